"""A code's one `example` becomes a positive and a negative example, and a code says where its
texts come from (`source`). The old example text is kept, as the positive example."""

from django.db import migrations, models
from django.db.models import F


def example_to_positive(apps, schema_editor):
    # Historical models carry no custom manager: this moves text between columns of every code,
    # frozen ones included, without changing what any code says.
    apps.get_model("taxonomy", "Code").objects.exclude(example="").update(positive_example=F("example"))


def positive_to_example(apps, schema_editor):
    apps.get_model("taxonomy", "Code").objects.exclude(positive_example="").update(example=F("positive_example"))


class Migration(migrations.Migration):
    dependencies = [("taxonomy", "0001_codebooks")]

    operations = [
        migrations.AddField(
            model_name="code",
            name="positive_example",
            field=models.TextField(blank=True, default="", help_text="A case this code fits."),
        ),
        migrations.AddField(
            model_name="code",
            name="negative_example",
            field=models.TextField(blank=True, default="", help_text="A near case this code does not fit (and why)."),
        ),
        migrations.AddField(
            model_name="code",
            name="source",
            field=models.TextField(
                blank=True,
                default="",
                help_text="Where the texts come from: 'published: …' (the study's own words, with the file) or 'Parallax'.",
            ),
        ),
        migrations.RunPython(example_to_positive, positive_to_example),
        migrations.RemoveField(model_name="code", name="example"),
    ]
