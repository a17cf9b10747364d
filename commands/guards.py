"""Watching a run's progress from the broker's progress call-back (after each Batsim
message, in the broker's thread, everything at rest): the no-progress report and
``--until``.

No progress: pods wait, none was bound for ``after_s`` of simulated time, and at least
one of them would fit on a node as things stand (a full cluster is a reason to wait, not
a fault). The report names the pods' ``schedulerName`` and, when the facade can tell
(a field selector ``spec.schedulerName=…`` on their pod lists and watches), the names
the schedulers look for — a scheduler that never binds because the names differ is the
most common first mistake. One report per stretch without a binding.

Once every job of the workloads has been submitted, a report also ends the run (unless
``--on-no-progress warn``): nothing that can still happen would change it, and a run that
can never progress would otherwise simulate on until ``--until`` or the sweep's timeout.
:class:`NoProgressStop` carries the report; the outputs are partial and the exit status
is :data:`NO_PROGRESS_EXIT`. Progress is a binding, a pod started or a job ended.

``--until T``: a broker-side timer at T makes Batsim call back at exactly T (deterministic
and lockstep time would otherwise jump from one event to the next, past T); the first
progress report at or after T raises :class:`StopAt`, which ends the run there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any


class StopAt(Exception):
    """``--until`` was reached: the run ends here, its outputs partial by request."""

    def __init__(self, t_s: float) -> None:
        super().__init__(f"stopped at simulated t={t_s:,.0f} s as asked (--until)")
        self.t_s = t_s


NO_PROGRESS_EXIT = 4


class NoProgressStop(Exception):
    """Every job was submitted and nothing progressed for ``--no-progress-after``."""

    def __init__(self, t_s: float, report: str) -> None:
        super().__init__(report)
        self.t_s = t_s
        self.report = report


def _seconds(t_s: float) -> str:
    return f"{t_s:,.0f} s"


class NoProgressGuard:
    """See the module docstring. ``warn(text)`` shows a report."""

    def __init__(
        self, broker: Any, after_s: float, warn: Callable[[str], None], stop: bool = False
    ) -> None:
        self.broker = broker
        self.after_s = after_s
        self.warn = warn
        self.stop = stop  # end the run on a report once every job was submitted
        self.reports: list[str] = []
        self._progress: tuple[int, ...] = ()
        self._since_s = 0.0  # simulated time of the last progress (or of the start)
        self._reported = False  # a report was shown for this stretch
        self._next_look_s = after_s

    def check(self, now_s: float) -> None:
        if self.after_s <= 0:
            return
        try:
            self._check(now_s)
        except NoProgressStop:
            raise
        except Exception as exc:  # a failing report must never be what ends a run
            self.after_s = 0
            self.warn(f"the no-progress report is off for this run (it failed: {exc!r})")

    def _check(self, now_s: float) -> None:
        cluster = self.broker.cluster
        stats = cluster.stats
        progress = (stats.bindings, stats.jobs_started, stats.jobs_done)
        if progress != self._progress:
            self._progress = progress
            self._since_s = now_s
            self._next_look_s = now_s + self.after_s
            self._reported = False
            return
        if now_s < self._next_look_s:
            return
        self._next_look_s = now_s + self.after_s  # look again one period on at most
        report = self.report(now_s)
        if report is None:
            return
        final = self.stop and cluster.all_submitted
        if not self._reported or final:  # once per stretch
            self._reported = True
            if final:
                report += (
                    "\n  every job has been submitted: the run stops here, outputs partial "
                    "(--on-no-progress warn lets it go on)"
                )
            self.reports.append(report)
            self.warn(report)
        if final:
            raise NoProgressStop(now_s, report)
        if not self.stop:
            self._next_look_s = float("inf")  # warn only: until the next progress

    def report(self, now_s: float) -> str | None:
        """The report, or None when nothing is wrong (no pod waits, or none could fit)."""
        from broker.cluster.kubelet_admission import NodeView, insufficient_resources

        cluster = self.broker.cluster
        with cluster.state_lock:
            waiting = [jp for jp in cluster.pods.values() if jp.state == "pending" and not jp.node]
            nodes = [
                NodeView(n.name, n.labels, [], dict(n.allocatable), dict(n.used))
                for n in cluster.nodes.values()
            ]
        # would the kubelet take it somewhere, resources-wise, as things stand?
        fits = [
            jp for jp in waiting if any(not insufficient_resources(jp.requests, n) for n in nodes)
        ]
        if not fits:
            return None
        facade = self.broker.facade
        asked = Counter()
        for jp in waiting:
            pod = facade.store.get_or_none("pods", jp.namespace, jp.name)
            if pod is not None:
                asked[(pod.get("spec") or {}).get("schedulerName") or "default-scheduler"] += 1
        pods = ", ".join(f"{count} with {name!r}" for name, count in asked.most_common())
        lines = [
            f"no progress: {len(waiting)} pod(s) pending and none bound for "
            f"{_seconds(now_s - self._since_s)} of simulated time (now t={_seconds(now_s)}), "
            f"although {len(fits)} of them would fit on a node",
            f"  the pending pods ask for schedulerName: {pods}",
        ]
        wanted = facade.scheduler_names.snapshot()
        for who, names in wanted.items():
            lines.append(
                f"  {who} selects pods with spec.schedulerName "
                + ", ".join(repr(n) if not n.startswith("not ") else n for n in names)
            )
        silent = sorted({proc.name for proc in self.broker.launcher.processes} - set(wanted))
        for who in silent:
            lines.append(
                f"  {who} names no schedulerName in its pod requests (it filters pods itself): "
                "check the name it schedules for"
            )
        top = asked.most_common(1)[0][0] if asked else "NAME"
        lines.append(
            "  only the scheduler named in a pod's spec.schedulerName binds it: start the "
            f"scheduler with that name (the sample schedulers: --scheduler-name {top}), or "
            "give the pods the scheduler's (timewarp workload ... --scheduler NAME, or "
            '"scheduler" in the profiles of the workload); --no-progress-after sets when '
            "this report comes, --until T ends a run at simulated time T"
        )
        return "\n".join(lines)


class StopAtGuard:
    """``--until``: see the module docstring."""

    def __init__(self, until_s: float) -> None:
        self.until_s = until_s

    def arm(self, clock: Any) -> None:
        """A broker-side timer at ``until_s`` (a no-op: its deadline is the point)."""
        clock.call_at(round(self.until_s * 1e9), lambda: None)

    def check(self, now_s: float) -> None:
        if now_s >= self.until_s:
            raise StopAt(now_s)
