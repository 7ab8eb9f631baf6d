"""API for annotators: only ever their own assignments and annotations (blind coding)."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .access import lead_study
from .analysis.store import NotComputed
from .errors import AnnotationError, ConflictError, LockedError
from .models import LABEL_FIELDS, Annotation, Assignment, Label
from .selectors import queue as selectors
from .selectors.exports import EXPORT_KINDS, export, statistics_headers
from .services.coding import LabelInput, annotation_save, annotation_submit


class AssignmentSerializer(serializers.ModelSerializer):
    study = serializers.CharField(source="study.name")
    benchmark = serializers.CharField(source="run.task.benchmark.name")
    task_id = serializers.CharField(source="run.task.external_id")
    agent = serializers.CharField(source="run.agent.name")
    status = serializers.SerializerMethodField()

    class Meta:
        model = Assignment
        fields = ["id", "study", "run", "benchmark", "task_id", "agent", "slot", "status"]
        read_only_fields = fields

    def get_status(self, assignment: Assignment) -> str:
        annotation = getattr(assignment, "annotation", None)
        return annotation.status if annotation else "not started"


class SpanSerializer(serializers.Serializer):
    """A cited span of an event's text (docs/annotation.md, "Citing a span"); checked at save."""

    field = serializers.ChoiceField(choices=["evidence", "contrast"])
    anchor = serializers.CharField(help_text="the event's anchor (file:line)")
    agent = serializers.CharField(help_text="the event's agent (its id in the log)")
    seq = serializers.IntegerField(min_value=0, max_value=2**31 - 1, help_text="the event's number in its agent")
    start = serializers.IntegerField(min_value=0, max_value=2**31 - 1, help_text="first character (code points)")
    end = serializers.IntegerField(min_value=1, max_value=2**31 - 1, help_text="after the last character")
    quote = serializers.CharField(trim_whitespace=False, help_text="exactly the characters start..end")


class LabelSerializer(serializers.ModelSerializer):
    code = serializers.SlugRelatedField(slug_field="key", read_only=True)
    spans = SpanSerializer(many=True, read_only=True)
    nearest_rejected = serializers.SlugRelatedField(slug_field="key", read_only=True, allow_null=True)

    class Meta:
        model = Label
        fields = ["code", *LABEL_FIELDS]
        read_only_fields = fields


class AnnotationSerializer(serializers.ModelSerializer):
    assignment = serializers.IntegerField(source="assignment_id", read_only=True)
    labels = serializers.SerializerMethodField()
    # An annotation that was never saved has neither; a draft has no submission time.
    updated_at = serializers.DateTimeField(read_only=True, allow_null=True)
    submitted_at = serializers.DateTimeField(read_only=True, allow_null=True)

    class Meta:
        model = Annotation
        fields = [
            "assignment", "status", "version", "no_failure", "notes", "flagged", "flag_note", "skip_reason", "labels",
            "updated_at", "submitted_at",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(LabelSerializer(many=True))
    def get_labels(self, annotation: Annotation) -> list[dict]:
        # An annotation that was never saved is an empty draft (opening a run writes nothing).
        return LabelSerializer(annotation.labels.all(), many=True).data if annotation.pk else []


class LabelInputSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="mode key", min_length=1, max_length=100)
    rationale = serializers.CharField(allow_blank=True, default="")
    realized_consequence = serializers.CharField(allow_blank=True, default="")
    evidence = serializers.ListField(child=serializers.CharField(), default=list)
    contrast = serializers.ListField(child=serializers.CharField(), default=list)
    spans = SpanSerializer(many=True, default=list)
    nearest_rejected = serializers.CharField(allow_blank=True, allow_null=True, default=None)
    rejection_reason = serializers.CharField(allow_blank=True, default="")
    episode_id = serializers.CharField(allow_blank=True, default="", max_length=200)
    comparative_role = serializers.CharField(allow_blank=True, default="", max_length=200)


class AnnotationWriteSerializer(serializers.Serializer):
    """Only content: owner, status and version cannot be set (version is the precondition)."""

    version = serializers.IntegerField(help_text="the version you read; a stale one gets 409")
    no_failure = serializers.BooleanField(default=False)
    notes = serializers.CharField(allow_blank=True, default="")
    flagged = serializers.BooleanField(
        required=False, help_text="ask for a discussion of the run even if the codings agree (left as is if absent)"
    )
    flag_note = serializers.CharField(allow_blank=True, required=False, help_text="what to discuss")
    labels = LabelInputSerializer(
        many=True,
        default=list,
        help_text="one entry per instance (episode) of a mode: repeat a mode for its further episodes, in order",
    )


