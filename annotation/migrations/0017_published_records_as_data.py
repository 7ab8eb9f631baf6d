from pathlib import PurePosixPath

from django.db import migrations, models

import annotation.fields

REVIEW_KINDS = ("review", "advantage-review")


def records_as_data(apps, schema_editor):
    """Each stored record gets its kind (the header the loader stored for a review said it, else the
    file's name), its data (its text read by today's parsers: a text they refuse keeps empty data and
    is still shown and kept whole) and its path in the artifact when the folder it was read from says
    it (`…/<benchmark>/<task>/<agent>/` or a flattened `<benchmark>__<task>__<agent>/`)."""
    from annotation.annotation_md import PublishedFormatError, parse_annotation_md
    from annotation.published_files import kind_of, pair_folder
    from annotation.review_json import ReviewFormatError, parse_advantage_review, parse_review

    Record = apps.get_model("annotation", "PublishedRecord")
    records = list(Record.objects.order_by("pk"))
    folders = {}
    for record in records:
        stored_kind = (record.header or {}).get("kind")
        record.kind = stored_kind if stored_kind in REVIEW_KINDS else kind_of(record.name)
        try:
            if record.kind == "annotation":
                parsed = parse_annotation_md(record.text, name=record.name)
                record.data = parsed.data()
                task_id = parsed.header.get("task_id") or parsed.pair_id.split("/")[0]
                agent = parsed.header.get("agent") or parsed.pair_id.split("/")[-1]
                folder = pair_folder(PurePosixPath(record.name).parent.parts, task_id=task_id, agent=agent)
                if folder:
                    record.path = f"{folder}/annotation.md"
                    folders[(record.study_id, record.run_id)] = folder
            elif record.kind == "review":
                record.data = parse_review(record.text, name=record.name).document
            else:
                record.data = parse_advantage_review(record.text, name=record.name)
        except (PublishedFormatError, ReviewFormatError):
            record.data = {}
    for record in records:
        folder = folders.get((record.study_id, record.run_id))
        if record.kind in REVIEW_KINDS and folder:
            record.path = f"{folder}/{PurePosixPath(record.name).name}"
    Record.objects.bulk_update(records, ["kind", "data", "path"], batch_size=500)


def records_as_headers(apps, schema_editor):
    Record = apps.get_model("annotation", "PublishedRecord")
    records = list(Record.objects.order_by("pk"))
    for record in records:
        header = record.data.get("header", {}) if record.kind == "annotation" else {"kind": record.kind}
        record.header = dict(header)
    Record.objects.bulk_update(records, ["header"], batch_size=500)


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0016_hint_policy'),
    ]

    operations = [
        migrations.AddField(
            model_name='publishedrecord',
            name='data',
            field=annotation.fields.DocumentJSONField(default=dict, help_text="Everything it says, in its order: an annotation.md's title, header, prose sections and failure blocks; a review's whole document."),
        ),
        migrations.AddField(
            model_name='publishedrecord',
            name='kind',
            field=models.CharField(choices=[('annotation', 'Annotation'), ('review', 'Review'), ('advantage-review', 'Advantage Review')], default='annotation', max_length=16),
        ),
        migrations.AddField(
            model_name='publishedrecord',
            name='path',
            field=models.CharField(blank=True, default='', help_text='Its path in the artifact (swebench_verified/django__django-10999/claude/annotation.md); empty when where it was read from did not say.', max_length=500),
        ),
        migrations.AlterField(
            model_name='publishedrecord',
            name='text',
            field=models.TextField(help_text='The file as published.'),
        ),
        migrations.RunPython(records_as_data, records_as_headers),
        migrations.RemoveField(
            model_name='publishedrecord',
            name='header',
        ),
    ]
