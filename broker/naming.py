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
