from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.roles import ADJUDICATOR, ADMIN, ANNOTATOR

DEMO_USERS = (
    ("annotator1", ANNOTATOR, False),
    ("annotator2", ANNOTATOR, False),
    ("annotator3", ANNOTATOR, False),
    ("senior", ADJUDICATOR, False),
    ("admin", ADMIN, True),
)


class Command(BaseCommand):
    help = (
        "DEMO ONLY: create the demo users (annotator1-3, senior, admin) with the given password. Runs only with "
        "DEBUG=1 or --i-know-this-is-a-demo, and never changes a user that already exists."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--password", default="parallax-demo")
        parser.add_argument("--i-know-this-is-a-demo", action="store_true", dest="demo")

    def handle(self, *args, **options) -> None:
        if not (settings.DEBUG or options["demo"]):
            raise CommandError(
                "refused: demo users have a public password. Run with DEBUG=1 (make demo does) or pass "
                "--i-know-this-is-a-demo on a server that holds no real accounts."
            )
        User = get_user_model()
        for username, role, is_admin in DEMO_USERS:
            if User.objects.filter(username=username).exists():
                self.stdout.write(f"kept {username}: the user exists and is not changed")
                continue
            user = User(username=username)
            user.set_password(options["password"])
            user.is_staff = is_admin
            user.is_superuser = is_admin
            user.save()
            user.groups.add(Group.objects.get(name=role))
            self.stdout.write(f"created {username} ({role})")
