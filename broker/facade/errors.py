"""API errors as the Kubernetes API server reports them: ``Status`` objects."""

from __future__ import annotations

from typing import Any

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    411: "LengthRequired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    504: "Timeout",
}


class ApiError(Exception):
    """A failed API call; ``status()`` is the body a real API server would send.

    Hooks the broker registers raise it to refuse a write (e.g. a binding the cluster
    policy rejects); the facade turns it into the HTTP response unchanged.
    """

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        *,
        kind: str | None = None,
        name: str | None = None,
        group: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details: dict[str, Any] = {}
        if name is not None:
            self.details["name"] = name
        if group:
            self.details["group"] = group
        if kind is not None:
            self.details["kind"] = kind

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = dict(self.details)
        return body


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(404, f'{qualified} "{name}" not found', kind=resource, name=name, group=group)


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        409,
        f'{qualified} "{name}" already exists',
        "AlreadyExists",
        kind=resource,
        name=name,
        group=group,
    )


def conflict(resource: str, name: str, why: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        "Conflict",
        kind=resource,
        name=name,
        group=group,
    )


_CAUSE_REASONS = {
    "Required value": "FieldValueRequired",
    "Unsupported value": "FieldValueNotSupported",
    "Forbidden": "FieldValueForbidden",
    "Duplicate value": "FieldValueDuplicate",
    "Too long": "FieldValueTooLong",
}


def invalid(kind: str, name: str, causes: list[str]) -> ApiError:
    """422 Invalid from ``"field.path: Error body"`` strings (the shape of Go's
    ``field.Error``; see :mod:`.validation` for building them)."""
    joined = causes[0] if len(causes) == 1 else f"[{', '.join(causes)}]"
    exc = ApiError(422, f'{kind} "{name}" is invalid: {joined}', kind=kind, name=name)
    details = []
    for cause in causes:
        field, _, body = cause.partition(": ")
        reason = next(
            (r for prefix, r in _CAUSE_REASONS.items() if body.startswith(prefix)),
            "FieldValueInvalid",
        )
        details.append({"reason": reason, "message": body, "field": field})
    exc.details["causes"] = details
    return exc


def too_large_resource_version(asked: int, current: int) -> ApiError:
    """What the watch cache answers a resourceVersion newer than any it has seen (504
    Timeout, cause ResourceVersionTooLarge, retry after 1 s). The facade answers at once:
    waiting for a revision in a simulation would wait for nothing."""
    exc = ApiError(
        504, f"Timeout: Too large resource version: {asked}, current: {current}", "Timeout"
    )
    exc.details["causes"] = [
        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    ]
    exc.details["retryAfterSeconds"] = 1
    return exc


def too_large(limit: int) -> ApiError:
    """413, as the API server refuses a request body or an object above its limit."""
    return ApiError(413, f"Request entity too large: limit is {limit}")


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def gone(message: str) -> ApiError:
    return ApiError(410, message, "Expired")


def success_status(code: int = 200, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
    }
    if details:
        body["details"] = details
    return body
