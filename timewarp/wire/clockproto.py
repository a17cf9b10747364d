"""The clock protocol between a scheduler process's runtime and the broker's clock service.

This module owns the wire format; nothing else builds or parses clock messages.

Transport: a stream socket, no broker library in between. The broker listens on a Unix
domain socket (``ipc:///path/to/socket``) or loopback TCP (``tcp://127.0.0.1:<port>``);
each scheduler process's runtime opens one connection, says ``hello`` on it and receives
everything the broker sends on it. Every message is one line followed by ``\n``
(:func:`pack`; a reader splits with :class:`Unpacker`), in one of two forms:

- the messages of every step (``state``, ``timer``, ``cancel``, ``harden``, ``now``;
  ``fire``, ``time``, ``io``) are *compact frames*: the op, one space, then the hex digits
  of the message's fields packed little-endian (``struct``): 8 bytes per integer (so every
  one is in 0 … 2**64 − 1), 1 byte per flag (0 or 1), the fixed fields first, then as many
  whole rows as there are (``io`` rows, a timer's ``key``, fire's ``ids``). Both ends are
  ours (the peer is authenticated at hello), so these need no JSON; the receiver still
  checks each frame's shape before it reads a field (hex digits only, whole fields, flags
  0 or 1) and refuses anything else, naming the op, what is wrong and the layout;
- the rest (``hello``, ``stacks``, ``woke``, ``figures``, ``bye``; ``welcome``, ``dump``,
  ``report``, ``error``) are compact JSON objects (pure ASCII: never a raw newline),
  checked field by field. A frequent message spelled as JSON is accepted too (the same
  checks), but nothing of ours sends one.

Runtime -> broker (a compact frame's fields in order, then the message it decodes to, as
the builders below spell it)::

    {"op":"hello","v":2,"name":"sched0","pid":4242,"token":"…"}
    now <rid>                                              {"op":"now","rid":7}: round-trip
                                                           read of the clock
    timer <id> <deadline> <slack> [<key>]...               {"op":"timer","id":3,
                                                           "deadline":60000000000,"key":[0,2,5]}
    timer (slack 1)                                        the same with "slack":true: a
                                                           server thread's poll timeout:
                                                           never decides when time moves,
                                                           fires once time reached it
    harden <id>                                            {"op":"harden","id":4}: that slack
                                                           timer is an ordinary one from now on
    cancel <id>                                            {"op":"cancel","id":3}: the waiter
                                                           woke some other way
    state <busy> <ack> <runnable> <blocked> <detached> [<port> <sent> <consumed> <seq>]...
                                                           {"op":"state","busy":false,"ack":12,
                                                           "io":[[53412,310,2048,1]],
                                                           "runnable":0,"blocked":3,"detached":0}
    {"op":"stacks","text":"Thread main (holds the baton) ..."}
    {"op":"woke","cause":"a connection from outside to 127.0.0.1:9100 ..."}
                                                           input from outside the simulation
                                                           made a thread run without the
                                                           broker's go (deterministic mode:
                                                           a non-deterministic advance)
    {"op":"figures","runtime_cpu_ns":41000000,"process_cpu_ns":820000000,"profile":""}
                                                           the answer to report: what the
                                                           runtime cost the process (figures
                                                           only) and its --profile file
    {"op":"bye"}

    (``cancel 0300000000000000`` is {"op":"cancel","id":3}.)

Broker -> runtime::

    {"op":"welcome","v":2,"t":0,"epoch":1767225600000000000,"mono":1000000000000,"mode":"deterministic"}
    now <rid> <t>                                          {"op":"now","rid":7,"t":120000000000}
    fire <t> [<id>]...                                     {"op":"fire","ids":[3,9],"t":60000000000}:
                                                           timers due now, in release order
    time <t>                                               {"op":"time","t":60000000000}: clock
                                                           moved (acknowledged via ack)
    io <t> [<port> <upto>]...                              {"op":"io","ports":[[53414,2240],
                                                           [53412,9310]],"t":60000000000}:
                                                           let the threads reading these API
                                                           connections run, in this order;
                                                           each may read up to that many bytes
                                                           (in all) on its connection
    {"op":"dump"}                                          send your threads' stacks
    {"op":"report"}                                        the run is over: send figures
    {"op":"error","message":"..."}                         fatal: the runtime prints it and exits

Invariants the broker relies on:

- messages from one process arrive in the order its runtime produced them, so a timer is
  always registered before the ``state`` that reports its thread blocked;
- ``ack`` counts the ``fire`` and ``time`` messages the runtime has applied; the broker
  counts a process as runnable from the moment it sends one of those until a ``state``
  acknowledges it (wake-ups are the broker's own doing);
- ``busy`` is true while any thread of the process runs outside a virtual wait;
  ``runnable`` / ``blocked`` count the tracked threads running or ready versus waiting
  (informational: stall reports show them); ``detached`` counts threads the stall guard
  let go while they were stuck in a real wait (the process is not deadlocked while any
  of them has not come back);
- ``io`` lists threads blocked reading a connection to the API facade, as
  ``[client_port, bytes_sent, bytes_consumed, connection_seq]`` on that connection
  (``connection_seq`` numbers the process's facade connections in the order it opened
  them — reproducible, unlike ports). In deterministic mode a thread whose connection has
  data does not run until the broker says so with an ``io`` message: the broker lets such
  threads go one at a time, in (process, connection_seq) order, when nothing else runs —
  as it does for simultaneous timers. ``io`` messages are acknowledged like ``fire`` and,
  like ``fire``, carry the time: in deterministic mode every thread of a quiescent process
  is woken by one or the other, so the broker pushes ``time`` only to processes whose
  threads may run without its go (free modes, threads the stall guard let go).
- ``key`` orders timers with equal deadlines: the process's registration sequence.
  In deterministic mode only one thread of a process runs at a time, in a reproducible
  order, so this sequence is the same every run.

``v`` is 2 since the compact frames (session 10); a hello of another version is refused,
naming both (the runtime and the broker come from one installation: a mismatch is a stale
process, which would otherwise fail on its first compact frame).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Mapping
from itertools import chain
from typing import Any

VERSION = 2


class ProtocolError(ValueError):
    """A clock message that does not follow this module's format."""


