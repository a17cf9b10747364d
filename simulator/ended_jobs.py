"""What the simulator remembers of a job once its ``jobs.csv`` row is written.

Batsim keeps every job to the end of the run; the outputs need no more than the row, so
the simulator drops an ended job's record and parsed job and keeps only what a later
decision naming it is answered from (Batsim's error for executing or rejecting it again,
a KILL_JOB of a finished job acknowledged once): its end state, its final state and
whether a kill was asked — as bits of :class:`~simulator.id_set.JobIdSet`s, so that
what the simulation holds stays flat in the number of jobs that ended.
"""

from __future__ import annotations

from simulator.id_set import JobIdSet


class EndedJobs:
    """job id -> (state, final state, kill requested) of the jobs whose row is written."""

    __slots__ = ("_by_end", "_kill_requested", "_count")

    def __init__(self) -> None:
        self._by_end: dict[tuple[str, str], JobIdSet] = {}  # (state, final state) -> ids
        self._kill_requested = JobIdSet()
        self._count = 0

    def add(self, job_id: str, state: str, final_state: str, kill_requested: bool) -> None:
        """``job_id`` ended (``state`` done or rejected); each id is added once."""
        self._by_end.setdefault((state, final_state), JobIdSet()).add(job_id)
        if kill_requested:
            self._kill_requested.add(job_id)
        self._count += 1

    def get(self, job_id: str) -> tuple[str, str, bool] | None:
        """(state, final state, kill requested) of an ended job; None if it did not end."""
        for (state, final_state), ids in self._by_end.items():
            if job_id in ids:
                return state, final_state, job_id in self._kill_requested
        return None

    def kill_requested(self, job_id: str) -> None:
        """A KILL_JOB named the ended ``job_id`` (a second one is ignored, as Batsim does)."""
        self._kill_requested.add(job_id)

    def __contains__(self, job_id: str) -> bool:
        return any(job_id in ids for ids in self._by_end.values())

    def __len__(self) -> int:
        return self._count
