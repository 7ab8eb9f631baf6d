from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.roles import is_admin
from config.htmx import HtmxHttpRequest

from . import services
from .models import Codebook
from .selectors import codebook_tree
from .tree import TreeError

MAX_CSV_BYTES = 2 * 1024 * 1024


def _require_admin(request: HtmxHttpRequest) -> None:
    if not is_admin(request.user):
        raise PermissionDenied("Only admins can change codebooks.")


@require_GET
def codebook_list(request: HtmxHttpRequest) -> HttpResponse:
    codebooks = Codebook.objects.select_related("parent").order_by("name", "-version")
    return render(request, "taxonomy/codebook_list.html", {"codebooks": codebooks})


@require_GET
def codebook_detail(request: HtmxHttpRequest, codebook_id: int) -> HttpResponse:
    codebook = get_object_or_404(Codebook, pk=codebook_id)
    tree = codebook_tree(codebook=codebook)
    counts = {
        "categories": len(tree),
        "subcategories": sum(len(c.children) for c in tree),
        "modes": sum(len(s.children) for c in tree for s in c.children),
    }
    return render(request, "taxonomy/codebook_detail.html", {"codebook": codebook, "tree": tree, "counts": counts})


@require_GET
def codebook_export(request: HtmxHttpRequest, codebook_id: int) -> HttpResponse:
    codebook = get_object_or_404(Codebook, pk=codebook_id)
    response = HttpResponse(services.codebook_csv(codebook), content_type="text/csv; charset=utf-8")
    slug = "".join(ch if ch.isalnum() else "-" for ch in codebook.name.lower()).strip("-")
    response["Content-Disposition"] = f'attachment; filename="{slug}-v{codebook.version}.csv"'
    return response


@require_http_methods(["GET", "POST"])
def codebook_import(request: HtmxHttpRequest) -> HttpResponse:
    _require_admin(request)
    error = ""
    if request.method == "POST":
        upload = request.FILES.get("file")
        if upload is None:
            error = "Choose a CSV file."
        elif upload.size > MAX_CSV_BYTES:
            error = f"{upload.name} is larger than {MAX_CSV_BYTES // 1024} KiB."
        else:
            try:
                text = upload.read().decode("utf-8-sig")
                codebook = services.codebook_import_csv(
                    text=text, name=request.POST.get("name") or None, user=request.user
                )
            except UnicodeDecodeError:
                error = f"{upload.name} is not UTF-8 text."
            except TreeError as exc:
                error = f"{upload.name}: {exc} — nothing was imported."
            else:
                messages.success(request, f"Imported {codebook} as a draft.")
                return redirect("taxonomy:codebook_detail", codebook_id=codebook.pk)
    return render(request, "taxonomy/codebook_import.html", {"error": error}, status=422 if error else 200)


@require_POST
def codebook_new_version(request: HtmxHttpRequest, codebook_id: int) -> HttpResponse:
    _require_admin(request)
    codebook = get_object_or_404(Codebook, pk=codebook_id)
    new = services.codebook_new_version(
        codebook=codebook, change_log=request.POST.get("change_log", ""), user=request.user
    )
    messages.success(request, f"Created {new} from v{codebook.version}.")
    return redirect("taxonomy:codebook_detail", codebook_id=new.pk)


@require_POST
def codebook_freeze(request: HtmxHttpRequest, codebook_id: int) -> HttpResponse:
    _require_admin(request)
    codebook = get_object_or_404(Codebook, pk=codebook_id)
    services.codebook_freeze(codebook=codebook, user=request.user)
    messages.success(request, f"{codebook} is frozen: studies can pin it, nobody can change it.")
    return redirect("taxonomy:codebook_detail", codebook_id=codebook.pk)
