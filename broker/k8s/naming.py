"""Batsim job ids <-> Kubernetes pod names, reversibly.

Job ids look like ``w0!1`` or ``w3!job-17`` and may contain any character; pod names must
be DNS-1123 subdomains (lowercase alphanumerics, ``-`` and ``.``, alphanumeric at both
ends, at most 253 characters). Lowercase letters and digits are kept; every other
character becomes ``-`` followed by its code in fixed-width lowercase hex (``-21`` for
``!``, ``-u00e9`` above 0xff, ``-v01f600`` above 0xffff). A ``-`` never appears otherwise,
so the mapping is a bijection; an escape ends with a hex digit, so names end with an
alphanumeric. ``w0!1`` -> ``w0-211`` (``w0`` + ``-21`` + ``1``); ``w3!job-17`` ->
``w3-21job-2d17``.
"""

from __future__ import annotations

_KEEP = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


def pod_name(job_id: str) -> str:
    if not job_id or job_id[0] not in _KEEP:
        raise ValueError(
            f"job id {job_id!r} must start with a lowercase letter or a digit "
            "(Batsim's are 'w<N>!<id>')"
        )
    out = []
    for ch in job_id:
        if ch in _KEEP:
            out.append(ch)
            continue
        code = ord(ch)
        if code < 0x100:
            out.append(f"-{code:02x}")
        elif code < 0x10000:
            out.append(f"-u{code:04x}")
        else:
            out.append(f"-v{code:06x}")
    name = "".join(out)
    if len(name) > 253:
        raise ValueError(f"job id {job_id!r} is too long for a pod name ({len(name)} > 253)")
    return name


def job_id(pod: str) -> str:
    """The inverse of :func:`pod_name`."""
    out, i = [], 0
    while i < len(pod):
        ch = pod[i]
        if ch != "-":
            out.append(ch)
            i += 1
            continue
        kind = pod[i + 1 : i + 2]
        if kind == "u":
            out.append(chr(int(pod[i + 2 : i + 6], 16)))
            i += 6
        elif kind == "v":
            out.append(chr(int(pod[i + 2 : i + 8], 16)))
            i += 8
        else:
            out.append(chr(int(pod[i + 1 : i + 3], 16)))
            i += 3
    return "".join(out)


# --- dynamic jobs (pods made by controllers) --------------------------------------------
#
# A ReplicaSet replacement restarts its job from scratch as a new Batsim job in the same
# workload: ``w0!web-1`` -> ``w0!web-1~r1``, then ``w0!web-1~r2`` (counted per original
# job, never nested). A pod the API created (a Job controller's pod, or a bare pod) that
# says how long it runs becomes a job of the ``k8s`` workload named after it:
# ``default/pi-x7k2p`` -> ``k8s!default.pi-x7k2p`` (namespaces have no dots, so the first
# ``.`` separates). Both forms are reversible; static job ids ending in ``~r<digits>`` are
# therefore reserved.

API_WORKLOAD = "k8s"
_REPLACEMENT = "~r"


def replacement_job_id(original: str, count: int) -> str:
    """The id of the ``count``-th (1, 2, …) replacement of job ``original``."""
    if count < 1:
        raise ValueError(f"replacement count must be >= 1, got {count}")
    return f"{original_job_id(original)}{_REPLACEMENT}{count}"


def original_job_id(job_id: str) -> str:
    """The job a replacement restarts (``w0!web-1~r2`` -> ``w0!web-1``); ``job_id`` itself
    when it is not a replacement."""
    head, sep, tail = job_id.rpartition(_REPLACEMENT)
    if sep and head and tail.isdigit() and tail[0] != "0":
        return head
    return job_id


def api_pod_job_id(namespace: str, pod: str, occurrence: int = 1) -> str:
    """The job id of a pod the API created: ``k8s!<namespace>.<pod>``; the ``n``-th pod of
    that name in a run (a name is free again once its pod is gone) is
    ``k8s!<namespace>.<pod>~<n>`` — ``~`` is never in a pod name, and a Batsim job id is
    never used twice."""
    if not namespace or "." in namespace or not pod or occurrence < 1:
        raise ValueError(f"not a namespace/pod pair: {namespace!r}/{pod!r} ({occurrence})")
    suffix = "" if occurrence == 1 else f"~{occurrence}"
    return f"{API_WORKLOAD}!{namespace}.{pod}{suffix}"


def api_pod_of(job_id: str) -> tuple[str, str] | None:
    """The inverse of :func:`api_pod_job_id` (without the occurrence); None for other job
    ids."""
    workload, sep, local = job_id.partition("!")
    if workload != API_WORKLOAD or not sep:
        return None
    namespace, dot, pod = local.partition(".")
    pod = pod.partition("~")[0]
    if not (namespace and dot and pod):
        return None
    return namespace, pod
