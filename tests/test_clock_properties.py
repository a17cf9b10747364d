"""Property tests of clock ordering: random multi-threaded programs run under
`timewarp run --standalone`, and the invariants a user relies on are checked."""

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

PROGRAM = Path(__file__).parent / "programs" / "random_program.py"
MS = 1_000_000

durations = st.integers(min_value=0, max_value=300)
timeouts = st.integers(min_value=1, max_value=300)
ops = st.one_of(
    st.tuples(st.just("sleep"), durations),
    st.tuples(st.just("now")),
    st.tuples(st.just("set"), st.integers(0, 2)),
    st.tuples(st.just("clear"), st.integers(0, 2)),
    st.tuples(st.just("wait"), st.integers(0, 2), timeouts),
    st.tuples(st.just("put"), st.integers(0, 1), st.integers(0, 99), timeouts),
    st.tuples(st.just("get"), st.integers(0, 1), timeouts),
    st.tuples(st.just("timer"), timeouts),
)
programs = st.fixed_dictionaries(
    {"threads": st.lists(st.lists(ops, min_size=1, max_size=6), min_size=1, max_size=4)}
)


def run_program(spec, env):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "timewarp",
            "run",
            "--standalone",
            "--no-import-hook",
            "-q",
            "--stall-timeout",
            "20",
            "--",
            sys.executable,
            str(PROGRAM),
            json.dumps(spec),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, [json.loads(line) for line in proc.stdout.splitlines()]


@given(spec=programs)
def test_random_programs_keep_clock_invariants(spec, subprocess_env):
    out, log = run_program(spec, subprocess_env)

    # now() never decreases along the order in which things happened (which includes
    # every happens-before edge: program order, set -> wait, put -> get, start -> run).
    times = [e["t"] for e in log]
    assert times == sorted(times)
    for e in log:
        assert e.get("t0", e["t"]) <= e["t"]

    sets = {}  # event index -> seqs of set()/clear() in log order
    for e in log:
        if e["op"] == "sleep":
            assert e["t"] == e["t0"] + e["args"][0] * MS, e
        if e["op"] in ("set", "clear"):
            sets.setdefault(e["args"][0], []).append((e["seq"], e["t"], e["op"]))
        if e["op"] == "wait":
            index, timeout_ms = e["args"]
            history = [op for seq, _, op in sets.get(index, []) if seq < e["seq"]]
            if e["result"]:
                # returned True: some set() came first, and before the deadline
                assert "set" in history
                assert e["t"] <= e["t0"] + timeout_ms * MS
            else:
                # timed out at exactly its deadline, and the flag was not left set
                # before that deadline (a set() at the deadline itself may come either way)
                assert e["t"] == e["t0"] + timeout_ms * MS
                before = [op for seq, t, op in sets.get(index, []) if seq < e["seq"] and t < e["t"]]
                assert not before or before[-1] == "clear"
        if e["op"] == "get" and e["result"] is None:
            assert e["t"] == e["t0"] + e["args"][1] * MS
        if e["op"] == "put" and e["result"] is False:
            assert e["t"] == e["t0"] + e["args"][2] * MS

    # timers fire at their deadline, in (deadline, registration) order
    registered = [e for e in log if e["op"] == "timer"]
    fired = [e for e in log if e["op"] == "fire"]
    assert sorted(f["name"] for f in fired) == sorted(r["name"] for r in registered)
    for f in fired:
        assert f["t"] == f["due"]
    order = {r["name"]: i for i, r in enumerate(registered)}
    assert [f["name"] for f in fired] == sorted(
        (f["name"] for f in fired),
        key=lambda n: (next(f["due"] for f in fired if f["name"] == n), order[n]),
    )

    # the run ends when the last deadline was reached
    assert log[-1]["op"] == "end"
    assert log[-1]["t"] == max(times)

    # and it is reproducible, byte for byte
    again, _ = run_program(spec, subprocess_env)
    assert again == out
