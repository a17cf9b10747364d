"""A stop signal held across a few statements that must run together.

A command's first stop signal raises in its main thread wherever it is
(``commands/stopping.py``): between any two bytecodes that check for signals — at a
call, a loop's back edge — and out of a blocking call. Code that makes something and
then records it (``mkdtemp`` then the assignment that a ``finally`` removes; ``Popen``
then the list that the clean-up stops; two renames that swap a folder in) leaves it
unrecorded, or half done, if the exception comes in between: a temporary folder left
behind, a process never stopped, a user's folder renamed away. Inside
``with stophold.critical:`` that signal is held, and raised when the block ends — after
the thing made is recorded. The block must be short and must not wait on anything a
signal should break (a child's end, a reply): a held signal is a delayed one.

It lives in ``timewarp.wire`` (what every layer may import) because every layer has such statements
(the patcher's atomic writes, the broker's launcher, the commands' wiring); the
handler in ``commands.stopping`` asks :func:`hold`. Only the main thread's blocks count
(the handler runs there); in another thread the block holds nothing.
"""

from __future__ import annotations

import threading
from types import TracebackType

_MAIN = threading.main_thread().ident


class _Critical:
    """``with critical:`` — see the module docstring. Re-entrant."""

    depth = 0  # the main thread's open blocks
    held: BaseException | None = None

    def __enter__(self) -> None:
        if threading.get_ident() == _MAIN:
            _Critical.depth += 1

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if threading.get_ident() != _MAIN:
            return
        _Critical.depth -= 1
        if _Critical.depth == 0 and _Critical.held is not None:
            held, _Critical.held = _Critical.held, None
            raise held  # the block is done: the signal now (any error of the block: its context)


critical = _Critical()


def hold(exc: BaseException) -> bool:
    """Whether ``exc`` (a stop signal's, in the main thread) was held by an open
    :data:`critical` block, to be raised when it ends, rather than due now."""
    if _Critical.depth <= 0 or threading.get_ident() != _MAIN:
        return False
    _Critical.held = exc
    return True
