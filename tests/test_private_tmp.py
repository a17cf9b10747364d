"""Each simulated process has its own, empty temporary directory (TMPDIR, TMP, TEMP), as a
container's /tmp is its own: what one leaves there (kubernetes.dynamic's discovery cache,
named after the API's host:port) is never read by another process or a later run, and
it is removed with the run."""

from __future__ import annotations

import os
import textwrap

from simrun import run_simulate

from simulator.testing import write_platform, write_workload

DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default"
PROGRAM = """
import os, sys, tempfile, time
tmp = tempfile.gettempdir()
print("empty" if not os.listdir(tmp) else f"not empty: {os.listdir(tmp)}", flush=True)
print("same" if os.environ["TMP"] == os.environ["TEMP"] == tmp else "differ", flush=True)
with open(os.path.join(tmp, "osrcp-cache.json"), "w") as f:
    f.write(sys.argv[1])
print(tmp, file=sys.stderr, flush=True)
time.sleep(30)
"""


def test_each_process_has_its_own_empty_tmp_removed_at_the_end(tmp_path, subprocess_env):
    prog = tmp_path / "tmpuser.py"
    prog.write_text(textwrap.dedent(PROGRAM))
    platform = write_platform(tmp_path / "p.xml", 1, cores=1)
    profile = {"type": "delay", "delay": 60, "cpu": "1", "scheduler": "default"}
    workload = write_workload(
        tmp_path / "w.json", [{"id": "0", "subtime": 0, "res": 1, "profile": "d"}], {"d": profile}
    )
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, DEFAULT_LIKE, platform, workload,
        "--scheduler", f"python {prog} one", "--scheduler", f"python {prog} two",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    dirs = []
    for name in ("scheduler-1", "scheduler-2"):
        lines = (out / f"{name}.log").read_text().splitlines()
        assert lines[:2] == ["empty", "same"], lines
        dirs.append(lines[2])
    assert dirs[0] != dirs[1] and os.path.basename(dirs[0]) == "scheduler-1"
    assert not any(os.path.exists(d) for d in dirs)
