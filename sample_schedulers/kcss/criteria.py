"""The six KCSS criteria of a node for a pod, and the KCSS configuration.

| criterion        | default | value for node n and pod p                                   |
| ---------------- | ------- | ------------------------------------------------------------ |
| ``image``        | cost    | seconds to pull p's images absent from n: size / bandwidth    |
| ``cpu``          | benefit | allocatable cpu minus requests of pods on n (millicores)      |
| ``memory``       | benefit | allocatable memory minus requests of pods on n (bytes)        |
| ``disk``         | benefit | free disk (annotation, else allocatable ephemeral-storage)    |
|                  |         | minus ephemeral-storage requests of pods on n (bytes)         |
| ``power``        | cost    | watts: idle + (max - idle) x cpu share after placing p, or a  |
|                  |         | fixed figure                                                  |
| ``containers``   | cost    | containers of the pods occupying n                            |

Where the numbers come from (annotation first, then label of the same key; the key names
can be changed in the config file's ``keys`` section):

- node ``timewarp.io/power-watts`` (e.g. ``"180"``), or ``timewarp.io/power-idle-watts``
  with ``timewarp.io/power-max-watts`` for the linear model, or SimGrid's
  ``wattage_per_state`` host property (``timewarp.io/wattage-per-state``, first state,
  ``"idle:full"`` or ``"idle:epsilon:full"``) for the same linear model;
- node ``timewarp.io/disk-free`` (a quantity, e.g. ``"200Gi"``);
- node ``timewarp.io/bandwidth`` (bytes per second as a quantity, e.g. ``"125M"`` for
  1 Gbit/s);
- images present on a node: ``status.images`` (what a kubelet reports) plus the
  comma-separated node annotation ``timewarp.io/images``;
- image size: pod annotation ``timewarp.io/image-size`` (a quantity: the pod's images
  together), else the size a node reports for the image in ``status.images``, else the
  configured default.

Missing figures take the configured defaults; an unparsable figure does too, and the
problem is reported with the decision (never silently).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sample_schedulers.common.model import NodeSummary, NodeView, PodSummary
from sample_schedulers.common.resources import EPHEMERAL_STORAGE, quantity_to_int

CRITERIA = ("image", "cpu", "memory", "disk", "power", "containers")
DEFAULT_BENEFIT = {
    "image": False,
    "cpu": True,
    "memory": True,
    "disk": True,
    "power": False,
    "containers": False,
}
DEFAULT_KEYS = {
    "power_watts": "timewarp.io/power-watts",
    "power_idle_watts": "timewarp.io/power-idle-watts",
    "power_max_watts": "timewarp.io/power-max-watts",
    "wattage_per_state": "timewarp.io/wattage-per-state",
    "disk_free": "timewarp.io/disk-free",
    "bandwidth": "timewarp.io/bandwidth",
    "images": "timewarp.io/images",
    "image_size": "timewarp.io/image-size",
}


@dataclass(frozen=True)
class KcssConfig:
    weights: tuple[float, ...] = tuple(1 / len(CRITERIA) for _ in CRITERIA)
    """One per criterion in ``CRITERIA`` order, summing to 1."""
    benefit: tuple[bool, ...] = tuple(DEFAULT_BENEFIT[c] for c in CRITERIA)
    default_image_size: int = 0
    default_bandwidth: int = 125_000_000
    default_power_watts: float = 0.0
    keys: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_KEYS))

    def describe(self) -> str:
        return ", ".join(
            f"{c}={w:.3g}({'benefit' if b else 'cost'})"
            for c, w, b in zip(CRITERIA, self.weights, self.benefit, strict=True)
        )


# -- configuration -----------------------------------------------------------------------


def _pairs(items: Sequence[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{what} {item!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def _criterion(name: str, where: str) -> str:
    if name not in CRITERIA:
        raise ValueError(f"{where}: unknown criterion {name!r} (known: {', '.join(CRITERIA)})")
    return name


def build_config(
    path: str | None = None,
    weight_args: Sequence[str] = (),
    direction_args: Sequence[str] = (),
) -> KcssConfig:
    """Defaults, then the YAML/JSON file at ``path``, then ``--weight``/``--direction``.

    File format (every section optional)::

        weights: {image: 2, cpu: 1, memory: 1, disk: 1, power: 1, containers: 1}
        directions: {power: cost, containers: cost}
        defaults: {image_size: 200Mi, bandwidth: 125M, power_watts: 100}
        keys: {power_watts: example.com/watts}

    Weights are relative: they are divided by their sum. Raises ValueError naming the file
    and field on bad input.
    """
    data: dict[str, Any] = {}
    if path:
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except OSError as exc:
            raise ValueError(f"{path}: cannot read ({exc.strerror})") from exc
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not YAML/JSON: {exc}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: expected a mapping at the top level")
        unknown = set(loaded) - {"weights", "directions", "defaults", "keys"}
        if unknown:
            raise ValueError(f"{path}: unknown section(s) {', '.join(sorted(unknown))}")
        data = loaded
    where = path or "config"

    weights = {c: 1.0 for c in CRITERIA}
    benefit = dict(DEFAULT_BENEFIT)
    sources = [
        (f"{where}: weights", _section(data, "weights", where)),
        ("--weight", _pairs(weight_args, "--weight")),
    ]
    for label, given in sources:
        for name, value in given.items():
            _criterion(name, label)
            try:
                weights[name] = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"{label}: {name!r} is not a number: {value!r}") from None
            if not weights[name] >= 0:
                raise ValueError(f"{label}: {name!r} must be >= 0, got {value!r}")
    total = sum(weights.values())
    if not total > 0:
        raise ValueError(f"{where}: at least one weight must be positive")
    sources = [
        (f"{where}: directions", _section(data, "directions", where)),
        ("--direction", _pairs(direction_args, "--direction")),
    ]
    for label, given in sources:
        for name, value in given.items():
            _criterion(name, label)
            if value not in ("benefit", "cost"):
                raise ValueError(f"{label}: {name!r} must be benefit or cost, got {value!r}")
            benefit[name] = value == "benefit"

    defaults = _section(data, "defaults", where)
    unknown = set(defaults) - {"image_size", "bandwidth", "power_watts"}
    if unknown:
        raise ValueError(f"{where}: defaults: unknown field(s) {', '.join(sorted(unknown))}")
    kwargs: dict[str, Any] = {}
    try:
        if "image_size" in defaults:
            kwargs["default_image_size"] = quantity_to_int("image_size", defaults["image_size"])
        if "bandwidth" in defaults:
            kwargs["default_bandwidth"] = quantity_to_int("bandwidth", defaults["bandwidth"])
            if kwargs["default_bandwidth"] <= 0:
                raise ValueError("'bandwidth' must be positive")
        if "power_watts" in defaults:
            kwargs["default_power_watts"] = float(defaults["power_watts"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: defaults: {exc}") from None

    keys = dict(DEFAULT_KEYS)
    for name, value in _section(data, "keys", where).items():
        if name not in DEFAULT_KEYS:
            raise ValueError(
                f"{where}: keys: unknown key {name!r} (known: {', '.join(DEFAULT_KEYS)})"
            )
        keys[name] = str(value)

    return KcssConfig(
        weights=tuple(weights[c] / total for c in CRITERIA),
        benefit=tuple(benefit[c] for c in CRITERIA),
        keys=keys,
        **kwargs,
    )


def _section(data: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    section = data.get(name) or {}
    if not isinstance(section, dict):
        raise ValueError(f"{where}: {name!r} must be a mapping")
    return {str(k): v for k, v in section.items()}


# -- criteria values ----------------------------------------------------------------------


def _lookup(node: NodeSummary, key: str) -> str | None:
    value = node.annotations.get(key)
    if value is None:
        value = node.labels.get(key)
    return value


def normalize_image(ref: str) -> str:
    """``busybox`` and ``docker.io/library/busybox:latest`` name the same image."""
    ref = ref.strip()
    for prefix in ("docker.io/library/", "docker.io/", "index.docker.io/library/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
            break
    last = ref.rsplit("/", 1)[-1]
    if "@" not in last and ":" not in last:
        ref += ":latest"
    return ref


def images_on(node: NodeSummary, config: KcssConfig) -> set[str]:
    present = {normalize_image(n) for img in node.images for n in img.names}
    extra = _lookup(node, config.keys["images"])
    if extra:
        present |= {normalize_image(n) for n in extra.split(",") if n.strip()}
    return present


def image_size(pod: PodSummary, views: Sequence[NodeView], config: KcssConfig) -> int:
    """Bytes to pull for all of the pod's images on a node that has none of them."""
    declared = pod.annotations.get(config.keys["image_size"])
    if declared is not None:
        return quantity_to_int("image_size", declared)
    known: dict[str, int] = {}
    for view in views:
        for img in view.node.images:
            for name in img.names:
                key = normalize_image(name)
                known[key] = max(known.get(key, 0), img.size_bytes)
    return sum(known.get(normalize_image(i), config.default_image_size) for i in pod.images)


