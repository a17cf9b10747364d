"""Pod addresses (``broker/cluster/pod_network.py``): each node a /24 of 10.244.0.0/14 as
``spec.podCIDR``, each pod the next free address of its node's range (host-local's round
robin from .2), released when its containers are gone; hostNetwork pods have their
node's; every pod address is one the runtime refuses connections to."""

from __future__ import annotations

import ipaddress
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from broker.cluster.pod_network import PodNetwork
from broker.drivers.inprocess import InProcessRun
from timewarp.wire.clusternet import CLUSTER_NETWORK, POD_NETWORK


def test_nodes_get_consecutive_24s_and_none_past_the_range():
    net = PodNetwork()
    cidrs = [net.add_node(f"n{i}") for i in range(1025)]
    assert cidrs[:3] == ["10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24"]
    assert cidrs[256] == "10.245.0.0/24"
    assert cidrs[1023] == "10.247.255.0/24"
    assert cidrs[1024] is None  # CIDRNotAvailable: its pods have the node's address
    assert net.allocate("n1024", host_network=False) is None


def test_addresses_go_round_robin_from_2_and_come_back_when_released():
    net = PodNetwork()
    net.add_node("a")
    first = [net.allocate("a", host_network=False) for _ in range(3)]
    assert first == ["10.244.0.2", "10.244.0.3", "10.244.0.4"]
    net.release("a", "10.244.0.3")
    assert net.allocate("a", host_network=False) == "10.244.0.5"  # next after the last given
    assert net.allocate("a", host_network=True) is None
    rest = [net.allocate("a", host_network=False) for _ in range(250)]
    assert rest[-1] == "10.244.0.3"  # wrapped: .6 .. .254, then the freed .3
    assert rest[-2] == "10.244.0.254"
    assert net.allocate("a", host_network=False) is None  # full: the node's address


class _ParsingNetwork(PodNetwork):
    """The release as it was: the offset parsed from the address."""

    def release(self, node: str, ip: str | None) -> None:
        node_range = self._ranges.get(node)
        if ip is None or node_range is None:
            return
        offset = int(ipaddress.ip_address(ip)) - int(node_range.network[0])
        node_range.used.discard(offset)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["allocate", "release", "release a stranger"]),
            st.integers(0, 1),  # node
            st.integers(0, 300),  # which address
        ),
        max_size=400,
    )
)
def test_a_release_frees_what_parsing_its_address_would(steps):
    """Releases find their offset among the addresses handed out: the same addresses come
    out as when each release parsed its address, whatever is released, twice or never
    handed out (an address of the range, or of another node's)."""
    ours, parsed = PodNetwork(), _ParsingNetwork()
    handed: list[tuple[str, str]] = []
    for net in (ours, parsed):
        net.add_node("n0"), net.add_node("n1")
    for what, node, which in steps:
        name = f"n{node}"
        if what == "allocate":
            got = ours.allocate(name, host_network=False)
            assert got == parsed.allocate(name, host_network=False)
            if got is not None:
                handed.append((name, got))
        elif what == "release" and handed:
            name, ip = handed[which % len(handed)]  # sometimes one released already
            ours.release(name, ip), parsed.release(name, ip)
        else:
            ip = f"10.244.{which % 3}.{which % 256}"  # perhaps another node's range
            ours.release(name, ip), parsed.release(name, ip)
        assert ours._ranges[name].used == parsed._ranges[name].used


def test_the_pod_network_is_inside_the_refused_cluster_network():
    assert ipaddress.ip_network(POD_NETWORK).subnet_of(ipaddress.ip_network(CLUSTER_NETWORK))


def _pods_seen(world: InProcessRun) -> dict[str, dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}

    def listen(key: str, event: str, obj: dict[str, Any]) -> None:
        status = obj.get("status") or {}
        if key == "pods" and status.get("phase") == "Running":
            seen.setdefault(obj["metadata"]["name"], obj)

    world.store.add_listener(listen)
    return seen


def test_running_pods_have_their_own_address_in_their_nodes_cidr(tmp_path):
    jobs = [{"id": str(i), "subtime": 10 * (i // 4), "res": 1, "profile": "p"} for i in range(6)]
    profiles = {"p": {"type": "delay", "delay": 5, "cpu": "1", "scheduler": "default"}}
    world = InProcessRun(tmp_path, nodes=2, cores=2)
    seen = _pods_seen(world)
    try:
        assert world.run(jobs, profiles).ended
        nodes = {n["metadata"]["name"]: n for n in world.store.list("nodes")[0]}
    finally:
        world.close()
    assert {name: (n["spec"]["podCIDR"], n["spec"]["podCIDRs"]) for name, n in nodes.items()} == {
        "n000": ("10.244.0.0/24", ["10.244.0.0/24"]),
        "n001": ("10.244.1.0/24", ["10.244.1.0/24"]),
    }
    by_node: dict[str, list[str]] = {}
    for name in seen:  # in the order they started
        pod = seen[name]
        node, status = pod["spec"]["nodeName"], pod["status"]
        address = nodes[node]["status"]["addresses"][0]["address"]
        assert (status["hostIP"], status["hostIPs"]) == (address, [{"ip": address}])
        assert status["podIPs"] == [{"ip": status["podIP"]}]
        assert ipaddress.ip_address(status["podIP"]) in ipaddress.ip_network(
            nodes[node]["spec"]["podCIDR"]
        )
        by_node.setdefault(node, []).append(status["podIP"])
    # the first wave's two pods per node, then (their addresses released) the next one's
    assert by_node == {
        "n000": ["10.244.0.2", "10.244.0.3", "10.244.0.4"],
        "n001": ["10.244.1.2", "10.244.1.3", "10.244.1.4"],
    }
