"""coordination.k8s.io/v1 Leases (leader election): the spec's times are
``metav1.MicroTime``, decoded and written back as kube-apiserver does
(``admission.MICRO_TIME``), so that a Lease one client renews reads the same to every
other (client-go parses them with exactly six fractional digits)."""

from __future__ import annotations

from ..admission import INT32, META, MICRO_TIME, STR, Struct
from . import printers_core
from .base import Strategy


class LeaseStrategy(Strategy):
    printer = printers_core.LEASE
    schema = Struct(
        "Lease",
        {
            "metadata": META,
            "spec": Struct(
                "LeaseSpec",
                {
                    "holderIdentity": STR,
                    "leaseDurationSeconds": INT32,
                    "acquireTime": MICRO_TIME,
                    "renewTime": MICRO_TIME,
                    "leaseTransitions": INT32,
                    "strategy": STR,
                    "preferredHolder": STR,
                },
            ),
        },
    )
