"""The clock protocol's wire format is pinned: these bytes are the contract."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timewarp.wire import clockproto as cp


@pytest.mark.parametrize(
    ("msg", "wire"),
    [
        (cp.hello("sched0", 4242), b'{"op":"hello","v":1,"name":"sched0","pid":4242}'),
        (cp.now_request(7), b'{"op":"now","rid":7}'),
        (
            cp.timer(3, 60_000_000_000, [12]),
            b'{"op":"timer","id":3,"deadline":60000000000,"key":[12]}',
        ),
        (
            cp.timer(4, 500_000_000, [13], slack=True),
            b'{"op":"timer","id":4,"deadline":500000000,"key":[13],"slack":true}',
        ),
        (cp.harden(4), b'{"op":"harden","id":4}'),
        (cp.cancel(3), b'{"op":"cancel","id":3}'),
        (
            cp.state(False, 12, [[53412, 310, 2048, 1]], 0, 3, 1),
            b'{"op":"state","busy":false,"ack":12,"io":[[53412,310,2048,1]],"runnable":0,"blocked":3,"detached":1}',
        ),
        (cp.stacks("T"), b'{"op":"stacks","text":"T"}'),
        (cp.woke("a connection"), b'{"op":"woke","cause":"a connection"}'),
        (cp.bye(), b'{"op":"bye"}'),
        (
            cp.welcome(0, 5, 6, "deterministic"),
            b'{"op":"welcome","v":1,"t":0,"epoch":5,"mono":6,"mode":"deterministic"}',
        ),
        (cp.now_reply(7, 120), b'{"op":"now","rid":7,"t":120}'),
        (cp.fire([3, 9], 60), b'{"op":"fire","ids":[3,9],"t":60}'),
        (cp.time_update(60), b'{"op":"time","t":60}'),
        (
            cp.io_release([[53414, 2240], [53412, 9310]], 60_000_000_000),
            b'{"op":"io","ports":[[53414,2240],[53412,9310]],"t":60000000000}',
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
        (b"not json", "is not JSON"),
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
        b'{"op":"now","rid":7}\n{"op":"stacks","text":"a\\nb"}\n'
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


# The quick checks of the frequent messages accept exactly what the generic checks accept
# (a frame they refuse is checked again, to say what is wrong: a quick check that let a
# bad field through would be the hole).
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=5),
    max_leaves=12,
)
_FREQUENT = [
    (cp._FAST_TO_BROKER, cp._TO_BROKER, cp.state(False, 12, [[1, 2, 3, 4], [5, 6, 7, 8]], 0, 3, 1)),
    (cp._FAST_TO_BROKER, cp._TO_BROKER, cp.timer(3, 60, [0, 2, 5])),
    (cp._FAST_TO_BROKER, cp._TO_BROKER, cp.now_request(7)),
    (cp._FAST_TO_BROKER, cp._TO_BROKER, cp.cancel(3)),
    (cp._FAST_TO_RUNTIME, cp._TO_RUNTIME, cp.fire([3, 9], 60)),
    (cp._FAST_TO_RUNTIME, cp._TO_RUNTIME, cp.io_release([[1, 2], [3, 4]], 60)),
    (cp._FAST_TO_RUNTIME, cp._TO_RUNTIME, cp.now_reply(7, 60)),
    (cp._FAST_TO_RUNTIME, cp._TO_RUNTIME, cp.time_update(60)),
]


def _accepted(check, msg) -> bool:
    try:
        check(msg)
    except cp.ProtocolError:
        return False
    return True


_NEAR_MISSES = [-1, 0, 2**70, True, False, 1.0, None, "1", [], [1], [[1]], {}]


def _near_misses(msg):
    """``msg`` with one field, or one cell of one of its rows, set to each near miss."""
    for field, value in msg.items():
        if field == "op":
            continue
        for miss in _NEAR_MISSES:
            yield {**msg, field: miss}
        if isinstance(value, list):
            for i, item in enumerate(value):
                for miss in _NEAR_MISSES:
                    yield {**msg, field: [*value[:i], miss, *value[i + 1 :]]}
                for j in range(len(item) if isinstance(item, list) else 0):
                    for miss in _NEAR_MISSES:
                        row = [*item[:j], miss, *item[j + 1 :]]
                        yield {**msg, field: [*value[:i], row, *value[i + 1 :]]}
                    yield {**msg, field: [*value[:i], item[:-1], *value[i + 1 :]]}
        yield {k: v for k, v in msg.items() if k != field}


@pytest.mark.parametrize(("fast", "table", "msg"), _FREQUENT)
def test_the_quick_checks_accept_exactly_what_the_generic_ones_do(fast, table, msg):
    op = msg["op"]
    for near in _near_misses(msg):
        assert fast[op](near) == _accepted(table[op], near), near


@given(
    st.sampled_from(_FREQUENT),
    st.dictionaries(
        st.sampled_from(
            [
                "busy",
                "ack",
                "io",
                "runnable",
                "blocked",
                "detached",
                "id",
                "deadline",
                "key",
                "rid",
                "t",
                "ids",
                "ports",
            ]
        ),
        _JSON_VALUES,
        max_size=3,
    ),
)
def test_the_quick_checks_agree_on_random_fields(frequent, changes):
    fast, table, msg = frequent
    msg = {**msg, **changes}
    assert fast[msg["op"]](msg) == _accepted(table[msg["op"]], msg)


@pytest.mark.parametrize(("fast", "table", "msg"), _FREQUENT)
def test_every_valid_frequent_message_takes_the_quick_path(fast, table, msg):
    assert fast[msg["op"]](msg)
