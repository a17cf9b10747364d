"""The Batsim wire format: pinned against real Batsim 4.2.1 traces, round-trips, errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from procset import ProcSet

from simulator import protocol as p
from simulator.testing import shared_data_dir

TRACE_DIR = "batsim-reference/protocol-trace"


def _trace_lines():
    data = shared_data_dir()
    if data is None:
        pytest.skip("shared/data is not beside this checkout")
    for name in ("fcfs-normal.messages.log", "all-events.messages.log"):
        for line in (data / TRACE_DIR / name).read_text().splitlines():
            direction, _, text = line.partition(": ")
            yield name, ("batsim" if direction.startswith("BATSIM") else "decision"), text


def test_every_message_of_the_real_batsim_traces_decodes_and_reencodes_to_the_same_json():
    count = 0
    for _name, sender, text in _trace_lines():
        message = p.decode(text, sender)
        assert json.loads(p.encode(message)) == json.loads(text)
        count += 1
    assert count == 44


def test_trace_messages_become_typed_events():
    messages = [p.decode(text, sender) for _, sender, text in _trace_lines()]
    completed = messages[12].events[0].data
    assert completed == p.JobCompleted("w0!1", "COMPLETED_SUCCESSFULLY", 0, ProcSet(0))
    execute = messages[3].events[0].data
    assert execute == p.ExecuteJob("w0!1", ProcSet(0))
    killed = [e.data for m in messages for e in m.events if isinstance(e.data, p.JobKilled)]
    assert killed[0].job_progress["w0!1"]["profile_name"] == "delay10"


def test_encoded_execute_job_is_exactly_batsims_shape():
    message = p.Message(6e-05, [p.Event(6e-05, p.ExecuteJob("w0!1", ProcSet((0, 3), 5)))])
    assert p.encode(message) == (
        '{"now":6e-05,"events":[{"timestamp":6e-05,"type":"EXECUTE_JOB",'
        '"data":{"job_id":"w0!1","alloc":"0-3 5"}}]}'
    )


@pytest.mark.parametrize(
    "text, needle",
    [
        (
            '{"now": 1, "events": [{"timestamp": 2, "type": "REJECT_JOB", '
            '"data": {"job_id": "w0!1"}}]}',
            "after the message's now",
        ),
        (
            '{"now": 1, "events": [{"timestamp": 0, "type": "EXECUTE_JOB", '
            '"data": {"job_id": "w0!1", "alloc": "0", "extra": 1}}]}',
            "unexpected field(s) extra",
        ),
        (
            '{"now": 1, "events": [{"timestamp": 0, "type": "EXECUTE_JOB", '
            '"data": {"job_id": "w0!1", "alloc": "3-1"}}]}',
            "not an interval set",
        ),
        (
            '{"now": 1, "events": [{"timestamp": 0, "type": "EXECUTE_JOB", '
            '"data": {"job_id": "w0!1"}}]}',
            "missing field(s) alloc",
        ),
        (
            '{"now": 1, "events": [{"timestamp": 0, "type": "JOB_COMPLETED", "data": {}}]}',
            "sent the other way",
        ),
        (
            '{"now": 1, "events": [{"timestamp": 0, "type": "FROBNICATE", "data": {}}]}',
            "unknown event type 'FROBNICATE'",
        ),
        (
            '{"now": 1, "events": [{"timestamp": 1, "type": "REJECT_JOB", "data": {"job_id": "w0!1"}},'
            '{"timestamp": 0.5, "type": "REJECT_JOB", "data": {"job_id": "w0!2"}}]}',
            "before the previous event",
        ),
        (
            '{"now": 1, "events": [{"timestamp": 0, "type": "REJECT_JOB", "data": {"job_id": "7"}}]}',
            "workload prefix",
        ),
        (
            '{"now": 1, "events": [{"timestamp": 0, "type": "NOTIFY", "data": {"type": "nope"}}]}',
            "NOTIFY 'nope'",
        ),
        ('{"now": "soon", "events": []}', "message.now: expected a number"),
        ("not json", "not JSON"),
    ],
)
def test_bad_decision_messages_are_rejected_naming_event_and_field(text, needle):
    with pytest.raises(p.ProtocolError) as info:
        p.decode(text, "decision")
    assert needle in str(info.value)


def test_decision_events_name_their_index_and_type():
    text = (
        '{"now": 1, "events": [{"timestamp": 0, "type": "REJECT_JOB", "data": {"job_id": "w0!1"}},'
        '{"timestamp": 0, "type": "CALL_ME_LATER", "data": {"timestamp": "x"}}]}'
    )
    with pytest.raises(p.ProtocolError, match=r"events\[1\] \(CALL_ME_LATER\)\.data\.timestamp"):
        p.decode(text, "decision")


# --------------------------------------------------------------------------- round trip

job_ids = st.builds(
    lambda w, j: f"w{w}!{j}", st.integers(0, 3), st.text("abc123", min_size=1, max_size=4)
)
procsets = st.lists(st.integers(0, 50), min_size=1, max_size=8).map(lambda xs: ProcSet(*xs))
times = st.floats(0, 1e6, allow_nan=False, allow_infinity=False)

decision_payloads = st.one_of(
    st.builds(p.ExecuteJob, job_ids, procsets),
    st.builds(p.RejectJob, job_ids),
    st.builds(p.KillJob, st.lists(job_ids, min_size=1, max_size=3)),
    st.builds(p.CallMeLater, times),
    st.builds(p.SetJobMetadata, job_ids, st.text(max_size=10)),
    st.builds(p.SetResourceState, procsets, st.sampled_from(["0", "1", "2"])),
    st.builds(p.Notify, st.sampled_from(p.DECISION_NOTIFY_TYPES)),
    st.builds(
        p.RegisterProfile,
        st.just("dyn"),
        st.text("xyz", min_size=1, max_size=3),
        st.just({"type": "delay", "delay": 5}),
    ),
)
batsim_payloads = st.one_of(
    st.builds(
        p.JobSubmitted,
        job_ids,
        st.just({"id": "w0!1", "subtime": 0, "res": 1, "profile": "d"}),
        st.one_of(st.none(), st.just({"type": "delay", "delay": 3})),
    ),
    st.builds(p.JobCompleted, job_ids, st.sampled_from(p.JOB_STATES), st.integers(-1, 3), procsets),
    st.builds(p.RequestedCall),
    st.builds(p.SimulationEnds),
    st.builds(p.ResourceStateChanged, procsets, st.just("1")),
    st.builds(p.Notify, st.sampled_from(p.BATSIM_NOTIFY_TYPES[:2])),
)


def _messages(payloads):
    return st.tuples(times, st.lists(st.tuples(times, payloads), max_size=6)).map(
        lambda t: p.Message(
            max([t[0]] + [ts for ts, _ in t[1]]),
            [p.Event(ts, data) for ts, data in sorted(t[1], key=lambda x: x[0])],
        )
    )


@given(_messages(decision_payloads))
def test_decision_messages_round_trip(message):
    assert p.decode(p.encode(message), "decision") == message


@given(_messages(batsim_payloads))
def test_batsim_messages_round_trip(message):
    assert p.decode(p.encode(message), "batsim") == message


# --------------------------------------------------------------------------- the fast path

# values a broken message might carry where a field is expected
_odd_values = st.sampled_from(
    [None, True, -1, -1.5, float("inf"), float("-inf"), float("nan"), "", "7", "x", "0-3",
     "٣", [], {}, {"job_id": "w0!1"}, 1e300]
)  # fmt: skip


def _mutations(message: p.Message):
    """The JSON of ``message`` with one field replaced, removed or added (or unchanged)."""
    raw = json.loads(p.encode(message))
    paths: list[tuple] = [("now",), ("events",), ("extra",)]
    for index, event in enumerate(raw["events"]):
        paths += [("events", index, key) for key in ("timestamp", "type", "data", "extra")]
        paths += [("events", index, "data", key) for key in [*event.get("data", {}), "extra"]]
    return st.tuples(st.sampled_from(paths), st.one_of(st.just("delete"), _odd_values)).map(
        lambda change: _changed(raw, *change)
    )


def _changed(raw, path, value):
    raw = json.loads(json.dumps(raw))
    *parents, last = path
    target = raw
    for key in parents:
        target = target[key]
        if not isinstance(target, dict | list):
            return raw
    if value == "delete":
        if isinstance(target, dict):
            target.pop(last, None)
    elif isinstance(target, dict):
        target[last] = value
    return raw


def _outcome(decode, raw, sender):
    try:
        return decode(raw, sender)
    except p.ProtocolError as exc:
        return f"ProtocolError: {exc}"


@settings(max_examples=400)
@given(st.data(), st.sampled_from(["decision", "batsim"]))
def test_the_fast_decoder_accepts_and_refuses_exactly_what_the_careful_one_does(data, sender):
    payloads = decision_payloads if sender == "decision" else batsim_payloads
    message = data.draw(_messages(payloads))
    raw = data.draw(st.one_of(st.just(json.loads(p.encode(message))), _mutations(message)))
    assert _outcome(p.from_json, raw, sender) == _outcome(p._from_json_checked, raw, sender)


_EXECUTE = {"timestamp": 1.0, "type": "EXECUTE_JOB", "data": {"job_id": "w0!1", "alloc": "3"}}


@pytest.mark.parametrize(
    "raw",
    [
        {"now": 2.0, "events": [_EXECUTE]},
        {"now": 2, "events": [{**_EXECUTE, "timestamp": 1}]},
        {"now": 2.0, "events": [{**_EXECUTE, "timestamp": float("-inf")}]},
        {"now": 2.0, "events": [{**_EXECUTE, "timestamp": float("nan")}]},
        {"now": float("inf"), "events": [_EXECUTE]},
        {"now": True, "events": []},
        {"now": 2.0, "events": [{**_EXECUTE, "timestamp": 3.0}]},
        {"now": 2.0, "events": [_EXECUTE, {**_EXECUTE, "timestamp": 0.5}]},
        {"now": 2.0, "events": [{**_EXECUTE, "data": {"job_id": "w0!1", "alloc": ""}}]},
        {"now": 2.0, "events": [{**_EXECUTE, "data": {"job_id": "1", "alloc": "3"}}]},
        {"now": 2.0, "events": [{**_EXECUTE, "data": {"job_id": "w0!1", "alloc": "٣"}}]},
        {"now": 2.0, "events": [{**_EXECUTE, "data": {"job_id": "w0!1", "alloc": 3}}]},
        {"now": 2.0, "events": [{**_EXECUTE, "type": "JOB_COMPLETED"}]},
        {"now": 2.0, "events": [{"timestamp": 1.0, "type": "NOTIFY", "data": {"type": "x"}}]},
        {"now": 2.0, "events": [{"timestamp": 1.0, "type": "NOTIFY"}]},
        {"now": 2.0, "events": [{**_EXECUTE, "extra": 1}]},
        {"now": 2.0, "events": ({"x": 1},)},
    ],
)
def test_the_fast_decoder_agrees_with_the_careful_one_on_edge_cases(raw):
    assert _outcome(p.from_json, raw, "decision") == _outcome(p._from_json_checked, raw, "decision")


# --------------------------------------------------------------------------- the fast encoder

# any time a message could be stamped with: floats of every size and sign, ints, the
# values the encoder refuses (its error must stay the same)
_any_times = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0.0, -0.0, 5e-324, 1e16, 1e-7, 123456.789]),
)


def _slow_encode(message: p.Message) -> str:
    """What encode wrote before its fast path: the whole envelope through the encoder."""
    return p.compact_json(message.to_json())


def _encoded(encode, message):
    try:
        return encode(message)
    except ValueError as exc:  # a NaN or an infinity: the encoder refuses it
        return ("refused", type(exc), str(exc))


@settings(max_examples=300)
@given(
    _any_times,
    st.lists(st.tuples(_any_times, st.one_of(batsim_payloads, decision_payloads)), max_size=5),
)
def test_encode_writes_exactly_what_the_encoder_writes(now, events):
    message = p.Message(now, [p.Event(ts, data) for ts, data in events])
    assert _encoded(p.encode, message) == _encoded(_slow_encode, message)


# --------------------------------------------------------------------------- the empty reply

_number_texts = st.one_of(
    st.floats(allow_nan=False).map(repr),
    st.integers(-(10**30), 10**400).map(str),
    st.from_regex(r"-?[0-9]{0,3}(\.[0-9]{0,3})?([eE][-+]?[0-9]{0,4})?", fullmatch=True),
    st.sampled_from(
        [
            "0",
            "-0",
            "00",
            "01",
            "1.",
            ".5",
            "1e5",
            "1E+05",
            "1e-400",
            "1e400",
            "Infinity",
            "NaN",
            "1_0",
            " 1",
            "+1",
            "0x10",
            "٣",
            "1" * 5000,
        ]
    ),
)


def _decoded(text, sender):
    try:
        return p.decode(text, sender)
    except Exception as exc:  # (a huge integer: OverflowError, on both paths alike)
        return ("refused", type(exc), str(exc))


@settings(max_examples=300)
@given(_number_texts, st.sampled_from(["decision", "batsim"]))
def test_an_empty_reply_decodes_as_the_parser_reads_it(number, sender):
    text = '{"now":' + number + ',"events":[]}'
    # the text as str goes through json's parser and the checks (the fast path is for bytes)
    assert _decoded(text.encode(), sender) == _decoded(text, sender)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=4)
            | st.integers(-5, 5)
            | st.booleans()
            | st.none()
            | st.floats(allow_nan=False, allow_infinity=False),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=400)
@given(json_values)
def test_event_data_encoder_writes_what_compact_json_writes(value):
    """``encode``'s event data go through a C encoder built once instead of
    ``compact_json`` (which builds it at every call): the same text for any JSON value."""
    assert p._encode_data(value) == p.compact_json(value)


@pytest.mark.parametrize("bad", [float("nan"), [1, float("inf")], {"a": {1j: 2}}, {(1,): 2}])
def test_event_data_encoder_refuses_what_compact_json_refuses(bad):
    with pytest.raises((ValueError, TypeError)) as fast:
        p._encode_data(bad)
    with pytest.raises((ValueError, TypeError)) as slow:
        p.compact_json(bad)
    assert type(fast.value) is type(slow.value) and str(fast.value) == str(slow.value)


json_texts = st.one_of(
    json_values.map(json.dumps),
    json_values.map(lambda v: json.dumps(v, separators=(",", ":"))),
    st.tuples(json_values, st.sampled_from([" ", "\n", "x", "]", ",1", "}"])).map(
        lambda vs: json.dumps(vs[0]) + vs[1]  # something after the value
    ),
    json_values.map(lambda v: " " + json.dumps(v)),
    json_values.map(lambda v: json.dumps(v)[:-1]),  # cut short
    st.text(max_size=12),
)


@settings(max_examples=500)
@given(json_texts)
def test_message_parser_reads_what_json_loads_reads(text):
    """``decode`` parses with json's scanner directly when the text is one value from
    end to end, else with ``json.loads``: the same value, or the same error."""
    try:
        expected = json.loads(text)
    except ValueError as exc:
        with pytest.raises(type(exc)) as fast:
            p._loads(text)
        assert str(fast.value) == str(exc)
    else:
        assert repr(p._loads(text)) == repr(expected)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 70_000), st.integers(0, 5)).map(lambda t: (t[0], t[0] + t[1])),
        max_size=4,
    )
)
def test_an_allocation_is_written_as_procset_writes_it(intervals):
    """procset_text, the allocation's text in JOB_COMPLETED, EXECUTE_JOB and jobs.csv,
    is ProcSet's own text, and procset_tuple (a job's machines) its resources in order:
    one resource, one interval, several, none."""
    alloc = ProcSet(*intervals)
    assert p.procset_text(alloc) == str(alloc)
    assert p.procset_tuple(alloc) == tuple(alloc)
    assert p.procset_text(p.one_resource(7)) == "7"
    assert p.procset_tuple(p.one_resource(7)) == (7,)
