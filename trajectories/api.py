"""REST API for machine clients; the same selectors and services as the pages."""

from __future__ import annotations

from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import is_admin

from . import selectors, services, tasks
from .access import visible_runs
from .formats import registry
from .formats.records import FormatError
from .models import AgentContext, Event, ImportBatch, Run


class RunSerializer(serializers.ModelSerializer):
    benchmark = serializers.CharField(source="task.benchmark.name")
    task_id = serializers.CharField(source="task.external_id")
    difficulty = serializers.CharField(source="task.difficulty")
    agent = serializers.CharField(source="agent.name")
    is_paired = serializers.BooleanField(read_only=True)

    class Meta:
        model = Run
        fields = [
            "id",
            "benchmark",
            "task_id",
            "difficulty",
            "agent",
            "backbone_model",
            "mode",
            "is_paired",
            "source_format",
            "source_name",
            "imported_at",
            "task_pass",
            "tests_passed",
            "tests_total",
            "tests_source",
            "f2p_passed",
            "f2p_total",
            "p2p_passed",
            "p2p_total",
            "test_pass",
            "duration_s",
            "shell_calls",
            "tokens",
            "n_contexts",
            "n_events",
            "subagents_created",
            "peak_concurrency",
            "first_spawn_pos",
            "first_overlap_pos",
            "overlap_ratio",
            "last_subagent_end_pos",
            "created_without_overlap",
        ]
        read_only_fields = fields


class ContextSerializer(serializers.ModelSerializer):
    parent = serializers.CharField(source="parent.external_id", default=None, allow_null=True, read_only=True)

    class Meta:
        model = AgentContext
        fields = [
            "id",
            "external_id",
            "parent",
            "role",
            "label",
            "started_at",
            "ended_at",
            "status",
            "n_events",
            "files_touched",
            "depth",
        ]
        read_only_fields = fields


class RunDetailSerializer(RunSerializer):
    twin_id = serializers.SerializerMethodField()
    contexts = ContextSerializer(many=True, read_only=True)
    warnings = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "twin_id", "warnings", "contexts"]
        read_only_fields = fields

    def get_twin_id(self, run: Run) -> int | None:
        twin = selectors.run_twin(run=run)
        return twin.pk if twin else None


class EventSerializer(serializers.ModelSerializer):
    context = serializers.CharField(source="context.external_id")

    class Meta:
        model = Event
        fields = [
            "id", "context", "seq", "timestamp", "kind", "tool", "text", "files", "target",
            "source_line", "source_file",
        ]  # fmt: skip
        read_only_fields = fields


class ImportBatchSerializer(serializers.ModelSerializer):
    class Meta:
        model = ImportBatch
        fields = [
            "id",
            "status",
            "origin",
            "source_name",
            "options",
            "format",
            "created_at",
            "finished_at",
            "total",
            "processed",
            "imported",
            "duplicates",
            "replaced",
            "failed",
            "events",
            "report",
            "error",
        ]
        read_only_fields = fields


@extend_schema_field({"type": "string", "format": "binary"})
class _UploadedFile(serializers.FileField):
    """The uploaded bytes (the schema says binary: a FileField is otherwise described as a URI)."""


class ImportUploadSerializer(serializers.Serializer):
    file = _UploadedFile()
    format = serializers.ChoiceField(choices=registry.choices(), default="auto")


_RUN_FILTER_PARAMS = [OpenApiParameter(name, str, required=False) for name in (*selectors.RUN_FILTERS, "q")]


@extend_schema(parameters=_RUN_FILTER_PARAMS)
class RunListAPI(generics.ListAPIView):
    serializer_class = RunSerializer

    def get_queryset(self):
        filters = selectors.run_filters(self.request.query_params)
        return visible_runs(self.request.user, selectors.run_list(filters=filters))


class RunDetailAPI(generics.RetrieveAPIView):
    serializer_class = RunDetailSerializer

    def get_queryset(self):
        return visible_runs(self.request.user, selectors.run_list()).prefetch_related("contexts__parent")


@extend_schema(
    parameters=[
        OpenApiParameter("context", str, required=False, description="external id of one agent context"),
        OpenApiParameter("kind", str, required=False),
    ]
)
class RunEventsAPI(generics.ListAPIView):
    serializer_class = EventSerializer

    def get_queryset(self):
        run = get_object_or_404(visible_runs(self.request.user, Run.objects.all()), pk=self.kwargs["pk"])
        qs = Event.objects.filter(run=run).select_related("context").order_by("context__position", "seq")
        if self.request.query_params.get("context"):
            qs = qs.filter(context__external_id=self.request.query_params["context"])
        if self.request.query_params.get("kind"):
            qs = qs.filter(kind=self.request.query_params["kind"])
        return qs


class ImportCreateAPI(APIView):
    parser_classes = [MultiPartParser]

    # an upload: the file is sent as multipart form data (the schema says binary, not a string)
    @extend_schema(request={"multipart/form-data": ImportUploadSerializer}, responses={202: ImportBatchSerializer})
    def post(self, request: Request) -> Response:
        if not is_admin(request.user):
            raise PermissionDenied("Only admins can import trajectories.")
        payload = ImportUploadSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            batch = services.import_batch_create(
                upload=payload.validated_data["file"], user=request.user, fmt=payload.validated_data["format"]
            )
        except FormatError as exc:
            return Response({"file": [exc.describe()]}, status=status.HTTP_400_BAD_REQUEST)
        transaction.on_commit(lambda: tasks.import_batch.delay(batch.pk))
        return Response(ImportBatchSerializer(batch).data, status=status.HTTP_202_ACCEPTED)


class ImportDetailAPI(generics.RetrieveAPIView):
    serializer_class = ImportBatchSerializer
    queryset = ImportBatch.objects.all()

    def get_object(self):
        if not is_admin(self.request.user):
            raise PermissionDenied("Only admins can see import batches.")
        return services.import_batch_mark_stalled(batch=super().get_object())
