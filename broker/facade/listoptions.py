"""List and watch query parameters as kube-apiserver (v1.30) reads them.

Decoding (``k8s.io/apimachinery/pkg/runtime/conversion.go``, generated
``Convert_url_Values_To_v1_ListOptions``): a parameter given several times counts by its
*first* value; a boolean (``watch``, ``allowWatchBookmarks``, ``sendInitialEvents``) is
false only for ``0`` and ``false`` (any case) and true for anything else, the empty
string included; an integer (``limit``, ``timeoutSeconds``) is Go's ``ParseInt``, so an
empty or malformed one is a 400 with Go's message.

Validation (``ValidateListOptions``: a 422 on ``ListOptions.meta.k8s.io``):

- list: ``resourceVersionMatch`` needs a ``resourceVersion``, is refused with
  ``continue``, is ``Exact`` or ``NotOlderThan``, and ``Exact`` is refused with
  ``resourceVersion=0``; ``sendInitialEvents`` is refused;
- watch: ``sendInitialEvents`` needs ``resourceVersionMatch=NotOlderThan``, and
  ``resourceVersionMatch`` needs ``sendInitialEvents``, is only ``NotOlderThan``, and is
  refused with ``continue``. (The facade behaves as a v1.30 server with the
  ``WatchList`` feature gate on, the default from v1.32: a v1.30 server with it off
  refuses ``sendInitialEvents`` on watches.)
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ApiError

EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def first(query: dict[str, list[str]], name: str) -> str | None:
    """The value the API server reads: the first one given (None when absent)."""
    values = query.get(name)
    return values[0] if values else None


def flag(query: dict[str, list[str]], name: str) -> bool | None:
    """A boolean parameter, None when absent."""
    value = first(query, name)
    if value is None:
        return None
    return not (value == "0" or value.lower() == "false")


def int64(query: dict[str, list[str]], name: str) -> int | None:
    """An integer parameter as Go's ``strconv.ParseInt(s, 10, 64)`` reads it."""
    value = first(query, name)
    if value is None:
        return None
    digits = value[1:] if value[:1] in "+-" else value
    if not digits or not digits.isascii() or not digits.isdigit():
        raise ApiError(400, f'strconv.ParseInt: parsing "{value}": invalid syntax')
    if len(digits) > 20 or not INT64_MIN <= int(value) <= INT64_MAX:
        raise ApiError(400, f'strconv.ParseInt: parsing "{value}": value out of range')
    return int(value)


@dataclass(frozen=True)
class ListOptions:
    watch: bool
    resource_version: str  # "" when not given
    match: str  # resourceVersionMatch, "" when not given
    limit: int  # <= 0: no limit
    continue_token: str
    timeout_s: int | None  # None when not given
    bookmarks: bool
    send_initial_events: bool | None
    label_selector: str | None
    field_selector: str | None


def parse(query: dict[str, list[str]], *, watch_path: bool = False) -> ListOptions:
    """Decode and validate (400 / 422 as the real server answers)."""
    options = ListOptions(
        watch=watch_path or bool(flag(query, "watch")),
        resource_version=first(query, "resourceVersion") or "",
        match=first(query, "resourceVersionMatch") or "",
        limit=int64(query, "limit") or 0,
        continue_token=first(query, "continue") or "",
        timeout_s=int64(query, "timeoutSeconds"),
        bookmarks=bool(flag(query, "allowWatchBookmarks")),
        send_initial_events=flag(query, "sendInitialEvents"),
        label_selector=first(query, "labelSelector"),
        field_selector=first(query, "fieldSelector"),
    )
    problems = _watch_problems(options) if options.watch else _list_problems(options)
    if problems:
        raise invalid(problems)
    return options


def _forbidden(field: str, detail: str) -> tuple[str, str, str]:
    return ("FieldValueForbidden", field, f"{field}: Forbidden: {detail}")


def _not_supported(field: str, value: str, supported: list[str]) -> tuple[str, str, str]:
    listed = ", ".join(f'"{s}"' for s in supported)
    return (
        "FieldValueNotSupported",
        field,
        f'{field}: Unsupported value: "{value}": supported values: {listed}',
    )


def _list_problems(o: ListOptions) -> list[tuple[str, str, str]]:
    out = []
    if o.match:
        if not o.resource_version:
            out.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            )
        if o.continue_token:
            out.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            )
        if o.match not in (EXACT, NOT_OLDER_THAN):
            out.append(_not_supported("resourceVersionMatch", o.match, [EXACT, NOT_OLDER_THAN, ""]))
        if o.match == EXACT and o.resource_version == "0":
            out.append(
                _forbidden(
                    "resourceVersionMatch",
                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if o.send_initial_events is not None:
        out.append(_forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return out


def _watch_problems(o: ListOptions) -> list[tuple[str, str, str]]:
    out = []
    if o.send_initial_events is not None and o.match != NOT_OLDER_THAN:
        out.append(
            _forbidden(
                "resourceVersionMatch",
                f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}",
            )
        )
    if o.match:
        if o.send_initial_events is None:
            out.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                    "provided",
                )
            )
        if o.match != NOT_OLDER_THAN:
            out.append(_not_supported("resourceVersionMatch", o.match, [NOT_OLDER_THAN]))
        if o.continue_token:
            out.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            )
    return out


def invalid(problems: list[tuple[str, str, str]]) -> ApiError:
    """``errors.NewInvalid(ListOptions.meta.k8s.io, "", errs)``."""
    messages = [m for _, _, m in problems]
    text = messages[0] if len(messages) == 1 else f"[{', '.join(messages)}]"
    exc = ApiError(
        422,
        f'ListOptions.meta.k8s.io "" is invalid: {text}',
        "Invalid",
        kind="ListOptions",
        name="",
        group="meta.k8s.io",
    )
    exc.details["causes"] = [
        {"reason": reason, "message": message.split(": ", 1)[1], "field": field}
        for reason, field, message in problems
    ]
    return exc


def resource_version(text: str) -> int:
    """A resourceVersion the store can compare (400 otherwise, as the real server)."""
    if not text.isascii() or not text.isdigit() or len(text) > 20:
        raise ApiError(
            400,
            f'resourceVersion: Invalid value: "{text}": strconv.ParseUint: parsing '
            f'"{text}": invalid syntax',
        )
    return int(text)
