"""The layout is the architecture: each layer imports only from the layers below it, and
no two files import each other, directly or round a longer loop (docs/design.md, "Layers").

Bottom to top:

0. ``timewarp.wire`` — what the runtime and the broker share (clock wire format and
   sockets, the in-cluster redirect);
1. ``timewarp`` — the runtime a scheduler process imports (drop-ins, ``_core``);
2. ``simulator`` and ``patcher`` — side by side, neither imports the other;
3. ``broker`` — may use the simulator's protocol, the patcher's launch environment and the
   wire format, never the runtime's internals. Inside it, by concern, bottom to top:
   ``broker.k8s`` and ``broker.clock``; ``broker.facade``; ``broker.controllers`` and
   ``broker.processes``; ``broker.cluster``; ``broker.drivers`` (``BROKER_RULES``);
4. ``commands`` — the ``timewarp`` command and its sub-commands.

``sample_schedulers`` stand outside, as users' programs do: they import none of these.

Every import counts, at module level or inside a function, under ``TYPE_CHECKING`` or
not: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("timewarp", "simulator", "patcher", "broker", "commands", "sample_schedulers")

# unit -> (rank, units it may import besides itself)
RULES: dict[str, tuple[int, frozenset[str]]] = {
    "timewarp.wire": (0, frozenset()),
    "timewarp": (1, frozenset({"timewarp.wire"})),
    "simulator": (2, frozenset({"timewarp.wire", "timewarp"})),
    "patcher": (2, frozenset({"timewarp.wire", "timewarp"})),
    "broker": (3, frozenset({"timewarp.wire", "simulator", "patcher"})),
    "commands": (4, frozenset({"timewarp.wire", "timewarp", "simulator", "patcher", "broker"})),
    "sample_schedulers": (9, frozenset()),
}
# Inside the broker, one folder per concern: folder -> the folders it may import besides
# itself (docs/design.md, "Layers").
BROKER_RULES: dict[str, frozenset[str]] = {
    "k8s": frozenset(),
    "clock": frozenset(),
    "facade": frozenset({"k8s"}),
    "controllers": frozenset({"k8s", "clock", "facade"}),
    "processes": frozenset({"k8s", "clock", "facade"}),
    "cluster": frozenset({"k8s", "clock", "facade", "controllers"}),
    "drivers": frozenset({"k8s", "clock", "facade", "controllers", "processes", "cluster"}),
}
# The entry point users know (`python -m timewarp`) is the one file of the runtime
# package that runs a command; no scheduler process imports it.
ENTRY_POINT_SHIMS = {"timewarp/__main__.py": frozenset({"commands"})}


def unit_of(module: str) -> str | None:
    if module == "timewarp.wire" or module.startswith("timewarp.wire."):
        return "timewarp.wire"
    top = module.partition(".")[0]
    return top if top in RULES else None


def source_files() -> dict[str, Path]:
    """module name -> file, for every module of the project's packages."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported_modules(path: Path, module: str, known: dict[str, Path]) -> set[str]:
    """The project modules ``path`` imports, resolved to module names that exist."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                candidate = f"{prefix}.{alias.name}"
                names.add(candidate if candidate in known else prefix)
    resolved = set()
    for name in names:
        # `import a.b.c` depends on a.b.c (the closest existing module)
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            resolved.add(name)
    return resolved


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    known = source_files()
    return {module: imported_modules(path, module, known) for module, path in known.items()}


def test_every_import_points_down(graph: dict[str, set[str]]) -> None:
    known = source_files()
    upward = []
    for module, targets in graph.items():
        unit = unit_of(module)
        assert unit is not None, module
        _rank, allowed = RULES[unit]
        rel = str(known[module].relative_to(ROOT))
        allowed = allowed | ENTRY_POINT_SHIMS.get(rel, frozenset())
        for target in sorted(targets):
            target_unit = unit_of(target)
            if target_unit is None or target_unit == unit:
                continue
            if target_unit not in allowed:
                upward.append(f"{rel} imports {target} ({unit} -> {target_unit})")
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def broker_folder_of(module: str) -> str | None:
    """``broker.cluster.cluster`` and the package ``broker.cluster`` -> ``cluster``."""
    parts = module.split(".")
    if parts[0] != "broker" or len(parts) < 2:
        return None
    if len(parts) == 2 and not (ROOT / "broker" / parts[1]).is_dir():
        return None  # a file directly in broker/
    return parts[1]


def test_the_brokers_folders_import_downward_only(graph: dict[str, set[str]]) -> None:
    """Every file of ``broker/`` sits in a folder of ``BROKER_RULES``, and imports only
    from the folders below its own."""
    known = source_files()
    problems = []
    for module, targets in graph.items():
        if not module.startswith("broker."):
            continue
        folder = broker_folder_of(module)
        rel = str(known[module].relative_to(ROOT))
        if folder is None:
            if module != "broker":
                problems.append(f"{rel} is not in one of the folders {sorted(BROKER_RULES)}")
            continue
        if folder not in BROKER_RULES:
            problems.append(f"{rel}: folder broker/{folder}/ has no rank in BROKER_RULES")
            continue
        for target in sorted(targets):
            other = broker_folder_of(target)
            if other and other != folder and other not in BROKER_RULES[folder]:
                problems.append(f"{rel} imports {target} (broker/{folder} -> broker/{other})")
    assert not problems, "imports against the broker's folders:\n" + "\n".join(problems)


def test_the_runtime_loads_nothing_above_it(graph: dict[str, set[str]]) -> None:
    """What a scheduler process imports for the drop-ins stays inside timewarp."""
    reached: set[str] = set()
    todo = [m for m in graph if m.startswith("timewarp.v")]
    while todo:
        module = todo.pop()
        if module in reached:
            continue
        reached.add(module)
        todo.extend(graph[module])
    outside = sorted(m for m in reached if not m.startswith("timewarp"))
    assert not outside, f"the drop-ins pull in {outside}"


def test_no_import_cycle_between_files(graph: dict[str, set[str]]) -> None:
    # Tarjan's strongly connected components; a package importing its own submodules
    # (its __init__ re-exporting) is an edge like any other.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The scan itself: a lazy, function-level import of the broker from the runtime is
    found (so the tests above cannot pass by seeing nothing)."""
    fake = tmp_path / "timewarp" / "vfake.py"
    fake.parent.mkdir()
    fake.write_text("def f():\n    from broker.facade import store\n    return store\n")
    known = source_files()
    assert imported_modules(fake, "timewarp.vfake", known) == {"broker.facade.store"}
    rel_imports = tmp_path / "broker" / "facade" / "x.py"
    rel_imports.parent.mkdir(parents=True)
    rel_imports.write_text("from . import store\nfrom .watch import Watcher\n")
    assert imported_modules(rel_imports, "broker.facade.x", known) == {
        "broker.facade.store",
        "broker.facade.watch",
    }
