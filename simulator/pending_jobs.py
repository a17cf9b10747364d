"""A workload's static jobs not yet submitted, held compactly until their submission.

The simulator reads and validates the whole workload file at start, as Batsim does (a bad
file is refused before the run), but a parsed :class:`~simulator.workload.Job` with its
JSON dict costs ~0.9 KiB per job, and in a long run most of the workload is still waiting
for its subtime when the broker reaches its working size: the pending jobs would set the
peak memory. :class:`PendingJobs` keeps each validated job as its compact JSON text (with
``id`` already rewritten to ``<workload>!<id>``) and its position in the file, in Batsim's
submission order, and builds the ``Job`` when it is submitted — equal to the one
:func:`~simulator.workload.parse_job` gave (``json`` round-trips its dict exactly: same
keys in the same order, same values).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

from simulator.workload import Job

#: ``json.dumps(raw, separators=(",", ":"), allow_nan=True)``, its encoder built once (a
#: call of ``dumps`` with options builds one per job); no circular-reference markers: a
#: dict parsed from JSON has no cycle. The text is ASCII (``ensure_ascii``).
_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=True, check_circular=False).encode
#: ``json.loads`` of that text once decoded, without its encoding detection (UTF-8 text)
_DECODE = json.JSONDecoder().decode


def submission_key(job: Job) -> tuple[float, bytes]:
    """Batsim's submitter's order: by subtime, then job id (byte order: 1, 10, 100, 101…)."""
    return job.subtime, job.local_id.encode()


class PendingJobs:
    """The jobs of one workload still to submit; :meth:`pop` gives the next one."""

    __slots__ = ("workload", "_texts", "_orders")

    def __init__(self, workload: str, jobs: Iterable[Job]) -> None:
        ordered = sorted(jobs, key=submission_key, reverse=True)  # popped from the end
        self.workload = workload
        self._texts = [_ENCODE(job.raw).encode() for job in ordered]
        self._orders = array("q", [job.order for job in ordered])

    def __len__(self) -> int:
        return len(self._texts)

    def pop(self) -> Job:
        """The next job to submit, built (and no longer held here)."""
        return self._build(self._texts.pop(), self._orders.pop())

    def __iter__(self) -> Iterator[Job]:
        """The jobs still held, built, in submission order (they stay held)."""
        for index in range(len(self._texts) - 1, -1, -1):
            yield self._build(self._texts[index], self._orders[index])

    def _build(self, text: bytes, order: int) -> Job:
        raw: dict[str, Any] = _DECODE(text.decode("utf-8"))
        job_id = raw["id"]
        walltime = raw.get("walltime", -1)
        if walltime is None:
            walltime = -1
        return Job(
            job_id,
            self.workload,
            job_id[len(self.workload) + 1 :],
            float(raw["subtime"]),
            raw["res"],
            raw["profile"],
            float(walltime),
            raw,
            order,
        )
