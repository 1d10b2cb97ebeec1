"""The OpenAPI schema: one component per operation's body, and every error documented.

drf-spectacular names a component after its serializer class, so the nested
`InputSerializer` of five views became one component `Input` and four operations were
documented with another's fields. Here a serializer nested in a view is named after the
view (`JudgementSubmitApi.InputSerializer` -> `JudgementSubmitInput`), and a hook adds the
one error shape (`Error`) to every operation for the statuses it can answer.
"""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema


class ArbiterAutoSchema(AutoSchema):
    def get_serializer_name(self, serializer, direction):
        cls = serializer.__class__
        outer, _, inner = cls.__qualname__.rpartition(".")
        if outer and "<locals>" not in outer:
            return outer.split(".")[-1].removesuffix("Api") + inner.removesuffix("Serializer")
        return cls.__name__


_ERROR_SCHEMA = {
    "type": "object",
    "description": "Every 4xx answer of the API has this shape.",
    "properties": {
        "detail": {"type": "string", "description": "The whole error in one sentence."},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "message": {"type": "string"},
                    "field": {"type": "string", "description": "The field at fault (dotted for nested fields)."},
                    "line": {"type": "integer", "description": "The input line at fault (imports)."},
                },
                "required": ["message"],
            },
        },
    },
    "required": ["detail"],
}

_REASONS = {
    "400": "The request is not valid; `detail` and `errors` say why.",
    "401": "No credentials, or a token that is not valid.",
    "403": "The caller's role does not allow this operation.",
    "404": "No such object.",
    "405": "The method is not allowed on this route.",
    "406": "The Accept header asks for a type this route does not give.",
    "413": "The body is larger than the limit.",
    "415": "The body's content type is not accepted by this route.",
}


def add_error_responses(result, generator, request, public):
    """Postprocessing hook: the `Error` component and the 4xx answers of every operation."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = _ERROR_SCHEMA
    ref = {"$ref": "#/components/schemas/Error"}
    for path, item in result.get("paths", {}).items():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            codes = ["400", "401", "403", "404", "405", "406"]
            if "requestBody" in operation:
                codes += ["413", "415"]
            responses = operation.setdefault("responses", {})
            for code in codes:
                responses.setdefault(
                    code, {"description": _REASONS[code], "content": {"application/json": {"schema": ref}}}
                )
    return result