def _error(msg: Mapping[str, Any], field: str, expected: str, value: Any) -> ProtocolError:
    return ProtocolError(
        f"clock message {msg.get('op')!r}: field {field!r} must be {expected}, got {value!r}"
    )


def _field(msg: Mapping[str, Any], field: str, expected: str, ok: Callable[[Any], bool]) -> Any:
    """``msg[field]`` when ``ok`` accepts it; a :class:`ProtocolError` naming the message,
    the field, what it ``expected`` and what came otherwise."""
    value = msg.get(field)
    if not ok(value):
        raise _error(msg, field, expected, value)
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(msg: Mapping[str, Any], field: str, *, minimum: int | None = 0) -> int:
    value = _field(msg, field, "an integer", _is_int)
    if minimum is not None and value < minimum:
        raise _error(msg, field, f">= {minimum}", value)
    return value


def _str(msg: Mapping[str, Any], field: str) -> str:
    return _field(msg, field, "a string", lambda v: isinstance(v, str))


def _bool(msg: Mapping[str, Any], field: str) -> bool:
    return _field(msg, field, "true or false", lambda v: isinstance(v, bool))


def _int_list(msg: Mapping[str, Any], field: str) -> list[int]:
    return _field(
        msg,
        field,
        "a list of integers",
        lambda v: isinstance(v, list) and all(_is_int(x) for x in v),
    )


def _rows(msg: Mapping[str, Any], field: str, columns: str) -> list[list[int]]:
    """A list of rows of non-negative integers, one per ``columns`` name ("port, sent")."""
    width = columns.count(",") + 1
    return _field(
        msg,
        field,
        f"a list of [{columns}] non-negative integers",
        lambda v: (
            isinstance(v, list)
            and all(
                isinstance(row, list)
                and len(row) == width
                and all(_is_int(x) and x >= 0 for x in row)
                for row in v
            )
        ),
    )


