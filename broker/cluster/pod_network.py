"""The pods' addresses, as a real cluster's CNI gives them: each node a pod CIDR, each pod
an IP of its node's range.

The node-ipam controller (kube-controller-manager's ``--allocate-node-cidrs`` with
kubeadm's ``--pod-network-cidr``) gives the n-th node (the platform's order) the n-th /24
of ``POD_NETWORK`` (``timewarp/wire/clusternet.py``): ``10.244.0.0/24``, ``10.244.1.0/24``…,
as ``spec.podCIDR``/``spec.podCIDRs``; past the range's 1,024 nodes a node gets none (the
real controller's ``CIDRNotAvailable``) and its pods share its address.

On each node, pods get addresses as the host-local IPAM plugin (flannel's) hands them
out: from ``.2`` (``.1`` is the node's bridge, ``cni0``) to ``.254``, each allocation the
next free one after the last given (round robin, wrapping), released when the pod's
containers are gone (finished, killed, deleted). A ``hostNetwork`` pod, or one on a node
whose range is full, has its node's address. Everything happens in the driver thread, in
the order of the pods' admissions: the same run gives the same addresses.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from timewarp.wire.clusternet import NODE_POD_PREFIX, POD_NETWORK


@dataclass
class _Range:
    """host-local's state for one node: the range and the addresses in use."""

    network: ipaddress.IPv4Network
    used: set[int] = field(default_factory=set)  # offsets in the range
    last: int = 1  # the last offset given (.1 is the bridge: the first pod gets .2)
    # the addresses in use, as handed out -> their offsets: a release finds its offset
    # without parsing the address (ipaddress: ~5 us a pod)
    given: dict[str, int] = field(default_factory=dict)

    def allocate(self) -> str | None:
        size = self.network.num_addresses - 2  # offsets 2 .. size (.255 is broadcast)
        for step in range(1, size):
            offset = (self.last - 2 + step) % (size - 1) + 2
            if offset not in self.used:
                self.used.add(offset)
                self.last = offset
                ip = str(self.network.network_address + offset)
                self.given[ip] = offset
                return ip
        return None


class PodNetwork:
    """Pod CIDRs per node and pod addresses in them (see the module docstring)."""

    def __init__(self) -> None:
        self._subnets = ipaddress.ip_network(POD_NETWORK).subnets(new_prefix=NODE_POD_PREFIX)
        self._ranges: dict[str, _Range] = {}

    def add_node(self, name: str) -> str | None:
        """The next node's pod CIDR (None when the cluster's range is used up)."""
        subnet = next(self._subnets, None)
        if subnet is None:
            return None
        self._ranges[name] = _Range(subnet)
        return str(subnet)

    def allocate(self, node: str, host_network: bool) -> str | None:
        """A new pod's address on ``node``; None: it has the node's."""
        node_range = self._ranges.get(node)
        if host_network or node_range is None:
            return None
        return node_range.allocate()

    def release(self, node: str, ip: str | None) -> None:
        """The pod's containers are gone: its address is free again."""
        node_range = self._ranges.get(node)
        if ip is None or node_range is None:
            return
        offset = node_range.given.pop(ip, None)
        if offset is None:  # not an address this range handed out (or released already)
            offset = int(ipaddress.ip_address(ip)) - int(node_range.network[0])
        node_range.used.discard(offset)
