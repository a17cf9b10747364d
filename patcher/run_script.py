"""``python -m patcher.run_script PROG.py [ARGS...]``: run a script with its source rewritten.

``python prog.py`` compiles the script itself, so the import hook never sees it. This
entry point behaves like ``python prog.py ARGS...`` (same ``sys.argv``, the script's
directory first on ``sys.path``, ``__name__ == "__main__"``, the script's exit status)
except that the script is rewritten first, through the import hook already installed by
``timewarp run`` or, failing that, a new one.
"""

from __future__ import annotations

import os
import sys

from patcher import importhook


def main() -> None:
    if len(sys.argv) < 2:
        sys.stderr.write("usage: python -m patcher.run_script PROG.py [ARGS...]\n")
        raise SystemExit(2)
    script = sys.argv[1]
    if not os.path.isfile(script):
        sys.stderr.write(f"python -m patcher.run_script: cannot open file {script!r}\n")
        raise SystemExit(2)
    finder = next((f for f in sys.meta_path if isinstance(f, importhook.Finder)), None)
    if finder is None:
        finder = importhook.install()
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # replaces -m's working directory
    importhook.run_main(finder, script, sys.argv[1:], set_path0=False)


if __name__ == "__main__":
    main()
