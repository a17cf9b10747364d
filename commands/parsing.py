"""Argument parsing for every ``timewarp`` sub-command: short, precise usage errors.

argparse answers a misspelled option with the whole usage (15 lines for ``simulate``)
and, when a required option is also "missing" because of the typo, complains about that
instead of the typo. Here a usage error is one line naming the mistake, with a
suggestion when an option is close (``unrecognised --schedular (did you mean
--scheduler?)``) and a pointer to ``--help``; the exit status stays argparse's 2. The
line keeps argparse's ``PROG: error:`` shape, which tools that scan logs rely on.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import sys
from collections.abc import Iterator, Sequence
from typing import NoReturn


class _Probe(Exception):
    """A usage error met while looking for unknown options: not reported itself."""


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (see the module docstring)."""

    _probing = False

    def parse_args(self, args: Sequence[str] | None = None, namespace=None):  # type: ignore[no-untyped-def, override]
        argv = list(sys.argv[1:] if args is None else args)
        unknown = unknown_options(self, argv)
        if unknown:
            chosen = chosen_parser(self, argv)
            chosen.error(unknown_option_message(chosen, unknown))
        return super().parse_args(argv, namespace)

    def error(self, message: str) -> NoReturn:
        if self._probing:
            raise _Probe(message)
        self.exit(2, f"{self.prog}: error: {message}\n(see `{self.prog} --help`)\n")


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                yield from _parsers(sub)


def chosen_parser(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The (sub-)parser that ``argv`` selects: ``timewarp workload burst ...`` -> burst's."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for i, token in enumerate(argv):
                if token in action.choices:
                    return chosen_parser(action.choices[token], argv[i + 1 :])
    return parser


def unknown_options(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """The options in ``argv`` that ``parser`` (or the sub-command chosen) does not
    know, found as argparse itself would (abbreviations, ``--opt=value``, values that
    follow an option, everything after ``--`` or a REMAINDER), ignoring every other
    mistake (a missing required option is no reason to hide a typo)."""
    saved = []
    for p in _parsers(parser):
        for action in p._actions:
            saved.append((action, action.required))
            action.required = False
        saved.append((p, None))
        p._probing = True  # type: ignore[attr-defined]
    try:
        # --help and --version print and exit: silenced here, they act in the real parse
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            _, extras = parser.parse_known_args(argv)
    except (_Probe, SystemExit):  # another mistake (a bad value...): reported later
        return []
    finally:
        for obj, required in saved:
            if required is None:
                obj._probing = False  # type: ignore[attr-defined]
            else:
                obj.required = required
    before_separator = argv[: argv.index("--")] if "--" in argv else argv
    return [e for e in extras if e.startswith("-") and len(e) > 1 and e in before_separator]


def unknown_option_message(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """``unrecognised --schedular (did you mean --scheduler?)``, one clause per option."""
    known = sorted(parser._option_string_actions)
    clauses = []
    for option in unknown:
        name = option.split("=", 1)[0]
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        clauses.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return "unrecognised " + ", ".join(clauses)
