"""The apps/v1 kinds' strategies (and :class:`Controller`, what batch/v1's share with
them): what kube-apiserver adds and checks on create and update
(``pkg/apis/apps/v1/defaults.go``, ``pkg/apis/apps/validation``), so that the broker's
controllers only ever see objects a real server would have stored. StatefulSets and
DaemonSets need a selector and a template; Deployments and ReplicaSets get more:

- the pod template gets the pod-spec defaults a real server writes into it
  (``restartPolicy: Always``, ``dnsPolicy``, ``terminationGracePeriodSeconds: 30``,
  ``schedulerName``, ``securityContext``, ``enableServiceLinks``, each container's
  ``imagePullPolicy``/``terminationMessage*``): the pod-template-hash is computed over it;
- a Deployment's ``strategy`` defaults to RollingUpdate 25%/25%, and a RollingUpdate
  without ``maxSurge``/``maxUnavailable`` gets 25% for the missing one;
- 422 (the server's field paths and words) for: negative ``replicas``/``minReadySeconds``/
  ``revisionHistoryLimit``, an empty selector, template labels the selector does not
  select, a template without containers or whose ``restartPolicy`` is not ``Always``,
  an unknown strategy type, ``rollingUpdate`` with Recreate, ``maxSurge``/
  ``maxUnavailable`` that are neither integers >= 0 nor percentages, both 0, or
  ``maxUnavailable`` above 100%, ``progressDeadlineSeconds`` not above ``minReadySeconds``.

:func:`scaled_value` is intstr's ``GetScaledValueFromIntOrPercent``: the controller
resolves ``maxSurge``/``maxUnavailable`` with it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .. import admission, validation
from ..admission import BOOL, INT32, INT64, META, SELECTOR, STR, TEMPLATE, TIME, ListOf, Struct
from ..errors import ApiError, invalid
from ..selectors import COMMON_FIELDS, fields_at, selector_from_dict
from . import printers_workloads
from .base import Context, Obj, Strategy, TypeNames, spec_of

DEFAULT_SURGE = DEFAULT_UNAVAILABLE = "25%"
NON_NEGATIVE = "must be greater than or equal to 0"
_PERCENT = re.compile(r"[0-9]+%\Z")
_PERCENT_MSG = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%' or '93%', regex used for validation is '[0-9]+%')"
)


def _condition(kind: str, *times: str) -> Struct:
    fields = {**dict.fromkeys(("type", "status", "reason", "message"), STR),
              **dict.fromkeys(times, TIME)}  # fmt: skip
    return Struct(kind, fields, written=("type", "status"))


REPLICA_SET_STATUS = Struct(
    "ReplicaSetStatus",
    {
        "replicas": INT32,
        "fullyLabeledReplicas": INT32,
        "readyReplicas": INT32,
        "availableReplicas": INT32,
        "observedGeneration": INT64,
        "conditions": ListOf(_condition("ReplicaSetCondition", "lastTransitionTime")),
    },
    written=("replicas",),  # the one field of ReplicaSetStatus without omitempty
)
DEPLOYMENT_STATUS = Struct(
    "DeploymentStatus",
    {
        "observedGeneration": INT64,
        "replicas": INT32,
        "updatedReplicas": INT32,
        "readyReplicas": INT32,
        "availableReplicas": INT32,
        "unavailableReplicas": INT32,
        "conditions": ListOf(
            _condition("DeploymentCondition", "lastUpdateTime", "lastTransitionTime")
        ),
        "collisionCount": INT32,
    },
)


def workload_schema(
    kind: str, spec: dict[str, Any] | None = None, status: Struct | None = None
) -> Struct:
    """The Go type of an apps/v1 workload, as far as the facade reads it: the spec
    fields all share, ``spec``'s, and its ``status``."""
    fields: dict[str, Any] = {
        "metadata": META,
        "spec": Struct(
            f"{kind}Spec",
            {
                "replicas": INT32,
                "selector": SELECTOR,
                "template": TEMPLATE,
                "minReadySeconds": INT32,
                **(spec or {}),
            },
        ),
    }
    if status is not None:
        fields["status"] = status
    return Struct(kind, fields)


