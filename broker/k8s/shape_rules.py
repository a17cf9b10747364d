"""The one place the cluster-shape code (kubelet model, platform and workload checks)
takes its rules for names, label keys and label values from: kube-apiserver's, as the
facade's own admission applies them (``broker/k8s/names.py``), so a workload or
platform checked up front and an API request get the same verdict in the same words.
Each ``is_*`` returns the list of problems (empty when valid)."""

from __future__ import annotations

from broker.k8s.names import (  # noqa: F401
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
)


class ShapeError(ValueError):
    """A value that cannot describe a Node or a Pod: ``field`` names where it came from."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