# op -> validator of the remaining fields; one table per direction.
_TO_BROKER = {
    "hello": lambda m: (
        _int(m, "v"),
        _str(m, "name"),
        _int(m, "pid"),
        "token" not in m or _str(m, "token"),
    ),
    "now": lambda m: _int(m, "rid"),
    "timer": lambda m: (
        _int(m, "id"),
        _int(m, "deadline"),
        _int_list(m, "key"),
        "slack" not in m or _bool(m, "slack"),
    ),
    "harden": lambda m: _int(m, "id"),
    "cancel": lambda m: _int(m, "id"),
    "state": lambda m: (
        _bool(m, "busy"),
        _int(m, "ack"),
        _rows(m, "io", "port, sent, consumed, seq"),
        _int(m, "runnable"),
        _int(m, "blocked"),
        _int(m, "detached"),
    ),
    "stacks": lambda m: _str(m, "text"),
    "figures": lambda m: (_int(m, "runtime_cpu_ns"), _int(m, "process_cpu_ns"), _str(m, "profile")),
    "woke": lambda m: _str(m, "cause"),
    "bye": lambda m: None,
}
_TO_RUNTIME = {
    "welcome": lambda m: (
        _int(m, "v"),
        _int(m, "t"),
        _int(m, "epoch", minimum=None),
        _int(m, "mono", minimum=None),
        _str(m, "mode"),
    ),
    "now": lambda m: (_int(m, "rid"), _int(m, "t")),
    "fire": lambda m: (_int_list(m, "ids"), _int(m, "t")),
    "time": lambda m: _int(m, "t"),
    "io": lambda m: (_rows(m, "ports", "port, bytes"), _int(m, "t")),
    "dump": lambda m: None,
    "report": lambda m: None,
    "error": lambda m: _str(m, "message"),
}


# Compact frames (the messages of every step): ``<op> <hex>``, the hex digits of the
# message's fields packed as little-endian unsigned 64-bit integers (a flag in one byte),
# fixed fields first, then as many rows as there are. Checked before a field is read: hex
# digits only (``bytes.fromhex`` skips whitespace, so the decoded length is checked too),
# the fixed part whole, rows whole, flags 0 or 1; then ``struct`` reads them in C. Every
# field is a non-negative integer below 2**64 by construction.
_Q = struct.Struct("<Q")
_FRAME_STRUCTS: dict[tuple[str, int], struct.Struct] = {}  # (head codes, integers after)
_CACHED_ROWS = 64


