import subprocess


def test_timewarp_without_command_prints_usage_and_fails(python, subprocess_env):
    proc = subprocess.run(
        [python, "-m", "timewarp"], env=subprocess_env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "usage: timewarp" in proc.stderr


def test_unknown_command_is_rejected_by_name(python, subprocess_env):
    proc = subprocess.run(
        [python, "-m", "timewarp", "frobnicate"], env=subprocess_env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "frobnicate" in proc.stderr


def test_version(python, subprocess_env):
    proc = subprocess.run(
        [python, "-m", "timewarp", "--version"], env=subprocess_env, capture_output=True, text=True
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("timewarp ")
