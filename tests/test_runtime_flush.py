"""What a runtime's flush sends stays what it was, with its cheaper paths (s5-runtime):
the state frame formatted directly (``clockproto.pack_state``) and the clock thread's
flush after a wake-up that says nothing without taking a snapshot.

The oracle is the flush as it was before those cuts (``_reference_flush``, the same
decisions written out with the generic encoder, ``clockproto.pack``): every sequence of runtime states must put
the same bytes on the wire, in the same order, through both."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timewarp._core import runtime as _runtime
from timewarp._core.client import ClockClient
from timewarp.wire import clockproto as cp

_ints = st.integers(min_value=0, max_value=2**63)


@given(
    busy=st.booleans(),
    ack=_ints,
    io=st.lists(st.lists(_ints, min_size=4, max_size=4), max_size=4),
    runnable=_ints,
    blocked=_ints,
    detached=_ints,
)
def test_the_state_frame_is_the_encoders_bytes(busy, ack, io, runnable, blocked, detached):
    args = (busy, ack, io, runnable, blocked, detached)
    frame = cp.pack_state(*args)
    assert frame == cp.pack([cp.state(*args)])
    assert cp.decode_to_broker(frame.rstrip(b"\n")) == cp.state(*args)


@given(
    busy=st.booleans(),
    ack=st.integers(),
    io=st.lists(st.lists(st.integers(), min_size=4, max_size=4), max_size=6),
    counts=st.tuples(st.integers(), st.integers(), st.integers()),
)
def test_a_state_the_frame_cannot_hold_is_refused_not_sent_wrong(busy, ack, io, counts):
    # negative or past 64 bits: the runtime's counters never are; if one were, the frame
    # is not built (struct refuses it) rather than sent with the value wrapped around
    args = (busy, ack, io, *counts)
    values = [ack, *counts, *(x for row in io for x in row)]
    if all(0 <= x < 2**64 for x in values):
        assert cp.decode_to_broker(cp.pack_state(*args).rstrip(b"\n")) == cp.state(*args)
    else:
        with pytest.raises(struct.error):
            cp.pack_state(*args)


class _Reference:
    """The flush before the cuts: snapshot every time, state built as a dict, JSON."""

    def __init__(self) -> None:
        self.last: tuple | None = None
        self.rid = 0
        self.in_flight: list | None = None
        self.closed = False

    def flush(self, rt: _runtime.Runtime, force_state: bool = False) -> bytes:
        out = rt.outbox
        rt.outbox = []
        if rt.now_waiters and self.in_flight is None:  # (never answered here)
            self.rid += 1
            self.in_flight, rt.now_waiters = rt.now_waiters, []
            out.append(cp.now_request(self.rid))
        bye = any(msg["op"] == "bye" for msg in out)
        if any(msg["op"] == "woke" for msg in out):
            self.last = None
        snap = rt.snapshot_locked()
        key = (snap[0], snap[1], snap[2], snap[5])
        redundant = (
            rt.deterministic
            and not force_state
            and snap[0]
            and self.last is not None
            and key[3] == self.last[3]
        )
        if (key != self.last or force_state) and not redundant and not bye:
            self.last = key
            out.append(cp.state(*snap))
        if not out or self.closed:
            return b""
        self.closed = bye
        return cp.pack(out)


# one step of a run, as the runtime's state changes between two flushes
_steps = st.lists(
    st.tuples(
        st.sampled_from(
            ["hold", "idle", "ack", "io", "no io", "detach", "back", "timer", "woke", "now", "bye"]
        ),
        st.booleans(),  # force_state (the stall guard's dump)
    ),
    max_size=30,
)


@settings(max_examples=300)
@given(mode=st.sampled_from(["deterministic", "realtime"]), steps=_steps)
def test_every_flush_sends_what_the_flush_before_the_cuts_sent(mode, steps):
    def runtime() -> _runtime.Runtime:
        rt = _runtime.Runtime(now_ns=0, epoch_ns=0, mono_ns=0, mode=mode, poke=lambda: None)
        rt.adopt_main()
        return rt

    rt, twin = runtime(), runtime()  # the client's, and the oracle's (same changes)
    sent: list[bytes] = []
    client = ClockClient("ipc:///nonexistent/clock", "test")
    client._ready, client.runtime, client._sendall = True, rt, sent.append
    oracle = _Reference()
    for step, (what, force) in enumerate(steps):
        for r in (rt, twin):
            if what == "hold":
                r.holder = r.threads[next(iter(r.threads))]
            elif what == "idle":
                r.holder = None
            elif what == "ack":
                r.acks += 1
            elif what == "io":
                r.io[step] = [40000 + step, step, step, step]
            elif what == "no io":
                r.io.pop(max(r.io, default=-1), None)
            elif what == "detach":
                r.detached.add(_runtime.ThreadState((9, step), "stuck"))
            elif what == "back":
                if r.detached:
                    r.detached.pop()
            elif what == "timer":
                r.outbox.append(cp.timer(step + 1, 10**9 * (step + 1), [step + 1]))
            elif what == "woke":
                r.outbox.append(cp.woke("outside input"))
            elif what == "now":
                r.now_waiters.append([None, 0])  # a round-trip now() (TIMEWARP_NOW)
            elif what == "bye":
                r.outbox.append(cp.bye())
        del sent[:]
        client.flush_locked(force_state=force)
        assert b"".join(sent) == oracle.flush(twin, force_state=force), (step, what, force)
        assert rt.outbox == [] and twin.outbox == []
