"""`timewarp workload … --replicaset NAME [--replicasets K]`: generated pods owned by
ReplicaSets (what KSE-style rebalancers move)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest


def workload(tmp_path, env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "workload", *args, "-o", str(tmp_path / "w.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def owners(tmp_path) -> list[str | None]:
    jobs = json.loads((tmp_path / "w.json").read_text())["jobs"]
    return [j.get("replicaset") for j in jobs]


def test_every_generated_pod_joins_the_replicaset(tmp_path, subprocess_env):
    proc = workload(
        tmp_path, subprocess_env, "burst", "-n", "5", "--delay", "60", "--replicaset", "app"
    )
    assert proc.returncode == 0, proc.stderr
    assert owners(tmp_path) == ["app"] * 5


def test_several_replicasets_get_the_pods_round_robin(tmp_path, subprocess_env):
    proc = workload(
        tmp_path, subprocess_env, "poisson", "-n", "10", "--rate", "0.1", "--mean-delay", "60",
        "--seed", "1", "--replicaset", "web", "--replicasets", "3",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = owners(tmp_path)
    assert got[:4] == ["web-0", "web-1", "web-2", "web-0"]
    assert Counter(got) == {"web-0": 4, "web-1": 3, "web-2": 3}


def test_without_the_option_pods_have_no_owner(tmp_path, subprocess_env):
    proc = workload(
        tmp_path, subprocess_env, "spaced", "-n", "3", "--delay", "5", "--interval", "1"
    )
    assert proc.returncode == 0, proc.stderr
    assert owners(tmp_path) == [None] * 3


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--replicaset", "Not_Valid"], "--replicaset: 'Not_Valid' is not a valid name"),
        (["--replicasets", "2"], "--replicasets needs --replicaset NAME"),
        (["--replicaset", "app", "--replicasets", "0"], "expected an integer >= 1"),
    ],
)
def test_bad_grouping_is_refused_and_nothing_is_written(tmp_path, subprocess_env, args, words):
    proc = workload(tmp_path, subprocess_env, "burst", "-n", "2", "--delay", "5", *args)
    assert proc.returncode == 2
    assert words in proc.stderr
    assert not list(tmp_path.iterdir())
