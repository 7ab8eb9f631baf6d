"""Each assignment's place in its annotator's queue for the study: the queue's order, stored, so a
queue page is a range of positions (keyset) rather than a sort of every assignment. Existing
queues keep the order they were shown in (benchmark, task, agent)."""

from collections import defaultdict

from django.db import migrations, models

ORDER = ("run__task__benchmark__name", "run__task__external_id", "run__agent__name", "run_id", "pk")


def number_queues(apps, schema_editor):
    Assignment = apps.get_model("annotation", "Assignment")
    nxt: dict = defaultdict(lambda: 1)
    changed = []
    for assignment in Assignment.objects.order_by("study_id", "annotator_id", *ORDER).only("pk", "study_id",
                                                                                           "annotator_id"):  # fmt: skip
        key = (assignment.study_id, assignment.annotator_id)
        assignment.position = nxt[key]
        nxt[key] += 1
        changed.append(assignment)
    Assignment.objects.bulk_update(changed, ["position"], batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [("annotation", "0009_skip_and_flag")]

    operations = [
        migrations.AddField(
            model_name="assignment",
            name="position",
            field=models.PositiveIntegerField(null=True),
        ),
        migrations.RunPython(number_queues, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="assignment",
            name="position",
            field=models.PositiveIntegerField(
                help_text="Place in this annotator's queue for the study (1, 2, …): the queue's order and its page cursor."
            ),
        ),
        migrations.RemoveIndex(model_name="assignment", name="annotation__study_i_80e1b4_idx"),
        migrations.AddConstraint(
            model_name="assignment",
            constraint=models.UniqueConstraint(
                fields=("study", "annotator", "position"), name="assignment_queue_position"
            ),
        ),
    ]
