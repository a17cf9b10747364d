import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"

settings.register_profile(
    "default", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def subprocess_env() -> dict[str, str]:
    """Environment for child Python processes: this checkout importable, no TIMEWARP_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMEWARP_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture(scope="session")
def python() -> str:
    return sys.executable


@pytest.fixture
def facade():
    """A started Kubernetes API facade on a manual clock, with one node ``n1`` and a
    bearer token (``facade.token``); a test file may define its own instead."""
    from broker.facade import Facade, ManualClock
    from broker.facade.objects import make_node

    f = Facade(ManualClock())
    f.store.create("nodes", make_node("n1"))
    f.token = f.add_token("sched")
    with f:
        yield f


@pytest.fixture
def shared_data() -> Path:
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip("../shared/data is not beside this checkout")
    return path
