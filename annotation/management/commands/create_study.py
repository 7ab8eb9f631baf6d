from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import AnnotationError
from annotation.hint_policies import DEFAULT_HINT_POLICY, HINT_POLICIES
from annotation.models import Study
from annotation.services.studies import study_create
from taxonomy.models import Codebook


class Command(BaseCommand):
    help = (
        "Create a study pinning a frozen codebook, with N ≥ 2 annotators (k of them per run) and a senior "
        "adjudicator. Runs in scope: every concurrent run that has a sequential twin. The web form "
        "(Studies → New study) does the same and can pick runs by agent, benchmark and difficulty."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--codebook", type=int, help="Codebook id (default: the newest frozen one).")
        parser.add_argument("--annotators", required=True, help="Two or more usernames, comma-separated.")
        parser.add_argument("--coders-per-run", type=int, default=2, help="k: how many annotators code each run.")
        parser.add_argument("--adjudicator", required=True)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--hint-policy",
            choices=list(HINT_POLICIES),
            default=DEFAULT_HINT_POLICY,
            help="When annotators see the failure-signature hints of a run (default: after their first submission).",
        )
        parser.add_argument(
            "--exists-ok",
            action="store_true",
            help="A study of that name already there is kept as it is (said, not an error): for scripts run twice.",
        )

    def handle(self, *args, **options) -> None:
        existing = Study.objects.filter(name=options["name"]).first()
        if existing is not None and options["exists_ok"]:
            self.stdout.write(f"study #{existing.pk} {existing.name} is already there: kept as it is")
            return
        User = get_user_model()
        names = [n.strip() for n in options["annotators"].split(",") if n.strip()]
        users = list(User.objects.filter(username__in=names))
        missing = sorted(set(names) - {u.username for u in users})
        if missing:
            raise CommandError(f"unknown user(s): {', '.join(missing)}")
        try:
            adjudicator = User.objects.get(username=options["adjudicator"])
        except User.DoesNotExist as exc:
            raise CommandError(f"unknown user: {options['adjudicator']}") from exc
        codebooks = Codebook.objects.filter(status=Codebook.Status.FROZEN)
        codebook = (
            codebooks.filter(pk=options["codebook"]) if options["codebook"] else codebooks.order_by("-frozen_at")
        ).first()
        if codebook is None:
            raise CommandError("no frozen codebook (run `manage.py load_codebook` first)")
        try:
            study = study_create(
                name=options["name"],
                codebook=codebook,
                annotators=users,
                adjudicator=adjudicator,
                seed=options["seed"],
                coders_per_run=options["coders_per_run"],
                hint_policy=options["hint_policy"],
            )
        except AnnotationError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            self.style.SUCCESS(f"study #{study.pk} {study.name}: {study.runs.count()} runs, codebook {codebook}")
        )
