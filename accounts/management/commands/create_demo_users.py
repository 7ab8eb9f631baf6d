from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandParser

from accounts.roles import ADJUDICATOR, ADMIN, ANNOTATOR

DEMO_USERS = (
    ("annotator1", ANNOTATOR, False),
    ("annotator2", ANNOTATOR, False),
    ("annotator3", ANNOTATOR, False),
    ("senior", ADJUDICATOR, False),
    ("admin", ADMIN, True),
)


class Command(BaseCommand):
    help = "Create the demo users (annotator1-3, senior, admin), all with the given password. Demo only."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--password", default="parallax-demo")

    def handle(self, *args, **options) -> None:
        User = get_user_model()
        for username, role, is_admin in DEMO_USERS:
            user, created = User.objects.get_or_create(username=username)
            user.set_password(options["password"])
            user.is_staff = is_admin
            user.is_superuser = is_admin
            user.save()
            user.groups.add(Group.objects.get(name=role))
            self.stdout.write(f"{'created' if created else 'updated'} {username} ({role})")