def scaled_value(value: Any, total: int, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``: an int as is, ``"N%"`` of ``total``
    rounded up or down (float arithmetic, as in Go). ValueError for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise ValueError(f"invalid value for IntOrString: {value!r}")
    if not value.endswith("%"):
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    try:
        percent = int(value[:-1])
    except ValueError:
        raise ValueError(f"invalid value for IntOrString: invalid value {value!r}") from None
    scaled = percent * float(total) / 100
    return int(math.ceil(scaled) if round_up else math.floor(scaled))


class _Problem:
    """One ``field: Type: …`` problem, formatted as the server formats it, for
    :func:`validation.invalid` (its message and its ``details.causes`` entry)."""

    REASONS = validation.FieldError.REASONS

    def __init__(self, text: str) -> None:
        self.text = text
        self.field, _, self._body = text.partition(": ")

    def __str__(self) -> str:
        return self.text

    def cause(self) -> dict[str, str]:
        kind = self._body.split(":", 1)[0]
        return {
            "reason": self.REASONS.get(kind, "FieldValueInvalid"),
            "message": self._body,
            "field": self.field,
        }


def invalid_from(kind: str, group: str, name: str, problems: list[str]) -> ApiError:
    """The 422 ``Invalid`` Status of ``problems`` (``field: Type: detail`` texts):
    ``Kind.group "name" is invalid: …`` (``[a, b]`` for several), ``details.causes``."""
    return validation.invalid(kind, name, [_Problem(p) for p in problems], group)  # type: ignore[misc]


def _shown(value: Any) -> str:
    """A value as ``field.Invalid`` prints it: strings quoted, numbers bare."""
    return json.dumps(value) if isinstance(value, str) else str(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def default_template_spec(spec: dict[str, Any]) -> None:
    """``SetDefaults_PodSpec`` and the container defaults, as on a stored template."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if not isinstance(c, dict):
            continue
        tag = str(c.get("image") or "").rsplit("/", 1)[-1]
        if "imagePullPolicy" not in c:
            latest = ":" not in tag or tag.endswith(":latest")
            c["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("resources", {})


def _counts(status: Any) -> dict[str, int]:
    """The integer fields of a status (what its validation reads)."""
    if not isinstance(status, dict):
        return {}
    return {key: value for key, value in status.items() if _is_int(value)}


class Controller(Strategy):
    """What the apps/v1 and batch/v1 controllers' kinds share: ``metadata.generation``
    from 1 (it moves on with each change of the spec), a spec, and the validation of
    their selector and pod template."""

    def prepare_for_create(self, rt: TypeNames, obj: Obj, ctx: Context) -> None:
        obj["metadata"].setdefault("generation", 1)
        self.default_spec(rt, obj, obj.setdefault("spec", {}))

    def default_spec(self, rt: TypeNames, obj: Obj, spec: Obj) -> None:
        """The kind's own defaults (and create-time checks) of a new object's spec."""

    def validate_fields(self, rt: TypeNames, obj: Obj) -> list[validation.FieldError]:
        spec = spec_of(obj)
        errs = admission.validate_label_selector(spec.get("selector"), "spec.selector")
        return errs + admission.template_errors(spec.get("template"), "spec.template")


class PodController(Controller):
    """A kind that runs copies of a pod template chosen by a selector (StatefulSet,
    DaemonSet; ReplicaSet and Deployment check more): both required on create."""

    replicated = True  # a DaemonSet has no spec.replicas

    def default_spec(self, rt: TypeNames, obj: Obj, spec: Obj) -> None:
        name = obj["metadata"].get("name", "")
        if not isinstance(spec.get("selector"), dict):
            raise invalid(rt.kind, name, ["spec.selector: Required value"])
        if not isinstance(spec.get("template"), dict):
            raise invalid(rt.kind, name, ["spec.template: Required value"])
        if self.replicated:
            spec.setdefault("replicas", 1)


class StatefulSetStrategy(PodController):
    schema = workload_schema("StatefulSet")
    printer = printers_workloads.STATEFUL_SET


class DaemonSetStrategy(PodController):
    schema = workload_schema("DaemonSet")
    printer = printers_workloads.DAEMON_SET
    replicated = False


class ReplicaSetStrategy(PodController):
    """apps/v1 ReplicaSet: the defaults on every write of the object (a real server
    defaults every object it decodes), then :meth:`validate_workload`."""

    schema = workload_schema("ReplicaSet", status=REPLICA_SET_STATUS)
    printer = printers_workloads.REPLICA_SET
    what = "replicaset"  # as the empty-selector message names it
    fields = {**COMMON_FIELDS, **fields_at("status.replicas")}
    # ValidateReplicaSetStatus: these >= 0, then these <= status.replicas
    status_counts = (
        "replicas",
        "fullyLabeledReplicas",
        "readyReplicas",
        "availableReplicas",
        "observedGeneration",
    )
    status_bounded = ("fullyLabeledReplicas", "readyReplicas", "availableReplicas")

    def default_spec(self, rt: TypeNames, obj: Obj, spec: Obj) -> None:
        super().default_spec(rt, obj, spec)
        self.default_workload(rt, obj)

    def prepare_for_update(
        self, rt: TypeNames, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        if subresource is None:
            self.default_workload(rt, new)
        else:  # the status strategy: ValidateReplicaSetStatusUpdate and co
            # the body's status is decoded; a status kept from the store may have any
            # shape a broker write gave it: what is not an integer counts as 0
            errs = self.status_errors(_counts(new.get("status")), _counts(old.get("status")))
            if errs:
                raise validation.invalid(rt.kind, new["metadata"]["name"], errs, rt.group)

    def status_errors(self, status: Obj, old: Obj) -> list[validation.FieldError]:
        """The status validation (after decoding: the counts are integers)."""
        errs = [
            validation.invalid_value(f"status.{key}", status[key], NON_NEGATIVE)
            for key in self.status_counts
            if status.get(key, 0) < 0
        ]
        replicas = status.get("replicas", 0)
        errs += [
            validation.invalid_value(
                f"status.{key}", status.get(key, 0), "cannot be greater than status.replicas"
            )
            for key in self.status_bounded
            if status.get(key, 0) > replicas
        ]
        if status.get("availableReplicas", 0) > status.get("readyReplicas", 0):
            errs.append(
                validation.invalid_value(
                    "status.availableReplicas",
                    status.get("availableReplicas", 0),
                    "cannot be greater than readyReplicas",
                )
            )
        return errs

    def default_workload(self, rt: TypeNames, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("replicas", 1)
            template = spec.get("template")
            if isinstance(template, dict) and isinstance(template.get("spec"), dict):
                default_template_spec(template["spec"])
            self.default_more(spec)
        self.validate_workload(rt, obj)

    def default_more(self, spec: Obj) -> None:
        """Defaults of this kind beyond a ReplicaSet's."""

    def validate_workload(self, rt: TypeNames, obj: Obj) -> None:
        """422 with every problem found (see the module docstring)."""
        name = obj.get("metadata", {}).get("name", "")
        spec = obj.get("spec") or {}
        problems: list[str] = []
        for key in ("replicas", "minReadySeconds", "revisionHistoryLimit"):
            value = spec.get(key)
            if value is not None and (not _is_int(value) or value < 0):
                problems.append(
                    f"spec.{key}: Invalid value: {_shown(value)}: must be greater than or equal to 0"
                )
        problems += _selector_problems(spec, self.what)
        problems += _template_problems(spec.get("template"))
        problems += self.more_problems(spec)
        if problems:
            raise invalid_from(rt.kind, rt.group, name, problems)

    def more_problems(self, spec: Obj) -> list[str]:
        """Problems of this kind beyond a ReplicaSet's."""
        return []


class DeploymentStrategy(ReplicaSetStrategy):
    """apps/v1 Deployment: a ReplicaSet's rules, its rollout strategy and deadlines."""

    schema = workload_schema(
        "Deployment",
        {"revisionHistoryLimit": INT32, "progressDeadlineSeconds": INT32, "paused": BOOL},
        DEPLOYMENT_STATUS,
    )
    what = "deployment"
    printer = printers_workloads.DEPLOYMENT
    fields = COMMON_FIELDS
    status_counts = (
        "observedGeneration",
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
        "collisionCount",
    )
    status_bounded = ("updatedReplicas", "readyReplicas", "availableReplicas")

    def status_errors(self, status: Obj, old: Obj) -> list[validation.FieldError]:
        errs = super().status_errors(status, old)
        if status.get("collisionCount", 0) < old.get("collisionCount", 0):
            errs.append(
                validation.invalid_value(
                    "status.collisionCount",
                    status.get("collisionCount", 0),
                    "cannot be decremented",
                )
            )
        return errs

    def default_more(self, spec: Obj) -> None:
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.setdefault("strategy", {})
        if isinstance(strategy, dict):
            strategy.setdefault("type", "RollingUpdate")
            if strategy["type"] == "RollingUpdate":
                rolling = strategy.setdefault("rollingUpdate", {})
                if isinstance(rolling, dict):
                    rolling.setdefault("maxUnavailable", DEFAULT_UNAVAILABLE)
                    rolling.setdefault("maxSurge", DEFAULT_SURGE)

    def more_problems(self, spec: Obj) -> list[str]:
        problems = _strategy_problems(spec.get("strategy"))
        deadline = spec.get("progressDeadlineSeconds")
        ready = spec.get("minReadySeconds") or 0
        if deadline is not None and _is_int(deadline) and _is_int(ready) and deadline <= ready:
            problems.append(
                f"spec.progressDeadlineSeconds: Invalid value: {deadline}: must be greater "
                "than minReadySeconds"
            )
        return problems


def _selector_problems(spec: dict[str, Any], what: str) -> list[str]:
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        return ["spec.selector: Required value"]
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return [
            f"spec.selector: Invalid value: {json.dumps(selector)}: empty selector is invalid for {what}"
        ]
    ops = ("In", "NotIn", "Exists", "DoesNotExist")
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        op = expr.get("operator") if isinstance(expr, dict) else None
        if op not in ops:
            return [
                f"spec.selector.matchExpressions[{i}].operator: Unsupported value: "
                f'{_shown(op)}: supported values: "In", "NotIn", "Exists", "DoesNotExist"'
            ]
        values = expr.get("values") or []
        if op in ("In", "NotIn") and not values:
            return [
                f"spec.selector.matchExpressions[{i}].values: Required value: must be "
                "specified when `operator` is 'In' or 'NotIn'"
            ]
        if op in ("Exists", "DoesNotExist") and values:
            return [
                f"spec.selector.matchExpressions[{i}].values: Forbidden: may not be "
                "specified when `operator` is 'Exists' or 'DoesNotExist'"
            ]
    template = spec.get("template")
    labels = ((template or {}).get("metadata") or {}).get("labels") or {}
    if isinstance(template, dict) and not selector_from_dict(selector).matches(labels):
        shown = ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items()))
        return [
            f"spec.template.metadata.labels: Invalid value: map[string]string{{{shown}}}: "
            "`selector` does not match template `labels`"
        ]
    return []


