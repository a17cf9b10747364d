"""Put on PYTHONPATH by ``timewarp run``: turns the runtime on before the program starts,
then hands over to any other ``sitecustomize`` the environment had."""

import os
import sys

if os.environ.get("TIMEWARP_CLOCK"):
    try:
        from patcher.bootstrap import boot
    except ImportError as exc:
        sys.stderr.write(
            f"timewarp run: this interpreter ({sys.executable}) cannot import timewarp "
            f"({exc}); run the program with the Python where timewarp is installed\n"
        )
        os._exit(3)
    boot()


def _chain_next_sitecustomize() -> None:
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_chain_next_sitecustomize()
