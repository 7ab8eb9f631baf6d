"""The API's page numbers, strictly: `?page=` must be a positive integer (an empty or malformed one is
a 400 naming the parameter, as the schema says it is an integer), not silently page 1."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination


class StrictPageNumberPagination(PageNumberPagination):
    def get_page_number(self, request, paginator):
        raw = request.query_params.get(self.page_query_param)
        if (
            raw is not None
            and raw not in self.last_page_strings
            and not (raw.isascii() and raw.isdigit() and int(raw) > 0)
        ):
            raise ValidationError({self.page_query_param: f"expected a positive integer, got {raw!r}"})
        return super().get_page_number(request, paginator)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"] = {**parameter.get("schema", {}), "minimum": 1}
        return parameters
