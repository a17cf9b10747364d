"""Batsim 4.x JSON protocol: the one module that owns its messages, for both sides.

A message is an envelope ``{"now": float, "events": [event, ...]}``; an event is
``{"timestamp": float, "type": str, "data": {...}}``. Batsim (or ``timewarp sim``) sends
the first message and every message gets exactly one reply. A real message, as real
Batsim 4.2.1 sent it (``shared/data/batsim-reference/protocol-trace``)::

    {"now":10.000125,"events":[{"timestamp":10.000125,"type":"JOB_COMPLETED",
      "data":{"job_id":"w0!1","job_state":"COMPLETED_SUCCESSFULLY","return_code":0,
              "alloc":"0"}}]}

and the decision process's reply::

    {"now": 10.000125, "events": [{"timestamp": 10.000125, "type": "EXECUTE_JOB",
      "data": {"job_id": "w0!2", "alloc": "0"}}]}

Invariants checked by :func:`decode` (the same rules real Batsim aborts on, reported as a
:class:`ProtocolError` naming the event and field instead): every event timestamp is
``<= now``; timestamps are non-decreasing; each ``data`` has exactly the fields of its type
(required ones present, no unknown ones); interval sets parse as :class:`procset.ProcSet`.
Rules that need simulation state (job known, machine free, CALL_ME_LATER in the future)
belong to the simulator, not here.

Event payloads are frozen dataclasses, one per event type; ``TYPE`` is the wire name;
interval sets are :class:`procset.ProcSet` (re-exported here as ``ProcSet``).
:func:`encode` turns a :class:`Message` into compact JSON text, :func:`decode` does the
reverse for a given sender (``"batsim"`` or ``"decision"``), so a decision process that
sends JOB_COMPLETED is told so.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from procset import ProcSet

Sender = Literal["batsim", "decision"]

JOB_STATES = (
    "COMPLETED_SUCCESSFULLY",
    "COMPLETED_FAILED",
    "COMPLETED_WALLTIME_REACHED",
    "COMPLETED_KILLED",
    "REJECTED",
)

BATSIM_NOTIFY_TYPES = (
    "no_more_static_job_to_submit",
    "no_more_external_event_to_occur",
    "event_machine_unavailable",
    "event_machine_available",
)
DECISION_NOTIFY_TYPES = ("registration_finished", "continue_registration")


#: Batsim prints every number of its messages with C's ``%f``: six decimals, so its times
#: are rounded to the microsecond (``0.3333333334`` goes out as ``0.333333``). That is the
#: precision of every time the decision process sees, hence of "the same instant".
TIME_DECIMALS = 6


def wire_time(t: float) -> float:
    """``t`` as Batsim writes it (``%f``: rounded to the microsecond, correctly rounded
    from the binary value, like C's printf)."""
    return round(t, TIME_DECIMALS)


def instant_end_ns(now: float) -> int:
    """The last nanosecond of the instant Batsim calls ``now``: every time up to it prints
    as ``now`` or earlier, so Batsim cannot tell it from ``now``. The one notion of "the
    same instant" of the broker's three time modes: a timer whose deadline is not after it
    is due at a message stamped ``now``, and a CALL_ME_LATER must ask for a later time."""
    return round(round(now, TIME_DECIMALS) * 10**TIME_DECIMALS) * 1000 + 499


def answers_call(when: float, now: float) -> bool:
    """Whether a REQUESTED_CALL stamped ``now`` can be the answer to a CALL_ME_LATER for
    ``when``: it prints the same instant or later — or up to 1 ns earlier, as SimGrid ends a
    sleep within its 1e-9 s precision of another event."""
    return round(when * 1e9) <= instant_end_ns(now) + 1


#: How many Batsim messages (1 byte each, its own weight counted) may share the slowest
#: shared link of a route with one of them before the broker's CALL_ME_LATER rule
#: (:func:`earliest_call`) is no longer sure to hold. Max-min sharing gives a message at
#: least that link's bandwidth over the bytes crossing it: with up to 1023 others of the
#: same size, its byte takes at most 1024 times as long as alone.
SHARED_MESSAGES = 1024
#: How many messages of other actors (a job's completion, a submission, a requested call)
#: the rule lets reach Batsim's server before a reply's call: its mailbox hands messages
#: over one at a time, in the order they were sent, each crossing its own route then.
OTHER_MESSAGES = 2
#: Round-off room per reply event on a platform with a network (in units in the last
#: place of the time): SimGrid's clock adds a message's latency, then its byte's time.
_ULPS_PER_EVENT = 4
_LOOPBACK_MESSAGE_S = 1e-10  # 1 byte at SimGrid's loopback's 10 GB/s, no latency


@dataclass(frozen=True)
class ReplyTransit:
    """How long the events of a reply take to reach Batsim's server.

    Batsim's request-reply actor hands the reply's events to its server one by one, each a
    1-byte SimGrid message from the master host to itself, the next sent once the previous
    arrived: event ``i`` of a reply applied at time ``t`` arrives at ``t + (i + 1) × m``,
    ``m`` the message's time on the master host's route (``Platform.reply_transit``). The
    server's mailbox takes messages in the order they were sent and one at a time: a
    message another actor sent first (a completion from a compute host, a submission)
    crosses its own route before the reply's next event starts.

    ``latency`` is the master host's route's (paid first, at no rate, never shared);
    ``byte_s`` the time of the byte alone at the route's rate; ``shared`` whether a link
    of the route is shared with other communications (a FATPIPE link, such as SimGrid's
    default loopback, is not); ``other_s`` the most a message of another actor takes to
    the server (the slowest route to the master host, bounded as :meth:`event_bound`).
    Without a network (every message to the master host crosses SimGrid's loopback, 10
    GB/s, no latency, or no link) a message takes at most 1e-10 s: :data:`NO_NETWORK`."""

    latency: float = 0.0
    byte_s: float = _LOOPBACK_MESSAGE_S
    shared: bool = False
    other_s: float = _LOOPBACK_MESSAGE_S

    def event_bound(self) -> float:
        """The most one event's message takes: its latency, then its byte at the rate
        left by up to :data:`SHARED_MESSAGES` messages on a shared link (alone on an
        unshared route: exact)."""
        return message_bound(self.latency, self.byte_s, self.shared)

    def describe(self) -> str:
        """One line for a person: what the broker allows for a reply's events, and why."""
        if self == NO_NETWORK:
            return "1e-10 s per reply event (no message to the master host crosses a link)"
        sharing = f", its byte {SHARED_MESSAGES} times its time alone" if self.shared else ""
        return (
            f"{self.event_bound() * 1e6:.6g} µs per reply event (the master host's route to "
            f"itself: latency {self.latency * 1e6:.6g} µs, 1 byte in {self.byte_s * 1e9:.6g} ns"
            f"{sharing}), and {OTHER_MESSAGES} messages of other actors first, "
            f"{self.other_s * 1e6:.6g} µs each (the slowest route to the master host)"
        )


NO_NETWORK = ReplyTransit()


def message_bound(latency: float, byte_s: float, shared: bool) -> float:
    """The most a 1-byte Batsim message takes on a route of this ``latency`` whose byte
    takes ``byte_s`` alone (``shared``: a link of it is not FATPIPE)."""
    return latency + byte_s * (SHARED_MESSAGES if shared else 1)


def earliest_call(now: float, events: int = 0, transit: ReplyTransit = NO_NETWORK) -> float:
    """The earliest CALL_ME_LATER time Batsim is sure to accept in a reply whose ``now`` is
    ``now``, after ``events`` other events: past the end of now's instant (Batsim's own
    clock may be up to half a microsecond ahead of what it printed, and it aborts on a call
    that is not after its clock) plus the time Batsim takes to apply the events before the
    call and the call itself, one message each (:class:`ReplyTransit`: 1e-10 s without a
    network), plus, with a network, :data:`OTHER_MESSAGES` message of another actor handed
    to the server first, and round-off room.

    Exact without a network. With one, sure while no more than :data:`SHARED_MESSAGES`
    messages share a link of a route with one of the reply's, and no more than
    :data:`OTHER_MESSAGES` messages of other actors reach the server while the reply's
    events are delivered. Past that (a burst of completions, a parallel task's
    communication on a link of the master host's route: SimGrid's max-min shares a link by
    the bytes each flow moves), Batsim refuses the call ("You asked to be awaken in the
    past!") and the run stops with that reason and the broker's bound (docs/broker.md)."""
    start = (instant_end_ns(now) + 1) / 1e9
    if transit == NO_NETWORK:
        return start + (events + 1) * _LOOPBACK_MESSAGE_S
    when = start + (events + 1) * transit.event_bound() + OTHER_MESSAGES * transit.other_s
    return when + (events + 1) * _ULPS_PER_EVENT * math.ulp(when)


def free_running_call(
    sent_now: float, now: float, events: int, wanted: float, transit: ReplyTransit = NO_NETWORK
) -> tuple[float, float, bool]:
    """The CALL_ME_LATER for ``wanted`` in a reply stamped ``now`` (later than the
    message's ``sent_now``, as lockstep and realtime stamp theirs) after ``events``
    decisions: (its time, its stamp, whether it goes first in the reply).

    Batsim sleeps until a reply's first stamp before applying its events, and meanwhile
    what other actors send queues at its server's mailbox — any number of messages, each
    crossing its own route before the reply's events. With a network the call goes first,
    stamped ``sent_now``: Batsim applies it at once, behind at most what other actors sent
    in that same instant, as for a reply stamped ``sent_now`` (:func:`earliest_call`), and
    never within ``now``'s instant. Without one, as before: last, stamped ``now``."""
    if transit == NO_NETWORK:
        return max(wanted, earliest_call(now, events)), now, False
    return max(wanted, earliest_call(now), earliest_call(sent_now, 0, transit)), sent_now, True


def wire_value(value: Any) -> Any:
    """A JSON value with every float as Batsim writes it (``%f``): what a decision process
    reads in the jobs and profiles Batsim forwards. Integers and the rest are unchanged."""
    if isinstance(value, float):
        return round(value, TIME_DECIMALS)
    if isinstance(value, dict):  # (a job's fields: ints and strings mostly, read as is)
        return {
            key: item if type(item) is int or type(item) is str else wire_value(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [wire_value(item) for item in value]
    return value


class ProtocolError(ValueError):
    """A message that breaks the Batsim protocol; the text names the event and field."""


# --------------------------------------------------------------------------- helpers


@functools.cache
def _field_set(names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(names)


def _where(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProtocolError(f"{where}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise ProtocolError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ProtocolError(f"{where}: expected a string, got {value!r}")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{where}: expected a JSON object, got {value!r}")
    return value


#: One-resource sets, copied out (ProcSet is mutable): a copy costs a fifteenth of a build.
_ONE_RESOURCE: dict[int, ProcSet] = {}
_ONE_RESOURCE_CACHED = 1 << 16  # ids below it are kept (a platform's resources)


def procset_text(alloc: ProcSet) -> str:
    """``str(alloc)`` (``"2-5 7"``), without ProcSet's generator over its intervals for
    one interval (most jobs' allocations: a JOB_COMPLETED and a jobs.csv row each)."""
    if alloc.count() == 1:
        low, high = alloc.min, alloc.max
        return str(low) if low == high else f"{low}-{high}"
    return str(alloc)


def procset_tuple(alloc: ProcSet) -> tuple[int, ...]:
    """``tuple(alloc)``, without ProcSet's length and generators for one resource (the
    allocation of most jobs)."""
    if alloc.count() == 1:
        low = alloc.min
        if low == alloc.max:
            return (low,)
    return tuple(alloc)


def one_resource(rid: int) -> ProcSet:
    """``ProcSet(rid)``, a new object, faster (the allocation of most jobs)."""
    cached = _ONE_RESOURCE.get(rid)
    if cached is None:
        cached = ProcSet(rid)
        if rid >= _ONE_RESOURCE_CACHED:
            return cached
        _ONE_RESOURCE[rid] = cached
    return cached.copy()


def _intervals(value: Any, where: str) -> ProcSet:
    text = _string(value, where)
    if text.isdigit() and text.isascii():  # one resource, the common case: 3x faster
        return one_resource(int(text))
    try:
        procs = ProcSet.from_str(text)
    except (ValueError, TypeError) as exc:
        raise ProtocolError(
            f"{where}: {text!r} is not an interval set like '0-3 5' ({exc})"
        ) from None
    if procs and procs.min < 0:
        raise ProtocolError(f"{where}: resource ids must be >= 0, got {text!r}")
    return procs


def _job_id(value: Any, where: str) -> str:
    text = _string(value, where)
    if "!" not in text:
        raise ProtocolError(f"{where}: job id {text!r} lacks its workload prefix ('w0!1')")
    return text


def _fields(data: dict[str, Any], where: str, required: tuple[str, ...], optional=()) -> None:
    if data.keys() == _field_set(required):  # the usual case, in one set comparison
        return
    missing = [name for name in required if name not in data]
    if missing:
        raise ProtocolError(f"{where}: missing field(s) {', '.join(missing)}")
    extra = sorted(set(data) - set(required) - set(optional))
    if extra:
        raise ProtocolError(
            f"{where}: unexpected field(s) {', '.join(extra)} "
            f"(allowed: {', '.join(required + tuple(optional))})"
        )


# --------------------------------------------------------------------------- payloads


@dataclass(frozen=True)
class SimulationBegins:
    """First message. ``compute_resources`` entries: ``{id, name, state, properties,
    zone_properties}``; ids follow sorted host names."""

    TYPE: ClassVar[str] = "SIMULATION_BEGINS"
    nb_resources: int
    nb_compute_resources: int
    nb_storage_resources: int
    allow_compute_sharing: bool
    allow_storage_sharing: bool
    config: dict[str, Any]
    compute_resources: list[dict[str, Any]]
    storage_resources: list[dict[str, Any]]
    workloads: dict[str, str]
    profiles: dict[str, dict[str, dict[str, Any]]]

    def to_data(self) -> dict[str, Any]:
        return {
            "nb_resources": self.nb_resources,
            "nb_compute_resources": self.nb_compute_resources,
            "nb_storage_resources": self.nb_storage_resources,
            "allow_compute_sharing": self.allow_compute_sharing,
            "allow_storage_sharing": self.allow_storage_sharing,
            "config": self.config,
            "compute_resources": self.compute_resources,
            "storage_resources": self.storage_resources,
            "workloads": self.workloads,
            "profiles": self.profiles,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> SimulationBegins:
        names = tuple(f.name for f in dataclasses.fields(cls))
        _fields(data, where, names)
        for name in ("nb_resources", "nb_compute_resources", "nb_storage_resources"):
            if isinstance(data[name], bool) or not isinstance(data[name], int):
                raise ProtocolError(f"{_where(where, name)}: expected an integer")
        for name in ("allow_compute_sharing", "allow_storage_sharing"):
            if not isinstance(data[name], bool):
                raise ProtocolError(f"{_where(where, name)}: expected true or false")
        for name in ("compute_resources", "storage_resources"):
            if not isinstance(data[name], list):
                raise ProtocolError(f"{_where(where, name)}: expected a list")
        for name in ("config", "workloads", "profiles"):
            _object(data[name], _where(where, name))
        return cls(**{name: data[name] for name in names})


@dataclass(frozen=True)
class JobSubmitted:
    """``job`` is the workload's job object with ``id`` rewritten to ``job_id``; unknown
    fields (Batkube's, timewarp's) pass through. ``profile`` only with
    ``--forward-profiles-on-submission``."""

    TYPE: ClassVar[str] = "JOB_SUBMITTED"
    job_id: str
    job: dict[str, Any]
    profile: dict[str, Any] | None = None

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"job_id": self.job_id, "job": self.job}
        if self.profile is not None:
            data["profile"] = self.profile
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> JobSubmitted:
        _fields(data, where, ("job_id", "job"), ("profile",))
        profile = data.get("profile")
        if profile is not None:
            _object(profile, _where(where, "profile"))
        return cls(
            _job_id(data["job_id"], _where(where, "job_id")),
            _object(data["job"], _where(where, "job")),
            profile,
        )


@dataclass(frozen=True)
class JobCompleted:
    TYPE: ClassVar[str] = "JOB_COMPLETED"
    job_id: str
    job_state: str
    return_code: int
    alloc: ProcSet

    def to_data(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "job_state": self.job_state,
            "return_code": self.return_code,
            "alloc": procset_text(self.alloc),
        }

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> JobCompleted:
        _fields(data, where, ("job_id", "job_state", "return_code", "alloc"))
        state = _string(data["job_state"], _where(where, "job_state"))
        if state not in JOB_STATES:
            raise ProtocolError(f"{where}.job_state: {state!r} is not one of {JOB_STATES}")
        code = data["return_code"]
        if isinstance(code, bool) or not isinstance(code, int):
            raise ProtocolError(f"{where}.return_code: expected an integer, got {code!r}")
        return cls(
            _job_id(data["job_id"], _where(where, "job_id")),
            state,
            code,
            _intervals(data["alloc"], _where(where, "alloc")),
        )


@dataclass(frozen=True)
class JobKilled:
    """``job_progress`` maps each job that was really running to
    ``{"profile_name": str, "progress": float in [0, 1]}``; jobs that had already finished
    are listed in ``job_ids`` only."""

    TYPE: ClassVar[str] = "JOB_KILLED"
    job_ids: list[str]
    job_progress: dict[str, dict[str, Any]]

    def to_data(self) -> dict[str, Any]:
        return {"job_ids": list(self.job_ids), "job_progress": self.job_progress}

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> JobKilled:
        _fields(data, where, ("job_ids", "job_progress"))
        return cls(
            _job_ids(data["job_ids"], _where(where, "job_ids")),
            _object(data["job_progress"], _where(where, "job_progress")),
        )


@dataclass(frozen=True)
class ResourceStateChanged:
    TYPE: ClassVar[str] = "RESOURCE_STATE_CHANGED"
    resources: ProcSet
    state: str

    def to_data(self) -> dict[str, Any]:
        return {"resources": str(self.resources), "state": self.state}

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> ResourceStateChanged:
        _fields(data, where, ("resources", "state"))
        return cls(
            _intervals(data["resources"], _where(where, "resources")),
            _string(data["state"], _where(where, "state")),
        )


@dataclass(frozen=True)
class RequestedCall:
    """The answer to a CALL_ME_LATER, at its requested time. ``data`` is ``{}``."""

    TYPE: ClassVar[str] = "REQUESTED_CALL"

    def to_data(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> RequestedCall:
        _fields(data, where, ())
        return cls()


@dataclass(frozen=True)
class SimulationEnds:
    """Last message; the decision process replies (with no events) and closes."""

    TYPE: ClassVar[str] = "SIMULATION_ENDS"

    def to_data(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> SimulationEnds:
        _fields(data, where, ())
        return cls()


@dataclass(frozen=True)
class Answer:
    """Reply to a QUERY, e.g. ``{"consumed_energy": 0.0}``."""

    TYPE: ClassVar[str] = "ANSWER"
    answers: dict[str, Any]

    def to_data(self) -> dict[str, Any]:
        return dict(self.answers)

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> Answer:
        return cls(dict(data))


@dataclass(frozen=True)
class Notify:
    """Both directions. From Batsim: ``no_more_static_job_to_submit``, … (machine
    availability notifications carry ``resources``); from the decision process:
    ``registration_finished`` / ``continue_registration``."""

    TYPE: ClassVar[str] = "NOTIFY"
    type: str
    resources: ProcSet | None = None

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type}
        if self.resources is not None:
            data["resources"] = str(self.resources)
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> Notify:
        _fields(data, where, ("type",), ("resources",))
        resources = None
        if "resources" in data:
            resources = _intervals(data["resources"], _where(where, "resources"))
        return cls(_string(data["type"], _where(where, "type")), resources)


@dataclass(frozen=True)
class ExecuteJob:
    """Run a submitted job on ``alloc``. Batsim accepts at most one of ``mapping``,
    ``storage_mapping``, ``additional_io_job`` beside ``job_id`` and ``alloc``."""

    TYPE: ClassVar[str] = "EXECUTE_JOB"
    job_id: str
    alloc: ProcSet
    mapping: dict[str, Any] | None = None
    storage_mapping: dict[str, Any] | None = None
    additional_io_job: dict[str, Any] | None = None

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"job_id": self.job_id, "alloc": procset_text(self.alloc)}
        for name in ("mapping", "storage_mapping", "additional_io_job"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> ExecuteJob:
        extras = ("mapping", "storage_mapping", "additional_io_job")
        _fields(data, where, ("job_id", "alloc"), extras)
        present = [name for name in extras if name in data]
        if len(present) > 1:
            raise ProtocolError(f"{where}: at most one of {', '.join(extras)} (got {present})")
        alloc = _intervals(data["alloc"], _where(where, "alloc"))
        if not alloc:
            raise ProtocolError(f"{where}.alloc: empty allocation")
        kwargs = {name: _object(data[name], _where(where, name)) for name in present}
        return cls(_job_id(data["job_id"], _where(where, "job_id")), alloc, **kwargs)


@dataclass(frozen=True)
class RejectJob:
    TYPE: ClassVar[str] = "REJECT_JOB"
    job_id: str

    def to_data(self) -> dict[str, Any]:
        return {"job_id": self.job_id}

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> RejectJob:
        _fields(data, where, ("job_id",))
        return cls(_job_id(data["job_id"], _where(where, "job_id")))


@dataclass(frozen=True)
class KillJob:
    TYPE: ClassVar[str] = "KILL_JOB"
    job_ids: list[str]

    def to_data(self) -> dict[str, Any]:
        return {"job_ids": list(self.job_ids)}

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> KillJob:
        _fields(data, where, ("job_ids",))
        return cls(_job_ids(data["job_ids"], _where(where, "job_ids")))


@dataclass(frozen=True)
class CallMeLater:
    """Ask for a REQUESTED_CALL at ``timestamp``, which must be strictly after the time
    the event is applied."""

    TYPE: ClassVar[str] = "CALL_ME_LATER"
    timestamp: float

    def to_data(self) -> dict[str, Any]:
        return {"timestamp": self.timestamp}

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> CallMeLater:
        _fields(data, where, ("timestamp",))
        return cls(_number(data["timestamp"], _where(where, "timestamp")))


@dataclass(frozen=True)
class SetResourceState:
    TYPE: ClassVar[str] = "SET_RESOURCE_STATE"
    resources: ProcSet
    state: str

    def to_data(self) -> dict[str, Any]:
        return {"resources": str(self.resources), "state": self.state}

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> SetResourceState:
        _fields(data, where, ("resources", "state"))
        return cls(
            _intervals(data["resources"], _where(where, "resources")),
            _string(data["state"], _where(where, "state")),
        )


@dataclass(frozen=True)
class SetJobMetadata:
    TYPE: ClassVar[str] = "SET_JOB_METADATA"
    job_id: str
    metadata: str

    def to_data(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "metadata": self.metadata}

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> SetJobMetadata:
        _fields(data, where, ("job_id", "metadata"))
        return cls(
            _job_id(data["job_id"], _where(where, "job_id")),
            _string(data["metadata"], _where(where, "metadata")),
        )


@dataclass(frozen=True)
class RegisterJob:
    """Dynamic job (``--enable-dynamic-jobs``); ``job["id"]`` must equal ``job_id``."""

    TYPE: ClassVar[str] = "REGISTER_JOB"
    job_id: str
    job: dict[str, Any]

    def to_data(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "job": self.job}

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> RegisterJob:
        _fields(data, where, ("job_id", "job"))
        return cls(
            _job_id(data["job_id"], _where(where, "job_id")),
            _object(data["job"], _where(where, "job")),
        )


@dataclass(frozen=True)
class RegisterProfile:
    TYPE: ClassVar[str] = "REGISTER_PROFILE"
    workload_name: str
    profile_name: str
    profile: dict[str, Any]

    def to_data(self) -> dict[str, Any]:
        return {
            "workload_name": self.workload_name,
            "profile_name": self.profile_name,
            "profile": self.profile,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> RegisterProfile:
        _fields(data, where, ("workload_name", "profile_name", "profile"))
        return cls(
            _string(data["workload_name"], _where(where, "workload_name")),
            _string(data["profile_name"], _where(where, "profile_name")),
            _object(data["profile"], _where(where, "profile")),
        )


@dataclass(frozen=True)
class Query:
    """``{"requests": {"consumed_energy": {}}}``; answered by an ANSWER event."""

    TYPE: ClassVar[str] = "QUERY"
    requests: dict[str, Any]

    def to_data(self) -> dict[str, Any]:
        return {"requests": self.requests}

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> Query:
        _fields(data, where, ("requests",))
        return cls(_object(data["requests"], _where(where, "requests")))


def _job_ids(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise ProtocolError(f"{where}: expected a non-empty list of job ids")
    return [_job_id(item, f"{where}[{i}]") for i, item in enumerate(value)]


Payload = (
    SimulationBegins
    | JobSubmitted
    | JobCompleted
    | JobKilled
    | ResourceStateChanged
    | RequestedCall
    | SimulationEnds
    | Answer
    | Notify
    | ExecuteJob
    | RejectJob
    | KillJob
    | CallMeLater
    | SetResourceState
    | SetJobMetadata
    | RegisterJob
    | RegisterProfile
    | Query
)

FROM_BATSIM: dict[str, type] = {
    cls.TYPE: cls
    for cls in (
        SimulationBegins,
        JobSubmitted,
        JobCompleted,
        JobKilled,
        ResourceStateChanged,
        RequestedCall,
        SimulationEnds,
        Answer,
        Notify,
    )
}
FROM_DECISION: dict[str, type] = {
    cls.TYPE: cls
    for cls in (
        ExecuteJob,
        RejectJob,
        KillJob,
        CallMeLater,
        SetResourceState,
        SetJobMetadata,
        RegisterJob,
        RegisterProfile,
        Query,
        Notify,
    )
}


# --------------------------------------------------------------------------- envelope


@dataclass(frozen=True, init=False)
class Event:
    timestamp: float
    data: Payload

    def __init__(self, timestamp: float, data: Payload) -> None:
        # the generated __init__ of a frozen dataclass sets each field through
        # object.__setattr__; written into the instance's dict instead, the same object
        # for a third less work (an Event per event of every message, both ways)
        fields = self.__dict__
        fields["timestamp"] = timestamp
        fields["data"] = data

    @property
    def type(self) -> str:
        return self.data.TYPE

    def to_json(self) -> dict[str, Any]:
        return {"timestamp": self.timestamp, "type": self.data.TYPE, "data": self.data.to_data()}


@dataclass(frozen=True, init=False)
class Message:
    now: float
    events: list[Event] = field(default_factory=list)

    def __init__(self, now: float, events: list[Event] | None = None) -> None:
        fields = self.__dict__  # (as Event's: a Message per message, both ways)
        fields["now"] = now
        fields["events"] = [] if events is None else events

    def to_json(self) -> dict[str, Any]:
        return {"now": self.now, "events": [event.to_json() for event in self.events]}


def message(now: float, *payloads: Payload) -> Message:
    """A message whose events are all stamped ``now`` — the usual decision reply::

    encode(message(now, ExecuteJob("w0!1", ProcSet(0)), CallMeLater(now + 5)))
    """
    return Message(now, [Event(now, payload) for payload in payloads])


#: Compact JSON text of a JSON value, as the messages are written (one encoder for every
#: call: ``json.dumps`` with options builds one each time). No circular-reference check:
#: the values are trees built here or parsed from JSON, and the check costs a dict insert
#: and delete per container (the same text either way).
_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False, check_circular=False)
compact_json = _COMPACT.encode
#: ``compact_json`` for :func:`encode`'s event data: the C encoder that
#: ``JSONEncoder.encode`` builds at every call (its one-shot path: no indent, no
#: circular-reference markers, so nothing of it outlives a call), built once. Same
#: text, same errors (tests/test_batsim_protocol.py); a third less per event.
_C_ENCODER = (
    json.encoder.c_make_encoder(
        None,
        _COMPACT.default,
        json.encoder.encode_basestring_ascii,
        None,
        ":",
        ",",
        False,
        False,
        False,
    )  # fmt: skip
    if json.encoder.c_make_encoder is not None
    else None
)


def _encode_data(value: Any) -> str:
    if _C_ENCODER is None:  # (a Python without json's C accelerator)
        return compact_json(value)
    return "".join(_C_ENCODER(value, 0))


def encode(message: Message) -> str:
    """Compact JSON text of ``message`` (deterministic: same message, same bytes).

    The envelope and each event's wrapper are written here and only each event's data
    goes through the encoder: the same text (the encoder writes a float with
    ``float.__repr__``, a key or a type name of plain ASCII as is), for less than half
    the work on a message of one small event. Anything else (a time that is not a
    finite float, an unusual type name) goes the encoder's way."""
    now = message.now
    if type(now) is not float or not _FINITE(now):
        return compact_json(message.to_json())
    parts = []
    for event in message.events:
        timestamp, data = event.timestamp, event.data
        kind = data.TYPE
        if type(timestamp) is not float or not _FINITE(timestamp) or kind not in _PLAIN_TYPES:
            return compact_json(message.to_json())
        parts.append(
            f'{{"timestamp":{timestamp!r},"type":"{kind}","data":{_encode_data(data.to_data())}}}'
        )
    return f'{{"now":{now!r},"events":[{",".join(parts)}]}}'


_FINITE = math.isfinite
#: event type names written without the encoder (no character JSON escapes)
_PLAIN_TYPES = frozenset(
    name
    for name in (*FROM_BATSIM, *FROM_DECISION)
    if name.isascii() and name.isprintable() and '"' not in name and "\\" not in name
)


def decode(text: str | bytes, sender: Sender) -> Message:
    """Parse and validate one message sent by ``sender``; raise :class:`ProtocolError`."""
    if sender not in ("batsim", "decision"):
        raise ValueError(f"sender must be 'batsim' or 'decision', not {sender!r}")
    if type(text) is bytes:
        # the commonest reply, "nothing to do" (half of an FCFS run's): its time as json
        # reads it (the same number text, parsed by float() as json's float and int do),
        # without the parser and the checks
        empty = _EMPTY_REPLY(text)
        if empty is not None:
            now = float(empty[1])
            if now < math.inf:  # (an overflow: the careful path says what is wrong)
                return Message(now, [])
    try:
        if type(text) is bytes and text[:1] == b"{" and text[1:2] != b"\x00":
            # what json.loads does with such bytes (its detect_encoding says UTF-8 when
            # neither of the first two bytes is 0 nor a BOM), minus the detection: a message is
            # decoded once per round trip
            text = text.decode("utf-8", "surrogatepass")
        raw = _loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        snippet = text[:80] if isinstance(text, str) else text[:80].decode("utf-8", "replace")
        raise ProtocolError(f"message from {sender} is not JSON ({exc}): {snippet!r}") from None
    return from_json(raw, sender)


_SCAN = json.decoder.JSONDecoder().scan_once  # json.loads's scanner (a C one if there is)


def _loads(text: str | bytes) -> Any:
    """``json.loads(text)`` for a text that is one JSON value from its first character
    to its last (a message): the scanner ``loads`` calls, without its three Python
    frames and two whitespace matches. Anything else (bytes, whitespace around, not
    JSON) goes ``loads``'s way, which raises its own error."""
    if type(text) is str:
        try:
            value, end = _SCAN(text, 0)
        except StopIteration:  # no value at 0: json.loads says what is wrong
            return json.loads(text)
        if end == len(text):
            return value
    return json.loads(text)


#: a message of no event in compact JSON, its time a JSON number (json's own grammar)
_EMPTY_REPLY = re.compile(
    rb'\{"now":((?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?),"events":\[\]\}'
).fullmatch
_ENVELOPE_KEYS = frozenset(("now", "events"))
_EVENT_KEYS = frozenset(("timestamp", "type", "data"))
_BARE_EVENT_KEYS = frozenset(("timestamp", "type"))
_EXECUTE_KEYS = frozenset(("job_id", "alloc"))


def _from_json_fast(raw: Any, sender: Sender) -> Message | None:
    """:func:`from_json` for a well-formed message, without building the names of the
    fields it checks (most of the cost): ``None`` for anything unusual, which the careful
    path then checks (and names in its error). Accepts exactly what that path accepts."""
    if type(raw) is not dict or raw.keys() != _ENVELOPE_KEYS:
        return None
    now, raw_events = raw["now"], raw["events"]
    if (type(now) is not float and type(now) is not int) or not 0 <= now < math.inf:
        return None
    if type(raw_events) is not list:
        return None
    now = float(now)
    known = FROM_BATSIM if sender == "batsim" else FROM_DECISION
    events: list[Event] = []
    previous = -math.inf
    for index, item in enumerate(raw_events):
        if type(item) is not dict:
            return None
        keys = item.keys()
        if keys != _EVENT_KEYS and keys != _BARE_EVENT_KEYS:
            return None
        timestamp, kind = item["timestamp"], item["type"]
        if type(timestamp) is not float and type(timestamp) is not int:
            return None
        if not (previous <= timestamp <= now and timestamp > -math.inf) or type(kind) is not str:
            return None  # (a NaN fails the comparisons too)
        previous = timestamp = float(timestamp)
        cls = known.get(kind)
        data = item.get("data", {})
        if cls is None or type(data) is not dict:
            return None
        if cls is ExecuteJob and data.keys() == _EXECUTE_KEYS:
            job_id, alloc = data["job_id"], data["alloc"]
            if type(job_id) is str and "!" in job_id and type(alloc) is str:
                if alloc.isdigit() and alloc.isascii():
                    events.append(Event(timestamp, ExecuteJob(job_id, one_resource(int(alloc)))))
                    continue
        payload = cls.from_data(data, f"events[{index}] ({kind}).data")
        if isinstance(payload, Notify):
            allowed = BATSIM_NOTIFY_TYPES if sender == "batsim" else DECISION_NOTIFY_TYPES
            if payload.type not in allowed:
                return None
        events.append(Event(timestamp, payload))
    return Message(now, events)


def from_json(raw: Any, sender: Sender) -> Message:
    """Validate an already-parsed JSON envelope (see :func:`decode`)."""
    fast = _from_json_fast(raw, sender)
    return fast if fast is not None else _from_json_checked(raw, sender)


def _from_json_checked(raw: Any, sender: Sender) -> Message:
    """:func:`from_json` field by field, naming what is wrong."""
    known = FROM_BATSIM if sender == "batsim" else FROM_DECISION
    envelope = _object(raw, f"message from {sender}")
    _fields(envelope, f"message from {sender}", ("now", "events"))
    now = _number(envelope["now"], "message.now")
    if now < 0:
        raise ProtocolError(f"message.now: must be >= 0, got {now}")
    if not isinstance(envelope["events"], list):
        raise ProtocolError("message.events: expected a list")
    events: list[Event] = []
    previous = -math.inf
    for index, raw_event in enumerate(envelope["events"]):
        where = f"events[{index}]"
        item = _object(raw_event, where)
        _fields(item, where, ("timestamp", "type"), ("data",))
        timestamp = _number(item["timestamp"], f"{where}.timestamp")
        kind = _string(item["type"], f"{where}.type")
        where = f"events[{index}] ({kind})"
        if timestamp > now:
            raise ProtocolError(f"{where}: timestamp {timestamp} is after the message's now {now}")
        if timestamp < previous:
            raise ProtocolError(
                f"{where}: timestamp {timestamp} is before the previous event's {previous}"
            )
        previous = timestamp
        cls = known.get(kind)
        if cls is None:
            other = FROM_DECISION if sender == "batsim" else FROM_BATSIM
            hint = " (it is sent the other way)" if kind in other else ""
            raise ProtocolError(
                f"{where}: unknown event type {kind!r} from {sender}{hint}; "
                f"known: {', '.join(sorted(known))}"
            )
        data = _object(item.get("data", {}), f"{where}.data")
        payload = cls.from_data(data, f"{where}.data")
        if isinstance(payload, Notify):
            allowed = BATSIM_NOTIFY_TYPES if sender == "batsim" else DECISION_NOTIFY_TYPES
            if payload.type not in allowed:
                raise ProtocolError(
                    f"{where}.data.type: NOTIFY {payload.type!r} is not one of {allowed}"
                )
        events.append(Event(timestamp, payload))
    return Message(now, events)
