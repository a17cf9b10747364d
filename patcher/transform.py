"""The rewrite itself: a libcst transformer over one module's source text.

``patch_source(text)`` parses with libcst, resolves every candidate name through
libcst's scope analysis (``ScopeProvider``'s qualified names, as ``QualifiedNameProvider``
reports them) (so ``import time as t``, ``from datetime import datetime as dt``
and nested scopes all resolve, and a parameter called ``time`` does not), and rewrites the
names listed in :mod:`patcher.targets`:

- ``from time import sleep, strptime`` becomes ``from time import strptime`` plus
  ``from timewarp.vtime import sleep``: the local name keeps its binding, so calls,
  references, re-exports (``from .compat import monotonic``) and ``globals()`` all see the
  runtime's version;
- an attribute reference that resolves to a target (``time.sleep``, ``dt.datetime.now``,
  ``threading.Thread`` as a base class, ``time.monotonic`` as a default argument) becomes
  ``_timewarp_vtime.sleep``, with ``import timewarp.vtime as _timewarp_vtime`` added once
  near the top of the module (after the docstring and ``__future__`` imports);
- ``from time import *`` is followed by an explicit
  ``from timewarp.vtime import <every target of time>``; with
  ``from datetime import *``, ``datetime.now`` resolves through the star import.

Left alone, on purpose: names that resolve to anything else (a shadowing parameter, an
attribute of an unrelated object, ``asyncio.sleep``), strings and comments, type
annotations, the class argument of ``isinstance``/``issubclass`` (the runtime's classes are
subclasses of the standard ones, so checks against the standard class keep working),
assignment and ``del`` targets (``time.sleep = fake`` monkeypatches the standard module as
before), and references whose binding is ambiguous (``time`` bound to the module on one path
and to something else on another); those are reported as notes.

The output is the libcst round trip of the input with only those nodes changed, so
formatting and comments survive, and the rewrite is idempotent: no key of the target table
is a runtime name, and the runtime import is added only where missing. The code being
rewritten is never imported or executed.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import (
    MetadataWrapper,
    PositionProvider,
    QualifiedName,
    QualifiedNameSource,
    ScopeProvider,
)

from patcher.targets import (
    MODULE_LEVEL,
    RUNTIME_MODULE_FOR,
    STAR_HEADS,
    TARGET_MODULES,
    TARGETS,
    Target,
    runtime_alias,
)

_TARGET_ATTRS = frozenset(name.rsplit(".", 1)[1] for name in TARGETS)
_MODULE_WORD = re.compile(
    rb"\b(?:" + b"|".join(m.encode() for m in sorted(TARGET_MODULES)) + rb")\b"
)
_CLASS_CHECKS = frozenset({"builtins.isinstance", "builtins.issubclass"})
# The libcst pass costs ~15 s and ~450 MB per MB of source: a module larger than this
# that needs it is left unpatched with a reason (modules with nothing to rewrite, such as
# the 6 MB generated APIs of the kubernetes client, never reach it, whatever their size)
MAX_REWRITE_BYTES = 1 << 20
# CPython's parser refuses deeper nesting than its limits ("too many nested
# parentheses": 200 levels; ~3,000 for expressions); libcst's native parser has no limit
# of its own and overflows its stack (SIGSEGV) on 2,000 nested brackets, so what CPython
# refuses for depth never reaches it (CPython could not run that module anyway)
_TOO_DEEP = "too many nested parentheses"


class _TooDeep(Exception):
    """CPython's own parser refuses the source for its depth."""


class PatchError(Exception):
    """The source could not be rewritten (it does not parse, or cannot be decoded)."""

    def __init__(self, filename: str, message: str, line: int | None = None) -> None:
        self.filename = filename
        self.line = line
        self.message = message
        where = f"{filename}:{line}" if line is not None else filename
        super().__init__(f"{where}: {message}")


