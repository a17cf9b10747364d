"""Recognising the usual mix-up of ``-p`` and ``-w`` (a workload given as the platform,
or the other way round), so the error says so instead of "malformed XML at line 1".

Only the first bytes are looked at: a SimGrid platform is XML (``<``), a Batsim
workload a JSON object (``{``).
"""

from __future__ import annotations

from collections.abc import Sequence


def _kind(path: str) -> str | None:
    """``platform`` (XML), ``workload`` (a JSON object) or None (unreadable, other)."""
    try:
        with open(path, "rb") as f:
            head = f.read(512).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return None
    if head.startswith(b"<"):
        return "platform"
    if head.startswith(b"{"):
        return "workload"
    return None


def input_mixup(platform: str, workloads: Sequence[str]) -> str | None:
    """A message naming the option given the wrong kind of file, or None."""
    wrong = []
    if _kind(platform) == "workload":
        wrong.append(f"-p {platform} looks like a workload (JSON), not a platform")
    wrong += [f"-w {w} looks like a platform (XML), not a workload" for w in workloads
              if _kind(w) == "platform"]  # fmt: skip
    if not wrong:
        return None
    swapped = " (-p and -w swapped?)" if len(wrong) > 1 else ""
    hint = "-p takes the SimGrid platform XML, -w the Batsim workload JSON"
    return "; ".join(wrong) + f"{swapped}: {hint}"
