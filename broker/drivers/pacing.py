"""API latency in virtual time: a request takes time, when a study (``--api-latency``)
or the program (busy polling) calls for it.

Without a model a request to the facade takes no virtual time at all. That is what a
study of scheduling decisions usually wants — but not always (Batsim 5 injects a
"decision time" for the same reason), and it turns one ordinary habit into a hang: a
scheduler whose loop re-lists pending pods without sleeping when there is nothing to do
never lets virtual time move, and on a real cluster it only burns CPU.

- ``--api-latency D`` (default 0): the response to every request is written D of virtual
  time after the request arrived. Meanwhile the connection is *held*: the reader is
  durably blocked, as in a sleep, so time may advance to the deadline.
- Busy polling (Shadow charges unblocked syscalls the same way): a process that makes more
  than ``threshold`` requests without once waiting of its own accord — every thread in a
  virtual wait or on a parked watch, nothing held back for it — is charged ``latency``
  per request from then on, until it waits again. Counted in requests, never in wall
  time: the same program charges the same requests every run. The first charge is
  reported at once and the run's summary says which process, from when, how many.

Held responses of one process due at one instant are released together by one
broker-side timer ordered by process name (requests of one process may reach the facade
in either order on different connections; the broker then lets the readers go in its
own fixed order). Deterministic mode only: elsewhere time follows the wall clock anyway.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # (the command line imports this module: nothing heavy at import)
    from broker.clock.service import ClockService
    from broker.facade import Facade
    from broker.facade.server import Hold, Request

DEFAULT_POLL_THRESHOLD = 1000
DEFAULT_POLL_LATENCY_NS = 10_000_000  # 10 ms: a small list request to a real API server


@dataclass
class BusyPolling:
    """One process charged for busy polling (the summary's line)."""

    name: str
    since_ns: int  # virtual time of its first charged request
    charged: int = 0  # requests charged
    charged_ns: int = 0  # virtual time charged for polling (beyond --api-latency)
    episodes: int = 1  # times it crossed the threshold (it waited in between)

    def describe(self, threshold: int) -> str:
        return (
            f"{self.name} made {threshold} API requests without waiting (no sleep, no parked "
            f"watch) at virtual t={self.since_ns / 1e9:g} s; from then on it was charged "
            f"for {self.charged} requests, {self.charged_ns / 1e9:g} s of simulated time"
            + (f" in {self.episodes} episodes" if self.episodes > 1 else "")
        )


class Pacer:
    """Decides how long each response is held back (see the module docstring)."""

    def __init__(
        self,
        clock: ClockService,
        *,
        api_latency_ns: int = 0,
        poll_threshold: int = DEFAULT_POLL_THRESHOLD,
        poll_latency_ns: int = DEFAULT_POLL_LATENCY_NS,
        log: TextIO | None = None,
    ) -> None:
        self.clock = clock
        self.api_latency_ns = api_latency_ns
        self.poll_threshold = poll_threshold  # 0: busy polling is never charged
        self.poll_latency_ns = poll_latency_ns
        self.log = log or sys.stderr
        self.polling: dict[str, BusyPolling] = {}
        self._facade: Facade | None = None
        self._lock = threading.Lock()
        self._since_wait: dict[str, int] = {}  # requests since the process last waited
        self._charging: set[str] = set()
        self._batches: dict[tuple[str, int], list[Hold]] = {}

    def attach(self, facade: Facade) -> Pacer:
        from broker.facade.server import Hold

        self._hold_type = Hold
        self._facade = facade
        facade.hold_responses(self._hold)
        self.clock.quiescence.add_wait_listener(self._waited)
        return self

    def _waited(self, name: str) -> None:
        """The process waits of its own accord (clock service's thread, its lock held)."""
        with self._lock:
            self._since_wait[name] = 0
            self._charging.discard(name)

    def _hold(self, request: Request) -> Hold | None:
        """A facade connection thread, the response decided: how long to keep it back."""
        # the process that sent it (its runtime's numbering), not the token's owner: a
        # client outside the simulation using a scheduler's kubeconfig is charged nothing
        name = self._facade.charged_process(request) if self._facade else None
        if name is None:
            return None
        now = self.clock.now_ns
        first_charge = None
        with self._lock:
            count = self._since_wait.get(name, 0) + 1
            self._since_wait[name] = count
            charge = self.api_latency_ns
            if self.poll_threshold and count > self.poll_threshold:
                polling = self.polling.get(name)
                if polling is None:
                    polling = self.polling[name] = BusyPolling(name, now)
                    first_charge = polling
                elif name not in self._charging:
                    polling.episodes += 1
                self._charging.add(name)
                extra = max(0, self.poll_latency_ns - charge)
                polling.charged += 1
                polling.charged_ns += extra
                charge += extra
            if charge <= 0:
                return None
            deadline = now + charge
            hold = self._hold_type()
            batch = self._batches.get((name, deadline))
            if batch is not None:
                batch.append(hold)
                return hold
            self._batches[(name, deadline)] = [hold]
        if first_charge is not None:
            self.log.write(
                f"timewarp: busy polling: {name} made {self.poll_threshold} API requests at "
                f"virtual t={now / 1e9:g} s without waiting (no sleep, no parked watch); "
                f"each further request takes {self.poll_latency_ns / 1e6:g} ms of virtual time "
                "until it waits\n"
            )
            self.log.flush()
        self.clock.call_at(deadline, lambda: self._release(name, deadline), key=(name, 0))
        return hold

    def _release(self, name: str, deadline: int) -> None:
        with self._lock:
            batch = self._batches.pop((name, deadline), [])
        for hold in batch:
            hold.release()

    def summary(self) -> list[str]:
        """One line per process charged for busy polling, by name."""
        with self._lock:
            return [self.polling[n].describe(self.poll_threshold) for n in sorted(self.polling)]

    def figures(self) -> dict:
        with self._lock:
            return {
                "api_latency_s": self.api_latency_ns / 1e9,
                "poll_threshold": self.poll_threshold,
                "poll_latency_s": self.poll_latency_ns / 1e9,
                "busy_polling": [
                    {
                        "process": p.name,
                        "since_s": p.since_ns / 1e9,
                        "charged_requests": p.charged,
                        "charged_s": p.charged_ns / 1e9,
                        "episodes": p.episodes,
                    }
                    for _, p in sorted(self.polling.items())
                ],
            }


# ---------------------------------------------------------------- command line


class PacingArgumentError(ValueError):
    pass


def add_pacing_arguments(parser) -> None:  # type: ignore[no-untyped-def]
    group = parser.add_argument_group("API latency in virtual time (deterministic mode)")
    group.add_argument(
        "--api-latency",
        default=None,
        metavar="DURATION",
        help="every API request's response comes this much virtual time later (e.g. 10ms; "
        "default 0: decisions take no simulated time)",
    )
    group.add_argument(
        "--poll-threshold",
        default=None,
        metavar="N",
        help="a process that makes more than N API requests without waiting (no sleep, no "
        f"parked watch) is busy polling and charged --poll-latency per request (default "
        f"{DEFAULT_POLL_THRESHOLD}; 0: never)",
    )
    group.add_argument(
        "--poll-latency",
        default=None,
        metavar="DURATION",
        help=f"virtual time charged per busy-polling request (default "
        f"{DEFAULT_POLL_LATENCY_NS // 1_000_000}ms)",
    )


def check_pacing_arguments(args) -> None:  # type: ignore[no-untyped-def]
    """Validate and convert in place: ``args.api_latency_ns``, ``args.poll_threshold``,
    ``args.poll_latency_ns``. Raises PacingArgumentError naming the flag."""
    from broker.drivers.lockstep_params import parse_duration_ns

    given = [
        flag
        for flag, dest in (
            ("--api-latency", "api_latency"),
            ("--poll-threshold", "poll_threshold"),
            ("--poll-latency", "poll_latency"),
        )
        if getattr(args, dest) is not None
    ]
    if given and args.mode != "deterministic":
        raise PacingArgumentError(
            f"{', '.join(given)} only apply in deterministic mode (this run is --mode "
            f"{args.mode}, where time follows the wall clock)"
        )

    def duration(flag: str, text: str | None, default: int) -> int:
        if text is None:
            return default
        try:
            value = parse_duration_ns(text)
        except ValueError as exc:
            raise PacingArgumentError(f"{flag}: {exc}") from None
        if value < 0:
            raise PacingArgumentError(f"{flag}: must not be negative, got {text!r}")
        return value

    args.api_latency_ns = duration("--api-latency", args.api_latency, 0)
    args.poll_latency_ns = duration("--poll-latency", args.poll_latency, DEFAULT_POLL_LATENCY_NS)
    if args.poll_threshold is None:
        args.poll_threshold = DEFAULT_POLL_THRESHOLD
    else:
        try:
            threshold = int(args.poll_threshold)
        except ValueError:
            raise PacingArgumentError(
                f"--poll-threshold: expected a whole number of requests, got {args.poll_threshold!r}"
            ) from None
        if threshold < 0:
            raise PacingArgumentError(f"--poll-threshold: must not be negative, got {threshold}")
        args.poll_threshold = threshold
    if args.poll_threshold and args.poll_latency_ns == 0:
        raise PacingArgumentError(
            "--poll-latency 0 would let a busy-polling process hold virtual time forever; "
            "use --poll-threshold 0 to turn the charge off (the stall guard still reports it)"
        )
