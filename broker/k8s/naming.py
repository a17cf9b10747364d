"""Batsim job ids <-> Kubernetes pod names, reversibly and readably.

Job ids look like ``w0!1`` or ``w3!job-17`` and may contain any character; pod names must
be DNS-1123 subdomains (lowercase alphanumerics, ``-`` and ``.``; every ``.``-separated
label starts and ends with an alphanumeric; at most 253 characters). The name shows the
id (issue 31: ``w0-211`` hid job 1):

- lowercase letters and digits are kept;
- ``!`` becomes ``.`` and ``-`` stays ``-`` when both neighbours are kept characters
  (``w0!1`` -> ``w0.1``, ``w3!job-17`` -> ``w3.job-17``);
- every other character (and a ``!`` or ``-`` next to one) becomes ``--`` followed by its
  code in fixed-width lowercase hex: ``--21`` for ``!``, ``--u00e9`` above 0xff,
  ``--v01f600`` above 0xffff (``w0!Job_1`` -> ``w0--21--4aob--5f1``,
  ``w0!web-1~r2`` -> ``w0.web-1--7er2``).

A kept ``-`` is always followed by an alphanumeric, so ``--`` always opens an escape and
the mapping is a bijection: two job ids never share a pod name, and :func:`job_id` gives
the id back from the name alone. Names always start (the id must) and end (an escape ends
with a hex digit) with an alphanumeric, and a ``.`` sits between two alphanumerics, so
every name is a valid subdomain. ``docs/broker.md`` ("Pods") documents the mapping.
"""

from __future__ import annotations

_KEEP = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_JOINERS = {"!": ".", "-": "-"}  # kept readable between two kept characters
_ESCAPE = "--"


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"{_ESCAPE}{code:02x}"
    if code < 0x10000:
        return f"{_ESCAPE}u{code:04x}"
    return f"{_ESCAPE}v{code:06x}"


def pod_name(job_id: str) -> str:
    """The pod name of Batsim job ``job_id`` (ValueError if it cannot have one)."""
    if not job_id or job_id[0] not in _KEEP:
        raise ValueError(
            f"job id {job_id!r} must start with a lowercase letter or a digit "
            "(Batsim's are 'w<N>!<id>')"
        )
    out = []
    last = len(job_id) - 1
    for i, ch in enumerate(job_id):
        if ch in _KEEP:
            out.append(ch)
        elif ch in _JOINERS and 0 < i < last and {job_id[i - 1], job_id[i + 1]} <= _KEEP:
            out.append(_JOINERS[ch])
        else:
            out.append(_escape(ch))
    name = "".join(out)
    if len(name) > 253:
        raise ValueError(f"job id {job_id!r} is too long for a pod name ({len(name)} > 253)")
    return name


_WIDTHS = {"u": 4, "v": 6}


def job_id(pod: str) -> str:
    """The inverse of :func:`pod_name`: the job id a pod name was made from (ValueError
    when no job id makes that name, e.g. a Deployment's pod ``web-7d9f-x2k4q`` decodes
    but ``web--zz`` does not)."""
    out, i = [], 0
    try:
        while i < len(pod):
            ch = pod[i]
            if pod.startswith(_ESCAPE, i):
                kind = pod[i + 2 : i + 3]
                width = _WIDTHS.get(kind, 2)
                start = i + 2 + (kind in _WIDTHS)
                digits = pod[start : start + width]
                if len(digits) != width:
                    raise ValueError("truncated escape")
                out.append(chr(int(digits, 16)))
                i = start + width
                continue
            out.append("!" if ch == "." else ch)
            i += 1
        found = "".join(out)
        if pod_name(found) != pod:
            raise ValueError("not a name pod_name makes")
    except ValueError as exc:
        raise ValueError(f"{pod!r} is not the pod name of a job ({exc})") from None
    return found


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