@dataclass(frozen=True)
class NodeFigures:
    """What a node's labels, annotations and status say, read once per node version."""

    images: frozenset[str]
    bandwidth: int
    power_watts: float
    power_idle_watts: float | None
    power_max_watts: float | None
    disk_total: int
    problems: tuple[str, ...]


def node_figures(node: NodeSummary, config: KcssConfig) -> NodeFigures:
    problems: list[str] = []

    def number(key_name: str, parse, default):
        key = config.keys[key_name]
        raw = _lookup(node, key)
        if raw is None:
            return default
        try:
            return parse(raw)
        except (TypeError, ValueError):
            fallback = f"using {default}" if isinstance(default, int | float) else "ignoring it"
            problems.append(f"node {node.name}: {key}={raw!r} is not valid; {fallback}")
            return default

    bandwidth = number("bandwidth", lambda s: quantity_to_int("bandwidth", s), None)
    if bandwidth is not None and bandwidth <= 0:
        problems.append(f"node {node.name}: bandwidth must be positive; using the default")
        bandwidth = None
    idle = number("power_idle_watts", float, None)
    peak = number("power_max_watts", float, None)
    if idle is None or peak is None:
        idle, peak = number("wattage_per_state", parse_wattage, (None, None))
    return NodeFigures(
        images=frozenset(images_on(node, config)),
        bandwidth=bandwidth or config.default_bandwidth,
        power_watts=number("power_watts", float, config.default_power_watts),
        power_idle_watts=idle if peak is not None else None,
        power_max_watts=peak if idle is not None else None,
        disk_total=number(
            "disk_free", lambda s: quantity_to_int("disk", s), node.allocatable[EPHEMERAL_STORAGE]
        ),
        problems=tuple(problems),
    )


