"""Applying the rewrite to files and directory trees, and writing the results safely.

A tree is walked in sorted order (so reports and outputs are reproducible). Python files
(``*.py``, ``*.pyw``, extensionless scripts with a ``python`` shebang) are rewritten; everything else is copied unchanged when mirroring.
Version-control, cache and virtualenv directories are neither scanned nor copied.

Writes never leave a half-written file: single files are written to a temporary file in
the destination directory and renamed over the target; a mirror tree is built in a
staging directory beside ``OUT`` and swapped in only when complete. An existing ``OUT`` is
replaced only if an earlier ``timewarp patch`` wrote it (it holds :data:`MARKER`), so a
mistyped ``-o ~`` cannot delete anything.
"""

from __future__ import annotations

import fnmatch
import io
import os
import re
import shutil
import stat
import tempfile
import tokenize
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patcher.transform import PatchError, PatchResult, patch_source
from timewarp.wire.stophold import critical

PYTHON_SUFFIXES = (".py", ".pyw")
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        ".tox",
        ".nox",
        "node_modules",
    }
)
MARKER = ".timewarp-patch"
# a Python file larger than this is not read: skipped with a reason (copied unchanged
# when mirroring); the largest modules seen in the wild are generated API clients of ~6 MB
MAX_SOURCE_BYTES = 16 << 20
_PYTHON_SHEBANG = re.compile(rb"#![^\n]*\bpython[0-9.]*\b")


class TreeError(Exception):
    """A usage problem with the source or destination paths (exit status 2)."""


@dataclass
class FileOutcome:
    """What happened to one Python file.

    ``status`` is changed, unchanged or skipped; a skipped file has a ``reason``, and
    ``failed`` is set when it was skipped because it could not be parsed or decoded.
    """

    rel: str
    status: str
    reason: str = ""
    result: PatchResult | None = None
    failed: bool = False


