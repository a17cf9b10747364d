"""The switch (the paper's Algorithm 1): which image variant runs on the chosen resource.

A table maps an application's CPU image to its GPU image; a pod may also name its GPU
variant itself (annotation ``kubcg.timewarp.io/gpu-image``). On a CPU the pod's own image
runs. A binding cannot change a pod's image, so KubCG records the choice as the binding
annotation ``kubcg.timewarp.io/image``; on a real cluster a mutating webhook (or the
application, through the downward API) acts on it.
"""

from __future__ import annotations

from collections.abc import Mapping

from .model import PodInfo, Resource


def select_image(pod: PodInfo, resource: Resource, table: Mapping[str, str]) -> str:
    """The image to run ``pod`` with on ``resource``."""
    if resource == "gpu":
        return pod.gpu_image or table.get(pod.image) or pod.image
    return pod.image


def parse_image_table(pairs: list[str]) -> dict[str, str]:
    """Parse ``CPU_IMAGE=GPU_IMAGE`` pairs; ValueError names the bad pair."""
    table: dict[str, str] = {}
    for pair in pairs:
        cpu_image, sep, gpu_image = pair.partition("=")
        if not sep or not cpu_image or not gpu_image:
            raise ValueError(f"--gpu-image {pair!r}: expected CPU_IMAGE=GPU_IMAGE")
        table[cpu_image] = gpu_image
    return table
