"""OpenAPI post-processing: document the error responses every operation can give, and the
constraints the project enforces before any view runs."""

from __future__ import annotations

ERROR = {
    "application/json": {
        "schema": {"type": "object", "properties": {"detail": {"type": "string"}}, "additionalProperties": True}
    }
}
GENERIC = {
    "400": "The request is malformed (the body names the fields).",
    "401": "Not logged in, or the token is not valid (WWW-Authenticate: Token).",
    "403": "Your role may not do this.",
    "404": "No such object, or not yours (others' work is never confirmed).",
}


def add_error_responses(result, generator, request, public):
    for path in result.get("paths", {}).values():
        for method, operation in path.items():
            if method not in {"get", "put", "post", "patch", "delete"}:
                continue
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                if parameter.get("in") == "path" and schema.get("type") == "integer":
                    schema.setdefault("minimum", 0)  # Django's <int:…> matches digits only
                if parameter.get("in") == "query" and schema.get("type") == "string":
                    schema.setdefault("pattern", "^[^\\u0000]*$")  # config.middleware.RejectNulQueryMiddleware
            responses = operation.setdefault("responses", {})
            for code, description in GENERIC.items():
                responses.setdefault(code, {"description": description, "content": ERROR})
    return result