@dataclass
class Report:
    files: list[FileOutcome] = field(default_factory=list)
    copied: int = 0  # non-Python files copied unchanged (mirror mode)
    special: list[str] = field(default_factory=list)  # "rel: why" of files never opened

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def rewrites(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for f in self.files:
            if f.result is not None:
                total.update(f.result.rewrites)
        return total

    @property
    def parse_failures(self) -> list[FileOutcome]:
        return [f for f in self.files if f.failed]


def is_python(path: Path) -> bool:
    """``*.py``/``*.pyw``, or an extensionless script whose first line is a Python shebang."""
    if path.suffix in PYTHON_SUFFIXES:
        return True
    if path.suffix or not path.is_file():
        return False
    try:
        with path.open("rb") as handle:
            first = handle.readline(256)
    except OSError:
        return False
    return _PYTHON_SHEBANG.match(first) is not None


def _excluded(rel: str, excludes: Sequence[str]) -> str | None:
    for pattern in excludes:
        if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(rel.rsplit("/", 1)[-1], pattern):
            return pattern
    return None


def walk(src: Path, excludes: Sequence[str], avoid: Sequence[Path] = ()) -> Iterator[Path]:
    """Files under ``src`` in sorted order, relative to it, minus skipped directories.

    Excluded *directories* are not descended into (their files are not yielded at all);
    excluded files are yielded, and the caller reports and copies them unchanged.
    ``avoid`` lists directories never entered (the output tree when it lies inside ``src``).
    """
    avoid_resolved = {p.resolve() for p in avoid}
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        kept = []
        for name in sorted(dirnames):
            child = here / name
            rel = child.relative_to(src).as_posix()
            if (
                name in SKIPPED_DIRS
                or (child / "pyvenv.cfg").exists()
                or child.resolve() in avoid_resolved
                or (child.is_dir() and not child.is_symlink() and _excluded(rel, excludes))
            ):
                continue
            if child.is_symlink():
                filenames.append(name)  # mirrored as a link, never followed
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            if name.startswith(".timewarp-patch") and here == src:
                continue
            yield (here / name).relative_to(src)


def patch_file_bytes(data: bytes, rel: str) -> FileOutcome:
    """Patch one file's bytes; a parse failure becomes a 'skipped' outcome."""
    try:
        result = patch_source(data, filename=rel)
    except PatchError as exc:
        where = f"line {exc.line}: " if exc.line is not None else "line ?: "
        return FileOutcome(rel, "skipped", where + exc.message, failed=True)
    return FileOutcome(rel, "changed" if result.changed else "unchanged", result=result)


def decode(data: bytes) -> str:
    """Source bytes as text, honouring a PEP 263 coding cookie (for diffs)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return data.decode("utf-8", errors="replace")


def atomic_write(path: Path, data: bytes, mode_from: Path | None = None) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # one critical block (timewarp.wire.stophold): a stop signal raised inside mkstemp
    # (after the file is made) or before the try left ``.NAME.XXXX.tmp`` beside the
    # user's file; held, it comes once the file is whole, renamed or removed
    with critical:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            if mode_from is not None:
                shutil.copymode(mode_from, tmp)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


Sink = Callable[[FileOutcome, bytes, bytes], None]  # (outcome, original, output)


def process_tree(
    src: Path,
    excludes: Sequence[str],
    sink: Sink | None = None,
    copy_other: Callable[[Path], None] | None = None,
    avoid: Sequence[Path] = (),
) -> Report:
    """Patch every Python file under ``src``; hand each result to ``sink``.

    Non-Python files (and symlinks) go to ``copy_other`` if given. Files are processed one
    at a time, so memory stays bounded by the largest file.
    """
    report = Report()
    for rel_path in walk(src, excludes, avoid):
        path = src / rel_path
        rel = rel_path.as_posix()
        special = _not_regular(os.lstat(path).st_mode)
        if special is not None:  # a FIFO would block the walk forever: never opened
            reason = f"{special}: not opened, not copied"
            if path.suffix in PYTHON_SUFFIXES:
                report.files.append(FileOutcome(rel, "skipped", reason))
            else:
                report.special.append(f"{rel}: {reason}")
            continue
        if path.is_symlink() and is_python(path):
            report.files.append(FileOutcome(rel, "skipped", "symbolic link (kept, not followed)"))
        if path.is_symlink() or not is_python(path):
            if copy_other is not None:
                copy_other(rel_path)
                report.copied += 1
            continue
        data = read_source(path)
        if isinstance(data, FileOutcome):  # too large (or no longer a regular file)
            data.rel = rel
            report.files.append(data)
            if copy_other is not None and data.failed:
                copy_other(rel_path)  # streamed, never held in memory
            continue
        pattern = _excluded(rel, excludes)
        if pattern is not None:
            outcome = FileOutcome(rel, "skipped", f"excluded by --exclude {pattern!r}")
        else:
            outcome = patch_file_bytes(data, rel)
        output = outcome.result.output if outcome.result is not None else data
        assert isinstance(output, bytes)
        report.files.append(outcome)
        if sink is not None:
            sink(outcome, data, output)
    return report


def _not_regular(mode: int) -> str | None:
    """What a file that is neither regular nor a symbolic link is, or None."""
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    kinds = ((stat.S_ISFIFO, "named pipe"), (stat.S_ISSOCK, "socket"),
             (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"))  # fmt: skip
    return next((f"a {name}" for test, name in kinds if test(mode)), "not a regular file")


def read_source(path: Path) -> bytes | FileOutcome:
    """A Python file's bytes, or a 'skipped' outcome saying why not: a file over
    :data:`MAX_SOURCE_BYTES` is not read, and only a regular file is ever read (opened
    without blocking and checked again once open, so a FIFO put in its place in between
    cannot hang the read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        special = _not_regular(info.st_mode)
        if special is not None:
            return FileOutcome(path.name, "skipped", f"{special}: not opened, not copied")
        if info.st_size > MAX_SOURCE_BYTES:
            return _too_large(path.name, info.st_size)
        os.set_blocking(fd, True)
        data = handle.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:  # it grew while being read
        return _too_large(path.name, len(data))
    return data


def _too_large(rel: str, size: int) -> FileOutcome:
    reason = f"{size:,} bytes, over the limit of {MAX_SOURCE_BYTES:,} (left unpatched)"
    return FileOutcome(rel, "skipped", reason, failed=True)


def _is_within(child: Path, parent: Path) -> bool:
    child, parent = child.resolve(), parent.resolve()
    return child == parent or parent in child.parents


def mirror_tree(
    src: Path, out: Path, excludes: Sequence[str], on_file: Sink | None = None
) -> Report:
    """Write a patched copy of the tree ``src`` to ``out``, all or nothing.

    ``out`` may lie inside ``src`` (it is not scanned); ``src`` may not lie inside ``out``.
    """
    if _is_within(src, out):
        raise TreeError(f"output directory {out} contains the source {src}; choose another -o")
    if out.exists() and not out.is_dir():
        raise TreeError(f"output {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise TreeError(
            f"output directory {out} is not empty and was not written by timewarp patch;"
            " choose a new or empty directory"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_work_dirs(out)
    staging = None
    try:
        with critical:  # made and recorded together: the except removes it
            staging = Path(tempfile.mkdtemp(prefix=_work_prefix(out, "staging"), dir=out.parent))
        shutil.copymode(src, staging)  # mkdtemp makes it private (0700)

        def write(outcome: FileOutcome, original: bytes, output: bytes) -> None:
            target = staging / outcome.rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(output)
            shutil.copymode(src / outcome.rel, target)
            if on_file is not None:
                on_file(outcome, original, output)

        def copy(rel: Path) -> None:
            source, target = src / rel, staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_symlink():
                os.symlink(os.readlink(source), target)
            else:
                shutil.copy2(source, target)

        report = process_tree(src, excludes, write, copy, avoid=[out, staging])
        (staging / MARKER).write_text(f"patched copy of {src.resolve()}\n", encoding="utf-8")
        _swap_in(staging, out)
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    return report


def _work_prefix(out: Path, kind: str) -> str:
    """``.OUT.staging-PID-``: the pid says whether its writer still runs."""
    return f".{out.name}.{kind}-{os.getpid()}-"


_WORK_DIR = re.compile(r"^\.(?P<out>.+)\.(?:staging|old)-(?P<pid>\d+)-[^/]+$")


def remove_stale_work_dirs(out: Path) -> list[Path]:
    """Staging and retired folders beside ``out`` whose writer is gone (a ``timewarp
    patch`` killed by SIGKILL or a power cut leaves them): removed. A folder whose writer
    still runs (a concurrent ``timewarp patch -o`` to the same place) is left alone."""
    removed = []
    try:
        siblings = list(out.parent.iterdir())
    except OSError:
        return removed
    for path in siblings:
        m = _WORK_DIR.match(path.name)
        if m is None or m["out"] != out.name or not path.is_dir() or path.is_symlink():
            continue
        if _pid_alive(int(m["pid"])):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's: alive
    return True


def _swap_in(staging: Path, out: Path) -> None:
    # one critical block (timewarp.wire.stophold): a stop signal between the two renames
    # left no ``out`` at all — the earlier copy renamed away (then removed as stale by
    # the next run), the new one removed as unfinished
    with critical:
        _swap_in_now(staging, out)


def _swap_in_now(staging: Path, out: Path) -> None:
    if not out.exists():
        os.rename(staging, out)
        return
    retired = Path(tempfile.mkdtemp(prefix=_work_prefix(out, "old"), dir=out.parent))
    retired.rmdir()
    os.rename(out, retired)
    os.rename(staging, out)
    shutil.rmtree(retired, ignore_errors=True)


def patch_in_place(src: Path, excludes: Sequence[str], on_file: Sink | None = None) -> Report:
    """Rewrite changed Python files under ``src`` (a file or a tree), each atomically.
    A ``src`` that is a symbolic link to a file: the file it points to is rewritten and
    the link kept (a rename over the link would replace it with a copy)."""

    def write(outcome: FileOutcome, original: bytes, output: bytes) -> None:
        if outcome.status == "changed":
            target = src / outcome.rel if src.is_dir() else src.resolve()
            atomic_write(target, output, mode_from=target)
        if on_file is not None:
            on_file(outcome, original, output)

    if src.is_dir():
        return process_tree(src, excludes, write)
    return process_single(src, write)


def process_single(src: Path, sink: Sink | None = None) -> Report:
    """Patch one file (whatever its suffix: the user named it)."""
    data = read_source(src)
    if isinstance(data, FileOutcome):
        return Report(files=[data])
    outcome = patch_file_bytes(data, src.name)
    output = outcome.result.output if outcome.result is not None else data
    assert isinstance(output, bytes)
    if sink is not None:
        sink(outcome, data, output)
    return Report(files=[outcome])