def parse_wattage(text: str) -> tuple[float, float]:
    """SimGrid's ``wattage_per_state`` (the first power state): ``"idle:full"`` or
    ``"idle:epsilon:full"`` watts, e.g. ``"95.0:190.0, 93.0:170.0"`` -> (95, 190)."""
    parts = [float(x) for x in text.split(",")[0].split(":")]
    if len(parts) not in (2, 3):
        raise ValueError(f"expected idle:full or idle:epsilon:full, got {text!r}")
    return parts[0], parts[-1]


_figures_cache: dict[str, tuple[NodeSummary, KcssConfig, NodeFigures]] = {}


def cached_node_figures(node: NodeSummary, config: KcssConfig) -> NodeFigures:
    """``node_figures``, remembered while the very same node summary and config objects
    are passed (the cache replaces a node's summary object on every change)."""
    hit = _figures_cache.get(node.name)
    if hit is not None and hit[0] is node and hit[1] is config:
        return hit[2]
    figures = node_figures(node, config)
    if len(_figures_cache) > 100_000:
        _figures_cache.clear()
    _figures_cache[node.name] = (node, config, figures)
    return figures


def node_criteria(
    pod: PodSummary,
    view: NodeView,
    pull_bytes: int,
    config: KcssConfig,
    problems: list[str],
) -> list[float]:
    """The six values of ``view``'s node for ``pod``, in ``CRITERIA`` order. Unparsable
    annotations fall back to defaults and are described in ``problems``."""
    figures = cached_node_figures(view.node, config)
    problems.extend(figures.problems)

    # image transfer time
    if pull_bytes and pod.images:
        missing = sum(1 for i in pod.images if normalize_image(i) not in figures.images)
        transfer = pull_bytes * (missing / len(pod.images)) / figures.bandwidth
    else:
        transfer = 0.0

    # power
    if figures.power_idle_watts is not None and figures.power_max_watts is not None:
        idle, peak = figures.power_idle_watts, figures.power_max_watts
        capacity = view.alloc_cpu
        used = view.requested_cpu + pod.requests.cpu_millis
        share = min(1.0, used / capacity) if capacity else 1.0
        power = idle + (peak - idle) * share
    else:
        power = figures.power_watts

    return [
        transfer,
        float(view.alloc_cpu - view.requested_cpu),
        float(view.alloc_memory - view.requested_memory),
        float(figures.disk_total - view.requested[EPHEMERAL_STORAGE]),
        float(power),
        float(view.containers),
    ]
