from __future__ import annotations

from rest_framework import generics, serializers

from .models import Code, Codebook


class CodeSerializer(serializers.ModelSerializer):
    parent_key = serializers.CharField(source="parent.key", default=None)

    class Meta:
        model = Code
        fields = [
            "id",
            "key",
            "level",
            "parent_key",
            "name",
            "definition",
            "inclusion",
            "exclusion",
            "positive_example",
            "negative_example",
            "source",
            "position",
        ]
        read_only_fields = fields


class CodebookSerializer(serializers.ModelSerializer):
    class Meta:
        model = Codebook
        fields = ["id", "name", "version", "status", "parent", "description", "change_log", "created_at", "frozen_at"]
        read_only_fields = fields


class CodebookDetailSerializer(CodebookSerializer):
    codes = serializers.SerializerMethodField()

    class Meta(CodebookSerializer.Meta):
        fields = [*CodebookSerializer.Meta.fields, "codes"]
        read_only_fields = fields

    def get_codes(self, codebook: Codebook) -> list[dict]:
        return CodeSerializer(codebook.codes.select_related("parent").order_by("position"), many=True).data


class CodebookListAPI(generics.ListAPIView):
    serializer_class = CodebookSerializer
    queryset = Codebook.objects.order_by("name", "-version")


class CodebookDetailAPI(generics.RetrieveAPIView):
    serializer_class = CodebookDetailSerializer
    queryset = Codebook.objects.all()
