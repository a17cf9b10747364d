"""What a request asks for, as kube-apiserver's ``RequestInfoFactory`` names it: a verb
(``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``, ``delete``,
``deletecollection``) and a resource (``pods``, ``deployments.apps``, ``pods/binding``,
…), for the per-process figures of a run (who asked what, how often)."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def request_info(method: str, target: str) -> tuple[str, str]:
    """(verb, resource) of ``method target``; ("get", path) for non-resource paths."""
    split = urlsplit(target)
    parts = [unquote(s) for s in split.path.split("/") if s]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return method.lower(), "/" + "/".join(parts)
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        rest = rest[2:]  # namespaced: namespaces/NS/<resource>...
    if not rest:
        return method.lower(), "/" + "/".join(parts)
    resource = rest[0] + (f".{group}" if group else "")
    named = len(rest) >= 2
    if len(rest) >= 3:
        resource += "/" + rest[2]  # a subresource: pods/binding, deployments/scale
    query = parse_qs(split.query)
    if method == "GET":
        if query.get("watch", [""])[0] in ("1", "true"):
            verb = "watch"
        else:
            verb = "get" if named else "list"
    elif method == "DELETE" and not named:
        verb = "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return verb, resource
