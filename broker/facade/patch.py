"""The three patch formats the official client sends.

- JSON merge patch (RFC 7386, ``application/merge-patch+json``);
- strategic merge patch (``application/strategic-merge-patch+json``): a merge patch
  where lists of objects with a known merge key (``conditions`` by ``type``,
  ``containers`` by ``name``, …) merge element-wise and ``$patch: delete`` removes one;
  other lists are replaced. Honest limit: no ``$setElementOrder``/``$retainKeys``
  directives; they are dropped;
- JSON patch (RFC 6902, ``application/json-patch+json``).
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError

MERGE_KEYS = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ports": "containerPort",
    "addresses": "type",
    "tolerations": "key",
    "taints": "key",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
}


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, MERGE_KEYS[key])
        elif isinstance(value, list):
            result[key] = [
                {k: v for k, v in item.items() if not k.startswith("$")}
                if isinstance(item, dict)
                else item
                for item in copy.deepcopy(value)
            ]
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _merge_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    result = list(current)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            return copy.deepcopy(patch)  # not mergeable: replace, as the server does
        index = next(
            (
                i
                for i, old in enumerate(result)
                if isinstance(old, dict) and old.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append(strategic_merge_patch({}, item))
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"json patch: path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str], path: str) -> Any:
    for part in parts:
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            raise ApiError(422, f"json patch: path {path!r} does not exist")
    return doc


def _add(doc: Any, parts: list[str], value: Any, path: str) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise ApiError(422, f"json patch: bad array index in {path!r}")
    else:
        raise ApiError(422, f"json patch: cannot add at {path!r}")
    return doc


def _remove(doc: Any, parts: list[str], path: str) -> Any:
    if not parts:
        raise ApiError(422, "json patch: cannot remove the whole document")
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise ApiError(422, f"json patch: path {path!r} does not exist")


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise ApiError(400, "json patch: body must be a JSON array of operations")
    doc = copy.deepcopy(target)
    for index, op in enumerate(operations):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, f"json patch: operation {index} needs 'op' and 'path'")
        kind, path = op["op"], op["path"]
        parts = _pointer(path)
        if kind in ("add", "replace", "test") and "value" not in op:
            raise ApiError(400, f"json patch: operation {index} ({kind}) needs 'value'")
        if kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op["value"]), path)
        elif kind == "remove":
            _remove(doc, parts, path)
        elif kind == "replace":
            _walk(doc, parts, path)
            if parts:
                _remove(doc, parts, path)
            doc = _add(doc, parts, copy.deepcopy(op["value"]), path)
        elif kind == "test":
            if _walk(doc, parts, path) != op["value"]:
                raise ApiError(422, f"json patch: test failed at {path!r}")
        elif kind in ("move", "copy"):
            source = op.get("from")
            if source is None:
                raise ApiError(400, f"json patch: operation {index} ({kind}) needs 'from'")
            src_parts = _pointer(source)
            value = _walk(doc, src_parts, source)
            if kind == "move":
                _remove(doc, src_parts, source)
            doc = _add(doc, parts, copy.deepcopy(value), path)
        else:
            raise ApiError(400, f"json patch: unknown operation {kind!r} at index {index}")
    return doc


PATCH_TYPES = {
    "application/merge-patch+json": merge_patch,
    "application/strategic-merge-patch+json": strategic_merge_patch,
    "application/json-patch+json": json_patch,
}


def apply_patch(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Apply ``patch`` of the given media type to a copy of ``target``; ApiError(415) else."""
    media = content_type.split(";")[0].strip().lower()
    fn = PATCH_TYPES.get(media)
    if fn is None:
        raise ApiError(
            415,
            f"the patch type {media!r} is not supported; use one of {', '.join(PATCH_TYPES)}",
        )
    if fn is not json_patch and not isinstance(patch, dict):
        raise ApiError(400, f"{media}: the patch body must be a JSON object")
    result = fn(copy.deepcopy(target), patch)
    if not isinstance(result, dict):
        raise ApiError(422, "the patched object is not a JSON object")
    return result
