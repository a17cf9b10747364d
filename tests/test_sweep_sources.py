"""The scheduler's source code is part of a run's identity: an edited scheduler reruns its
points, an unchanged one is skipped (commands/sweeping/sources.py)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from commands.sweeping.sources import SourceHasher, patch_modules

ROOT = Path(__file__).resolve().parent.parent


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def make_tree(root: Path) -> None:
    write(root / "pkg" / "__init__.py", "")
    write(root / "pkg" / "sched" / "__init__.py", "")
    write(root / "pkg" / "sched" / "__main__.py", "from . import scoring\nimport shared.helpers\n")
    write(root / "pkg" / "sched" / "scoring.py", "from ..common import util\n")
    write(root / "pkg" / "common" / "__init__.py", "")
    write(root / "pkg" / "common" / "util.py", "import json\n")
    write(root / "pkg" / "other" / "__init__.py", "X = 1\n")
    write(root / "shared" / "__init__.py", "")
    write(root / "shared" / "helpers.py", "from shared import deep\n")
    write(root / "shared" / "deep.py", "Y = 2\n")
    write(root / "shared" / "unused.py", "Z = 3\n")
    write(root / "scripts" / "s.py", "import sibling_dep\n")
    write(root / "scripts" / "sibling_dep.py", "")
    write(root / "scripts" / "sub" / "nested.py", "")


def test_a_package_run_with_dash_m_hashes_its_package_and_what_it_imports(tmp_path):
    make_tree(tmp_path)
    hashes = SourceHasher(tmp_path).hashes(["python -m pkg.sched --flag {seed}"])
    assert sorted(hashes) == [
        "pkg/__init__.py",
        "pkg/common/__init__.py",
        "pkg/common/util.py",  # a relative import two levels up
        "pkg/sched/__init__.py",
        "pkg/sched/__main__.py",
        "pkg/sched/scoring.py",
        "shared/__init__.py",
        "shared/deep.py",  # transitively
        "shared/helpers.py",
    ]  # not pkg/other (never imported), not shared/unused, not json (the standard library)


def test_a_script_hashes_its_folder_but_not_subfolders(tmp_path):
    make_tree(tmp_path)
    hashes = SourceHasher(tmp_path).hashes(["python3 -u scripts/s.py --x 1"])
    assert sorted(hashes) == ["scripts/s.py", "scripts/sibling_dep.py"]


def test_editing_any_hashed_file_changes_the_hashes_and_others_do_not(tmp_path):
    make_tree(tmp_path)
    command = ["python -m pkg.sched"]
    before = SourceHasher(tmp_path).hashes(command)
    (tmp_path / "pkg" / "other" / "__init__.py").write_text("X = 2\n")
    (tmp_path / "shared" / "unused.py").write_text("Z = 4\n")
    assert SourceHasher(tmp_path).hashes(command) == before
    (tmp_path / "shared" / "deep.py").write_text("Y = 3  # edited\n")
    after = SourceHasher(tmp_path).hashes(command)
    assert after.keys() == before.keys()
    assert after["shared/deep.py"] != before["shared/deep.py"]


def test_patched_packages_are_hashed_and_named_by_module(tmp_path):
    hashes = SourceHasher(tmp_path).hashes([], patch_modules(["--patch-module", "apscheduler"]))
    assert "<apscheduler>" in hashes and "<apscheduler.schedulers.background>" in hashes
    assert patch_modules(["-q", "--patch-module=yaml", "--patch-module", "x"]) == ["yaml", "x"]


def test_commands_that_are_not_python_files_hash_nothing_but_do_not_fail(tmp_path):
    hasher = SourceHasher(tmp_path)
    assert hasher.hashes(["python -c 'print(1)'", "python -m no.such.module", "'unclosed"]) == {}


# ----------------------------------------------------------------- end to end, on Dask


def run_sweep(spec: Path, out: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "sweep", str(spec), "-o", str(out)]
        + ["--workers", "1", "--no-plots"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_an_edited_scheduler_reruns_its_points_and_an_unchanged_one_is_skipped(
    tmp_path, subprocess_env
):
    tiny = (ROOT / "tests" / "programs" / "tiny_scheduler.py").read_text()
    write(tmp_path / "a" / "sched.py", tiny)
    write(tmp_path / "b" / "sched.py", tiny)
    shutil.copy(ROOT / "examples" / "inputs" / "cluster16.xml", tmp_path / "c16.xml")
    spec = write(
        tmp_path / "sweep.yaml",
        yaml.safe_dump(
            {
                "root": str(tmp_path),
                "timeout": 120,
                "simulate_args": ["--stall-timeout", "60"],
                "schedulers": {
                    "a": "python a/sched.py --scheduler-name default-scheduler",
                    "b": "python b/sched.py --scheduler-name default-scheduler",
                },
                "platforms": {"c16": "c16.xml"},
                "workloads": {"two": {"generator": "burst", "count": 2, "delay": 10}},
                "modes": {"deterministic": {}},
            }
        ),
    )
    out = tmp_path / "results"
    first = run_sweep(spec, out, subprocess_env)
    assert first.returncode == 0, first.stderr
    ids = {r["scheduler"]: r["run_id"] for r in csv.DictReader(open(out / "runs.csv"))}
    point = json.loads((out / "runs" / ids["a"] / "point.json").read_text())
    assert list(point["identity"]["scheduler_sources"]) == ["a/sched.py"]

    with open(tmp_path / "a" / "sched.py", "a") as f:
        f.write("# a comment is enough: the source changed\n")
    second = run_sweep(spec, out, subprocess_env)
    assert second.returncode == 0, second.stderr
    assert "1 already finished, 1 to run" in second.stderr
    again = {r["scheduler"]: r["run_id"] for r in csv.DictReader(open(out / "runs.csv"))}
    assert again["b"] == ids["b"]  # skipped: its result is the one from the first sweep
    assert again["a"] != ids["a"]
    assert json.loads((out / "runs" / again["a"] / "result.json").read_text())["status"] == "ok"
