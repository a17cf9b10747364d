"""The import hook: rewrite modules as they are imported, with an on-disk cache.

``install()`` puts a :class:`Finder` first on ``sys.meta_path``. For every import it asks
the other finders where the module is; if the module is plain Python source and is one of

- the program's own modules: source outside the standard library and outside every
  ``site-packages``/``dist-packages`` directory (and, if ``program_roots`` is given, under
  one of those directories), never timewarp's own packages (``timewarp``, ``patcher``,
  ``broker``, ``simulator``, ``commands``: by their files, so a program's own module of
  one of those names is still patched); or
- a package named in ``patch_modules``: ``"apscheduler"`` means the package and all its
  submodules, a pattern with glob characters (``"mylib.*"``) is matched with ``fnmatch``
  against the full dotted name,

then the module is loaded from the rewritten source instead. Everything else is left to
the normal machinery, untouched.

The cache maps ``sha256(patcher version, interpreter magic, file path, source bytes)`` to
the marshalled code object of the rewritten source, so a cached import costs one read
and one ``marshal.loads`` and does not even import libcst. Entries are written to a
temporary file and renamed into place, so concurrent processes never read half an entry.
The default location is ``$XDG_CACHE_HOME/timewarp/patched`` (``~/.cache/...``).

Limits: only modules imported *after* ``install()`` are rewritten (an already imported
module stays as it was); the ``__main__`` script run as ``python prog.py`` is compiled by
the interpreter, not imported, so it needs :func:`run_main` (or
``python -m patcher.run_script prog.py``); extension modules and
sourceless ``.pyc`` files cannot be rewritten. A module that does not parse is loaded
unpatched, with a warning on stderr and an entry in ``stats.failures``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import marshal
import os
import site
import sys
import sysconfig
import threading
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

OWN_PACKAGES = frozenset({"timewarp", "patcher", "broker", "simulator", "commands"})
# Where they are: a module is timewarp's own by its file, not by its name (a program may
# well have a module called ``commands`` or ``broker`` of its own, which must be patched).
_OWN_DIRS = tuple(
    str(Path(__file__).resolve().parent.parent / package) for package in sorted(OWN_PACKAGES)
)
_GLOB_CHARS = frozenset("*?[")


def patcher_version() -> str:
    """A digest of the rewrite rules; any change to them invalidates the cache."""
    global _VERSION
    if _VERSION is None:
        digest = hashlib.sha256()
        here = Path(__file__).resolve().parent
        for name in ("targets.py", "transform.py"):
            digest.update((here / name).read_bytes())
        _VERSION = digest.hexdigest()[:16]
    return _VERSION


_VERSION: str | None = None


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "timewarp" / "patched"


@dataclass
class HookStats:
    """What the hook did, for tests, benchmarks and the end-of-run summary.

    ``modules_patched``: rewritten with libcst (cache misses); ``cache_hits``: loaded from
    the cache; ``modules_unchanged``: nothing to rewrite (loaded from the cache or freshly
    checked); ``failures``: ``"module: reason"`` for modules loaded unpatched.
    """

    modules_patched: int = 0
    cache_hits: int = 0
    modules_unchanged: int = 0
    patched_names: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


class Finder(importlib.abc.MetaPathFinder):
    """A ``sys.meta_path`` finder that hands rewritable modules to :class:`PatchingLoader`."""

    def __init__(
        self,
        patch_modules: Sequence[str] = (),
        *,
        cache_dir: Path | None = None,
        program_roots: Sequence[str] | None = None,
    ) -> None:
        self.patch_modules = tuple(patch_modules)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.program_roots = (
            tuple(_real(p) for p in program_roots) if program_roots is not None else None
        )
        self.library_dirs = _library_dirs()
        self.stats = HookStats()
        self._busy = threading.local()
        self._lock = threading.Lock()
        self._cache_warned = False

    # -- which modules ----------------------------------------------------------------

    def wants_name(self, fullname: str) -> bool:
        """Whether ``fullname`` is one of the named packages (``patch_modules``)."""
        for pattern in self.patch_modules:
            if _GLOB_CHARS & set(pattern):
                if fnmatch.fnmatchcase(fullname, pattern):
                    return True
            elif fullname == pattern or fullname.startswith(pattern + "."):
                return True
        return False

    def is_program_source(self, path: str) -> bool:
        """Whether ``path`` is program code: outside the stdlib and site-packages."""
        real = _real(path)
        if self.program_roots is not None and not any(
            _within(real, root) for root in self.program_roots
        ):
            return False
        parts = Path(real).parts
        if "site-packages" in parts or "dist-packages" in parts:
            return False
        return not any(_within(real, lib) for lib in self.library_dirs)

    def should_patch(self, fullname: str, path: str) -> bool:
        if fullname.partition(".")[0] in OWN_PACKAGES:
            # timewarp itself never, even when named; a program's namesake by its source
            real = _real(path)
            return not any(_within(real, own) for own in _OWN_DIRS) and self.is_program_source(path)
        return self.wants_name(fullname) or self.is_program_source(path)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if getattr(self._busy, "active", False):
            return None
        self._busy.active = True
        try:
            spec = self._find_elsewhere(fullname, path, target)
        finally:
            self._busy.active = False
        if (
            spec is None
            or not isinstance(spec.loader, importlib.machinery.SourceFileLoader)
            or not spec.origin
            or not self.should_patch(fullname, spec.origin)
        ):
            return None
        spec.loader = PatchingLoader(fullname, spec.origin, self)
        return spec

    def _find_elsewhere(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None
    ) -> importlib.machinery.ModuleSpec | None:
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    # -- rewriting, with the cache ----------------------------------------------------

    def code_for(self, fullname: str, path: str, source: bytes) -> types.CodeType:
        """The code object for the rewritten ``source`` of ``path`` (cached on disk)."""
        key = hashlib.sha256()
        for part in (patcher_version().encode(), importlib.util.MAGIC_NUMBER, path.encode()):
            key.update(part)
            key.update(b"\0")
        key.update(source)
        digest = key.hexdigest()
        entry = self.cache_dir / digest[:2] / f"{digest}.bin"
        try:
            blob = entry.read_bytes()
        except OSError:
            blob = None
        if blob is not None and len(blob) > 1:
            try:
                code = marshal.loads(blob[1:])
            except (ValueError, EOFError, TypeError):
                code = None
            if isinstance(code, types.CodeType):
                with self._lock:
                    self.stats.cache_hits += 1
                    if blob[:1] == b"=":
                        self.stats.modules_unchanged += 1
                return code
        rewritten, changed = self._rewrite(fullname, path, source)
        code = compile(rewritten, path, "exec", dont_inherit=True)
        with self._lock:
            if changed:
                self.stats.modules_patched += 1
                self.stats.patched_names.append(fullname)
            else:
                self.stats.modules_unchanged += 1
        if not _atomic_write(entry, (b"+" if changed else b"=") + marshal.dumps(code)):
            if not self._cache_warned:
                self._cache_warned = True
                sys.stderr.write(
                    f"timewarp: cannot write the patch cache under {self.cache_dir}; "
                    "modules are rewritten on every run\n"
                )
        return code

    def _rewrite(self, fullname: str, path: str, source: bytes) -> tuple[bytes, bool]:
        from patcher.transform import PatchError, patch_source

        try:
            result = patch_source(source, filename=path, verify_syntax=False)
        except PatchError as exc:
            with self._lock:
                self.stats.failures.append(f"{fullname}: {exc}")
            sys.stderr.write(f"timewarp: {fullname} loaded unpatched: {exc}\n")
            return source, False
        assert isinstance(result.output, bytes)
        return result.output, result.changed


class PatchingLoader(importlib.machinery.SourceFileLoader):
    """Loads a module from its rewritten source; never reads or writes ``__pycache__``.

    (A bytecode cache next to the source would either hand back unpatched code or leave
    patched code behind for later runs without timewarp.)
    """

    def __init__(self, fullname: str, path: str, finder: Finder) -> None:
        super().__init__(fullname, path)
        self._finder = finder

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        return self._finder.code_for(fullname, path, self.get_data(path))


def install(
    patch_modules: Sequence[str] = (),
    *,
    cache_dir: Path | None = None,
    program_roots: Sequence[str] | None = None,
) -> Finder:
    """Put a rewriting finder first on ``sys.meta_path`` and return it."""
    finder = Finder(patch_modules, cache_dir=cache_dir, program_roots=program_roots)
    sys.meta_path.insert(0, finder)
    importlib.invalidate_caches()
    return finder


def uninstall(finder: Finder) -> None:
    """Remove ``finder`` from ``sys.meta_path`` (modules already loaded stay as loaded)."""
    try:
        sys.meta_path.remove(finder)
    except ValueError:
        pass


def run_main(
    finder: Finder, path: str, argv: Sequence[str] | None = None, *, set_path0: bool = True
) -> None:
    """Run the script ``path`` as ``__main__`` from its rewritten source.

    ``python prog.py`` compiles ``prog.py`` itself, past every import hook; a launcher
    that wants the script rewritten calls this (or runs ``python -m patcher.run_script
    prog.py ...``). Sets ``sys.argv`` (default ``[path]``) and, unless ``set_path0`` is
    false, puts the script's directory first on ``sys.path`` as the interpreter does.
    Exceptions, including ``SystemExit``, propagate to the caller.
    """
    real_path = os.path.abspath(path)
    source = Path(real_path).read_bytes()
    code = finder.code_for("__main__", real_path, source)
    module = types.ModuleType("__main__")
    module.__file__ = real_path
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    module.__spec__ = None
    sys.modules["__main__"] = module
    sys.argv = list(argv) if argv is not None else [path]
    if set_path0:
        sys.path.insert(0, os.path.dirname(real_path))
    exec(code, module.__dict__)


def _atomic_write(path: Path, data: bytes) -> bool:
    """Write via a temporary file and a rename; False if the cache is not writable.
    The temporary name is the writer's (process and thread), not a random one: the
    program's random numbers are seeded (``TIMEWARP_SEED``) and a write of the cache
    must not draw from them, or a warm cache would change the program's draws."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = str(path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp"))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:  # a read-only cache must not break the program
        return False
    return True


def _real(path: str) -> str:
    return os.path.realpath(path)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _library_dirs() -> tuple[str, ...]:
    """The standard library and every site-packages directory this interpreter knows."""
    dirs: set[str] = set()
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            dirs.add(_real(paths[key]))
    for getter in (site.getsitepackages, site.getusersitepackages):
        try:
            found = getter()
        except AttributeError:  # virtualenvs with an old site.py
            continue
        for entry in [found] if isinstance(found, str) else found:
            dirs.add(_real(entry))
    # Installed packages put on sys.path another way (`pip install --target DIR` +
    # PYTHONPATH) are libraries too: a directory holding *.dist-info is an install target.
    for entry in sys.path:
        try:
            if entry and any(name.endswith(".dist-info") for name in os.listdir(entry)):
                dirs.add(_real(entry))
        except OSError:
            continue
    return tuple(sorted(dirs))
