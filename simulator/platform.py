"""SimGrid platform XML → the hosts Batsim would see.

Understood: ``<platform>``, nested ``<zone>``/``<AS>`` (their ``<prop>`` become the
``zone_properties`` of the hosts inside), ``<host id speed core>`` with ``<prop id value>``
children, and ``<cluster id prefix suffix radical speed core>`` expanded to one host per
radical number (cluster ``<prop>`` apply to each of its hosts, e.g. ``role=master``).
Links and routes are read past: the embedded simulator does not model the network (a
documented limit). ``<config>`` props are listed with their lines (``Platform.config``):
the embedded simulator uses none, but SimGrid 3.32 — real Batsim 4.2.1's — aborts on
some that older platforms carry (``smpi/os``, ``smpi/or``: Batkube's),
:func:`refused_by_simgrid` names them. The prolog is read as SimGrid's parser reads it
(blank lines before the XML declaration accepted; no or another DOCTYPE, a byte-order
mark refused: :func:`real_batsim_refusals`).

Roles, as in Batsim: a host with ``<prop id="role" value="master"/>`` is the master (else the
host named by ``-m``, default ``master_host``); ``role=storage`` hosts are storage resources;
every other host is a compute resource. Resource ids are given by sorted host names.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.network import (  # PlatformError: defined there, raised by both
    LOOPBACK_BW,
    TCP_GAMMA,
    Network,
    PlatformError,
    link_elements,
    message_cost,
    parse_radical,
    read_network,
)
from simulator.protocol import NO_NETWORK, ReplyTransit, message_bound

_UNITS = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_SPEED_RE = re.compile(r"^\s*([0-9.eE+-]+)\s*([kMGTPE]?)(f|flops)?\s*$")


#: ``<config>`` keys SimGrid 3.32 no longer knows ("Bad config key"): Batsim 4.2.1 aborts.
SIMGRID_332_REFUSED_KEYS = ("smpi/os", "smpi/or", "smpi/ois")


@dataclass(frozen=True)
class ConfigProp:
    """A ``<prop>`` of a ``<config>`` element, where it is in the file."""

    key: str
    value: str
    line: int


@dataclass(frozen=True)
class Host:
    name: str
    speed: float  # flop/s of its initial power state
    cores: int
    properties: dict[str, str]
    zone_properties: dict[str, str] = field(default_factory=dict)
    pstate_speeds: tuple[float, ...] = ()  # every power state's speed (the energy model)
    pstate: int = 0  # its initial power state (``pstate`` attribute)

    @property
    def role(self) -> str:
        return self.properties.get("role", "")

    @property
    def node_class(self) -> str | None:
        """timewarp extension: the ``node_class`` prop selects per-class job durations."""
        return self.properties.get("node_class")


@dataclass(frozen=True)
class Platform:
    path: str
    master: Host
    compute: list[Host]  # index = resource id
    storage: list[Host]
    config: tuple[ConfigProp, ...] = ()
    network: Network | None = None  # links, routes, zones (None: no network read)
    #: why SimGrid's parser refuses the file's prolog (no or another DOCTYPE, a
    #: byte-order mark), "" when it reads it
    prolog_refusal: str = ""

    def message_costs(
        self, constraints: dict[Any, tuple[float, bool]] | None = None
    ) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
        """(latency, rate) of a Batsim message from the master host to itself, and from
        each compute host (by resource id) to the master (:mod:`simulator.network`).
        With ``constraints`` (shared resources: they get the links' capacities), each
        cost also names its links and its bound: (latency, rate, elements, bound)."""
        if self.network is None:
            return (0.0, LOOPBACK_BW), [(0.0, 0.0)] * len(self.compute)
        master = self.master.name
        network = self.network

        def cost(src: str) -> tuple[Any, ...]:
            links, latency = network.route(src, master)
            alone = message_cost(links, latency)
            if constraints is None:
                return alone
            elements = []
            for link, load in link_elements(links, 1.0).items():
                constraints[id(link)] = (link.bandwidth, link.fatpipe)
                elements.append((id(link), load))
            bound = TCP_GAMMA / (2.0 * latency) if latency > 0 else 0.0
            return (*alone, tuple(elements), bound)

        return cost(master), [cost(h.name) for h in self.compute]

    def reply_transit(self) -> ReplyTransit:
        """What a decision process's reply costs on its way to Batsim's server: each event
        a message from the master host to itself, and the slowest message another actor
        (on any host) may send to the server first, as :meth:`message_costs` (the embedded
        simulator's model) prices them alone. The broker's CALL_ME_LATER rule
        (``protocol.earliest_call``) adds them up."""
        if self.network is None:
            return NO_NETWORK
        master = self.master.name
        network = self.network

        def alone(src: str) -> tuple[float, float, bool]:
            links, latency = network.route(src, master)
            latency, rate = message_cost(links, latency)
            return latency, 1.0 / rate if rate > 0 else 0.0, any(not x.fatpipe for x in links)

        latency, byte_s, shared = alone(master)
        others = [alone(h.name) for h in (*self.compute, *self.storage)]
        other_s = max(message_bound(latency, byte_s, shared), *(message_bound(*o) for o in others))
        if other_s <= NO_NETWORK.other_s and (latency, byte_s) == (0.0, NO_NETWORK.byte_s):
            return NO_NETWORK  # SimGrid's loopback, and routes of no link to the master
        return ReplyTransit(latency, byte_s, shared, other_s)

    def resources_json(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """``compute_resources`` / ``storage_resources`` of SIMULATION_BEGINS."""

        def entry(rid: int, host: Host) -> dict[str, Any]:
            properties = {"role": host.role}
            properties.update(host.properties)
            return {
                "id": rid,
                "name": host.name,
                "state": "idle",
                "properties": properties,
                "zone_properties": dict(host.zone_properties),
            }

        compute = [entry(i, host) for i, host in enumerate(self.compute)]
        offset = len(self.compute)
        storage = [entry(offset + i, host) for i, host in enumerate(self.storage)]
        return compute, storage


def parse_speed(text: str, where: str) -> float:
    """``"16.673E9f"``, ``"1Gf"``, ``"100Mf, 50Mf"`` (first power state) → flop/s."""
    return _one_speed(text.split(",")[0], text, where)


def parse_speeds(text: str, where: str) -> tuple[float, ...]:
    """Every power state's speed: ``"100.0Mf, 1e-9Mf, 0.5f"`` → flop/s each."""
    return tuple(_one_speed(part, text, where) for part in text.split(","))


def _one_speed(first: str, text: str, where: str) -> float:
    match = _SPEED_RE.match(first)
    if not match:
        raise PlatformError(f"{where}: speed {text!r} is not like '1Gf' or '16.673E9f'")
    try:
        value = float(match.group(1)) * _UNITS[match.group(2)]
    except ValueError:
        raise PlatformError(f"{where}: speed {text!r} is not a number") from None
    if value <= 0:
        raise PlatformError(f"{where}: speed must be > 0, got {text!r}")
    return value


def _props(element: ET.Element) -> dict[str, str]:
    return {
        prop.get("id", ""): prop.get("value", "")
        for prop in element.findall("prop")
        if prop.get("id") is not None
    }


def _cores(text: str | None, where: str) -> int:
    if text is None:
        return 1
    try:
        cores = int(text)
    except ValueError:
        raise PlatformError(f"{where}: core={text!r} is not an integer") from None
    if cores < 1:
        raise PlatformError(f"{where}: core must be >= 1, got {cores}")
    return cores


def load_platform(path: str | Path, master_name: str = "master_host") -> Platform:
    """Read a SimGrid platform file; raise :class:`PlatformError` naming file and element."""
    path = str(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise PlatformError(f"{path}: no such platform file") from None
    except OSError as exc:
        raise PlatformError(f"{path}: cannot read ({exc.strerror})") from None
    text, prolog = _prolog(raw, path)
    try:
        parser = ET.XMLParser()
        parser.feed(text)
        root = parser.close()
    except ET.ParseError as exc:
        raise PlatformError(f"{path}: malformed XML ({exc})") from None
    if root.tag != "platform":
        raise PlatformError(f"{path}: root element is <{root.tag}>, expected <platform>")
    hosts: list[Host] = []

    def walk(element: ET.Element, zone_props: dict[str, str]) -> None:
        for child in element:
            tag = child.tag
            if tag in ("zone", "AS"):
                walk(child, {**zone_props, **_props(child)})
            elif tag in ("host", "peer"):  # a peer: a host of a Vivaldi zone, with links
                name = child.get("id")
                where = f"{path}: <{tag} id={name!r}>"
                if not name:
                    raise PlatformError(f"{path}: a <{tag}> has no id")
                speed = child.get("speed")
                if speed is None:
                    raise PlatformError(f"{where}: missing speed")
                speeds = parse_speeds(speed, where)
                try:
                    pstate = int(child.get("pstate", "0"))
                except ValueError:
                    raise PlatformError(f"{where}: pstate {child.get('pstate')!r}") from None
                if not 0 <= pstate < len(speeds):
                    raise PlatformError(
                        f"{where}: pstate {pstate} but {len(speeds)} speed(s) are given"
                    )
                hosts.append(
                    Host(
                        name,
                        speeds[pstate],
                        _cores(child.get("core"), where),
                        _props(child),
                        dict(zone_props),
                        speeds,
                        pstate,
                    )
                )
            elif tag == "cabinet":  # hosts of a zone routed Cluster
                where = f"{path}: <cabinet id={child.get('id', '?')!r}>"
                speed_value = parse_speed(child.get("speed", ""), where)
                for number in parse_radical(child.get("radical", ""), where):
                    name = f"{child.get('prefix', '')}{number}{child.get('suffix', '')}"
                    hosts.append(Host(name, speed_value, 1, {}, dict(zone_props)))
            elif tag == "cluster":
                cid = child.get("id", "?")
                where = f"{path}: <cluster id={cid!r}>"
                for attr in ("prefix", "radical", "speed"):
                    if child.get(attr) is None:
                        raise PlatformError(f"{where}: missing {attr}")
                speed_value = parse_speed(child.get("speed", ""), where)
                cores = _cores(child.get("core"), where)
                cluster_props = _props(child)
                for number in parse_radical(child.get("radical", ""), where):
                    name = f"{child.get('prefix')}{number}{child.get('suffix', '')}"
                    hosts.append(
                        Host(
                            name,
                            speed_value,
                            cores,
                            dict(cluster_props),
                            {**zone_props, **cluster_props},
                        )
                    )

    walk(root, {})
    if not hosts:
        raise PlatformError(f"{path}: no <host> or <cluster> found")
    seen: set[str] = set()
    for host in hosts:
        if host.name in seen:
            raise PlatformError(f"{path}: host {host.name!r} is defined twice")
        seen.add(host.name)
    masters = [host for host in hosts if host.role == "master"]
    if len(masters) > 1:
        names = ", ".join(h.name for h in masters)
        raise PlatformError(f"{path}: several hosts have role=master ({names}); need exactly one")
    if not masters:
        masters = [host for host in hosts if host.name == master_name]
    if not masters:
        raise PlatformError(
            f'{path}: no master host: mark one host with <prop id="role" value="master"/> '
            f"or name it with -m/--master-host (looked for {master_name!r})"
        )
    master = masters[0]
    others = sorted((h for h in hosts if h is not master), key=lambda h: h.name)
    compute = [h for h in others if h.role != "storage"]
    storage = [h for h in others if h.role == "storage"]
    if not compute:
        raise PlatformError(f"{path}: no compute host besides the master {master.name!r}")
    network = read_network(root, path)
    platform = Platform(path, master, compute, storage, _config_props(text), network, prolog)
    platform.message_costs()  # every route the simulation needs exists
    return platform


def _config_props(text: str) -> tuple[ConfigProp, ...]:
    """The ``<prop>`` of every ``<config>``, with their line numbers (expat knows them)."""
    import xml.parsers.expat

    found: list[ConfigProp] = []
    depth = 0
    parser = xml.parsers.expat.ParserCreate()

    def start(tag: str, attrs: dict[str, str]) -> None:
        nonlocal depth
        if tag == "config":
            depth += 1
        elif tag == "prop" and depth:
            found.append(
                ConfigProp(attrs.get("id", ""), attrs.get("value", ""), parser.CurrentLineNumber)
            )

    def end(tag: str) -> None:
        nonlocal depth
        if tag == "config":
            depth -= 1

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.Parse(text, True)
    return tuple(found)


def _prolog(raw: bytes, path: str) -> tuple[str, str]:
    """The file's text as expat can read it, and why SimGrid's parser would refuse its
    prolog ("" if it would not). SimGrid's (FleXML) parser skips whitespace, comments
    and processing instructions before the root — the XML declaration included, even
    after blank lines (six of Batsim's own platforms begin with one), which expat
    refuses — but needs the DOCTYPE it knows and no byte-order mark. So the declaration
    is read for its encoding, then blanked (its line kept: line numbers stay right)."""
    bom = raw.startswith(b"\xef\xbb\xbf")
    if bom:
        raw = raw[3:]
    encoding = "utf-8"
    named = _ENCODING_RE.match(raw)
    if named is not None:
        encoding = named.group(1).decode("ascii")
    try:
        text = raw.decode(encoding)
    except (LookupError, UnicodeDecodeError) as exc:
        raise PlatformError(f"{path}: cannot decode it as {encoding} ({exc})") from None
    declaration = _XML_DECL_RE.match(text)
    if declaration is not None:
        begin, end = declaration.span(1)
        text = text[:begin] + " " * (end - begin) + text[end:]
    if bom:
        return text, (
            f"{path}:1: a byte-order mark (EF BB BF) before the XML: SimGrid's parser "
            'refuses it ("Unexpected character in prolog")'
        )
    doctype = _DOCTYPE_RE.search(text)
    if doctype is None:
        return text, (
            f'{path}: no <!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd"> '
            "after the XML declaration: SimGrid's parser needs it (\"Unexpected character "
            "'<' in prolog\")"
        )
    line = text.count("\n", 0, doctype.start()) + 1
    if not _SIMGRID_DOCTYPE_RE.fullmatch(doctype.group(0)):
        return text, (
            f"{path}:{line}: {' '.join(doctype.group(0).split())}: SimGrid's parser knows only "
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd"> (or the old '
            'http://simgrid.gforge.inria.fr/simgrid/simgrid.dtd) and refuses it ("Bad '
            'declaration")'
        )
    return text, ""


# the XML declaration, wherever in the prolog (before the first element)
_XML_DECL_RE = re.compile(r"(?:\s|<!--.*?-->)*(<\?xml\s[^>]*\?>)", re.S)
_ENCODING_RE = re.compile(
    rb"(?:\s|<!--.*?-->)*<\?xml\s[^>]*encoding\s*=\s*[\"']([A-Za-z0-9._-]+)[\"']", re.S
)
_DOCTYPE_RE = re.compile(r"<!DOCTYPE\b[^>\[]*(?:\[.*?\][^>]*)?>", re.S)
_SIMGRID_DOCTYPE_RE = re.compile(
    r"<!DOCTYPE\s+platform\s+SYSTEM\s+(?P<q>[\"'])(?:https://simgrid\.org/simgrid\.dtd|"
    r"http://simgrid\.gforge\.inria\.fr/simgrid/simgrid\.dtd)(?P=q)\s*>"
)


def refused_by_simgrid(platform: Platform) -> list[ConfigProp]:
    """The platform's ``<config>`` props real Batsim 4.2.1 (SimGrid 3.32) aborts on."""
    return [prop for prop in platform.config if prop.key in SIMGRID_332_REFUSED_KEYS]


def real_batsim_refusals(platform: Platform) -> list[str]:
    """Why real Batsim 4.2.1 would abort on this platform (SimGrid 3.32's parser and
    config), one text per reason naming file and line; empty when it would run it."""
    found = [refused_config_text(platform, prop) for prop in refused_by_simgrid(platform)]
    if platform.prolog_refusal:
        found.insert(0, platform.prolog_refusal)
    if platform.network is not None and platform.network.unrouted:
        found.append(
            f"{platform.path}: zone(s) {', '.join(platform.network.unrouted)} without a "
            "routing attribute: SimGrid's DTD requires it (taken as Full here)"
        )
    return found


def refused_config_text(platform: Platform, prop: ConfigProp) -> str:
    """What to tell about one such prop: file, line, key, and what to do."""
    return (
        f'{platform.path}:{prop.line}: <prop id="{prop.key}"> in <config>: SimGrid 3.32, real '
        f'Batsim 4.2.1\'s, no longer knows this key and aborts ("Bad config key: {prop.key}")'
    )
