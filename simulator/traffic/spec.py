"""The spec of services with traffic: timewarp's workload extension, validated before
anything runs.

A workload file may carry, beside Batsim's ``nb_res``/``jobs``/``profiles`` (untouched;
real Batsim ignores the extra key), a list ``services``. Each names the Deployment that
serves it and the traffic it gets (``docs/services.md`` is the reference)::

    "services": [{
      "name": "web",
      "deployment": {                      # an apps/v1 Deployment, as kubectl would take it
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"schedulerName": "default-scheduler",
                                       "containers": [{"name": "web", "image": "web:1",
                                         "resources": {"requests": {"cpu": "1", "memory": "512Mi"},
                                                       "limits": {"cpu": "1", "memory": "512Mi"}}}]}}}},
      "startup_delay": 10,                 # s from bound to Running (image pull + start)
      "readiness_delay": 0,                # s from Running to Ready
      "traffic": {"type": "step", "steps": [[0, 20], [600, 200], [1800, 20]],
                  "duration": 3000, "arrivals": "poisson"},
      "request": {"cost": {"distribution": "exponential", "mean": 0.05}, "timeout": 10},
      "metrics": {"pipeline": "metrics-server"},      # or {"tick": 10, "lag": 4}
      "model": "auto",                     # exact | fluid | auto
      "seed": 1,
      "horizontalPodAutoscaler": {...}     # optional: an autoscaling/v2 HPA created at start
    }]

Every problem is a :class:`~simulator.workload.WorkloadError` naming the file and the
field (``w.json: services[0].traffic.rate: expected a number >= 0, got -1``).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.traffic import patterns
from simulator.traffic.costs import DISTRIBUTIONS, Cost, parse_cost
from simulator.traffic.metrics import PIPELINES
from simulator.traffic.model import SERVINGS
from simulator.traffic.serving import TrafficConfig

TRAFFIC_TYPES = ("constant", "poisson", "step", "ramp", "sinusoid", "replay")
MODELS = ("auto", *SERVINGS)
# "auto": the exact model up to this many expected requests per service, fluid beyond
# (benchmarks/traffic_model.py: the exact model serves ~10^6 requests in a few seconds)
AUTO_EXACT_LIMIT = 5_000_000
# Bounds on every rate and interval, so that no valid-looking number makes the run take
# unbounded memory or time (docs/security.md lists them):
MAX_SECONDS = 366 * 86_400.0  # any interval or time: a service lives at most a year
MIN_TICK_S = 0.001  # out_services.csv writes times in milliseconds
MAX_TICK_S = 86_400.0  # the sinusoid's Λ⁻¹ grid spans one tick at most (GRID_S apart)
# one out_services.csv row per tick, kept until the end (~470 bytes each: ~94 MB)
MAX_TICKS = 200_000
MAX_RATE = 1e9  # requests per second
# "exact" serves every request (~2 s of CPU per 10^6): asked for by name, up to 10× "auto"'s
MAX_EXACT_REQUESTS = 10 * AUTO_EXACT_LIMIT
MIN_SINUSOID_PERIOD_S = 10 * patterns.GRID_S  # the rate is interpolated every GRID_S
MAX_REPLAY_BYTES = 16 << 20  # a replayed series: a day at one row per second is ~1.2 MB
SERVICE_KEYS = (
    "name",
    "deployment",
    "startup_delay",
    "readiness_delay",
    "traffic",
    "request",
    "metrics",
    "model",
    "seed",
    "horizontalPodAutoscaler",
)
# the cluster side's pod lifecycle (broker/cluster/pod_lifecycle.py) reads these
STARTUP_ANNOTATION = "timewarp.io/container-start-seconds"
SERVE_UNTIL_ANNOTATION = "timewarp.io/serve-until"
SERVICE_ANNOTATION = "timewarp.io/service"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(r"^[+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+|[KMGTPE]i?|[numkMGTPE])?$")


class ServiceError(ValueError):
    """Raised as WorkloadError by the loader (kept separate to avoid an import cycle)."""


@dataclass
class ServiceSpec:
    """One validated service."""

    name: str
    namespace: str
    deployment: dict[str, Any]  # the manifest to create (template annotated, see below)
    selector: dict[str, str]  # matchLabels of the Deployment
    startup_delay: float
    readiness_delay: float
    traffic: TrafficConfig
    hpa: dict[str, Any] | None = None
    source: str = ""  # "<file>: services[i]"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return self.traffic.duration


def _fail(where: str, message: str) -> ServiceError:
    return ServiceError(f"{where}: {message}")


def _number(obj: dict, key: str, where: str, *, default: Any = None, minimum: float = 0.0,
            strict: bool = False, maximum: float = MAX_SECONDS) -> float:  # fmt: skip
    """A finite number in [minimum, maximum] (``strict``: above ``minimum``). The default
    maximum is the bound of every interval (:data:`MAX_SECONDS`); rates pass theirs."""
    value = obj.get(key, default)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise _fail(f"{where}.{key}", f"expected a number {bound}, got {value!r}")
    if value > maximum:
        raise _fail(f"{where}.{key}", f"{value:g} is over the limit of {maximum:g}")
    return float(value)


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, f"expected a JSON object, got {value!r}")
    return value


def _unknown(obj: dict, known: tuple[str, ...], where: str) -> None:
    extra = sorted(set(obj) - set(known))
    if extra:
        raise _fail(where, f"unknown key(s) {extra} (known: {list(known)})")


def declared_twice(specs: list[ServiceSpec]) -> str | None:
    """The first service name declared more than once (across workload files), if any."""
    names = [s.name for s in specs]
    return next((n for n in names if names.count(n) > 1), None)


def parse_services(raw: Any, path: str) -> list[ServiceSpec]:
    """Validate the ``services`` list of the workload file ``path``."""
    if not isinstance(raw, list):
        raise _fail(f"{path}: services", "expected a list of service objects")
    specs: list[ServiceSpec] = []
    seen: dict[tuple[str, str], int] = {}
    names: dict[str, int] = {}
    for index, item in enumerate(raw):
        where = f"{path}: services[{index}]"
        spec = _parse_service(item, where, Path(path).parent, index)
        key = (spec.namespace, spec.deployment["metadata"]["name"])
        if key in seen:
            raise _fail(
                f"{where}.deployment.metadata.name",
                f"Deployment {key[0]}/{key[1]} already serves services[{seen[key]}]",
            )
        if spec.name in names:
            raise _fail(f"{where}.name", f"{spec.name!r} is already services[{names[spec.name]}]")
        seen[key] = names[spec.name] = index
        specs.append(spec)
    return specs


def _parse_service(item: Any, where: str, base: Path, index: int) -> ServiceSpec:
    item = _object(item, where)
    _unknown(item, SERVICE_KEYS, where)
    name = item.get("name")
    if not isinstance(name, str) or not _DNS_LABEL.match(name) or len(name) > 63:
        raise _fail(f"{where}.name", f"expected a DNS label (a-z, 0-9, '-'), got {name!r}")
    for key in ("deployment", "traffic", "request"):
        if key not in item:
            raise _fail(f"{where}.{key}", "missing")
    deployment, namespace, selector = _deployment(item["deployment"], f"{where}.deployment")
    startup = _number(item, "startup_delay", where, default=0)
    readiness = _number(item, "readiness_delay", where, default=0)
    pattern, process, duration = _traffic(item["traffic"], f"{where}.traffic", base)
    cost, timeout = _request(item["request"], f"{where}.request")
    tick, lag = _metrics(item.get("metrics", {}), f"{where}.metrics")
    if duration / tick > MAX_TICKS:
        raise _fail(
            f"{where}.metrics.tick",
            f"{tick:g} s over a {duration:g} s service makes {duration / tick:.3g} ticks "
            f"(rows of out_services.csv), over the limit of {MAX_TICKS:,}: a tick of at "
            f"least {duration / MAX_TICKS:.3g} s",
        )
    model = item.get("model", "auto")
    if model not in MODELS:
        raise _fail(f"{where}.model", f"expected one of {list(MODELS)}, got {model!r}")
    expected = patterns.expected_requests(pattern, duration)
    if model == "auto":
        model = "exact" if expected <= AUTO_EXACT_LIMIT else "fluid"
    elif model == "exact" and expected > MAX_EXACT_REQUESTS:
        raise _fail(
            f"{where}.model",
            f"'exact' would serve {expected:.3g} requests one by one, over the limit of "
            f"{MAX_EXACT_REQUESTS:,}: use 'fluid' or 'auto'",
        )
    seed = item.get("seed", zlib.crc32(name.encode()))
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise _fail(f"{where}.seed", f"expected an integer >= 0, got {seed!r}")
    hpa = item.get("horizontalPodAutoscaler")
    if hpa is not None:
        hpa = _hpa(hpa, f"{where}.horizontalPodAutoscaler", deployment, namespace)
    # the pods say which service they serve, how long they take to start, when the
    # service ends (their Batsim jobs last until then) and, with a readiness delay, how
    # long after starting they turn Ready (a readiness probe, as an application has)
    template = deployment["spec"]["template"]
    annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[SERVICE_ANNOTATION] = name
    annotations.setdefault(STARTUP_ANNOTATION, f"{startup:g}")
    annotations[SERVE_UNTIL_ANNOTATION] = f"{duration:g}"
    if readiness > 0:
        for container in template["spec"]["containers"]:
            container.setdefault(
                "readinessProbe",
                {
                    "exec": {"command": ["true"]},
                    "initialDelaySeconds": math.ceil(readiness),
                    "periodSeconds": 1,
                },
            )
    traffic = TrafficConfig(
        name=name,
        pattern=pattern,
        process=process,
        cost=cost,
        timeout=timeout,
        duration=duration,
        tick=tick,
        lag=lag,
        model=model,
        seed=seed,
    )
    return ServiceSpec(
        name, namespace, deployment, selector, startup, readiness, traffic, hpa, where
    )


def _deployment(raw: Any, where: str) -> tuple[dict[str, Any], str, dict[str, str]]:
    dep = dict(_object(raw, where))
    if dep.setdefault("apiVersion", "apps/v1") != "apps/v1":
        raise _fail(f"{where}.apiVersion", f"expected 'apps/v1', got {dep['apiVersion']!r}")
    if dep.setdefault("kind", "Deployment") != "Deployment":
        raise _fail(f"{where}.kind", f"expected 'Deployment', got {dep['kind']!r}")
    meta = dict(_object(dep.get("metadata"), f"{where}.metadata"))
    dep["metadata"] = meta
    name = meta.get("name")
    if not isinstance(name, str) or not _DNS_LABEL.match(name) or len(name) > 63:
        raise _fail(f"{where}.metadata.name", f"expected a DNS label, got {name!r}")
    namespace = meta.setdefault("namespace", "default")
    if not isinstance(namespace, str) or not _DNS_LABEL.match(namespace):
        raise _fail(f"{where}.metadata.namespace", f"expected a DNS label, got {namespace!r}")
    spec = dict(_object(dep.get("spec"), f"{where}.spec"))
    dep["spec"] = spec
    replicas = spec.setdefault("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise _fail(f"{where}.spec.replicas", f"expected an integer >= 0, got {replicas!r}")
    selector = _object(spec.get("selector"), f"{where}.spec.selector")
    match = selector.get("matchLabels")
    if not isinstance(match, dict) or not match or selector.keys() - {"matchLabels"}:
        raise _fail(
            f"{where}.spec.selector",
            "expected {matchLabels: {label: value, ...}} (matchExpressions are not supported "
            "for services)",
        )
    template = _object(spec.get("template"), f"{where}.spec.template")
    spec["template"] = template = {**template}
    labels = (template.get("metadata") or {}).get("labels") or {}
    missing = {k: v for k, v in match.items() if labels.get(k) != v}
    if missing:
        raise _fail(
            f"{where}.spec.template.metadata.labels",
            f"must match spec.selector.matchLabels; missing {missing}",
        )
    template["metadata"] = meta = {**(template.get("metadata") or {})}
    meta["annotations"] = dict(meta.get("annotations") or {})
    pod_spec = _object(template.get("spec"), f"{where}.spec.template.spec")
    template["spec"] = pod_spec = {**pod_spec}
    containers = pod_spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise _fail(f"{where}.spec.template.spec.containers", "expected a non-empty list")
    pod_spec["containers"] = containers = [
        dict(c) if isinstance(c, dict) else c for c in containers
    ]
    for i, c in enumerate(containers):
        cw = f"{where}.spec.template.spec.containers[{i}]"
        c = _object(c, cw)
        if not isinstance(c.get("name"), str) or not c["name"]:
            raise _fail(f"{cw}.name", "missing")
        resources = _object(c.get("resources", {}), f"{cw}.resources")
        for section in ("requests", "limits"):
            values = _object(resources.get(section, {}), f"{cw}.resources.{section}")
            for res, qty in values.items():
                if not isinstance(qty, str | int | float) or isinstance(qty, bool):
                    raise _fail(f"{cw}.resources.{section}.{res}", f"not a quantity: {qty!r}")
                if not _QUANTITY.match(str(qty)):
                    raise _fail(f"{cw}.resources.{section}.{res}", f"not a quantity: {qty!r}")
    if not any(
        "cpu" in ((c.get("resources") or {}).get(s) or {})
        for c in containers
        for s in ("requests", "limits")
    ):
        raise _fail(
            f"{where}.spec.template.spec.containers",
            "no container has a cpu request or limit: the traffic model needs the pod's CPU",
        )
    return dep, namespace, {str(k): str(v) for k, v in match.items()}


def _traffic(raw: Any, where: str, base: Path) -> tuple[patterns.Pattern, str, float]:
    t = _object(raw, where)
    kind = t.get("type")
    if kind not in TRAFFIC_TYPES:
        raise _fail(f"{where}.type", f"expected one of {list(TRAFFIC_TYPES)}, got {kind!r}")
    common = ("type", "duration", "arrivals")
    own = {
        "constant": ("rate",),
        "poisson": ("rate",),
        "step": ("steps",),
        "ramp": ("from", "to", "start", "ramp_duration"),
        "sinusoid": ("mean", "amplitude", "period", "phase"),
        "replay": ("file",),
    }[kind]
    _unknown(t, common + own, where)
    duration = _number(t, "duration", where, strict=True)
    process = t.get("arrivals", "poisson" if kind == "poisson" else "regular")
    if process not in ("regular", "poisson"):
        raise _fail(f"{where}.arrivals", f"expected 'regular' or 'poisson', got {process!r}")
    if kind in ("constant", "poisson"):
        return patterns.constant(_number(t, "rate", where, maximum=MAX_RATE)), process, duration
    if kind == "step":
        return patterns.step(_series(t.get("steps"), f"{where}.steps")), process, duration
    if kind == "ramp":
        return (
            patterns.ramp(
                _number(t, "from", where, maximum=MAX_RATE),
                _number(t, "to", where, maximum=MAX_RATE),
                _number(t, "start", where, default=0),
                _number(t, "ramp_duration", where, default=duration),
            ),
            process,
            duration,
        )
    if kind == "sinusoid":
        mean = _number(t, "mean", where, maximum=MAX_RATE)
        amplitude = _number(t, "amplitude", where, maximum=MAX_RATE)
        if amplitude > mean:
            raise _fail(
                f"{where}.amplitude",
                f"{amplitude:g} > mean {mean:g} would make the rate negative",
            )
        period = _number(t, "period", where, minimum=MIN_SINUSOID_PERIOD_S)
        phase = _number(t, "phase", where, default=0)
        return patterns.Sinusoid(mean, amplitude, period, phase), process, duration
    file = t.get("file")
    if not isinstance(file, str) or not file:
        raise _fail(f"{where}.file", "expected the path of a CSV file (time,rate)")
    return patterns.replay(read_rate_csv(base / file, f"{where}.file")), process, duration


def _series(raw: Any, where: str) -> list[tuple[float, float]]:
    if not isinstance(raw, list) or not raw:
        raise _fail(where, "expected [[seconds, requests per second], ...]")
    out: list[tuple[float, float]] = []
    for i, point in enumerate(raw):
        ok = (
            isinstance(point, list)
            and len(point) == 2
            and all(
                isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                for x in point
            )
        )
        if not ok or not (0 <= point[0] <= MAX_SECONDS and 0 <= point[1] <= MAX_RATE):
            raise _fail(
                f"{where}[{i}]",
                f"expected [seconds in [0, {MAX_SECONDS:g}], rate in [0, {MAX_RATE:g}]], "
                f"got {point!r}",
            )
        if out and point[0] <= out[-1][0]:
            raise _fail(f"{where}[{i}]", f"times must increase ({point[0]} after {out[-1][0]})")
        out.append((float(point[0]), float(point[1])))
    if out[0][0] != 0:
        raise _fail(f"{where}[0]", "the first step must be at 0 s")
    return out


def read_rate_csv(path: Path, where: str) -> list[tuple[float, float]]:
    """A request-rate series: header ``time,rate`` then rows; times increasing from 0.
    A regular file (a FIFO would hang the read) of at most :data:`MAX_REPLAY_BYTES`
    (``/dev/zero`` would fill the memory), UTF-8, each field within csv's 128 KiB."""
    text = _read_text(path, MAX_REPLAY_BYTES, where)
    rows = csv.reader(io.StringIO(text, newline=""))
    out: list[tuple[float, float]] = []
    try:
        header = next(rows, [])
        if [c.strip() for c in header] != ["time", "rate"]:
            raise _fail(where, f"{path}: line 1: expected the header 'time,rate'")
        for lineno, row in enumerate(rows, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            out.append(_rate_row(row, out[-1][0] if out else None, f"{path}: line {lineno}"))
    except csv.Error as exc:  # e.g. "field larger than field limit (131072)"
        raise _fail(where, f"{path}: line {rows.line_num}: {exc}") from None
    except ServiceError as exc:
        raise _fail(where, str(exc)) from None
    if not out:
        raise _fail(where, f"{path}: no rows")
    if out[0][0] != 0:
        raise _fail(where, f"{path}: line 2: the series must start at time 0")
    return out


def _rate_row(row: list[str], previous: float | None, where: str) -> tuple[float, float]:
    try:
        if len(row) != 2:
            raise ValueError
        t, r = float(row[0]), float(row[1])
    except ValueError:
        raise ServiceError(f"{where}: expected two numbers, got {row!r}") from None
    if not (0 <= t <= MAX_SECONDS and 0 <= r <= MAX_RATE):  # NaN fails both
        raise ServiceError(
            f"{where}: expected time in [0, {MAX_SECONDS:g}] and rate in [0, {MAX_RATE:g}]"
        )
    if previous is not None and t <= previous:
        raise ServiceError(f"{where}: times must increase")
    return t, r


def _read_text(path: Path, limit: int, where: str) -> str:
    """A regular file's UTF-8 text, refused naming ``where`` if it is anything else:
    opened without blocking and checked once open, so a FIFO never hangs the read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise _fail(where, f"cannot read {path} ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _fail(where, f"{path}: not a regular file")
        os.set_blocking(fd, True)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise _fail(where, f"{path}: larger than the limit of {limit:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(
            where, f"{path}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start})"
        ) from None


def _request(raw: Any, where: str) -> tuple[Cost, float]:
    r = _object(raw, where)
    _unknown(r, ("cost", "timeout"), where)
    cost = _object(r.get("cost"), f"{where}.cost")
    kind = cost.get("distribution")
    cw = f"{where}.cost"
    if kind not in DISTRIBUTIONS:
        raise _fail(f"{cw}.distribution", f"expected one of {list(DISTRIBUTIONS)}, got {kind!r}")
    params = {
        "constant": ("value",),
        "exponential": ("mean",),
        "uniform": ("low", "high"),
        "lognormal": ("mean", "cv"),
    }[kind]
    _unknown(cost, ("distribution", *params), cw)
    for p in params:
        if p == "cv":
            _number(cost, p, cw, default=1.0)
        else:
            _number(cost, p, cw, strict=p != "low")
    if kind == "uniform" and cost["high"] < cost["low"]:
        raise _fail(f"{cw}.high", f"{cost['high']} < low {cost['low']}")
    timeout = _number(r, "timeout", where, strict=True)
    return parse_cost(cost), timeout


def _metrics(raw: Any, where: str) -> tuple[float, float]:
    m = _object(raw, where)
    _unknown(m, ("pipeline", "tick", "lag"), where)
    pipeline = m.get("pipeline", "metrics-server")
    if pipeline not in PIPELINES:
        raise _fail(f"{where}.pipeline", f"expected one of {list(PIPELINES)}, got {pipeline!r}")
    tick, lag = PIPELINES[pipeline]
    tick = _number(m, "tick", where, default=tick, minimum=MIN_TICK_S, maximum=MAX_TICK_S)
    lag = _number(m, "lag", where, default=lag)
    return tick, lag


def _hpa(raw: Any, where: str, deployment: dict, namespace: str) -> dict[str, Any]:
    hpa = dict(_object(raw, where))
    if hpa.setdefault("apiVersion", "autoscaling/v2") != "autoscaling/v2":
        raise _fail(f"{where}.apiVersion", f"expected 'autoscaling/v2', got {hpa['apiVersion']!r}")
    if hpa.setdefault("kind", "HorizontalPodAutoscaler") != "HorizontalPodAutoscaler":
        raise _fail(f"{where}.kind", f"expected 'HorizontalPodAutoscaler', got {hpa['kind']!r}")
    meta = hpa["metadata"] = dict(hpa.get("metadata") or {})
    meta.setdefault("name", deployment["metadata"]["name"])
    if meta.setdefault("namespace", namespace) != namespace:
        raise _fail(f"{where}.metadata.namespace", f"must be the Deployment's ({namespace!r})")
    spec = _object(hpa.get("spec"), f"{where}.spec")
    ref = _object(spec.get("scaleTargetRef"), f"{where}.spec.scaleTargetRef")
    want = {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment["metadata"]["name"]}
    for key, value in want.items():
        if ref.get(key, value) != value:
            raise _fail(f"{where}.spec.scaleTargetRef.{key}", f"expected {value!r}")
    # the rest of the spec (replica bounds, metrics, behavior) is checked before the run
    # by the API's own validation (broker/cluster/input_check.py check_services)
    return hpa
