"""Benchmark the patcher: rewrite throughput and the import hook's cost, cold vs cached.

    python benchmarks/patch.py [--package kubernetes] [--repeat 3] [--hook-package apscheduler]

1. Throughput: patch every ``.py`` file of an installed package in memory (nothing is
   written), report lines per second over all files and over the files that needed the
   full libcst pass (the others are dismissed by the pre-filter) -- once as
   ``timewarp patch`` does it (every file's syntax checked with ``ast``), once as the
   import hook does it (files that never spell a target module's name are not parsed).
2. Import hook: in fresh interpreters, time ``import <module>`` with no hook (the
   interpreter's own ``__pycache__``), with the hook and an empty cache (cold), and with
   the hook and a warm cache; the hook is told to patch the package (``--patch-module``).

Each measurement is repeated; min / median / max are printed, as wall seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from patcher.transform import PatchError, patch_source  # noqa: E402


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"no installed package {name!r}")
    return Path(next(iter(spec.submodule_search_locations)))


def throughput(name: str, verify_syntax: bool = True) -> dict[str, float]:
    files = sorted(p for p in package_dir(name).rglob("*.py") if "__pycache__" not in p.parts)
    total_lines = full_lines = changed = failed = 0
    full_seconds = 0.0
    started = time.perf_counter()
    for path in files:
        data = path.read_bytes()
        lines = data.count(b"\n")
        total_lines += lines
        t0 = time.perf_counter()
        try:
            result = patch_source(data, filename=str(path), verify_syntax=verify_syntax)
        except PatchError:
            failed += 1
            continue
        elapsed = time.perf_counter() - t0
        if result.changed or result.rewrites or _needed_libcst(data):
            full_lines += lines
            full_seconds += elapsed
        changed += result.changed
    seconds = time.perf_counter() - started
    return {
        "files": len(files),
        "lines": total_lines,
        "changed": changed,
        "failed": failed,
        "seconds": seconds,
        "lines_per_s": total_lines / seconds,
        "full_pass_lines": full_lines,
        "full_pass_lines_per_s": full_lines / full_seconds if full_seconds else float("nan"),
    }


def _needed_libcst(data: bytes) -> bool:
    from patcher.transform import _may_use_targets

    return _may_use_targets(data)


HOOK_SNIPPET = """
import sys, time, json
sys.path.insert(0, {root!r})
mode = {mode!r}
if mode != "none":
    from patcher import importhook
    finder = importhook.install([{package!r}], cache_dir={cache!r})
t0 = time.perf_counter()
import {module}
elapsed = time.perf_counter() - t0
stats = finder.stats if mode != "none" else None
print(json.dumps({{"s": elapsed, "patched": stats.modules_patched if stats else 0,
                  "hits": stats.cache_hits if stats else 0}}))
"""


def hook_run(mode: str, package: str, module: str, cache: str) -> dict[str, float]:
    code = HOOK_SNIPPET.format(
        root=str(ROOT), mode=mode, package=package, cache=cache, module=module
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=900
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summary(values: list[float]) -> str:
    return f"min {min(values):.3f}  median {statistics.median(values):.3f}  max {max(values):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="kubernetes", help="tree to patch (throughput)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hook-package", default="apscheduler")
    parser.add_argument("--hook-module", default="apscheduler.schedulers.background")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-hook", action="store_true")
    args = parser.parse_args()

    if not args.skip_throughput:
        for verify, label in ((True, "timewarp patch"), (False, "import hook")):
            runs = [throughput(args.package, verify) for _ in range(args.repeat)]
            first = runs[0]
            print(
                f"throughput as {label}, {args.package}: {first['files']} files, "
                f"{first['lines']} lines, {first['changed']} changed, {first['failed']} "
                f"unparseable; {first['full_pass_lines']} lines went through libcst"
            )
            print(f"  seconds            {summary([r['seconds'] for r in runs])}")
            print(f"  lines/s (all)      {summary([r['lines_per_s'] for r in runs])}")
            print(f"  lines/s (libcst)   {summary([r['full_pass_lines_per_s'] for r in runs])}")

    if not args.skip_hook:
        hook_benchmark(args)
    apscheduler_hour(args.repeat)


def hook_benchmark(args: argparse.Namespace) -> None:
    results: dict[str, list[float]] = {"none": [], "cold": [], "cached": []}
    counts: dict[str, tuple[int, int]] = {}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            results["none"].append(
                hook_run("none", args.hook_package, args.hook_module, cache)["s"]
            )
            cold = hook_run("cold", args.hook_package, args.hook_module, cache)
            cached = hook_run("cached", args.hook_package, args.hook_module, cache)
            results["cold"].append(cold["s"])
            results["cached"].append(cached["s"])
            counts = {
                "cold": (cold["patched"], cold["hits"]),
                "cached": (cached["patched"], cached["hits"]),
            }
    print(f"import {args.hook_module} (--patch-module {args.hook_package}), seconds:")
    print(f"  no hook            {summary(results['none'])}")
    print(
        f"  hook, cold cache   {summary(results['cold'])}  (rewritten, cache hits: {counts['cold']})"
    )
    print(
        f"  hook, warm cache   {summary(results['cached'])}  (rewritten, cache hits: {counts['cached']})"
    )


APP = ROOT / "tests" / "corpus" / "patcher" / "apscheduler_usage.py"


def apscheduler_hour(repeat: int) -> None:
    """An APScheduler interval job, every simulated minute for a simulated hour, under
    ``timewarp run --standalone --patch-module apscheduler``: timewarp's own wall-time
    figure for the run, with a cold and then a warm cache."""
    import os
    import re

    cold: list[float] = []
    warm: list[float] = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "aps_app.py").write_text(APP.read_text())
            env = dict(os.environ, XDG_CACHE_HOME=f"{tmp}/cache")
            env["PYTHONPATH"] = os.pathsep.join([str(ROOT), tmp])
            for bucket in (cold, warm):
                proc = subprocess.run(
                    [sys.executable, "-m", "timewarp", "run", "--standalone",
                     "--patch-module", "apscheduler", "--", "python", "-m", "aps_app"],
                    env=env, cwd=tmp, capture_output=True, text=True, check=True, timeout=300,
                )  # fmt: skip
                found = re.search(r"simulated 01:00:00\.000 in ([0-9.]+) s", proc.stderr)
                assert found and proc.stdout.startswith("60 runs"), proc.stderr
                bucket.append(float(found.group(1)))
    print("APScheduler, 60 interval runs = 1 simulated hour, wall seconds:")
    print(f"  cold cache         {summary(cold)}")
    print(f"  warm cache         {summary(warm)}")


if __name__ == "__main__":
    main()
