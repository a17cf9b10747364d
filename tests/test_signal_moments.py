"""The first stop signal at chosen moments of real commands ends each cleanly: exit
128 + the signal and "interrupted" said (or exit 0 with a good manifest, for a run
whose verdict was made before the signal came), manifest and CSVs whole, no process of
the run left, no temporary folder left (tests/signal_moments.py says what is checked).

A few moments, reached by output markers, in the default run; many seeded ones across
every command under ``-m slow`` (``scripts/signal_stress.py`` runs more)."""

from __future__ import annotations

import signal

import pytest
from signal_moments import Moment, check_moment, moments

FEW = [
    Moment("simulate", signal.SIGTERM, "run"),
    Moment("simulate", signal.SIGHUP, "cleanup"),
    Moment("run", signal.SIGINT, "run"),
    Moment("sim", signal.SIGTERM, "run"),
    # --check-determinism's scratch folder (OUT/.determinism-check) was left by both
    Moment("simulate-check", signal.SIGTERM, "run"),
    Moment("simulate-check", signal.SIGINT, "second"),
]


@pytest.mark.parametrize("moment", FEW, ids=str)
def test_a_stop_signal_at_this_moment_ends_the_command_cleanly(tmp_path, subprocess_env, moment):
    outcome = check_moment(moment, tmp_path / "work", subprocess_env)
    assert outcome.problems == [], f"{moment}: {outcome.problems}\n{outcome.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("moment", moments(seed=7, count=70), ids=str)
def test_a_stop_signal_at_many_moments_ends_every_command_cleanly(tmp_path, subprocess_env, moment):
    outcome = check_moment(moment, tmp_path / "work", subprocess_env)
    if outcome.problems and outcome.problems[0].startswith("skipped"):
        pytest.skip(outcome.problems[0])
    assert outcome.problems == [], f"{moment}: {outcome.problems}\n{outcome.stderr[-3000:]}"