def _template_problems(template: Any) -> list[str]:
    if not isinstance(template, dict):
        return ["spec.template: Required value"]
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return ["spec.template.spec: Required value"]
    problems = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        problems.append("spec.template.spec.containers: Required value")
    else:
        for i, c in enumerate(containers):
            if not isinstance(c, dict) or not c.get("name"):
                problems.append(f"spec.template.spec.containers[{i}].name: Required value")
            elif not c.get("image"):
                problems.append(f"spec.template.spec.containers[{i}].image: Required value")
    policy = spec.get("restartPolicy", "Always")
    if policy != "Always":
        problems.append(
            f"spec.template.spec.restartPolicy: Unsupported value: {_shown(policy)}: "
            'supported values: "Always"'
        )
    return problems


def _strategy_problems(strategy: Any) -> list[str]:
    if not isinstance(strategy, dict):
        return ["spec.strategy: Invalid value: must be an object"]
    kind = strategy.get("type")
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            return [
                "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy "
                "`type` is 'Recreate'"
            ]
        return []
    if kind != "RollingUpdate":
        return [
            f"spec.strategy.type: Unsupported value: {_shown(kind)}: supported values: "
            '"Recreate", "RollingUpdate"'
        ]
    if not isinstance(rolling, dict):
        return [
            "spec.strategy.rollingUpdate: Required value: this should be defaulted and never be nil"
        ]
    path = "spec.strategy.rollingUpdate"
    problems = []
    values = {}
    for key in ("maxUnavailable", "maxSurge"):
        value = rolling.get(key, 0)
        values[key] = value
        if isinstance(value, str):
            if not _PERCENT.match(value):
                problems.append(f"{path}.{key}: Invalid value: {_shown(value)}: {_PERCENT_MSG}")
        elif _is_int(value):
            if value < 0:
                problems.append(
                    f"{path}.{key}: Invalid value: {value}: must be greater than or equal to 0"
                )
        else:
            problems.append(
                f"{path}.{key}: Invalid value: {_shown(value)}: must be an integer or "
                "percentage (e.g '5%')"
            )
    if problems:
        return problems

    def plain(value: Any) -> int:
        return int(value[:-1]) if isinstance(value, str) else value

    if plain(values["maxUnavailable"]) == 0 and plain(values["maxSurge"]) == 0:
        problems.append(
            f"{path}.maxUnavailable: Invalid value: {_shown(values['maxUnavailable'])}: may "
            "not be 0 when `maxSurge` is 0"
        )
    unavailable = values["maxUnavailable"]
    if isinstance(unavailable, str) and plain(unavailable) > 100:
        problems.append(
            f"{path}.maxUnavailable: Invalid value: {_shown(unavailable)}: must not be "
            "greater than 100%"
        )
    return problems
