from __future__ import annotations

from django import forms
from django.conf import settings

from .formats import registry
from .services import UPLOAD_SUFFIXES as ACCEPTED


class UploadForm(forms.Form):
    file = forms.FileField(
        help_text=f"{registry.files_described()}; or a .zip/.tar.gz bundle (the study's corpus tree, agent home "
        "folders, a manifest)."
    )
    format = forms.ChoiceField(choices=[(f, f) for f in registry.choices()], initial="auto")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The browser checks the size before sending (static/js/upload.js); the server checks it again.
        self.fields["file"].widget.attrs.update(
            {"data-max-bytes": settings.PARALLAX_MAX_UPLOAD_BYTES, "accept": ",".join(ACCEPTED)}
        )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if not upload.name.lower().endswith(ACCEPTED):
            raise forms.ValidationError(f"{upload.name}: expected one of {', '.join(ACCEPTED)}")
        if upload.size > settings.PARALLAX_MAX_UPLOAD_BYTES:
            raise forms.ValidationError(
                f"{upload.name} is {upload.size:,} bytes; the limit is {settings.PARALLAX_MAX_UPLOAD_BYTES:,}"
            )
        return upload
