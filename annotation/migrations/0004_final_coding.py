from django.db import migrations


class Migration(migrations.Migration):
    """`Final` shadowed `typing.Final`: the model is `FinalCoding` now (the table is renamed)."""

    dependencies = [
        ("annotation", "0003_advantage_tags"),
    ]

    operations = [
        migrations.RenameModel(old_name="Final", new_name="FinalCoding"),
    ]
