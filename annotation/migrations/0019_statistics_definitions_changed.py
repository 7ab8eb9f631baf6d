"""The definitions of several figures changed (macro κ over one code set for every pair, Fleiss' κ over
the study's designed coders per run, κ over time counting runs once two codings are in, the headline CI
from 10,000 resamples with its Monte Carlo error): every stored analysis is marked not current, so the
dashboard says so and the next change or *Compute now* computes it again. Nothing is deleted."""

from django.db import migrations
from django.db.models import F


def mark_not_current(apps, schema_editor):
    apps.get_model("annotation", "Study").objects.update(statistics_version=F("statistics_version") + 1)


class Migration(migrations.Migration):
    dependencies = [("annotation", "0018_help_texts_name_new_homes")]

    operations = [migrations.RunPython(mark_not_current, migrations.RunPython.noop)]
