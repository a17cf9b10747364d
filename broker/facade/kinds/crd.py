"""CustomResourceDefinitions (``apiextensions.k8s.io/v1``), as kube-apiserver's
apiextensions server admits them (``staging/src/k8s.io/apiextensions-apiserver/pkg/
registry/customresourcedefinition/strategy.go`` and ``apis/apiextensions/validation``),
and the strategy of the custom resources one defines (``registry/customresource``).

A CRD's custom kinds are served from its commit on, by the store that holds it
(``crds.py``); its status says so at once (``Established`` and ``NamesAccepted``
True), as the apiextensions controllers would a moment later. No conversion webhooks:
every served version stores the same object, with only its ``apiVersion`` changed.
"""

from __future__ import annotations

import json
from typing import Any

from .. import validation as v
from ..selectors import COMMON_FIELDS
from . import printers, schema
from .base import Context, Obj, Strategy, TypeNames, spec_of

_SCOPES = ("Namespaced", "Cluster")


def names_of(crd: Obj) -> dict[str, Any]:
    """``spec.names`` with the defaults kube-apiserver gives them (``singular`` the
    lower-cased kind, ``listKind`` the kind + ``List``)."""
    names = dict(spec_of(crd).get("names") or {})
    kind = names.get("kind") or ""
    names.setdefault("singular", kind.lower())
    names.setdefault("listKind", f"{kind}List")
    return names


