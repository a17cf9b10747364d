"""Writing a command's output files: atomically, and saying clearly where it cannot.

An output is written to a hidden temporary file beside it and renamed over it, so a
reader (or a crash, a full disk, a signal) never sees half a file; the temporary file is
removed whatever happens. Files get the mode an ordinary ``open(path, "w")`` gives
(0666 less the umask).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


class OutputDirError(Exception):
    """The output directory cannot be made or written (a usage error: exit 2)."""


def check_output_dir(path: Path, option: str = "-o") -> None:
    """Make ``path`` (with parents) and prove it writable by creating a file there;
    raise :class:`OutputDirError` naming the option and the reason otherwise."""
    if path.exists() and not path.is_dir():
        raise OutputDirError(f"{option} {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise OutputDirError(f"{option} {path}: cannot write there ({reason})") from None


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` fills a temporary file beside ``path``, which then replaces
    ``path`` in one rename; on any error (or signal) the temporary file is removed and
    the error raised, ``path`` untouched."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomically(path: Path, text: str, *, private: bool = False) -> None:
    """``private``: readable by the owner only (0600), for a file holding credentials."""

    def write(tmp: Path) -> None:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)

    write_atomically(path, write)