@dataclass
class PatchResult:
    """Outcome of patching one module.

    ``output`` has the input's type (``str`` in, ``str`` out; ``bytes`` in, ``bytes`` out in
    the file's own encoding). ``rewrites`` counts rewritten sites per standard-library name
    (``{"time.sleep": 3}``); ``notes`` lists references deliberately left alone, as
    ``"line N: ..."``.
    """

    output: str | bytes
    changed: bool
    rewrites: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)


def patch_source(
    source: str | bytes, filename: str = "<string>", *, verify_syntax: bool = True
) -> PatchResult:
    """Rewrite one module's source; raise :class:`PatchError` if it does not parse.

    With ``verify_syntax=False`` a module that never spells a target module's name is
    returned unchanged without being parsed at all, even if it has syntax errors (the
    import hook uses this: the interpreter compiles the module next and reports them).
    """
    try:
        if not _may_use_targets(source, verify_syntax):
            return PatchResult(output=source, changed=False)
    except _TooDeep as exc:
        raise PatchError(filename, f"nested too deeply for CPython's parser ({exc})") from None
    size = len(source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source)
    if size > MAX_REWRITE_BYTES:
        raise PatchError(
            filename, f"{size:,} bytes to rewrite, over the limit of {MAX_REWRITE_BYTES:,}"
        )
    try:
        module = cst.parse_module(source)
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        rewriter = _Rewriter(_star_imports(module))
        new_module = wrapper.visit(rewriter)
        notes = []
        if rewriter.notes:  # positions cost a full pass: only computed when needed
            positions = wrapper.resolve(PositionProvider)
            notes = [f"line {positions[n].start.line}: {text}" for n, text in rewriter.notes]
    except cst.ParserSyntaxError as exc:
        raise PatchError(filename, f"does not parse: {exc.message}", exc.raw_line) from None
    except (UnicodeDecodeError, LookupError, SyntaxError) as exc:
        raise PatchError(filename, f"cannot be decoded: {exc}") from None
    except RecursionError:  # a tree deeper than the visitors' Python recursion allows
        raise PatchError(filename, "nested too deeply to rewrite") from None
    if rewriter.needed_runtime_modules:
        new_module = _add_runtime_imports(new_module, rewriter.needed_runtime_modules)
    output: str | bytes = new_module.bytes if isinstance(source, bytes) else new_module.code
    return PatchResult(
        output=output,
        changed=output != source,
        rewrites=rewriter.rewrites,
        notes=notes,
    )


def _may_use_targets(source: str | bytes, verify_syntax: bool = True) -> bool:
    """False only if the module certainly has nothing to rewrite: a fast negative filter.

    Every target is reached in one of two ways: a ``from <module> import <name>`` (or
    ``*``) of its standard-library module, which the rewrite changes; or an attribute
    chain ending in the target's last name (``.sleep``, ``.now``, ``.Thread``) rooted in
    such an import. A byte search for the module names, then CPython's ``ast`` (C speed),
    tell whether either can occur; if not, the libcst passes are skipped. Anything ``ast``
    cannot parse goes the full way (libcst then reports it, or parses a grammar this
    interpreter's ``ast`` lacks). ``verify_syntax=False`` trusts the byte search alone.
    """
    text = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    mentions_a_module = _MODULE_WORD.search(text) is not None
    if not mentions_a_module and not verify_syntax:
        return False  # no import can name a target module without spelling it
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning: invalid escape sequence
            tree = ast.parse(source)
    except (RecursionError, MemoryError) as exc:  # "... during ast construction"
        raise _TooDeep(str(exc) or type(exc).__name__) from None
    except SyntaxError as exc:
        if exc.msg == _TOO_DEEP:
            raise _TooDeep(f"{exc.msg}, line {exc.lineno}") from None
        return True
    except (ValueError, UnicodeDecodeError):
        return True
    if not mentions_a_module:
        return False
    imports_target_module = False
    target_attribute = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            target_attribute = target_attribute or node.attr in _TARGET_ATTRS
        elif isinstance(node, ast.Import):
            if any(a.name.partition(".")[0] in TARGET_MODULES for a in node.names):
                imports_target_module = True
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            module = node.module or ""
            if module.partition(".")[0] not in TARGET_MODULES:
                continue
            imports_target_module = True
            if any(a.name == "*" or a.name in MODULE_LEVEL.get(module, ()) for a in node.names):
                return True
    return imports_target_module and target_attribute


