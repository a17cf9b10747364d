"""A platform's network as SimGrid 3.32 routes it: what a message between two hosts costs.

Why: real Batsim sends every internal message (a submission, a decision, a job's
completion, SCHED_READY) as a 1-byte SimGrid communication from the sender's host to the
server's (the master host). Under the ptask_L07 host model Batsim uses, a communication
waits the latency of its route, then moves its bytes at the rate its links allow: so on a
platform with links, messages take microseconds to milliseconds, and Batsim's times with
them. This module reads the links, routes and zones of a platform file and gives, for a
pair of hosts, the route's latency and the rate of a 1-byte message (:func:`message_cost`).

Read as SimGrid reads them:

* ``<link id bandwidth latency sharing_policy>`` (SHARED, FATPIPE; SPLITDUPLEX makes two
  links ``id_UP`` and ``id_DOWN``), with SimGrid's units (``10GBps``, ``1Gbps``, ``15us``);
* ``<route src dst symmetrical>`` of ``<link_ctn id direction>`` and
  ``<zoneRoute src dst gw_src gw_dst>`` (``<ASroute>``) between sub-zones;
* zones (``<zone>``, ``<AS>``) routed ``Full`` (routes as written; a host's route to
  itself, if none is written, is SimGrid's loopback: 10 GB/s, no latency — in a zone of
  hosts only), ``Floyd`` and ``Dijkstra`` (shortest paths in links over the written
  routes), ``Vivaldi`` (``<peer>`` links, plus the euclidean distance of the
  coordinates, in ms) and ``None``;
* ``<cluster>`` (a star: each host's private link ``lat``/``bw`` with
  ``sharing_policy``, the backbone ``bb_lat``/``bb_bw``, ``loopback_bw``/``loopback_lat``
  links, ``limiter_link``), its router as gateway;
* a route between zones goes through their gateways, as SimGrid's
  ``get_global_route`` does.

A message's time: the route's latency (the sum of its links'), then 1 byte at the rate
of its slowest link (a link met twice counts twice, unless FATPIPE), bounded by SimGrid's
TCP window bound ``TCP_GAMMA / (2 × latency)``; a route of no link costs nothing.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

TCP_GAMMA = 4194304.0  # SimGrid's network/TCP-gamma default (bytes)
LOOPBACK_BW = 1e10  # SimGrid's network/loopback-bw default (10 GB/s)
LOOPBACK_LAT = 0.0


class PlatformError(ValueError):
    """A platform file that cannot be used; the text names the file and element."""


NetworkError = PlatformError  # a network element SimGrid would refuse


def parse_radical(text: str, where: str) -> list[int]:
    """A cluster's ``radical``: ``"0-15"``, ``"1,3-5"`` → the numbers."""
    numbers: list[int] = []
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                numbers.extend(range(low, high + 1))
            else:
                numbers.append(int(part))
        except ValueError:
            raise PlatformError(
                f"{where}: radical {text!r} is not like '0-15' or '1,3-5'"
            ) from None
    return numbers