class _Compact:
    """One op's compact layout: the fixed fields (name, ``struct`` code: ``Q`` an integer,
    ``B`` a flag), then rows of ``width`` 64-bit integers (``rows`` names them);
    ``build(head, values)`` makes the message the builders below make (rows as lists)."""

    __slots__ = ("op", "prefix", "codes", "head", "fields", "flags", "width", "layout", "build")

    def __init__(
        self,
        op: str,
        fields: list[tuple[str, str]],
        width: int,
        rows: str,
        build: Callable[[tuple[int, ...], list], dict[str, Any]],
    ) -> None:
        self.op = op
        self.prefix = op.encode() + b" "
        self.codes = "<" + "".join(code for _, code in fields)
        self.head = struct.Struct(self.codes)
        self.fields = len(fields)
        self.flags = [(i, name) for i, (name, code) in enumerate(fields) if code == "B"]
        self.width = width
        self.layout = " ".join(
            [op, *(f"<{name}>" for name, _ in fields), *([rows] if rows else [])]
        )
        self.build = build

    def frame_struct(self, values: int) -> struct.Struct:
        """The whole frame's layout with ``values`` 64-bit integers after the fixed fields
        (cached: a runtime's frames have a handful of sizes)."""
        key = (self.codes, values)
        layout = _FRAME_STRUCTS.get(key)
        if layout is None:
            layout = struct.Struct(f"{self.codes}{values}Q")
            if values <= _CACHED_ROWS:  # (a peer's frame may be of any size: not cached)
                _FRAME_STRUCTS[key] = layout
        return layout

    def pack(self, head: tuple[int, ...], values: list[int] | tuple[int, ...] = ()) -> str:
        return f"{self.op} {self.frame_struct(len(values)).pack(*head, *values).hex()}"

    def decode(self, frame: bytes, direction: str) -> dict[str, Any]:
        hexits = frame[len(self.prefix) :]
        try:
            raw = bytes.fromhex(hexits.decode("ascii"))
        except ValueError:  # (UnicodeDecodeError too)
            raw = None
        extra = -1 if raw is None else len(raw) - self.head.size  # the rows' bytes
        if (
            extra < 0
            or frame[: len(self.prefix)] != self.prefix
            or len(raw) * 2 != len(hexits)  # (whitespace skipped by fromhex)
            or (extra % (8 * self.width) if self.width else extra)
        ):
            raise self._refused(frame, direction, "not whole fields in hex digits")
        values = self.frame_struct(extra // 8).unpack(raw)
        for i, name in self.flags:
            if values[i] > 1:
                raise self._refused(frame, direction, f"field {name!r} must be 0 or 1")
        return self.build(values[: self.fields], list(values[self.fields :]))

    def _refused(self, frame: bytes, direction: str, what: str) -> ProtocolError:
        return ProtocolError(
            f"clock message {self.op!r} ({direction}): {what}; expected {self.layout!r}, "
            "each field the hex digits of its little-endian bytes (8 per integer, 1 per "
            f"flag), got {frame[:120]!r}"
        )


def _rows_of(values: list[int], width: int) -> list[list[int]]:
    return [values[i : i + width] for i in range(0, len(values), width)]


def _timer_msg(head: tuple[int, ...], key: list[int]) -> dict[str, Any]:
    msg: dict[str, Any] = {"op": "timer", "id": head[0], "deadline": head[1], "key": key}
    if head[2]:
        msg["slack"] = True
    return msg


_STATE = _Compact(
    "state",
    [("busy", "B"), ("ack", "Q"), ("runnable", "Q"), ("blocked", "Q"), ("detached", "Q")],
    4,
    "[<port> <sent> <consumed> <seq>]...",
    lambda h, v: {
        "op": "state",
        "busy": h[0] == 1,
        "ack": h[1],
        "io": _rows_of(v, 4),
        "runnable": h[2],
        "blocked": h[3],
        "detached": h[4],
    },
)
_TIMER = _Compact(
    "timer", [("id", "Q"), ("deadline", "Q"), ("slack", "B")], 1, "[<key>]...", _timer_msg
)
_CANCEL = _Compact("cancel", [("id", "Q")], 0, "", lambda h, v: {"op": "cancel", "id": h[0]})
_HARDEN = _Compact("harden", [("id", "Q")], 0, "", lambda h, v: {"op": "harden", "id": h[0]})
_NOW_REQUEST = _Compact("now", [("rid", "Q")], 0, "", lambda h, v: {"op": "now", "rid": h[0]})
_FIRE = _Compact(
    "fire", [("t", "Q")], 1, "[<id>]...", lambda h, v: {"op": "fire", "ids": v, "t": h[0]}
)
_TIME = _Compact("time", [("t", "Q")], 0, "", lambda h, v: {"op": "time", "t": h[0]})
_IO = _Compact(
    "io",
    [("t", "Q")],
    2,
    "[<port> <upto>]...",
    lambda h, v: {"op": "io", "ports": _rows_of(v, 2), "t": h[0]},
)
_NOW_REPLY = _Compact(
    "now", [("rid", "Q"), ("t", "Q")], 0, "", lambda h, v: {"op": "now", "rid": h[0], "t": h[1]}
)
_COMPACT_TO_BROKER = {c.op.encode(): c for c in (_STATE, _TIMER, _CANCEL, _HARDEN, _NOW_REQUEST)}
_COMPACT_TO_RUNTIME = {c.op.encode(): c for c in (_FIRE, _TIME, _IO, _NOW_REPLY)}


def _state_line(
    busy: bool, ack: int, io: list[list[int]], runnable: int, blocked: int, detached: int
) -> str:
    layout = _STATE.frame_struct(4 * len(io))
    return "state " + layout.pack(busy, ack, runnable, blocked, detached, *chain(*io)).hex()


# op -> the compact line of a message (the builders' dicts; ``now`` is a request when it
# has no ``t``, a reply when it has)
_COMPACT_ENCODERS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "state": lambda m: _state_line(
        m["busy"], m["ack"], m["io"], m["runnable"], m["blocked"], m["detached"]
    ),
    "timer": lambda m: _TIMER.pack((m["id"], m["deadline"], bool(m.get("slack"))), m["key"]),
    "cancel": lambda m: "cancel " + _Q.pack(m["id"]).hex(),
    "harden": lambda m: "harden " + _Q.pack(m["id"]).hex(),
    "now": lambda m: (
        _NOW_REPLY.pack((m["rid"], m["t"])) if "t" in m else _NOW_REQUEST.pack((m["rid"],))
    ),
    "fire": lambda m: _FIRE.pack((m["t"],), m["ids"]),
    "time": lambda m: "time " + _Q.pack(m["t"]).hex(),
    "io": lambda m: _IO.pack((m["t"],), [*chain(*m["ports"])]),
}


