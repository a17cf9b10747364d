"""``timewarp patch`` as a user runs it: trees, reports, exit codes, safe writes."""

from __future__ import annotations

import argparse
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from patcher import cli as patch_cli

UNPATCHED = "import time\n\n\ndef nap():\n    time.sleep(1)  # polite\n"
PATCHED = (
    "import timewarp.vtime as _timewarp_vtime; import time\n\n\n"
    "def nap():\n    _timewarp_vtime.sleep(1)  # polite\n"
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    src = tmp_path / "sched"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "loop.py").write_text(UNPATCHED)
    (src / "pkg" / "plain.py").write_text("x = 1\n")
    (src / "config.yaml").write_text("interval: 5\n")
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "stale.cpython-311.pyc").write_bytes(b"\0")
    run_sh = src / "run.sh"
    run_sh.write_text("#!/bin/sh\n")
    run_sh.chmod(0o755)
    return src


def patch(*args: str | Path) -> int:
    """``timewarp patch ARGS`` in process (the subprocess test below covers the dispatcher)."""
    parser = argparse.ArgumentParser(prog="timewarp patch")
    patch_cli.add_arguments(parser)
    return patch_cli.run(parser.parse_args([str(a) for a in args]))


def test_mirror_tree_rewrites_python_and_copies_the_rest(
    tree: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "build"
    assert patch(tree, "-o", out) == 0
    assert (out / "pkg" / "loop.py").read_text() == PATCHED
    assert (out / "pkg" / "plain.py").read_text() == "x = 1\n"
    assert (out / "config.yaml").read_text() == "interval: 5\n"
    assert os.access(out / "run.sh", os.X_OK)
    assert not (out / "__pycache__").exists()
    assert (tree / "pkg" / "loop.py").read_text() == UNPATCHED  # source untouched
    err = capsys.readouterr().err
    assert "3 Python file(s) scanned, 1 changed, 2 unchanged, 0 skipped" in err
    assert "1  time.sleep -> timewarp.vtime.sleep" in err


def test_rerun_replaces_its_own_output_and_drops_stale_files(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "build"
    assert patch(tree, "-o", out) == 0
    (tree / "pkg" / "plain.py").unlink()
    assert patch(tree, "-o", out) == 0
    assert not (out / "pkg" / "plain.py").exists()
    assert stat.S_IMODE(out.stat().st_mode) & 0o755 == 0o755


def test_refuses_to_overwrite_a_directory_it_did_not_write(
    tree: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "precious"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    assert patch(tree, "-o", out) == 2
    assert (out / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious", "sched"]
    assert "not empty and was not written by timewarp patch" in capsys.readouterr().err


def test_output_inside_the_source_tree_is_not_scanned(tree: Path) -> None:
    assert patch(tree, "-o", tree / "build") == 0
    assert patch(tree, "-o", tree / "build") == 0
    assert (tree / "build" / "pkg" / "loop.py").read_text() == PATCHED
    assert not (tree / "build" / "build").exists()


def test_unparseable_file_is_reported_copied_and_fails_unless_keep_going(
    tree: Path, tmp_path: Path, capsys
) -> None:
    (tree / "pkg" / "legacy.py").write_text("print 'python 2'\n")
    out = tmp_path / "build"
    assert patch(tree, "-o", out) == 1
    assert (out / "pkg" / "legacy.py").read_text() == "print 'python 2'\n"
    assert (out / "pkg" / "loop.py").read_text() == PATCHED
    err = capsys.readouterr().err
    assert "skipped pkg/legacy.py: line 1: does not parse" in err
    assert patch(tree, "-o", out, "--keep-going") == 0


def test_undecodable_file_is_skipped_with_a_reason(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "latin.py"
    bad.write_bytes(b"name = '\xe9t\xe9'\n")
    assert patch(bad, "--keep-going") == 0
    assert "skipped latin.py" in capsys.readouterr().err


def test_check_changes_nothing_and_fails_only_when_something_would_change(
    tree: Path, tmp_path: Path
) -> None:
    before = (tree / "pkg" / "loop.py").read_text()
    assert patch(tree, "--check") == 1
    assert (tree / "pkg" / "loop.py").read_text() == before
    out = tmp_path / "build"
    patch(tree, "-o", out)
    assert patch(out, "--check") == 0


def test_diff_prints_a_unified_diff(tree: Path, capsys) -> None:
    assert patch(tree, "--diff") == 0
    out = capsys.readouterr().out
    assert "--- a/pkg/loop.py\n+++ b/pkg/loop.py\n" in out
    assert "-    time.sleep(1)  # polite\n+    _timewarp_vtime.sleep(1)  # polite\n" in out
    assert "plain.py" not in out


def test_in_place_rewrites_atomically_and_keeps_modes(tree: Path, capsys) -> None:
    loop = tree / "pkg" / "loop.py"
    loop.chmod(0o750)
    assert patch(tree, "--in-place") == 0
    assert loop.read_text() == PATCHED
    assert stat.S_IMODE(loop.stat().st_mode) == 0o750
    assert not [p for p in tree.rglob("*.tmp")]
    capsys.readouterr()
    assert patch(tree, "--in-place") == 0
    assert "0 changed" in capsys.readouterr().err


def test_exclude_leaves_matching_files_untouched(tree: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "build"
    assert patch(tree, "-o", out, "--exclude", "pkg/loop.py") == 0
    assert (out / "pkg" / "loop.py").read_text() == UNPATCHED
    assert "skipped pkg/loop.py: excluded by --exclude 'pkg/loop.py'" in capsys.readouterr().err


def test_exclude_a_directory_by_name(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "build"
    assert patch(tree, "-o", out, "--exclude", "pkg") == 0
    assert not (out / "pkg").exists()


def test_single_file_to_a_file_and_to_a_directory(tree: Path, tmp_path: Path) -> None:
    target = tmp_path / "patched_loop.py"
    assert patch(tree / "pkg" / "loop.py", "-o", target) == 0
    assert target.read_text() == PATCHED
    directory = tmp_path / "dir"
    directory.mkdir()
    assert patch(tree / "pkg" / "loop.py", "-o", directory) == 0
    assert (directory / "loop.py").read_text() == PATCHED


def test_the_patcher_never_runs_the_code(tmp_path: Path) -> None:
    evil = tmp_path / "evil.py"
    marker = tmp_path / "ran"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\nimport time\ntime.sleep(1)\n")
    assert patch(evil, "--in-place") == 0
    assert not marker.exists()
    assert "_timewarp_vtime.sleep(1)" in evil.read_text()


@pytest.mark.parametrize(
    "args, message",
    [
        (["does/not/exist"], "SRC does/not/exist does not exist"),
        ([], "give SRC"),
        (["--package", "no_such_package_xyz"], "no installed package or module named"),
        (["--package", "apscheduler", "--in-place"], "--in-place cannot be used with --package"),
        (["x.py", "--check", "-o", "out"], "--check changes nothing"),
        (["x.py", "--package", "apscheduler"], "either SRC or --package"),
    ],
)
def test_usage_errors_exit_2_with_a_message(args: list[str], message: str, capsys) -> None:
    assert patch(*args) == 2
    assert message in capsys.readouterr().err


def test_output_and_in_place_are_exclusive(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        patch("x.py", "-o", "out", "--in-place")
    assert info.value.code == 2


def test_package_is_patched_ahead_of_time_without_importing_it(tmp_path: Path, capsys) -> None:
    vendor = tmp_path / "vendor"
    assert patch("--package", "apscheduler", "-o", vendor) == 0
    blocking = (vendor / "apscheduler" / "schedulers" / "blocking.py").read_text()
    assert "from timewarp.vthreading import Event" in blocking
    assert "written to" in capsys.readouterr().err


def test_cli_end_to_end_in_a_subprocess(tree: Path, tmp_path: Path, subprocess_env) -> None:
    out = tmp_path / "build"
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "patch", str(tree), "-o", str(out), "--diff"],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "+++ b/pkg/loop.py" in proc.stdout
    assert "1 changed" in proc.stderr
    assert (out / "pkg" / "loop.py").read_text() == PATCHED


def test_single_file_to_a_new_directory_named_with_a_slash(tree: Path, tmp_path: Path) -> None:
    assert patch(tree / "pkg" / "loop.py", "-o", f"{tmp_path / 'fresh'}/") == 0
    assert (tmp_path / "fresh" / "loop.py").read_text() == PATCHED


def test_single_file_onto_itself_is_refused(tree: Path, capsys) -> None:
    assert patch(tree / "pkg" / "loop.py", "-o", tree / "pkg" / "loop.py") == 2
    assert "use --in-place" in capsys.readouterr().err


def test_extensionless_python_scripts_are_patched_and_links_are_kept(
    tree: Path, tmp_path: Path, capsys
) -> None:
    script = tree / "bin" / "scheduler"
    script.parent.mkdir()
    script.write_text("#!/usr/bin/env python3\nimport time\ntime.sleep(1)\n")
    script.chmod(0o755)
    (tree / "pkg" / "alias.py").symlink_to("loop.py")
    out = tmp_path / "build"
    assert patch(tree, "-o", out) == 0
    assert "_timewarp_vtime.sleep(1)" in (out / "bin" / "scheduler").read_text()
    assert os.access(out / "bin" / "scheduler", os.X_OK)
    assert (out / "pkg" / "alias.py").is_symlink()
    assert (out / "pkg" / "alias.py").read_text() == PATCHED  # points at the patched copy
    assert "skipped pkg/alias.py: symbolic link (kept, not followed)" in capsys.readouterr().err


def test_vcs_caches_and_virtualenvs_are_neither_scanned_nor_copied(
    tree: Path, tmp_path: Path, capsys
) -> None:
    for noise in (".git/hooks/pre-commit.py", "venv/lib/site.py", ".tox/py/x.py"):
        (tree / noise).parent.mkdir(parents=True, exist_ok=True)
        (tree / noise).write_text(UNPATCHED)
    (tree / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    out = tmp_path / "build"
    assert patch(tree, "-o", out) == 0
    assert not (out / ".git").exists() and not (out / "venv").exists()
    assert not (out / ".tox").exists()
    assert "3 Python file(s) scanned" in capsys.readouterr().err


def test_in_place_on_a_symlink_rewrites_its_target_and_keeps_the_link(
    tmp_path: Path, capsys
) -> None:
    """(issue 17 item 17) A rename over the link used to replace it with a patched copy,
    leaving the real file unpatched."""
    real = tmp_path / "real" / "sched.py"
    real.parent.mkdir()
    real.write_text(UNPATCHED)
    link = tmp_path / "sched.py"
    link.symlink_to(real)
    assert patch(link, "--in-place") == 0
    assert link.is_symlink() and link.resolve() == real
    assert real.read_text() == PATCHED
    assert f"{link} is a symbolic link: rewrote {real}, kept the link" in capsys.readouterr().err
    assert not list(real.parent.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_staging_folders_left_by_a_killed_patch_are_removed(tree: Path, tmp_path: Path) -> None:
    """`-o` builds in `.OUT.staging-PID-*` beside OUT; SIGKILL leaves it behind. The next
    run removes those whose writer is gone, and leaves a running writer's alone."""
    # pids are below pid_max: no process can have this one (a dead writer's, for sure)
    dead_pid = int(Path("/proc/sys/kernel/pid_max").read_text())
    stale = tmp_path / f".build.staging-{dead_pid}-x1y2"
    retired = tmp_path / f".build.old-{dead_pid}-z3"
    busy = tmp_path / f".build.staging-{os.getpid()}-w4"  # this process: still running
    for d in (stale, retired, busy):
        (d / "pkg").mkdir(parents=True)
    assert patch(tree, "-o", tmp_path / "build") == 0
    assert not stale.exists() and not retired.exists()
    assert busy.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".build")) == [busy.name]


def test_an_output_that_cannot_be_written_is_a_usage_error(tree: Path, tmp_path: Path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert patch(tree, "-o", a_file / "out") == 2
    assert f"-o {a_file / 'out'}: cannot write there (File exists)" in capsys.readouterr().err


# Issue 27 item 8: what could kill or hang the patcher is skipped with a reason


def _patch_in_subprocess(env: dict, *args: str | Path) -> subprocess.CompletedProcess:
    """In a child: a SIGSEGV or a hang must fail the test, not take pytest down."""
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "patch", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("[" * 2000 + "]" * 2000, "(too many nested parentheses, line 3)"),
        ("1+" * 5000 + "1", "(maximum recursion depth exceeded during ast construction)"),
    ],
    ids=["brackets", "expression"],
)
def test_deep_nesting_is_skipped_with_a_reason_not_a_crash(
    tmp_path: Path, subprocess_env, body: str, why: str
) -> None:
    deep = tmp_path / "deep.py"
    deep.write_text(f"import time\ntime.sleep(1)\nx = {body}\n")
    proc = _patch_in_subprocess(subprocess_env, deep, "--check")
    assert proc.returncode == 1, proc.stderr  # a file left unpatched, as for a parse error
    assert f"skipped deep.py: line ?: nested too deeply for CPython's parser {why}" in proc.stderr


def test_a_file_over_the_rewrite_limit_is_skipped_before_libcst(tmp_path: Path, capsys) -> None:
    from patcher.transform import MAX_REWRITE_BYTES

    big = tmp_path / "big.py"
    filler = "# " + "x" * 1000 + "\n"
    big.write_text("import time\ntime.sleep(1)\n" + filler * (MAX_REWRITE_BYTES // len(filler) + 1))
    size = big.stat().st_size
    assert MAX_REWRITE_BYTES == 1 << 20 and size > MAX_REWRITE_BYTES
    assert patch(big, "--check") == 1
    err = capsys.readouterr().err
    assert f"skipped big.py: line ?: {size:,} bytes to rewrite, over the limit of 1,048,576" in err


def test_a_file_over_the_read_limit_is_not_read_and_is_copied_unchanged(
    tree: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    import patcher.tree

    monkeypatch.setattr(patcher.tree, "MAX_SOURCE_BYTES", 100)
    (tree / "pkg" / "huge.py").write_text("import time\n" * 10)  # 120 bytes
    out = tmp_path / "build"
    assert patch(tree, "-o", out) == 1
    assert (out / "pkg" / "huge.py").read_text() == "import time\n" * 10
    assert (out / "pkg" / "loop.py").read_text() == PATCHED  # the rest is patched
    err = capsys.readouterr().err
    assert "skipped pkg/huge.py: 120 bytes, over the limit of 100 (left unpatched)" in err


def test_a_fifo_is_never_opened(tree: Path, tmp_path: Path, subprocess_env) -> None:
    os.mkfifo(tree / "pkg" / "pipe.py")
    os.mkfifo(tree / "queue")
    out = tmp_path / "build"
    for args in ([tree, "--check"], [tree, "-o", out]):
        proc = _patch_in_subprocess(subprocess_env, *args)
        assert proc.returncode == (1 if "--check" in args else 0), proc.stderr
        assert "skipped pkg/pipe.py: a named pipe: not opened, not copied" in proc.stderr
        assert "skipped queue: a named pipe: not opened, not copied" in proc.stderr
    assert (out / "pkg" / "loop.py").read_text() == PATCHED
    assert not (out / "pkg" / "pipe.py").exists() and not (out / "queue").exists()
    proc = _patch_in_subprocess(subprocess_env, tree / "pkg" / "pipe.py")  # named as SRC
    assert "skipped pipe.py: a named pipe: not opened, not copied" in proc.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_patch_removes_its_staging_copy_and_says_so(
    tree: Path, tmp_path: Path, subprocess_env, signum: int
) -> None:
    """Issue 27 item 15: SIGTERM to `timewarp patch -o OUT` left `.OUT.staging-*` and
    printed nothing. The child holds still after its first file (no race with a fast
    patch), then gets the signal."""
    (tree / "pkg" / "more.py").write_text(UNPATCHED)
    marker, out = tmp_path / "one-file-done", tmp_path / "build"
    child = (
        "import pathlib, sys, threading\n"
        "import patcher.tree as tree\n"
        "real = tree.patch_file_bytes\n"
        "def held(data, rel):\n"
        "    result = real(data, rel)\n"
        f"    pathlib.Path({str(marker)!r}).write_text(rel)\n"
        "    threading.Event().wait()  # until the signal\n"
        "    return result\n"
        "tree.patch_file_bytes = held\n"
        "from commands.cli import main\n"
        f"sys.exit(main(['patch', {str(tree)!r}, '-o', {str(out)!r}]))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", child], env=subprocess_env, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(600):  # up to 60 s for the interpreter and the first file
            if marker.exists() or proc.poll() is not None:
                break
            threading.Event().wait(0.1)
        assert marker.exists(), proc.stderr.read() if proc.poll() is not None else "no file"
        assert list(tmp_path.glob(".build.staging-*"))  # the copy being built
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signum, err
    name = signal.Signals(signum).name
    assert (
        f"timewarp patch: stopped by {name}: {out} left as it was (the partial copy removed)" in err
    )
    assert not list(tmp_path.glob(".build.*")) and not out.exists()