def _unit_table(base_units: list[tuple[str, float]]) -> dict[str, float]:
    """SimGrid's unit tables (xbt_parse_units): each unit with its decimal (k, M, G…)
    and binary (Ki, Mi…) prefixes, the multipliers applied one after the other."""
    table: dict[str, float] = {}
    for unit, value in base_units:
        for mult, prefixes in (
            (1024.0, ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi")),
            (1000.0, ("k", "M", "G", "T", "P", "E", "Z", "Y")),
        ):
            scaled = value
            table.setdefault(unit, value)
            for prefix in prefixes:
                scaled *= mult
                table.setdefault(prefix + unit, scaled)
    return table


_BANDWIDTH_UNITS = _unit_table([("bps", 0.125), ("Bps", 1.0)])
_TIME_UNITS = {
    "w": 7 * 24 * 60 * 60.0, "d": 24 * 60 * 60.0, "h": 60 * 60.0, "m": 60.0, "s": 1.0,
    "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "ps": 1e-12,
}  # fmt: skip
_NUMBER_RE = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(.*)$")


def _value(text: str, units: dict[str, float], default: str, what: str, where: str) -> float:
    match = _NUMBER_RE.match(text)
    if not match:
        raise NetworkError(f"{where}: {what} {text!r} is not a number with a unit")
    unit = match.group(2) or default
    if unit not in units:
        raise NetworkError(f"{where}: {what} {text!r}: unknown unit {unit!r}")
    return float(match.group(1)) * units[unit]


def parse_bandwidth(text: str, where: str) -> float:
    """``"10GBps"``, ``"1Gbps"``, ``"1.25E8Bps"``, ``"10000MiBps"`` → bytes/s."""
    return _value(text, _BANDWIDTH_UNITS, "Bps", "bandwidth", where)


def parse_time(text: str, where: str) -> float:
    """``"15us"``, ``"1.0E-4s"``, ``"2ms"`` → seconds (a bare number is seconds)."""
    return _value(text, _TIME_UNITS, "s", "latency", where)


@dataclass(eq=False)
class Link:
    name: str
    bandwidth: float
    latency: float
    fatpipe: bool = False


@dataclass(eq=False)
class Zone:
    name: str
    routing: str
    parent: Zone | None
    children: list[Zone] = field(default_factory=list)
    # Full/Floyd/Dijkstra: written routes, (src, dst) -> (links, gw_src, gw_dst)
    routes: dict[tuple[str, str], tuple[list[Link], str | None, str | None]] = field(
        default_factory=dict
    )
    # star (cluster, Vivaldi): each netpoint's way up and down, its loopback
    up: dict[str, list[Link]] = field(default_factory=dict)
    down: dict[str, list[Link]] = field(default_factory=dict)
    loopback: dict[str, list[Link]] = field(default_factory=dict)
    gateway: str | None = None  # a cluster's router: its gateway to other zones
    members: list[str] = field(default_factory=list)  # hosts and routers, in order
    _paths: dict[tuple[str, str], list[Link]] | None = None  # Floyd/Dijkstra, computed


@dataclass
class Network:
    """Every netpoint (host, router, zone) in its zone; :meth:`route` between two."""

    zone_of: dict[str, Zone]  # host or router name -> its zone
    zones: dict[str, Zone]  # zone name -> zone
    coordinates: dict[str, tuple[float, float, float]]
    has_links: bool
    unrouted: tuple[str, ...] = ()  # zones without routing (SimGrid refuses the file)

    def route(self, src: str, dst: str) -> tuple[list[Link], float]:
        """The links from host ``src`` to host ``dst`` and the route's latency."""
        links: list[Link] = []
        latency = [0.0]
        self._global(src, dst, links, latency)
        return links, latency[0]

    def _global(self, src: str, dst: str, links: list[Link], latency: list[float]) -> None:
        src_zone, dst_zone = self._zone(src), self._zone(dst)
        if src_zone is dst_zone:
            links.extend(self._local(src_zone, src, dst, latency)[0])
            return
        path_src, path_dst = _path_to_root(src_zone), _path_to_root(dst_zone)
        parent = None
        while len(path_src) > 1 and len(path_dst) > 1 and path_src[-1] is path_dst[-1]:
            parent = path_src.pop()
            path_dst.pop()
        src_anc, dst_anc = path_src[-1], path_dst[-1]
        if src_anc is dst_anc:
            common = src_anc
            local, _, _ = self._local(common, src, dst, latency)
            links.extend(local)
            return
        assert parent is not None
        local, gw_src, gw_dst = self._local(parent, src_anc.name, dst_anc.name, latency)
        if gw_src is None or gw_dst is None:
            raise NetworkError(
                f"no route between zones {src_anc.name!r} and {dst_anc.name!r} (from "
                f"{src!r} to {dst!r}): SimGrid needs a <zoneRoute> with gateways"
            )
        if src != gw_src:
            self._global(src, gw_src, links, latency)
        links.extend(local)
        if gw_dst != dst:
            self._global(gw_dst, dst, links, latency)

    def _zone(self, name: str) -> Zone:
        zone = self.zone_of.get(name)
        if zone is None:
            raise NetworkError(f"no host or router {name!r}")
        return zone

    def _local(
        self, zone: Zone, src: str, dst: str, latency: list[float]
    ) -> tuple[list[Link], str | None, str | None]:
        if zone.routing in ("Cluster", "Vivaldi"):
            return self._star(zone, src, dst, latency)
        if zone.routing == "None":  # SimGrid's EmptyZone: any route through it aborts
            raise NetworkError(
                f"{src!r} to {dst!r} goes through zone {zone.name!r}, routed None: SimGrid "
                'aborts ("There can\'t be route in an Empty zone"), and so does Batsim'
            )
        found = zone.routes.get((src, dst))
        if found is None and zone.routing in ("Floyd", "Dijkstra"):
            path = _shortest_paths(zone).get((src, dst))
            if path is not None:
                found = (path, None, None)
        if found is None:
            if src == dst and not zone.children:  # SimGrid's loopback
                found = ([_LOOPBACK], None, None)
            else:
                return [], None, None
        links, gw_src, gw_dst = found
        for link in links:
            latency[0] += link.latency
        return list(links), gw_src, gw_dst

    def _star(
        self, zone: Zone, src: str, dst: str, latency: list[float]
    ) -> tuple[list[Link], str | None, str | None]:
        if src == dst and src in zone.loopback:
            chosen = zone.loopback[src]
        else:
            chosen = []
            for link in zone.up.get(src, []) + zone.down.get(dst, []):
                if link not in chosen:  # StarZone adds each link once
                    chosen.append(link)
        for link in chosen:
            latency[0] += link.latency
        if zone.routing == "Vivaldi":
            a = self.coordinates.get(src, (0.0, 0.0, 0.0))
            b = self.coordinates.get(dst, (0.0, 0.0, 0.0))
            distance = math.sqrt((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) + abs(a[2]) + abs(b[2])
            latency[0] += distance / 1000.0
        return chosen, None, None


_LOOPBACK = Link("__loopback__", LOOPBACK_BW, LOOPBACK_LAT, fatpipe=True)


def message_cost(links: list[Link], latency: float, size: float = 1.0) -> tuple[float, float]:
    """(latency, rate) of a ``size``-byte SimGrid communication on this route under
    ptask_L07: the rate is in communications per second (the action's cost is 1): the
    slowest link's bandwidth over the bytes it carries, bounded by the TCP window; 0
    for a route of no link (done at once, after its latency)."""
    if not links:
        return latency, 0.0
    load: dict[int, float] = {}
    for link in links:
        if link.fatpipe:
            load[id(link)] = size
        else:
            load[id(link)] = load.get(id(link), 0.0) + size
    rate = min(link.bandwidth / load[id(link)] for link in links)
    if latency > 0:
        rate = min(rate, TCP_GAMMA / (2.0 * latency * size))
    return latency, rate


def link_elements(links: list[Link], size: float) -> dict[Link, float]:
    """What a transfer of ``size`` bytes uses of each link of its route (SimGrid's lmm
    ``expand``: a link met twice carries the bytes twice, unless FATPIPE)."""
    load: dict[Link, float] = {}
    for link in links:
        if link.fatpipe:
            load[link] = max(load.get(link, 0.0), size)
        else:
            load[link] = load.get(link, 0.0) + size
    return load


def ptask_spec(
    network: Network | None,
    hosts: list[tuple[str, float, int, Any]],
    flops: list[float],
    matrix: list[float],
) -> tuple[float, list[tuple[Any, float]], float, dict[Any, tuple[float, bool]]]:
    """ptask_L07's parallel task on ``hosts`` (name, speed, cores, constraint id): its
    latency (the largest route latency among its communications), the constraints it
    uses with their weights (each host's CPU for its flops, each link for the bytes over
    it), its bound (the slowest host's speed over its flops, the TCP window over the
    largest latency × bytes; 0: none), and the capacity of every constraint named."""
    n = len(hosts)
    latency = 0.0
    lat_bytes = 0.0
    weights: dict[Any, float] = {}
    capacity: dict[Any, tuple[float, bool]] = {}
    for (_, speed, cores, cid), amount in zip(hosts, flops, strict=True):
        weights[cid] = weights.get(cid, 0.0) + amount
        capacity[cid] = (cores * speed, False)
    for k, amount in enumerate(matrix):
        if amount <= 0:
            continue
        links, lat = network.route(hosts[k // n][0], hosts[k % n][0]) if network else ([], 0.0)
        latency = max(latency, lat)
        lat_bytes = max(lat_bytes, lat * amount)
        for link, load in link_elements(links, amount).items():
            key = id(link)
            if link.fatpipe:
                weights[key] = max(weights.get(key, 0.0), load)
            else:
                weights[key] = weights.get(key, 0.0) + load
            capacity[key] = (link.bandwidth, link.fatpipe)
    bound = float("inf")
    for (_, speed, _, _), amount in zip(hosts, flops, strict=True):
        if amount > 0:
            bound = min(bound, speed / amount)
    if lat_bytes > 0:
        bound = min(bound, TCP_GAMMA / (2.0 * lat_bytes))
    return latency, list(weights.items()), 0.0 if bound == float("inf") else bound, capacity


def _path_to_root(zone: Zone) -> list[Zone]:
    path = []
    current: Zone | None = zone
    while current is not None:
        path.append(current)
        current = current.parent
    return path


def _shortest_paths(zone: Zone) -> dict[tuple[str, str], list[Link]]:
    """Floyd-Warshall over the written routes, a route's cost its number of links (as
    SimGrid's Floyd and Dijkstra zones count it)."""
    if zone._paths is not None:
        return zone._paths
    names = zone.members + [child.name for child in zone.children]
    index = {name: i for i, name in enumerate(names)}
    n = len(names)
    inf = float("inf")
    cost = [[inf] * n for _ in range(n)]
    pred = [[-1] * n for _ in range(n)]
    hop: dict[tuple[int, int], list[Link]] = {}
    for (src, dst), (links, _, _) in zone.routes.items():
        a, b = index[src], index[dst]
        cost[a][b] = len(links)
        pred[a][b] = a
        hop[(a, b)] = links
    if not zone.children:
        for i in range(n):
            if pred[i][i] == -1:
                cost[i][i], pred[i][i] = 1, i
                hop[(i, i)] = [_LOOPBACK]
    for c in range(n):
        for a in range(n):
            for b in range(n):
                if cost[a][c] < inf and cost[c][b] < inf and cost[a][c] + cost[c][b] < cost[a][b]:
                    cost[a][b] = cost[a][c] + cost[c][b]
                    pred[a][b] = pred[c][b]
    paths: dict[tuple[str, str], list[Link]] = {}
    for a in range(n):
        for b in range(n):
            if pred[a][b] == -1:
                continue
            chain: list[Link] = []
            current = b
            guard = 0
            while True:
                previous = pred[a][current]
                chain[:0] = hop[(previous, current)]
                if previous == a or guard > n:
                    break
                current = previous
                guard += 1
            paths[(names[a], names[b])] = chain
    zone._paths = paths
    return paths


# --------------------------------------------------------------------------- reading


def read_network(root: ET.Element, path: str) -> Network:
    """The network of a parsed platform file (its ``<platform>`` element)."""
    reader = _Reader(path)
    top = Zone("__root__", "Full", None)
    reader.zones[top.name] = top
    reader.walk(root, top)
    reader.resolve()
    # a single top-level zone is SimGrid's root zone
    return Network(
        reader.zone_of, reader.zones, reader.coordinates, reader.has_links, tuple(reader.unrouted)
    )


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path
        self.links: dict[str, Link | tuple[Link, Link]] = {}
        self.zone_of: dict[str, Zone] = {}
        self.zones: dict[str, Zone] = {}
        self.coordinates: dict[str, tuple[float, float, float]] = {}
        self.pending: list[tuple[Zone, ET.Element]] = []  # routes, read once all links are
        self.has_links = False
        self.unrouted: list[str] = []  # zones without a routing attribute

    def walk(self, element: ET.Element, zone: Zone) -> None:
        for child in element:
            tag = child.tag
            where = f"{self.path}: <{tag} id={child.get('id')!r}>"
            if tag in ("zone", "AS"):
                routing = child.get("routing")
                if routing is None:  # SimGrid's DTD requires it: taken as Full here
                    self.unrouted.append(child.get("id", "?"))
                    routing = "Full"
                if routing not in ("Full", "Floyd", "Dijkstra", "Vivaldi", "Cluster", "None"):
                    raise NetworkError(
                        f"{where}: routing {routing!r} is not modelled (Full, Floyd, "
                        "Dijkstra, Vivaldi, Cluster, None)"
                    )
                sub = self._zone(child.get("id", "?"), routing, zone, where)
                self.walk(child, sub)
                if routing == "Cluster":
                    self._populate(sub, child)
            elif tag == "host":
                self._netpoint(child.get("id", ""), zone)
                coords = child.get("coordinates")
                if coords:
                    self.coordinates[child.get("id", "")] = _coords(coords, where)
            elif tag == "router":
                self._netpoint(child.get("id", ""), zone)
                coords = child.get("coordinates")
                if coords:
                    self.coordinates[child.get("id", "")] = _coords(coords, where)
            elif tag == "peer":
                self._peer(child, zone, where)
            elif tag == "link":
                self._link(child, where)
            elif tag == "cluster":
                self._cluster(child, zone, where)
            elif tag in ("route", "zoneRoute", "ASroute", "bypassRoute", "bypassZoneRoute"):
                if tag.startswith("bypass"):
                    raise NetworkError(f"{self.path}: <{tag}> is not modelled")
                self.pending.append((zone, child))
            elif tag in ("backbone", "cabinet", "host_link"):
                if zone.routing != "Cluster":
                    raise NetworkError(f"{where}: <{tag}> is only for zones routed Cluster")
                if tag == "cabinet":
                    for number in parse_radical(child.get("radical", ""), where):
                        self._netpoint(
                            f"{child.get('prefix', '')}{number}{child.get('suffix', '')}", zone
                        )

    def _populate(self, zone: Zone, element: ET.Element) -> None:
        """A zone routed Cluster, once read (SimGrid's sg_platf_zone_cluster_populate): its
        ``<backbone>``, then each ``<host_link>`` (up: the host's up link then the
        backbone; down: the backbone then its down link), then each ``<cabinet>`` (hosts
        with links ``link_<host>_UP``/``_DOWN`` of its ``bw``/``lat``)."""
        backbone = None
        for child in element.findall("backbone"):
            where = f"{self.path}: <backbone id={child.get('id')!r}>"
            made = self._new_link(
                child.get("id", ""),
                parse_bandwidth(child.get("bandwidth", "0"), where),
                parse_time(child.get("latency", "0"), where),
                "SHARED",
                where,
            )
            assert isinstance(made, Link)
            backbone = made
        pairs: list[tuple[str, Link, Link]] = []
        for child in element.findall("host_link"):
            where = f"{self.path}: <host_link id={child.get('id')!r}>"
            ends = []
            for key in ("up", "down"):
                made = self.links.get(child.get(key, ""))
                if not isinstance(made, Link):
                    raise NetworkError(f"{where}: link {child.get(key)!r} not found")
                ends.append(made)
            pairs.append((child.get("id", ""), ends[0], ends[1]))
        for child in element.findall("cabinet"):
            where = f"{self.path}: <cabinet id={child.get('id')!r}>"
            bw = parse_bandwidth(child.get("bw", "0"), where)
            lat = parse_time(child.get("lat", "0"), where)
            for number in parse_radical(child.get("radical", ""), where):
                name = f"{child.get('prefix', '')}{number}{child.get('suffix', '')}"
                up = self._new_link(f"link_{name}_UP", bw, lat, "SHARED", where)
                down = self._new_link(f"link_{name}_DOWN", bw, lat, "SHARED", where)
                assert isinstance(up, Link) and isinstance(down, Link)
                pairs.append((name, up, down))
        for name, up, down in pairs:
            zone.up[name] = [up, backbone] if backbone else [up]
            zone.down[name] = [backbone, down] if backbone else [down]

    def _zone(self, name: str, routing: str, parent: Zone, where: str) -> Zone:
        if name in self.zones:
            raise NetworkError(f"{where}: zone {name!r} is defined twice")
        zone = Zone(name, routing, parent)
        parent.children.append(zone)
        self.zones[name] = zone
        self.zone_of[name] = parent  # a zone is a netpoint of its parent
        return zone

    def _netpoint(self, name: str, zone: Zone) -> None:
        self.zone_of[name] = zone
        zone.members.append(name)

    def _new_link(self, name: str, bandwidth: float, latency: float, policy: str, where: str):  # type: ignore[no-untyped-def]
        self.has_links = True
        if policy in ("SPLITDUPLEX", "FULLDUPLEX"):
            made: Link | tuple[Link, Link] = (
                Link(f"{name}_UP", bandwidth, latency),
                Link(f"{name}_DOWN", bandwidth, latency),
            )
        elif policy in ("SHARED", "FATPIPE"):
            made = Link(name, bandwidth, latency, fatpipe=policy == "FATPIPE")
        else:
            raise NetworkError(f"{where}: sharing_policy {policy!r} is not modelled")
        if name in self.links:
            raise NetworkError(f"{where}: link {name!r} is defined twice")
        self.links[name] = made
        return made

    def _link(self, element: ET.Element, where: str) -> None:
        bandwidth = element.get("bandwidth")
        if bandwidth is None:
            raise NetworkError(f"{where}: missing bandwidth")
        if "," in bandwidth or ";" in bandwidth:
            raise NetworkError(f"{where}: several bandwidths (a WIFI link) are not modelled")
        self._new_link(
            element.get("id", ""),
            parse_bandwidth(bandwidth, where),
            parse_time(element.get("latency", "0"), where),
            element.get("sharing_policy", "SHARED"),
            where,
        )

    def _peer(self, element: ET.Element, zone: Zone, where: str) -> None:
        if zone.routing != "Vivaldi":
            raise NetworkError(f"{where}: <peer> is only for Vivaldi zones")
        name = element.get("id", "")
        self._netpoint(name, zone)
        self.coordinates[name] = _coords(element.get("coordinates", "0 0 0"), where)
        up = self._new_link(
            f"link_{name}_UP", parse_bandwidth(element.get("bw_out", "0"), where), 0.0,
            "SHARED", where,
        )  # fmt: skip
        down = self._new_link(
            f"link_{name}_DOWN", parse_bandwidth(element.get("bw_in", "0"), where), 0.0,
            "SHARED", where,
        )  # fmt: skip
        zone.up[name] = [up]
        zone.down[name] = [down]

    def _cluster(self, element: ET.Element, parent: Zone, where: str) -> None:
        cid = element.get("id", "?")
        if element.get("topology", "FLAT") != "FLAT":
            raise NetworkError(f"{where}: topology {element.get('topology')!r} is not modelled")
        zone = self._zone(cid, "Cluster", parent, where)
        prefix, suffix = element.get("prefix", ""), element.get("suffix", "")
        bw = parse_bandwidth(element.get("bw", "0"), where)
        lat = parse_time(element.get("lat", "0"), where)
        policy = element.get("sharing_policy", "SPLITDUPLEX")
        backbone = None
        bb_bw_text, bb_lat_text = element.get("bb_bw", ""), element.get("bb_lat", "0s")
        bb_bw = parse_bandwidth(bb_bw_text, where) if bb_bw_text else 0.0
        bb_lat = parse_time(bb_lat_text, where)
        if bb_bw > 0 or bb_lat > 0:
            backbone = self._new_link(
                f"{cid}_backbone", bb_bw, bb_lat, element.get("bb_sharing_policy", "SHARED"), where
            )
        lb_bw_text, lb_lat_text = element.get("loopback_bw", ""), element.get("loopback_lat", "")
        lb_bw = parse_bandwidth(lb_bw_text, where) if lb_bw_text else 0.0
        lb_lat = parse_time(lb_lat_text, where) if lb_lat_text else 0.0
        limiter_text = element.get("limiter_link", "")
        limiter_bw = parse_bandwidth(limiter_text, where) if limiter_text else 0.0
        for number in parse_radical(element.get("radical", ""), where):
            name = f"{prefix}{number}{suffix}"
            self._netpoint(name, zone)
            link_id = f"{cid}_link_{number}"
            if lb_bw > 0 or lb_lat > 0:
                loop = self._new_link(f"{link_id}_loopback", lb_bw, lb_lat, "FATPIPE", where)
                zone.loopback[name] = [loop]
            ups: list[Link] = []
            downs: list[Link] = []
            if limiter_bw > 0:
                limiter = self._new_link(f"{link_id}_limiter", limiter_bw, 0.0, "SHARED", where)
                ups.append(limiter)
            # SimGrid 3.32 makes a cluster's private link split-duplex or else SHARED: its
            # FATPIPE is not applied (sg_platf_new_cluster_flat)
            made = self._new_link(
                link_id, bw, lat, "SPLITDUPLEX" if policy == "SPLITDUPLEX" else "SHARED", where
            )
            if isinstance(made, tuple):
                ups.append(made[0])
                downs.append(made[1])
            else:
                ups.append(made)
                downs.append(made)
            if backbone is not None:
                assert isinstance(backbone, Link)
                ups.append(backbone)
                downs.insert(0, backbone)
            if limiter_bw > 0:
                downs.append(ups[0])
            zone.up[name], zone.down[name] = ups, downs
        router = element.get("router_id") or f"{prefix}{cid}_router{suffix}"
        self._netpoint(router, zone)
        zone.up[router], zone.down[router] = [], []
        zone.gateway = router

    def resolve(self) -> None:
        """The routes, once every link and netpoint is known."""
        for zone, element in self.pending:
            tag = element.tag
            where = f"{self.path}: <{tag} src={element.get('src')!r} dst={element.get('dst')!r}>"
            src, dst = element.get("src", ""), element.get("dst", "")
            if zone.routing in ("None", "Vivaldi", "Cluster"):
                raise NetworkError(
                    f"{where}: zone {zone.name!r} (routed {zone.routing}) takes no <{tag}>: "
                    f"SimGrid aborts (\"NetZone '{zone.name}' does not accept new routes\")"
                )
            gw_src = gw_dst = None
            if tag in ("zoneRoute", "ASroute"):
                gw_src, gw_dst = element.get("gw_src"), element.get("gw_dst")
                if gw_src not in self.zone_of or gw_dst not in self.zone_of:
                    raise NetworkError(f"{where}: unknown gateway {gw_src!r} or {gw_dst!r}")
            for name in (src, dst):
                if self.zone_of.get(name) is not zone:
                    raise NetworkError(f"{where}: {name!r} is not in zone {zone.name!r}")
            forward: list[Link] = []
            backward: list[Link] = []
            for ctn in element.findall("link_ctn"):
                lid = ctn.get("id", "")
                made = self.links.get(lid)
                direction = ctn.get("direction", "NONE")
                if made is None:
                    raise NetworkError(f"{where}: unknown link {lid!r}")
                if isinstance(made, tuple):
                    if direction not in ("UP", "DOWN"):
                        raise NetworkError(
                            f"{where}: link {lid!r} is SPLITDUPLEX: say direction UP or DOWN"
                        )
                    up, down = made
                    forward.append(up if direction == "UP" else down)
                    backward.insert(0, down if direction == "UP" else up)
                else:
                    forward.append(made)
                    backward.insert(0, made)
            if (src, dst) in zone.routes:
                raise NetworkError(
                    f"{where}: the route between {src} and {dst} already exists (routes are "
                    "symmetrical by default)"
                )
            zone.routes[(src, dst)] = (forward, gw_src, gw_dst)
            symmetrical = element.get("symmetrical", "YES").upper() == "YES"
            if symmetrical and src != dst:
                if (dst, src) in zone.routes:
                    raise NetworkError(
                        f"{where}: the route between {dst} and {src} already exists: do not "
                        "declare the reverse path as symmetrical"
                    )
                zone.routes[(dst, src)] = (backward, gw_dst, gw_src)


def _coords(text: str, where: str) -> tuple[float, float, float]:
    try:
        values = [float(v) for v in text.split()]
    except ValueError:
        raise NetworkError(f"{where}: coordinates {text!r} are not 3 numbers") from None
    if len(values) != 3:
        raise NetworkError(f"{where}: coordinates {text!r} are not 3 numbers")
    return values[0], values[1], values[2]
