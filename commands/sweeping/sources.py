"""Which source files a scheduler command runs, and their hashes (part of a run's identity).

A sweep must not reuse a run whose scheduler code changed since, so a run's identity holds
the SHA-256 of every source file its scheduler commands run:

- ``python -m pkg.mod``: the directory of the module's package (``pkg/`` for a module
  ``pkg/mod.py``, ``pkg/mod/`` for a package run through its ``__main__``), every ``.py``
  file under it;
- ``python path/x.py``: every ``.py`` file in the script's folder (not below it);
- plus, transitively, every module those files import (``import a.b``, ``from a import b``,
  relative imports) that resolves to a file under the sweep's root, the script's folder or
  the scheduler's own package: shared helpers such as ``sample_schedulers/common`` count;
- ``--patch-module PKG`` packages (they are rewritten at import): their ``.py`` files.

Modules are located the way the run will find them (the root first: ``timewarp simulate``
runs schedulers there with the root on ``PYTHONPATH``; then this interpreter's path), with
``importlib.machinery.PathFinder``, which reads directories and imports nothing.

Honest limits: installed third-party libraries (the kubernetes client, …) and timewarp
itself are not hashed (a different environment is the user's to track: ``manifest.json``
records versions); imports computed at run time (``importlib.import_module(name)``) are not
seen; a command that is not ``python …`` hashes only an executable file it names under the
root; timewarp's own package is never followed (it is the tool). Keys are paths relative to the root (or ``<module name>`` for files outside it), so
moving the whole root keeps the identity.
"""

from __future__ import annotations

import ast
import hashlib
import shlex
import sys
from collections.abc import Iterable
from importlib.machinery import PathFinder
from pathlib import Path

_TIMEWARP_DIR = Path(__file__).resolve().parents[1]
# interpreter options that take a separate argument (``-W ignore``, ``-X dev``)
_OPTIONS_WITH_ARGUMENT = {"-W", "-X", "--check-hash-based-pycs"}


def _is_python(token: str) -> bool:
    name = Path(token).name
    return name.startswith("python") or Path(token) == Path(sys.executable)


def _find(module: str, search: list[str]) -> tuple[Path, bool] | None:
    """(file, is_package) of a dotted module name, importing nothing; None if not found."""
    parts = module.split(".")
    locations: list[str] | None = search
    origin: Path | None = None
    is_package = False
    for i in range(len(parts)):
        spec = PathFinder.find_spec(".".join(parts[: i + 1]), locations)
        if spec is None:
            return None
        is_package = spec.submodule_search_locations is not None
        if spec.origin is None or spec.origin in ("built-in", "frozen", "namespace"):
            if not is_package:
                return None
            locations = list(spec.submodule_search_locations)
            origin = Path(locations[0]) / "__init__.py" if locations else None
            continue
        origin = Path(spec.origin)
        locations = list(spec.submodule_search_locations) if is_package else None
        if i < len(parts) - 1 and locations is None:
            return None  # ``a.b`` where ``a`` is a plain module
    if origin is None or origin.suffix != ".py":
        return None  # extension modules, namespace packages without files
    return origin, is_package


def _py_files(directory: Path, recursive: bool) -> list[Path]:
    pattern = "**/*.py" if recursive else "*.py"
    return sorted(p for p in directory.glob(pattern) if p.is_file())


def _module_name(path: Path, search: list[str]) -> str | None:
    """The dotted name ``path`` has when found through ``search`` (None if outside)."""
    for entry in search:
        try:
            rel = path.resolve().relative_to(Path(entry).resolve())
        except ValueError:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts and parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)
    return None


