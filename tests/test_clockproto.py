"""The clock protocol's wire format is pinned: these bytes are the contract."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timewarp.wire import clockproto as cp


def _q(*values: int) -> str:
    """Integers as a compact frame spells them: 8 little-endian bytes each, in hex."""
    return "".join(v.to_bytes(8, "little").hex() for v in values)


@pytest.mark.parametrize(
    ("msg", "wire"),
    [
        (cp.hello("sched0", 4242), b'{"op":"hello","v":2,"name":"sched0","pid":4242}'),
        (cp.now_request(7), b"now 0700000000000000"),
        (
            cp.timer(3, 60_000_000_000, [12]),
            b"timer 0300000000000000" + b"005847f80d000000" + b"00" + b"0c00000000000000",
        ),
        (
            cp.timer(4, 500_000_000, [13], slack=True),
            f"timer {_q(4, 500_000_000)}01{_q(13)}".encode(),
        ),
        (cp.timer(4, 5, []), f"timer {_q(4, 5)}00".encode()),
        (cp.harden(4), b"harden 0400000000000000"),
        (cp.cancel(3), b"cancel 0300000000000000"),
        (
            cp.state(False, 12, [[53412, 310, 2048, 1]], 0, 3, 1),
            f"state 00{_q(12, 0, 3, 1)}{_q(53412, 310, 2048, 1)}".encode(),
        ),
        (cp.state(True, 0, [], 1, 0, 0), f"state 01{_q(0, 1, 0, 0)}".encode()),
        (cp.stacks("T"), b'{"op":"stacks","text":"T"}'),
        (cp.woke("a connection"), b'{"op":"woke","cause":"a connection"}'),
        (cp.bye(), b'{"op":"bye"}'),
        (
            cp.welcome(0, 5, 6, "deterministic"),
            b'{"op":"welcome","v":2,"t":0,"epoch":5,"mono":6,"mode":"deterministic"}',
        ),
        (cp.now_reply(7, 120), f"now {_q(7, 120)}".encode()),
        (cp.fire([3, 9], 60), f"fire {_q(60, 3, 9)}".encode()),
        (cp.time_update(60), b"time 3c00000000000000"),
        (
            cp.io_release([[53414, 2240], [53412, 9310]], 60_000_000_000),
            f"io {_q(60_000_000_000, 53414, 2240, 53412, 9310)}".encode(),
        ),
        (cp.dump(), b'{"op":"dump"}'),
        (cp.error("boom"), b'{"op":"error","message":"boom"}'),
    ],
)
def test_wire_format_is_pinned(msg, wire):
    assert cp.encode(msg) == wire


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"not json", "is not JSON nor a compact frame"),
        (b"[1,2]", "must be a JSON object"),
        (b'{"op":"teleport"}', "unknown op 'teleport'"),
        (b'{"op":"timer","id":1,"deadline":-5,"key":[1]}', "field 'deadline' must be >= 0"),
        (
            b'{"op":"timer","id":1,"deadline":5,"key":[1],"slack":1}',
            "field 'slack' must be true or false",
        ),
        (b'{"op":"harden"}', "field 'id' must be an integer"),
        (
            b'{"op":"timer","id":1,"deadline":"soon","key":[1]}',
            "field 'deadline' must be an integer",
        ),
        (
            b'{"op":"state","busy":1,"ack":0,"io":[],"runnable":0,"blocked":0,"detached":0}',
            "field 'busy' must be true or false",
        ),
        (b'{"op":"state","busy":true,"ack":0,"io":[]}', "field 'runnable' must be an integer"),
        (
            b'{"op":"state","busy":true,"ack":0,"io":[[1,2]],"runnable":1,"blocked":0,"detached":0}',
            "field 'io' must be a list of [port, sent, consumed, seq]",
        ),
        (b'{"op":"hello","v":1,"pid":3}', "field 'name' must be a string"),
    ],
)
def test_malformed_messages_are_named(frame, message):
    with pytest.raises(cp.ProtocolError, match=None) as info:
        cp.decode_to_broker(frame)
    assert message in str(info.value)


nat = st.integers(min_value=0, max_value=2**62)
to_broker = st.one_of(
    st.builds(cp.hello, st.text(), nat),
    st.builds(cp.now_request, nat),
    st.builds(cp.timer, nat, nat, st.lists(nat, max_size=4), st.booleans()),
    st.builds(cp.harden, nat),
    st.builds(cp.cancel, nat),
    st.builds(
        cp.state, st.booleans(), nat, st.lists(st.lists(nat, min_size=4, max_size=4)), nat, nat, nat
    ),
    st.builds(cp.stacks, st.text()),
    st.just(cp.bye()),
)
to_runtime = st.one_of(
    st.builds(cp.welcome, nat, st.integers(), st.integers(), st.text()),
    st.builds(cp.now_reply, nat, nat),
    st.builds(cp.fire, st.lists(nat), nat),
    st.builds(cp.time_update, nat),
    st.builds(cp.io_release, st.lists(st.lists(nat, min_size=2, max_size=2)), nat),
    st.just(cp.dump()),
    st.builds(cp.error, st.text()),
)


@given(to_broker)
def test_runtime_to_broker_round_trip(msg):
    assert cp.decode_to_broker(cp.encode(msg)) == msg


@given(to_runtime)
def test_broker_to_runtime_round_trip(msg):
    assert cp.decode_to_runtime(cp.encode(msg)) == msg


def test_a_malformed_io_release_is_named():
    with pytest.raises(cp.ProtocolError) as info:
        cp.decode_to_runtime(b'{"op":"io","ports":[[53412]],"t":5}')
    assert "field 'ports' must be a list of [port, bytes]" in str(info.value)


def test_on_the_wire_each_message_is_one_line():
    assert cp.pack([cp.now_request(7), cp.stacks("a\nb")]) == (
        b'now 0700000000000000\n{"op":"stacks","text":"a\\nb"}\n'
    )


@given(
    st.lists(
        st.one_of(
            to_broker.map(lambda m: (cp.decode_to_broker, m)),
            to_runtime.map(lambda m: (cp.decode_to_runtime, m)),
        ),
        max_size=8,
    ),
    st.data(),
)
def test_messages_survive_any_split_of_the_byte_stream(tagged, data):
    """However the stream is cut into reads, the reader gets the same messages in order
    and keeps an incomplete last one for later."""
    wire = cp.pack([m for _, m in tagged])
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=6)))
    unpacker = cp.Unpacker()
    frames = []
    for start, end in zip([0, *cuts], [*cuts, len(wire)], strict=True):
        frames += unpacker.feed(wire[start:end])
    assert unpacker.pending == 0
    assert [decode(f) for (decode, _), f in zip(tagged, frames, strict=True)] == [
        m for _, m in tagged
    ]


# The compact frames: the broker reads a field only from a frame of the right shape, and
# whatever it accepts is a message the generic (JSON) checks accept too — a compact frame
# is never a way past them.
_GENERIC = {**{("b", op): check for op, check in cp._TO_BROKER.items()}}
_GENERIC.update({("r", op): check for op, check in cp._TO_RUNTIME.items()})
_DECODERS = {"b": cp.decode_to_broker, "r": cp.decode_to_runtime}
_FREQUENT = [
    ("b", cp.state(False, 12, [[1, 2, 3, 4], [5, 6, 7, 8]], 0, 3, 1)),
    ("b", cp.timer(3, 60, [0, 2, 5], slack=True)),
    ("b", cp.now_request(7)),
    ("b", cp.cancel(3)),
    ("b", cp.harden(3)),
    ("r", cp.fire([3, 9], 60)),
    ("r", cp.io_release([[1, 2], [3, 4]], 60)),
    ("r", cp.now_reply(7, 60)),
    ("r", cp.time_update(60)),
]


@pytest.mark.parametrize(("way", "msg"), _FREQUENT)
def test_the_frequent_messages_need_no_json(way, msg):
    frame = cp.encode(msg)
    assert frame.startswith(msg["op"].encode() + b" ")
    assert b"{" not in frame and b'"' not in frame
    assert _DECODERS[way](frame) == msg


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"state", "not whole fields in hex digits; expected 'state <busy> <ack> <runnable>"),
        (b"state ", "not whole fields in hex digits"),
        (b"state 00" + _q(1, 2, 3).encode(), "not whole fields"),  # a fixed field short
        (f"state 00{_q(1, 2, 3, 4)}{_q(5, 6, 7)}".encode(), "not whole fields"),  # a row short
        (f"state 02{_q(1, 2, 3, 4)}".encode(), "field 'busy' must be 0 or 1"),
        (f"state ff{_q(1, 2, 3, 4)}".encode(), "field 'busy' must be 0 or 1"),
        (f"state 00{_q(1, 2, 3, 4)}0".encode(), "not whole fields"),  # an odd digit
        (f"state 00 {_q(1, 2, 3, 4)}".encode(), "not whole fields"),  # fromhex skips spaces
        (f"state 00{_q(1, 2, 3, 4)}\t".encode(), "not whole fields"),
        (f"state 0x{_q(1, 2, 3, 4)}".encode(), "not whole fields"),
        (f"state  00{_q(1, 2, 3, 4)}".encode(), "not whole fields"),
        ("now ０７00000000000000".encode(), "not whole fields"),  # not ASCII digits
        (b"now \xff\xfe00000000000000", "not whole fields"),
        (f"now {_q(7, 0)}".encode(), "expected 'now <rid>'"),  # a reply is not a request
        (f"timer {_q(1, 5)}02{_q(1)}".encode(), "field 'slack' must be 0 or 1"),
        (f"timer {_q(1, 5)}00{_q(1)}00".encode(), "expected 'timer <id> <deadline> <slack>"),
        (f"cancel {_q(1, 2)}".encode(), "expected 'cancel <id>'"),
        (b"harden 0400000000", "expected 'harden <id>'"),
        (f"fire {_q(60, 3)}".encode(), "not JSON nor a compact frame"),  # not to the broker
        (f"teleport {_q(1)}".encode(), "not JSON nor a compact frame"),
    ],
)
def test_malformed_compact_frames_are_named(frame, message):
    with pytest.raises(cp.ProtocolError) as info:
        cp.decode_to_broker(frame)
    assert message in str(info.value)
    assert "(runtime -> broker)" in str(info.value)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (f"io {_q(60, 1, 2, 3)}".encode(), "expected 'io <t> [<port> <upto>]...'"),
        (f"fire {_q(60)}0".encode(), "not whole fields"),
        (f"time {_q(60, 1)}".encode(), "expected 'time <t>'"),
        (f"now {_q(7)}".encode(), "expected 'now <rid> <t>'"),
        (f"state 00{_q(1, 2, 3, 4)}".encode(), "not JSON nor a compact frame"),
    ],
)
def test_malformed_compact_frames_to_the_runtime_are_named(frame, message):
    with pytest.raises(cp.ProtocolError) as info:
        cp.decode_to_runtime(frame)
    assert message in str(info.value)


def _accepted_by_both(way, frame):
    """Decode ``frame``; when the compact decoder accepts it, the message passes the
    generic checks and encodes back to the same frame (hex digits in lower case)."""
    try:
        msg = _DECODERS[way](frame)
    except cp.ProtocolError:
        return
    _GENERIC[way, msg["op"]](msg)  # raises if the compact path let something through
    assert cp.encode(msg) == frame.lower(), (frame, msg)


@given(
    st.sampled_from(_FREQUENT),
    st.lists(
        st.tuples(
            st.integers(0, 200),
            st.sampled_from(["0", "1", "f", "F", "g", " ", "\t", "-", "", "00", "ff", "é"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_a_mangled_compact_frame_is_refused_or_a_valid_message(frequent, edits):
    """Characters replaced, inserted or deleted anywhere in a valid frame: the result is
    refused with a ProtocolError or is a message the generic checks accept."""
    way, msg = frequent
    text = cp.encode(msg).decode()
    for at, piece, replace in edits:
        at = min(at, len(text))
        text = text[:at] + piece + text[at + (1 if replace else 0) :]
    _accepted_by_both(way, text.encode())


@given(
    st.sampled_from([("b", op) for op in ("state", "timer", "cancel", "harden", "now")])
    | st.sampled_from([("r", op) for op in ("fire", "time", "io", "now")]),
    st.binary(max_size=120) | st.text("0123456789abcdefABCDEF", max_size=120).map(str.encode),
)
def test_any_bytes_after_a_compact_op_are_refused_or_a_valid_message(way_op, payload):
    way, op = way_op
    _accepted_by_both(way, op.encode() + b" " + payload)


def test_a_state_frame_reads_every_row():
    rows = [[port, port * 3, port * 5, i] for i, port in enumerate(range(40000, 40009))]
    frame = cp.encode(cp.state(True, 2**64 - 1, rows, 1, 2, 3))
    assert cp.decode_to_broker(frame)["io"] == rows
    assert cp.decode_to_broker(frame)["ack"] == 2**64 - 1


def test_a_frequent_message_spelled_as_json_gets_the_generic_checks():
    # (nothing of ours sends one; a peer may, and is held to the same rules)
    assert cp.decode_to_broker(b'{"op":"cancel","id":3}') == cp.cancel(3)
    with pytest.raises(cp.ProtocolError, match="field 'id' must be >= 0"):
        cp.decode_to_broker(b'{"op":"cancel","id":-3}')