class SubmitSerializer(serializers.Serializer):
    version = serializers.IntegerField()


_REFUSED = OpenApiResponse(description="409: stale version or locked; 422: invalid coding (errors by field)")


def _own(request: Request, assignment_id: int) -> Assignment:
    assignment = selectors.own_assignment(user=request.user, assignment_id=assignment_id)
    if assignment is None:
        raise Http404
    return assignment


def _error(exc: AnnotationError) -> Response:
    code = status.HTTP_409_CONFLICT if isinstance(exc, ConflictError | LockedError) else 422
    return Response({"detail": str(exc), "errors": exc.errors}, status=code)


class MyAssignmentsAPI(generics.ListAPIView):
    serializer_class = AssignmentSerializer

    def get_queryset(self):
        return selectors.my_assignments(user=self.request.user)


class AnnotationAPI(APIView):
    @extend_schema(responses=AnnotationSerializer)
    def get(self, request: Request, assignment_id: int) -> Response:
        annotation = selectors.annotation_for(assignment=_own(request, assignment_id))
        return Response(AnnotationSerializer(annotation).data)

    @extend_schema(
        request=AnnotationWriteSerializer, responses={200: AnnotationSerializer, 409: _REFUSED, 422: _REFUSED}
    )
    def put(self, request: Request, assignment_id: int) -> Response:
        assignment = _own(request, assignment_id)
        payload = AnnotationWriteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        codes = {c.key: c.pk for c in assignment.study.codebook.codes.all()}
        unknown = [label["code"] for label in data["labels"] if label["code"] not in codes]
        unknown += [
            label["nearest_rejected"]
            for label in data["labels"]
            if label["nearest_rejected"] and label["nearest_rejected"] not in codes
        ]
        if unknown:
            return Response({"detail": f"unknown code key(s): {', '.join(unknown)}"}, status=422)
        labels = [
            LabelInput(
                code_id=codes[label["code"]],
                rationale=label["rationale"],
                realized_consequence=label["realized_consequence"],
                evidence=label["evidence"],
                contrast=label["contrast"],
                spans=[dict(span) for span in label["spans"]],
                nearest_rejected_id=codes.get(label["nearest_rejected"] or ""),
                rejection_reason=label["rejection_reason"],
                episode_id=label["episode_id"],
                comparative_role=label["comparative_role"],
            )
            for label in data["labels"]
        ]
        annotation = selectors.annotation_for(assignment=assignment)
        try:
            annotation_save(
                annotation=annotation,
                actor=request.user,
                version=data["version"],
                no_failure=data["no_failure"],
                notes=data["notes"],
                flagged=data.get("flagged"),
                flag_note=data.get("flag_note"),
                labels=labels,
            )
        except AnnotationError as exc:
            return _error(exc)
        return Response(AnnotationSerializer(annotation).data)


class AnnotationSubmitAPI(APIView):
    @extend_schema(request=SubmitSerializer, responses={200: AnnotationSerializer, 409: _REFUSED, 422: _REFUSED})
    def post(self, request: Request, assignment_id: int) -> Response:
        annotation = selectors.annotation_for(assignment=_own(request, assignment_id))
        payload = SubmitSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            annotation_submit(annotation=annotation, actor=request.user, version=payload.validated_data["version"])
        except AnnotationError as exc:
            return _error(exc)
        return Response(AnnotationSerializer(annotation).data)


class StudyExportAPI(APIView):
    """The dashboard's tables as JSON rows (same rows as the CSV downloads)."""

    @extend_schema(
        responses={
            200: {"type": "array", "items": {"type": "object", "additionalProperties": True}},
            409: OpenApiResponse(description="the statistics these rows come from are not computed yet"),
        },
        parameters=[OpenApiParameter("kind", str, OpenApiParameter.PATH, enum=list(EXPORT_KINDS))],
    )
    def get(self, request: Request, study_id: int, kind: str) -> Response:
        study = lead_study(request.user, study_id)
        if kind not in EXPORT_KINDS:
            raise Http404
        try:
            exported = export(study, kind)
        except NotComputed as exc:
            return Response({"detail": f"Not available yet: {exc}."}, status=409)
        headers = statistics_headers(exported.statistics) if exported.statistics is not None else None
        return Response(list(exported.rows), headers=headers)