def _set_defaults(crd: Obj) -> None:
    """What kube-apiserver's decoding and ``SetDefaults_CustomResourceDefinitionSpec``
    give every stored CRD (``apis/apiextensions/v1/defaults.go``): the names' defaults,
    ``conversion.strategy: None``, and each version's ``served``/``storage`` written out
    (Go's bools have no ``omitempty``: an omitted one is false, and typed clients
    require both)."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return
    if isinstance(spec.get("names"), dict):
        spec["names"] = names_of(crd)
    if spec.get("conversion") is None:
        spec["conversion"] = {"strategy": "None"}
    for version in spec.get("versions") or []:
        if isinstance(version, dict):
            version.setdefault("served", False)
            version.setdefault("storage", False)


def storage_version(crd: Obj) -> str:
    for version in spec_of(crd).get("versions") or []:
        if isinstance(version, dict) and version.get("storage"):
            return str(version.get("name"))
    return ""


def _condition(kind: str, status: str, reason: str, message: str, now: str) -> Obj:
    return {
        "type": kind,
        "status": status,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


_CONTROLLED = ("NamesAccepted", "Established")


def _keep_controllers_part(status: Obj, old: Obj) -> None:
    """A status write keeps what the naming and establishing controllers own
    (``acceptedNames``, the NamesAccepted and Established conditions): they would write
    it back a moment later, the spec being unchanged; the rest is as written."""
    if "acceptedNames" in old:
        status["acceptedNames"] = old["acceptedNames"]
    owned = [c for c in old.get("conditions") or [] if c.get("type") in _CONTROLLED]
    written = [
        c
        for c in status.get("conditions") or []
        if not isinstance(c, dict) or c.get("type") not in _CONTROLLED
    ]
    status["conditions"] = owned + written


def _stored_versions_errors(obj: Obj) -> list[v.FieldError]:
    """``ValidateCustomResourceDefinitionStoredVersions``."""
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    stored = status.get("storedVersions") or []
    path = "status.storedVersions"
    if not isinstance(stored, list) or not stored:
        return [
            v.invalid_value(
                path, v.GoText("[]string(nil)"), "must have at least one stored version"
            )
        ]
    errs = []
    shown = v.GoText("[]string{" + ", ".join(json.dumps(str(x)) for x in stored) + "}")
    versions = [ver for ver in spec_of(obj).get("versions") or [] if isinstance(ver, dict)]
    for ver in versions:
        if ver.get("storage") and ver.get("name") not in stored:
            errs.append(
                v.invalid_value(path, shown, f"must have the storage version {ver.get('name')}")
            )
    names = {ver.get("name") for ver in versions}
    for i, name in enumerate(stored):
        if name not in names:
            errs.append(
                v.invalid_value(
                    f"{path}[{i}]",
                    name,
                    f"missing from spec.versions; {name} was previously a storage version, "
                    f"and must remain in spec.versions until a storage migration ensures no "
                    f"data remains persisted in {name} and removes {name} from "
                    "status.storedVersions",
                )
            )
    return errs


class CustomResourceDefinitionStrategy(Strategy):
    """The CRD's spec validated (422 with kube-apiserver's field paths); its status made
    by the server: ``acceptedNames``, ``storedVersions``, the conditions."""

    def prepare_for_create(self, rt: TypeNames, obj: Obj, ctx: Context) -> None:
        obj["metadata"].setdefault("generation", 1)
        _set_defaults(obj)
        self._set_status(obj, ctx)

    @staticmethod
    def _set_status(obj: Obj, ctx: Context) -> None:
        now = str(obj["metadata"].get("creationTimestamp", ""))
        spec = spec_of(obj)
        names = names_of(obj)
        group = str(spec.get("group") or "")
        taken = [
            str(ver.get("name"))
            for ver in spec.get("versions") or []
            if isinstance(ver, dict)
            and ctx.serves(group, str(ver.get("name")), str(names.get("plural")))
        ]
        if taken:
            accepted = (
                "False",
                "PluralConflict",
                f'"{names.get("plural")}" is already in use',
            )
        else:
            accepted = ("True", "NoConflicts", "no conflicts found")
        established = (
            ("True", "InitialNamesAccepted", "the initial names have been accepted")
            if not taken
            else ("False", "NotAccepted", "not all names are accepted")
        )
        obj["status"] = {
            "conditions": [
                _condition("NamesAccepted", *accepted, now),
                _condition("Established", *established, now),
            ],
            "acceptedNames": names if not taken else {"kind": "", "plural": ""},
            "storedVersions": [storage_version(obj)] if storage_version(obj) else [],
        }

    def prepare_for_update(
        self, rt: TypeNames, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        status = new.get("status")
        if not isinstance(status, dict):
            status = new["status"] = {}
        if subresource == "status":
            _keep_controllers_part(status, old.get("status") or {})
        else:
            _set_defaults(new)
            if not any(c.get("status") == "False" for c in status.get("conditions") or []):
                status["acceptedNames"] = names_of(new)
        # the storage version joins storedVersions (strategy.go); an empty list is
        # defaulted to it (SetDefaults_CustomResourceDefinition)
        stored = list(status.get("storedVersions") or [])
        if storage_version(new) and (subresource is None or not stored):
            if storage_version(new) not in stored:
                stored.append(storage_version(new))
        status["storedVersions"] = stored

    def validate_fields(self, rt: TypeNames, obj: Obj) -> list[v.FieldError]:
        return self._spec_errors(obj) + _stored_versions_errors(obj)

    @staticmethod
    def _spec_errors(obj: Obj) -> list[v.FieldError]:
        spec = spec_of(obj)
        errs: list[v.FieldError] = []
        group = spec.get("group")
        if not group:
            errs.append(v.required("spec.group"))
        elif "." not in str(group):
            errs.append(
                v.invalid_value("spec.group", group, "should be a domain with at least one dot")
            )
        names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
        for field in ("plural", "kind"):
            if not names.get(field):
                errs.append(v.required(f"spec.names.{field}"))
        plural = names.get("plural")
        for field in ("plural", "singular"):
            value = names.get(field)
            if value and v.is_dns1035_label(str(value)):
                errs.append(
                    v.invalid_value(
                        f"spec.names.{field}", value, "; ".join(v.is_dns1035_label(str(value)))
                    )
                )
        name = obj["metadata"].get("name")
        if plural and group and name != f"{plural}.{group}":
            errs.append(
                v.invalid_value("metadata.name", name, 'must be spec.names.plural+"."+spec.group')
            )
        if spec.get("scope") not in _SCOPES:
            if not spec.get("scope"):
                errs.append(v.required("spec.scope"))
            else:
                errs.append(v.not_supported("spec.scope", spec.get("scope"), _SCOPES))
        versions = spec.get("versions")
        if not isinstance(versions, list) or not versions:
            errs.append(
                v.invalid_value(
                    "spec.versions",
                    versions or [],
                    "must have exactly one version marked as storage version",
                )
            )
            return errs
        storage = 0
        for i, version in enumerate(versions):
            path = f"spec.versions[{i}]"
            if not isinstance(version, dict) or not version.get("name"):
                errs.append(v.required(f"{path}.name"))
                continue
            storage += bool(version.get("storage"))
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if schema is None and version.get("served"):
                errs.append(v.required(f"{path}.schema.openAPIV3Schema", "schemas are required"))
        if storage != 1:
            errs.append(
                v.invalid_value(
                    "spec.versions",
                    f"{storage} versions",
                    "must have exactly one version marked as storage version",
                )
            )
        return errs


class CustomResourceStrategy(Strategy):
    """A custom resource: ``metadata`` typed, the rest as its version's structural
    schema says (``kinds/schema.py``: pruned, defaulted, validated, 422 with the field
    paths); ``generation`` counted; ``metadata.name`` and ``metadata.namespace``
    selectable, as kube-apiserver serves them; its Scale read and written at the paths
    the CRD names."""

    fields = COMMON_FIELDS
    strategic_merge = False

    def __init__(self, crd: Obj, version: str) -> None:
        self.version = next(ver for ver in spec_of(crd)["versions"] if ver["name"] == version)
        self.subresources = tuple(self.version.get("subresources") or {})
        self.schema_of = (self.version.get("schema") or {}).get("openAPIV3Schema") or {}
        self.scale = (self.version.get("subresources") or {}).get("scale")
        self.printer = printers.custom_resource_printer(
            [c for c in self.version.get("additionalPrinterColumns") or [] if isinstance(c, dict)]
        )

    def _admit(self, obj: Obj) -> None:
        schema.prune(self.schema_of, obj, root=True)
        schema.default(self.schema_of, obj)

    def prepare_for_create(self, rt: TypeNames, obj: Obj, ctx: Context) -> None:
        obj["metadata"]["generation"] = 1
        if "status" in self.subresources:
            obj.pop("status", None)
        self._admit(obj)

    def prepare_for_update(
        self, rt: TypeNames, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        self._admit(new)
        if subresource is None and "generation" in old["metadata"]:
            # any change but to metadata (and status, when it is a subresource) counts
            ignored = ("metadata", "status") if "status" in self.subresources else ("metadata",)
            if {k: x for k, x in new.items() if k not in ignored} != {
                k: x for k, x in old.items() if k not in ignored
            }:
                new["metadata"]["generation"] = old["metadata"]["generation"] + 1

    def validate_fields(self, rt: TypeNames, obj: Obj) -> list[v.FieldError]:
        body = {k: x for k, x in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        props = {
            k: x
            for k, x in (self.schema_of.get("properties") or {}).items()
            if k not in ("apiVersion", "kind", "metadata")
        }
        return schema.validate({**self.schema_of, "properties": props}, body)

    def scale_of(self, rt: TypeNames, obj: Obj) -> Obj | None:
        if not self.scale:
            return None
        meta = obj["metadata"]
        status: Obj = {"replicas": _at(obj, self.scale.get("statusReplicasPath")) or 0}
        selector = _at(obj, self.scale.get("labelSelectorPath"))
        if selector:
            status["selector"] = selector
        replicas = _at(obj, self.scale.get("specReplicasPath"))
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace", ""),
                "uid": meta["uid"],
                "resourceVersion": meta["resourceVersion"],
                "creationTimestamp": meta["creationTimestamp"],
            },
            "spec": {"replicas": replicas} if replicas else {},
            "status": status,
        }

    def with_replicas(self, obj: Obj, replicas: int) -> None:
        path = (self.scale or {}).get("specReplicasPath") or ".spec.replicas"
        *parents, last = path.lstrip(".").split(".")
        node = obj
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = replicas


def _at(obj: Obj, path: str | None) -> Any:
    """The value at a CRD's JSON path (``.spec.replicas``), None when absent."""
    node: Any = obj
    for part in (path or "").lstrip(".").split(".") if path else []:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node if path else None