# One encoder/decoder for the process: json.dumps with options builds an encoder per call,
# and json.loads of bytes sniffs the encoding first (clock frames are always UTF-8).
_ENCODER = json.JSONEncoder(separators=(",", ":"))
_DECODER = json.JSONDecoder()


def encode(msg: Mapping[str, Any]) -> bytes:
    """One frame: compact for the messages of every step, JSON for the rest (no
    validation: the builders below are the way in)."""
    compact = _COMPACT_ENCODERS.get(msg["op"])
    if compact is not None:
        return compact(msg).encode()
    return _ENCODER.encode(msg).encode()


def pack(msgs: Iterable[Mapping[str, Any]]) -> bytes:
    """Messages as they go on the wire: one line each."""
    return b"".join(encode(msg) + b"\n" for msg in msgs)


class Unpacker:
    """Splits the bytes read from a connection into frames (one per message), keeping an
    incomplete last line for the next read."""

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, data: bytes) -> list[bytes]:
        if self._partial:
            data = self._partial + data
        *frames, self._partial = data.split(b"\n")
        return frames

    @property
    def pending(self) -> int:
        """Bytes of an incomplete message received so far."""
        return len(self._partial)


def _decode(
    frame: bytes,
    table: Mapping[str, Any],
    direction: str,
    compact: Mapping[bytes, _Compact],
) -> dict[str, Any]:
    layout = compact.get(frame.partition(b" ")[0])
    if layout is not None:
        return layout.decode(frame, direction)
    try:
        msg = _DECODER.decode(frame.decode())
    except ValueError as exc:  # UnicodeDecodeError too
        raise ProtocolError(
            f"clock message ({direction}) is not JSON nor a compact frame "
            f"({', '.join(sorted(c.op for c in compact.values()))}): {frame[:80]!r}"
        ) from exc
    except RecursionError:  # 100,000 nested brackets: the JSON parser recurses per level
        raise ProtocolError(
            f"clock message ({direction}) is nested too deeply: {frame[:80]!r}"
        ) from None
    if not isinstance(msg, dict):
        raise ProtocolError(f"clock message ({direction}) must be a JSON object: {frame[:80]!r}")
    op = msg.get("op")
    check = table.get(op)
    if check is None:
        raise ProtocolError(
            f"clock message ({direction}): unknown op {op!r}; expected one of {sorted(table)}"
        )
    check(msg)
    return msg


def decode_to_broker(frame: bytes) -> dict[str, Any]:
    """Parse and validate a message a runtime sent to the broker."""
    return _decode(frame, _TO_BROKER, "runtime -> broker", _COMPACT_TO_BROKER)


def decode_to_runtime(frame: bytes) -> dict[str, Any]:
    """Parse and validate a message the broker sent to a runtime."""
    return _decode(frame, _TO_RUNTIME, "broker -> runtime", _COMPACT_TO_RUNTIME)


# Builders: the only places a message dict is spelled out.
def hello(name: str, pid: int, token: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"op": "hello", "v": VERSION, "name": name, "pid": pid}
    if token is not None:
        msg["token"] = token
    return msg


def now_request(rid: int) -> dict[str, Any]:
    return {"op": "now", "rid": rid}


def timer(timer_id: int, deadline_ns: int, key: list[int], slack: bool = False) -> dict[str, Any]:
    msg: dict[str, Any] = {"op": "timer", "id": timer_id, "deadline": deadline_ns, "key": key}
    if slack:
        msg["slack"] = True
    return msg


