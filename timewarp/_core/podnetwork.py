"""The simulated cluster's addresses are not on the real network.

Nodes get addresses in ``10.0.0.0/8`` (``broker/cluster/cluster.py``), and pods theirs in
its ``10.244.0.0/14`` (``broker/cluster/pod_network.py``). A program that probes them (a health check of its pods, a scrape of a node's
kubelet) would otherwise send real packets to whatever machine answers for that private
address where the simulation runs — or hang until a TCP timeout, in wall time. In a
simulated process a connection to an address of the simulated cluster is refused at once
(``ECONNREFUSED``, as from a pod with nothing listening), through ``socket.socket.connect``
and ``connect_ex`` (asyncio's ``sock_connect`` and every client library go through them).
Host names are left alone: the simulated cluster has none in DNS. Limit: C code that
connects on its own (a C extension's client, a subprocess) is not covered.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
from typing import Any

from timewarp.wire.clusternet import CLUSTER_NETWORK

_network = ipaddress.ip_network(CLUSTER_NETWORK)
_installed = False


def simulated(address: Any) -> bool:
    """Whether ``address`` (a socket address) is an IP of the simulated cluster."""
    if not isinstance(address, tuple) or not address or not isinstance(address[0], str):
        return False
    try:
        ip = ipaddress.ip_address(address[0].split("%", 1)[0])
    except ValueError:
        return False  # a host name, resolved by the C library: left alone
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip in _network


def _refused(address: Any) -> ConnectionRefusedError:
    return ConnectionRefusedError(
        errno.ECONNREFUSED,
        f"{os.strerror(errno.ECONNREFUSED)} ({address[0]} is an address of the simulated "
        "cluster: nothing real answers there)",
    )


def install() -> None:
    """Refuse connections to the simulated cluster's addresses, once per process."""
    global _installed
    if _installed:
        return
    _installed = True
    connect = socket.socket.connect
    connect_ex = socket.socket.connect_ex

    def tw_connect(self: socket.socket, address: Any) -> None:
        if simulated(address):
            raise _refused(address)
        return connect(self, address)

    def tw_connect_ex(self: socket.socket, address: Any) -> int:
        if simulated(address):
            return errno.ECONNREFUSED
        return connect_ex(self, address)

    socket.socket.connect = tw_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = tw_connect_ex  # type: ignore[method-assign]