def _star_imports(module: cst.Module) -> dict[str, str]:
    """Names that module-level ``from <target module> import *`` binds -> that module."""
    heads: dict[str, str] = {}

    class _Finder(cst.CSTVisitor):
        # Star imports are only legal at module level (possibly inside if/try/with), so
        # function and class bodies and expressions are not entered.
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
            for small in node.body:
                module = _absolute_module(small) if isinstance(small, cst.ImportFrom) else None
                if module and isinstance(small.names, cst.ImportStar):  # type: ignore[union-attr]
                    for head in STAR_HEADS.get(module, ()):
                        heads[head] = module
            return False

    module.visit(_Finder())
    return heads


class _Rewriter(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (ScopeProvider,)

    def __init__(self, star_heads: dict[str, str]) -> None:
        super().__init__()
        self.star_heads = star_heads
        self.rewrites: Counter[str] = Counter()
        self.notes: list[tuple[cst.CSTNode, str]] = []  # (node, message), lines added later
        self.needed_runtime_modules: set[str] = set()
        self._protected: set[cst.CSTNode] = set()
        self._protect_depth = 0
        self._rebinds: dict[int, cst.ImportFrom] = {}  # id(import) -> import to add after it

    # -- where references are left alone ------------------------------------------------

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Annotation):
            self._protected.add(node)
        elif isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
            self._protect_target(node.target)
        elif isinstance(node, cst.Del):
            self._protect_target(node.target)
        elif (
            isinstance(node, cst.Call)
            and len(node.args) >= 2
            and isinstance(node.func, cst.Name)
            and node.func.value in ("isinstance", "issubclass")
        ):
            if {q.name for q in self._qualified_names(node.func)} & _CLASS_CHECKS:
                self._protected.add(node.args[1].value)
        if node in self._protected:
            self._protect_depth += 1
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[no-untyped-def]
        result = super().on_leave(original_node, updated_node)
        if original_node in self._protected:
            self._protect_depth -= 1
        return result

    def _protect_target(self, target: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._protect_target(element.value)
        elif isinstance(target, (cst.Attribute, cst.Name)):
            self._protected.add(target)

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    # -- name resolution ---------------------------------------------------------------

    def _qualified_names(self, node: cst.CSTNode) -> set[QualifiedName]:
        """What ``QualifiedNameProvider`` would say, computed only for the nodes asked about."""
        scope = self.get_metadata(ScopeProvider, node, None)
        return scope.get_qualified_names_for(node) if scope is not None else set()

    def _resolve(self, node: cst.Attribute) -> Target | None:
        """The target this attribute reference denotes, if it certainly denotes one."""
        if node.attr.value not in _TARGET_ATTRS:
            return None  # cheap: every target reference ends in a target's last name
        names = self._qualified_names(node)
        if not names:
            return self._resolve_through_star(node)
        hits = {
            q.name for q in names if q.source is QualifiedNameSource.IMPORT and q.name in TARGETS
        }
        if not hits:
            return None
        if len(names) > 1:
            spelled = get_full_name_for_node(node)
            self.notes.append(
                (
                    node,
                    f"left {spelled} alone: it may be "
                    f"{' or '.join(sorted(_describe(q) for q in names))} depending on the path"
                    " taken",
                )
            )
            return None
        return TARGETS[hits.pop()]

    def _resolve_through_star(self, node: cst.Attribute) -> Target | None:
        dotted = get_full_name_for_node(node)
        if not dotted or not self.star_heads:
            return None
        head = dotted.split(".", 1)[0]
        module = self.star_heads.get(head)
        if module is None:
            return None
        return TARGETS.get(f"{module}.{dotted}")

    # -- rewriting references ----------------------------------------------------------

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        if self._protect_depth:
            return updated_node
        target = self._resolve(original_node)
        if target is None:
            return updated_node
        self.rewrites[target.stdlib] += 1
        self.needed_runtime_modules.add(target.runtime_module)
        return cst.Attribute(
            value=cst.Name(runtime_alias(target.runtime_module)),
            attr=cst.Name(target.runtime_name),
            lpar=updated_node.lpar,
            rpar=updated_node.rpar,
        )

    # -- rewriting imports -------------------------------------------------------------

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom:
        module = _absolute_module(original_node)
        table = MODULE_LEVEL.get(module or "")
        if not table:
            return updated_node
        if isinstance(updated_node.names, cst.ImportStar):
            names = sorted(table)
            self._rebinds[id(updated_node)] = _import_from(
                RUNTIME_MODULE_FOR[module],  # type: ignore[index]
                [cst.ImportAlias(name=cst.Name(n)) for n in names],
            )
            return updated_node
        aliases = list(updated_node.names)
        hits = [a for a in aliases if get_full_name_for_node(a.name) in table]
        if not hits:
            return updated_node
        if len(hits) == len(aliases):
            for alias in hits:
                self._count(table[get_full_name_for_node(alias.name)])  # type: ignore[index]
            return updated_node.with_changes(module=_dotted(RUNTIME_MODULE_FOR[module]))  # type: ignore[index]
        # Mixed import: keep it as written and rebind the target names right after it,
        # on the same line, so line numbers do not move.
        self._rebinds[id(updated_node)] = _import_from(
            RUNTIME_MODULE_FOR[module],  # type: ignore[index]
            [
                cst.ImportAlias(name=cst.Name(a.name.value), asname=a.asname)  # type: ignore[union-attr]
                for a in hits
            ],
        )
        return updated_node

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        return updated_node.with_changes(body=self._insert_rebinds(updated_node.body))

    def leave_SimpleStatementSuite(
        self, original_node: cst.SimpleStatementSuite, updated_node: cst.SimpleStatementSuite
    ) -> cst.SimpleStatementSuite:
        return updated_node.with_changes(body=self._insert_rebinds(updated_node.body))

    def _insert_rebinds(
        self, body: Sequence[cst.BaseSmallStatement]
    ) -> Sequence[cst.BaseSmallStatement]:
        """Put each pending rebinding import right after its import, unless already there."""
        if not self._rebinds:
            return body
        out: list[cst.BaseSmallStatement] = []
        for index, statement in enumerate(body):
            rebind = self._rebinds.pop(id(statement), None)
            if rebind is None:
                out.append(statement)
                continue
            following = body[index + 1] if index + 1 < len(body) else None
            if isinstance(following, cst.ImportFrom) and _same_import(following, rebind):
                out.append(statement)
                continue
            module = get_full_name_for_node(statement.module)  # type: ignore[attr-defined]
            for alias in rebind.names:  # type: ignore[union-attr]
                self._count(MODULE_LEVEL[module][alias.name.value])  # type: ignore[index,union-attr]
            last = index == len(body) - 1
            out.append(statement.with_changes(semicolon=cst.MaybeSentinel.DEFAULT))
            out.append(rebind.with_changes(semicolon=statement.semicolon) if not last else rebind)
        return out

    def _count(self, target: Target) -> None:
        self.rewrites[target.stdlib] += 1


def _describe(name: QualifiedName) -> str:
    origin = {QualifiedNameSource.IMPORT: "imported", QualifiedNameSource.LOCAL: "local"}
    return f"{name.name} ({origin.get(name.source, name.source.name.lower())})"


def _absolute_module(node: cst.ImportFrom) -> str | None:
    if node.relative or node.module is None:
        return None
    return get_full_name_for_node(node.module)


def _import_from(module: str, aliases: list[cst.ImportAlias]) -> cst.ImportFrom:
    return cst.ImportFrom(module=_dotted(module), names=aliases)


def _same_import(a: cst.ImportFrom, b: cst.ImportFrom) -> bool:
    """Same module and same (name, asname) pairs, whatever the spacing."""

    def key(node: cst.ImportFrom) -> tuple[str | None, object]:
        if isinstance(node.names, cst.ImportStar):
            return _absolute_module(node), "*"
        pairs = [
            (
                get_full_name_for_node(alias.name),
                get_full_name_for_node(alias.asname.name) if alias.asname else None,
            )
            for alias in node.names
        ]
        return _absolute_module(node), sorted(pairs, key=str)

    return key(a) == key(b)


def _dotted(name: str) -> cst.Attribute | cst.Name:
    expr: cst.Attribute | cst.Name = cst.Name(name.split(".")[0])
    for part in name.split(".")[1:]:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr


def _add_runtime_imports(module: cst.Module, runtime_modules: set[str]) -> cst.Module:
    """Add ``import timewarp.vX as _timewarp_vX`` for each module not yet imported.

    The imports must precede every use, and line numbers should not move (tracebacks of
    patched code then point at the original lines). They go right after the docstring and
    ``from __future__`` block, in this order of preference:

    1. on a blank line there (the usual blank line after a docstring or license header),
       which they replace;
    2. joined with ``;`` to the end of the docstring / ``__future__`` line, or to the start
       of the first statement if it is a simple statement;
    3. on a new first line, only for a module that starts with a compound statement
       (``def``, ``class``, ``if``...) with no blank line before it: lines then shift by one.
    """
    present = _present_runtime_aliases(module)
    missing = sorted(m for m in runtime_modules if runtime_alias(m) not in present)
    if not missing:
        return module
    imports: list[cst.BaseSmallStatement] = [
        cst.Import(
            names=[
                cst.ImportAlias(name=_dotted(m), asname=cst.AsName(name=cst.Name(runtime_alias(m))))
            ]
        )
        for m in missing
    ]
    line = cst.SimpleStatementLine(body=imports)
    body = list(module.body)
    position = 0
    while position < len(body) and _is_docstring_or_future(body[position], position):
        position += 1
    if position < len(body):
        following = body[position]
        blank = _first_blank(following.leading_lines)
        if blank is not None:
            body[position] = following.with_changes(
                leading_lines=following.leading_lines[blank + 1 :]
            )
            body.insert(position, line.with_changes(leading_lines=following.leading_lines[:blank]))
            return module.with_changes(body=body)
    if position == 0:
        blanks = [i for i, empty in enumerate(module.header) if empty.comment is None]
        if blanks:
            header = [*module.header[: blanks[-1]], *module.header[blanks[-1] + 1 :]]
            return module.with_changes(header=header, body=[line, *body])
    if position > 0:
        previous = body[position - 1]
        assert isinstance(previous, cst.SimpleStatementLine)
        *head, last = previous.body
        body[position - 1] = previous.with_changes(
            body=[*head, last.with_changes(semicolon=cst.MaybeSentinel.DEFAULT), *imports]
        )
    elif body and isinstance(body[0], cst.SimpleStatementLine):
        body[0] = body[0].with_changes(body=[*imports, *body[0].body])
    else:
        body.insert(0, line)
    return module.with_changes(body=body)


def _first_blank(lines: Sequence[cst.EmptyLine]) -> int | None:
    for index, empty in enumerate(lines):
        if empty.comment is None:
            return index
    return None


def _present_runtime_aliases(module: cst.Module) -> set[str]:
    present: set[str] = set()
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        present.add(alias.asname.name.value)
    return present


def _is_docstring_or_future(statement: cst.BaseStatement, position: int) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    first = statement.body[0]
    if position == 0 and isinstance(first, cst.Expr) and isinstance(first.value, cst.BaseString):
        return True
    return (
        isinstance(first, cst.ImportFrom)
        and isinstance(first.module, cst.Name)
        and first.module.value == "__future__"
    )