def harden(timer_id: int) -> dict[str, Any]:
    return {"op": "harden", "id": timer_id}


def cancel(timer_id: int) -> dict[str, Any]:
    return {"op": "cancel", "id": timer_id}


def state(
    busy: bool,
    ack: int,
    io: list[list[int]],
    runnable: int = 0,
    blocked: int = 0,
    detached: int = 0,
) -> dict[str, Any]:
    return {
        "op": "state",
        "busy": busy,
        "ack": ack,
        "io": io,
        "runnable": runnable,
        "blocked": blocked,
        "detached": detached,
    }


def pack_state(
    busy: bool,
    ack: int,
    io: list[list[int]],
    runnable: int = 0,
    blocked: int = 0,
    detached: int = 0,
) -> bytes:
    """``pack([state(...)])``, the same bytes, without the dict: a runtime sends one after
    every wake-up."""
    return (_state_line(busy, ack, io, runnable, blocked, detached) + "\n").encode()


def stacks(text: str) -> dict[str, Any]:
    return {"op": "stacks", "text": text}


def woke(cause: str) -> dict[str, Any]:
    return {"op": "woke", "cause": cause}


def bye() -> dict[str, Any]:
    return {"op": "bye"}


def welcome(t_ns: int, epoch_ns: int, mono_ns: int, mode: str) -> dict[str, Any]:
    return {
        "op": "welcome",
        "v": VERSION,
        "t": t_ns,
        "epoch": epoch_ns,
        "mono": mono_ns,
        "mode": mode,
    }


def now_reply(rid: int, t_ns: int) -> dict[str, Any]:
    return {"op": "now", "rid": rid, "t": t_ns}


def fire(timer_ids: list[int], t_ns: int) -> dict[str, Any]:
    return {"op": "fire", "ids": timer_ids, "t": t_ns}


def time_update(t_ns: int) -> dict[str, Any]:
    return {"op": "time", "t": t_ns}


def io_release(ports: list[list[int]], t_ns: int) -> dict[str, Any]:
    """``ports``: ``[port, upto]`` pairs — the threads reading these connections go, in
    this order, and may read until ``upto`` bytes in all were consumed on each."""
    return {"op": "io", "ports": ports, "t": t_ns}


def dump() -> dict[str, Any]:
    return {"op": "dump"}


def report() -> dict[str, Any]:
    return {"op": "report"}


def figures(runtime_cpu_ns: int, process_cpu_ns: int, profile: str) -> dict[str, Any]:
    return {
        "op": "figures",
        "runtime_cpu_ns": runtime_cpu_ns,
        "process_cpu_ns": process_cpu_ns,
        "profile": profile,
    }


def error(message: str) -> dict[str, Any]:
    return {"op": "error", "message": message}


# Environment variables through which a launcher hands a process to a broker.
ENV_ENDPOINT = "TIMEWARP_CLOCK"  # ipc:///tmp/timewarp-x/clock or tcp://127.0.0.1:40123
ENV_NAME = "TIMEWARP_PROCESS"  # stable process name (orders simultaneous wake-ups)
ENV_TOKEN = "TIMEWARP_CLOCK_TOKEN"  # the process's credential (its facade bearer token)
ENV_BROKER_PID = "TIMEWARP_BROKER_PID"  # the runtime exits if this process disappears
ENV_CONNECT_TIMEOUT = "TIMEWARP_CONNECT_TIMEOUT"  # seconds to wait for the welcome (default 10)
ENV_FACADE = "TIMEWARP_FACADE"  # host:port of the API facade (I/O accounting)
ENV_PATCH_MODULES = "TIMEWARP_PATCH_MODULES"  # comma-separated, for the import hook
ENV_FREEZE_UNPATCHED = "TIMEWARP_FREEZE_UNPATCHED"  # "1": freezegun for unpatched modules
ENV_PROFILE_DIR = "TIMEWARP_PROFILE_DIR"  # --profile: write profile-<name>.prof there
ENV_SEED = "TIMEWARP_SEED"  # the process's seed (from the run's seed and its name): its entropy
