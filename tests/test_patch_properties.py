"""Properties of the rewrite over generated programs (hypothesis).

Programs combine every import form with references in many positions. Each reference to
a standard-library time name is wrapped as ``probe(i, <reference>)``; an independent
resolver over Python's own ``ast`` (module-level bindings, applied in order) then checks
that every probe names the runtime's replacement after patching. Trap functions whose
parameters shadow the module names must come out byte-for-byte unchanged.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from patcher.targets import TARGETS, Target
from patcher.transform import patch_source

TARGET_LIST = sorted(TARGETS.values(), key=lambda t: t.stdlib)

CONTEXTS = [
    "x_{i} = probe({i}, {ref})\n",
    "def f_{i}(a=probe({i}, {ref})):\n    return a\n",
    "def g_{i}():\n    def inner():\n        return probe({i}, {ref})\n    return inner\n",
    "h_{i} = lambda: probe({i}, {ref})\n",
    "class C_{i}:\n    attr = probe({i}, {ref})\n",
    "class D_{i}(probe({i}, {ref})):\n    pass\n",
    "r_{i} = [probe({i}, {ref}) for _ in range(1)]\n",
    "if True:\n    y_{i} = functools.partial(probe({i}, {ref}), 1)\n",
]

PREFIXES = [
    "",
    '"""Docstring."""\n',
    '"""Docstring."""\n\n',
    "#!/usr/bin/env python\n# licence header\n\n",
    "from __future__ import annotations\n",
    '"""Doc\n\nstring."""\nfrom __future__ import annotations\n\n# imports\n',
]

TRAPS = [
    "def trap_{i}(time, threading, datetime, queue):\n"
    "    time.sleep(1); threading.Event(); datetime.datetime.now(); queue.Queue()\n",
    "def trap_{i}(obj):\n    obj.sleep(1); obj.time.sleep(2); obj.datetime.now()\n",
    "trap_{i} = 'time.sleep(1) datetime.now()'  # time.time()\n",
]


@dataclass
class Program:
    source: str
    expected: dict[int, str]  # probe id -> runtime dotted name
    traps: list[str]


@st.composite
def programs(draw: st.DrawFn) -> Program:
    usages = draw(
        st.lists(st.tuples(st.sampled_from(TARGET_LIST), st.integers(0, 4)), min_size=1, max_size=8)
    )
    imports: list[str] = ["import functools\n"]
    body: list[str] = []
    expected: dict[int, str] = {}
    bind = _binder({"functools": "functools"})
    for i, (target, form) in enumerate(usages):
        ref = _import_and_reference(target, form, i, imports, bind)
        body.append(draw(st.sampled_from(CONTEXTS)).format(i=i, ref=ref))
        expected[i] = target.runtime
    traps = [
        t.format(i=i) for i, t in enumerate(draw(st.lists(st.sampled_from(TRAPS), max_size=3)))
    ]
    order = draw(st.permutations(imports))
    prefix = draw(st.sampled_from(PREFIXES))
    return Program(prefix + "".join(order) + "".join(body) + "".join(traps), expected, traps)


def _binder(bound: dict[str, str]):  # type: ignore[no-untyped-def]
    """``bind(name, denotes)``: record a binding unless ``name`` already means something else."""

    def bind(name: str, denotes: str) -> bool:
        if bound.get(name, denotes) != denotes:
            return False
        bound[name] = denotes
        return True

    return bind


def _import_and_reference(target: Target, form: int, i: int, imports: list[str], bind) -> str:  # type: ignore[no-untyped-def]
    module = target.stdlib_module
    rest = target.stdlib.split(".")[1:]  # ["sleep"] or ["datetime", "now"]
    head = rest[0]
    if form == 1 and bind(f"M_{i}", module):
        imports.append(f"import {module} as M_{i}\n")
        return ".".join([f"M_{i}", *rest])
    if form == 2 and bind(head, f"{module}.{head}"):
        imports.append(f"from {module} import {head}\n")
        return ".".join(rest)
    if form == 3 and bind(f"A_{i}", f"{module}.{head}"):
        imports.append(f"from {module} import {head} as A_{i}\n")
        return ".".join([f"A_{i}", *rest[1:]])
    other = {"time": "strptime", "datetime": "timedelta", "threading": "get_ident",
             "queue": "Empty", "sched": "Event", "asyncio": "gather"}[module]  # fmt: skip
    if form == 4 and bind(other, f"{module}.{other}") and bind(f"A_{i}", f"{module}.{head}"):
        # a mixed import: one name the patcher leaves alone, one it rewrites
        imports.append(f"from {module} import {other}, {head} as A_{i}\n")
        return ".".join([f"A_{i}", *rest[1:]])
    if bind(module, module):
        imports.append(f"import {module}\n")
        return ".".join([module, *rest])
    imports.append(f"import {module} as M_{i}\n")  # the plain name is taken
    bind(f"M_{i}", module)
    return ".".join([f"M_{i}", *rest])


def _module_bindings(tree: ast.Module) -> dict[str, str]:
    """Module-level import bindings in execution order (later ones win)."""
    table: dict[str, str] = {}

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        table[alias.asname] = alias.name
                    else:
                        head = alias.name.split(".")[0]
                        table[head] = head
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                for alias in node.names:
                    table[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    visit(tree.body)
    return table


def _dotted(expr: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    return [expr.id, *reversed(parts)]


def _probes(tree: ast.Module) -> dict[int, ast.expr]:
    found: dict[int, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "probe":
                found[node.args[0].value] = node.args[1]  # type: ignore[attr-defined]
    return found


@given(programs())
def test_every_reference_resolves_to_the_runtime_after_patching(program: Program) -> None:
    result = patch_source(program.source)
    output = result.output
    assert isinstance(output, str)
    tree = ast.parse(output)
    bindings = _module_bindings(tree)
    probes = _probes(tree)
    assert set(probes) == set(program.expected)
    for i, expr in probes.items():
        parts = _dotted(expr)
        assert parts is not None, ast.unparse(expr)
        resolved = ".".join([bindings.get(parts[0], parts[0]), *parts[1:]])
        assert resolved == program.expected[i], (ast.unparse(expr), output)


@given(programs())
def test_patching_is_idempotent_and_keeps_line_numbers(program: Program) -> None:
    once = patch_source(program.source).output
    again = patch_source(once)
    assert again.output == once and not again.changed
    assert once.count("\n") == program.source.count("\n")  # every program starts with an import
    compile(once, "<generated>", "exec")


@given(programs())
def test_traps_come_out_unchanged(program: Program) -> None:
    output = patch_source(program.source).output
    for trap in program.traps:
        assert trap in output


def test_every_target_in_every_import_form_resolves_to_the_runtime() -> None:
    """Exhaustive companion of the property test: no target or form left to chance."""
    for target in TARGET_LIST:
        for form in range(5):
            imports: list[str] = []
            ref = _import_and_reference(target, form, 0, imports, _binder({}))
            source = "".join(imports) + f"x = probe(0, {ref})\n"
            tree = ast.parse(patch_source(source).output)
            parts = _dotted(_probes(tree)[0])
            assert parts is not None
            resolved = ".".join([_module_bindings(tree).get(parts[0], parts[0]), *parts[1:]])
            assert resolved == target.runtime, source