def _imports(path: Path, own_name: str | None) -> set[str]:
    """Module names ``path`` imports (for ``from a import b`` both ``a`` and ``a.b``)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return set()  # it will fail at run time; its bytes are hashed all the same
    package = ""
    if own_name is not None:
        package = own_name if path.name == "__init__.py" else own_name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".") if package else []
                if node.level - 1 > len(anchor):
                    continue
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            if base:
                names.add(base)
            names.update(f"{base}.{a.name}" if base else a.name for a in node.names)
    return names


class SourceHasher:
    """Hashes the sources of scheduler commands run from ``root``; memoised per command.

    ``hashes(commands, patch_modules)`` maps a key per file (a path relative to the root, or
    ``<module.name>`` outside it) to its SHA-256. Invariant: two calls on unchanged files
    return equal mappings; changing, adding or removing a hashed file changes the mapping.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._memo: dict[tuple[str, ...], dict[str, str]] = {}

    def hashes(self, commands: Iterable[str], patch_modules: Iterable[str] = ()) -> dict[str, str]:
        key = (*commands, "\0", *patch_modules)
        if key not in self._memo:
            files: set[Path] = set()
            for command in commands:
                files |= self.command_files(command)
            for package in patch_modules:
                found = _find(package, sys.path)
                if found is not None:
                    path, is_package = found
                    files.update(_py_files(path.parent, True) if is_package else [path])
            self._memo[key] = {self._key(p): _sha256(p) for p in sorted(files)}
        return dict(self._memo[key])

    def command_files(self, command: str) -> set[Path]:
        """The source files one command line runs (see the module docstring)."""
        try:
            tokens = shlex.split(command)
        except ValueError:
            return set()
        if not tokens:
            return set()
        if not _is_python(tokens[0]):
            exe = (self.root / tokens[0]).resolve()
            return {exe} if exe.is_file() and self._under_root(exe) else set()
        i = 1
        while i < len(tokens) and tokens[i].startswith("-") and tokens[i] not in ("-m", "-c"):
            i += 2 if tokens[i] in _OPTIONS_WITH_ARGUMENT else 1
        if i >= len(tokens) or tokens[i] == "-c":
            return set()
        if tokens[i] == "-m":
            if i + 1 >= len(tokens):
                return set()
            search = [str(self.root), *sys.path]
            found = _find(tokens[i + 1], search)
            if found is None:
                return set()
            path, is_package = found
            if is_package or "." in tokens[i + 1]:  # the package directory: pkg/ or pkg/mod/
                own_dir = path.parent
                seeds = _py_files(own_dir, recursive=True)
            else:  # a top-level module: its folder is the root or site-packages, not a package
                own_dir = None
                seeds = [path]
        else:
            script = (self.root / tokens[i]).resolve()
            if not script.is_file():
                return set()
            own_dir = script.parent
            search = [str(own_dir), str(self.root), *sys.path]
            seeds = sorted({script, *_py_files(own_dir, recursive=False)})
        return self._closure(seeds, search, own_dir)

    def _closure(self, seeds: list[Path], search: list[str], own_dir: Path | None) -> set[Path]:
        """``seeds`` and every file they import, transitively, that lies in ``own_dir`` or
        under the root (outside a virtual environment kept there), with the ``__init__.py``
        of every package on the way (importing ``a.b.c`` runs ``a`` and ``a.b`` too)."""

        def local(path: Path) -> bool:
            if _is_within(path, _TIMEWARP_DIR):
                return False  # the tool, not the scheduler
            if own_dir is not None and _is_within(path, own_dir):
                return True
            return _is_within(path, self.root) and not _in_environment(path)

        seen: set[Path] = set()
        todo = [p.resolve() for p in seeds]
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            for name in _imports(path, _module_name(path, search)):
                found = _find(name, search)
                if found is None or not local(found[0]):
                    continue
                todo.append(found[0].resolve())
                parent = found[0].resolve().parent
                while local(parent) and (parent / "__init__.py").is_file():
                    todo.append((parent / "__init__.py").resolve())
                    parent = parent.parent
        return seen

    def _under_root(self, path: Path) -> bool:
        return _is_within(path, self.root)

    def _key(self, path: Path) -> str:
        if self._under_root(path) and not _in_environment(path):
            return path.resolve().relative_to(self.root).as_posix()
        # the most specific entry: site-packages rather than a root that holds a venv
        entries = sorted((p for p in sys.path if p), key=lambda p: -len(str(Path(p).resolve())))
        name = _module_name(path, entries)
        return f"<{name}>" if name else f"<{path.name}>"


def _is_within(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True


def _in_environment(path: Path) -> bool:
    """Inside this interpreter's installation or a virtual environment's site-packages."""
    if any(part in ("site-packages", "dist-packages") for part in path.parts):
        return True
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return any(_is_within(path, prefix) for prefix in prefixes)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def patch_modules(argv: Iterable[str]) -> list[str]:
    """The ``--patch-module`` packages named in simulate arguments (both spellings)."""
    out: list[str] = []
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--patch-module" and i + 1 < len(args):
            out.append(args[i + 1])
        elif arg.startswith("--patch-module="):
            out.append(arg.split("=", 1)[1])
    return out
