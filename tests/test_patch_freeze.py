"""``--freeze-unpatched``: unpatched modules read the given clock (via freezegun)."""

from __future__ import annotations

import datetime as dt
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from patcher.freeze import start_freeze

T0 = 1_800_000_000 * 10**9  # 2027-01-15T08:00:00Z


@pytest.fixture
def clock() -> Iterator[list[int]]:
    now = [T0]
    handle = start_freeze(lambda: now[0])
    try:
        yield now
    finally:
        handle.stop()


def test_unpatched_reads_follow_the_clock(clock: list[int]) -> None:
    assert time.time() == 1_800_000_000.0
    assert time.time_ns() == T0
    assert dt.datetime.now(dt.UTC).isoformat() == "2027-01-15T08:00:00+00:00"
    clock[0] += 90 * 10**9 + 500_000
    assert time.time() == pytest.approx(1_800_000_090.0005)
    assert dt.datetime.utcnow() == dt.datetime(2027, 1, 15, 8, 1, 30, 500)
    assert dt.date.today() == dt.date(2027, 1, 15)


def test_log_records_carry_the_clock(clock: list[int]) -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "msg", None, None)
    assert record.created == 1_800_000_000.0


def test_stop_restores_the_real_clock() -> None:
    handle = start_freeze(lambda: T0)
    assert time.time() == 1_800_000_000.0
    handle.stop()
    handle.stop()  # idempotent
    assert abs(time.time() - dt.datetime.now().timestamp()) < 60
    assert time.time() != 1_800_000_000.0


def test_runtime_and_io_modules_keep_real_time(clock: list[int]) -> None:
    for module_name in ("timewarp.probe", "zmq.probe", "socket"):
        namespace = {"__name__": module_name, "time": time}
        exec("def read():\n    return time.time()\n", namespace)
        assert namespace["read"]() != 1_800_000_000.0, module_name


def test_the_clock_callable_may_read_the_real_clock_without_recursing() -> None:
    from timewarp import vtime  # passthrough: calls time.time_ns() itself

    handle = start_freeze(vtime.time_ns)
    try:
        assert abs(time.time() - vtime.time()) < 5
    finally:
        handle.stop()


LIBRARY = """\
import time
from datetime import datetime, timezone

def stamp():
    return time.time(), datetime.now(timezone.utc).isoformat()
"""

APP = """\
import time
import frozenlib

time.sleep(3600)
print(*frozenlib.stamp())
"""


def test_unpatched_library_sees_virtual_time_under_timewarp_run(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    expected = "1767229200.0 2026-01-01T01:00:00+00:00"
    site = tmp_path / "site-packages"  # not program code: the hook leaves it alone
    site.mkdir()
    (site / "frozenlib.py").write_text(LIBRARY)
    (tmp_path / "freeze_app.py").write_text(APP)
    env = dict(subprocess_env, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env["PYTHONPATH"] += f":{tmp_path}:{site}"
    command = [
        sys.executable, "-m", "timewarp", "run", "--standalone", "-q",
        "--epoch", "2026-01-01T00:00:00Z", "--freeze-unpatched", "--", "python", "-m", "freeze_app",
    ]  # fmt: skip
    proc = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected
    command.remove("--freeze-unpatched")
    proc = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() != expected  # without the freeze the library reads real time


def test_pydantic_models_declared_while_frozen_accept_datetimes(clock: list[int]) -> None:
    pydantic = pytest.importorskip("pydantic")
    from datetime import date, datetime  # FakeDatetime / FakeDate while frozen

    class Stamped(pydantic.BaseModel):
        at: datetime
        day: date | None = None

    stamped = Stamped(at=datetime.now(), day=date.today())
    assert stamped.at.year == 2027 and stamped.day == dt.date(2027, 1, 15)
    parsed = Stamped.model_validate({"at": "2024-01-01T00:00:00Z"})
    assert parsed.at == dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def test_a_failed_start_leaves_nothing_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    class Exploding(types.ModuleType):
        def __dir__(self) -> list[str]:
            return ["boom"]

        def __getattr__(self, name: str) -> object:
            raise RuntimeError("lazy attribute exploded")

    monkeypatch.setitem(sys.modules, "tw_exploding_module", Exploding("tw_exploding_module"))
    real_datetime = dt.datetime
    with pytest.raises(RuntimeError, match="exploded"):
        start_freeze(lambda: T0)
    assert dt.datetime is real_datetime
    assert time.time() != 1_800_000_000.0
