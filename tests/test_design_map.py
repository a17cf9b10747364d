"""docs/design.md stays true to the code.

What the map names in backticks is checked against the tree, by reading the sources
with ``ast`` (nothing is imported):

- a repository path (its first part a top-level folder of the checkout, or a name ending
  in ``.py``/``.md``) exists;
- a path followed by names (```broker/engine.py` `Broker.step```, also in parentheses and
  as a comma-separated list) names a top-level function, class or constant of that file,
  or ``Class.member`` a member of one of its classes;
- a bare ``Class.member`` names a member of some class of that name in the packages.

Placeholders (``timewarp/v<name>.py``, ``v*.py``) and paths outside the checkout
(``../shared``) are not paths of the tree and are left alone.
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "design.md"
PACKAGES = ("timewarp", "simulator", "patcher", "broker", "commands", "sample_schedulers")

_TICK = r"`([^`\n]+)`"
_NAME = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?"
# a path, then (optionally in parentheses) one name or a list of them
_PAIR = re.compile(
    r"`(?P<path>[^`\s]+\.py)`\s*\(?\s*(?P<names>`" + _NAME + r"`(?:,\s*`" + _NAME + r"`)*)"
)
_MEMBER = re.compile(r"^[A-Z]\w*\.[A-Za-z_]\w*$")


@dataclass(frozen=True)
class Problem:
    line: int
    text: str

    def __str__(self) -> str:
        return f"docs/design.md:{self.line}: {self.text}"


def _top_dirs(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")}


def _looks_like_path(token: str, top_dirs: set[str]) -> bool:
    if any(c in token for c in "<>*{} ") or token.startswith(("/", "../", "-")):
        return False
    if token.endswith((".py", ".md")):
        return True
    first = token.split("/", 1)[0]
    return "/" in token and first in top_dirs


@dataclass
class _Module:
    names: set[str]  # top-level functions, classes, assigned names
    members: dict[str, set[str]]  # class -> its functions, nested classes, assigned names


@cache
def _module(path: Path) -> _Module:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    members: dict[str, set[str]] = {}

    def assigned(node: ast.stmt) -> list[str]:
        if isinstance(node, ast.Assign):
            return [t.id for t in node.targets if isinstance(t, ast.Name)]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            return [node.target.id]
        return []

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        names.update(assigned(node))
        if isinstance(node, ast.ClassDef):
            inside = members.setdefault(node.name, set())
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inside.add(item.name)
                inside.update(assigned(item))
    return _Module(names, members)


def _defines(path: Path, name: str) -> bool:
    module = _module(path)
    if "." not in name:
        return name in module.names
    cls, member = name.split(".", 1)
    return member in module.members.get(cls, set())


@cache
def _classes(root: Path) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for cls in _module(path).members:
                found.setdefault(cls, []).append(path)
    return found


def check_map(text: str, root: Path = ROOT) -> list[Problem]:
    """Everything wrong in ``text`` (a design map) against the tree at ``root``."""
    problems: list[Problem] = []
    top_dirs = _top_dirs(root)
    # pairs and lists can wrap onto the next line: look at the text as a whole
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(offset: int) -> int:
        return bisect.bisect_right(starts, offset)

    for match in re.finditer(_TICK, text):
        token = match.group(1)
        if _looks_like_path(token, top_dirs) and not (root / token).exists():
            problems.append(Problem(line(match.start()), f"no such path: {token}"))
    for match in _PAIR.finditer(text):
        path = root / match.group("path")
        if not path.is_file():
            continue  # reported above
        for name in re.findall(_TICK, match.group("names")):
            if not _defines(path, name):
                problems.append(
                    Problem(line(match.start()), f"{match.group('path')} defines no {name}")
                )
    for match in re.finditer(_TICK, text):
        token = match.group(1)
        if _MEMBER.match(token):
            cls, member = token.split(".")
            homes = _classes(root).get(cls, [])
            if not any(member in _module(p).members[cls] for p in homes):
                where = ", ".join(str(p.relative_to(root)) for p in homes) or "no module"
                problems.append(
                    Problem(line(match.start()), f"no {token} (class {cls} in {where})")
                )
    return problems


def test_the_design_map_names_only_what_exists() -> None:
    problems = check_map(MAP.read_text())
    assert not problems, "docs/design.md is out of date:\n" + "\n".join(map(str, problems))


def test_the_map_names_the_code_it_describes() -> None:
    """The checks above must have something to check: the journeys name functions."""
    text = MAP.read_text()
    pairs = list(_PAIR.finditer(text))
    assert len(pairs) >= 30
    for journey in ("JOB_SUBMITTED", "time.sleep", "watch event"):
        assert journey in text


def test_a_wrong_name_a_wrong_member_and_a_missing_path_are_each_reported(
    tmp_path: Path,
) -> None:
    pkg = tmp_path / "broker"
    pkg.mkdir()
    (pkg / "engine.py").write_text(
        "LIMIT = 3\n\nclass Broker:\n    def step(self):\n        pass\n\ndef helper():\n    pass\n"
    )
    good = (
        "The driver: `broker/engine.py` `Broker.step`, then (`helper`, `LIMIT`);\n"
        "see `Broker.step`, a placeholder `broker/v<name>.py`, and `../shared/x.md`.\n"
    )
    assert check_map(good, tmp_path) == []
    bad = (
        "Line one.\n"
        "`broker/engine.py` `Broker.stepp` and\n"
        "`broker/engine.py` (`helper`, `helpr`)\n"
        "then `Broker.run`, and `broker/gone.py`, `broker/missing/`.\n"
    )
    found = [str(p) for p in check_map(bad, tmp_path)]
    assert found == [
        "docs/design.md:4: no such path: broker/gone.py",
        "docs/design.md:4: no such path: broker/missing/",
        "docs/design.md:2: broker/engine.py defines no Broker.stepp",
        "docs/design.md:3: broker/engine.py defines no helpr",
        "docs/design.md:2: no Broker.stepp (class Broker in broker/engine.py)",
        "docs/design.md:4: no Broker.run (class Broker in broker/engine.py)",
    ]
