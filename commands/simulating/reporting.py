"""A run's report: the figures, the manifest, the plots and the summary."""

from __future__ import annotations

import json
import sys
import threading
import time as _wall
from pathlib import Path

from commands.outfiles import (
    write_text_atomically,
)
from commands.services_report import SERVICES_CSV, plot_services, write_rows
from commands.simulating.options import run_seed
from commands.simulating.outputs import DECISIONS_CSV, OUT_FILES, OUT_PREFIX, kubectl_line
from timewarp import __version__


def sha256(path: Path) -> str:
    import hashlib  # not before the schedulers start: manifest facts are gathered later

    return hashlib.sha256(path.read_bytes()).hexdigest()


class Reporting:
    """The end of a run: figures from the outputs, per-process figures, services, the
    decisions CSV, the manifest, the plots and the summary."""

    def _report(self, result, ok: bool, reason: str, wall: float) -> bool:  # type: ignore[no-untyped-def]
        """Figures from the outputs, the manifest, the plots and the summary. Returns
        False when the disk refused an output (the summary then says what was kept)."""
        from commands import report
        from commands.cli import STARTED

        out = self.out
        figures = report.summarise(
            out / OUT_PREFIX,
            result.stats if result else {},
            wall,
            simulated_s=result.virtual_s if result is not None else None,
        )
        stopped_at = getattr(self, "stopped_at_s", None)
        written = all((out / name).exists() for name in OUT_FILES)
        complete = ok and stopped_at is None
        figures["outputs"] = ("complete" if complete else "partial") if written else "none"
        figures["seed"] = run_seed(self.args)
        if getattr(self, "observer_kubeconfig", None) is not None:
            # the people's way in (docs/user-guide.md)
            figures["kubectl"] = kubectl_line(self.observer_kubeconfig)
        if stopped_at is not None:
            figures["stopped_at_s"] = stopped_at
        if getattr(self, "stopped_by", None):
            figures["stopped_by"] = self.stopped_by
        if self.pacer is not None:
            figures["api_latency"] = self.pacer.figures()
        self._process_figures()
        guard = getattr(self, "no_progress", None)
        warnings = list(guard.reports) if guard is not None else []
        refused: list[str] = []
        service_plots = None
        try:
            service_plots = self._write_services(figures)
        except OSError as exc:
            refused.append(f"{SERVICES_CSV} ({exc.strerror or exc})")
        decisions = getattr(self, "decisions", None)
        if decisions is not None:
            try:
                decisions.finish()
                decisions.write(out / DECISIONS_CSV)
            except OSError as exc:
                refused.append(f"{DECISIONS_CSV} ({exc.strerror or exc})")
        try:
            self._write_manifest(figures, ok, reason, wall, warnings)
        except OSError as exc:
            refused.append(f"manifest.json ({exc.strerror or exc})")
        if not self.args.no_plots:
            started = _wall.perf_counter()
            try:
                if report.plot(out / OUT_PREFIX, out, self.node_names):
                    figures["plots_s"] = round(_wall.perf_counter() - started, 2)
                else:
                    figures["plots"] = "none (no job ran)"
                if service_plots:
                    service_plots()
            except OSError as exc:
                refused.append(f"plots ({exc.strerror or exc})")
            except Exception as exc:  # plots are a bonus: never lose the run for them
                print(f"{self.prog}: plots skipped ({exc!r})", file=sys.stderr)
        figures["outputs_dir"] = str(out)
        figures["command_wall_s"] = round(_wall.perf_counter() - STARTED, 2)
        if refused:
            if getattr(self, "traceback", None) and "manifest.json" in refused[0]:
                print(self.traceback, file=sys.stderr)  # it had nowhere else to go
            kept = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
            print(
                f"{self.prog}: could not write {'; '.join(refused)}; kept in {out}: "
                + (", ".join(kept) or "nothing"),
                file=sys.stderr,
            )
        if not self.args.quiet or not ok or figures["outputs"] != "complete" or refused:
            report.print_summary(figures, sys.stderr, title=self.prog)
            self._print_services(figures)
            from commands.process_figures import summary_lines

            for line in summary_lines(getattr(self, "per_process", {})):
                print(f"{self.prog}: {line}", file=sys.stderr)
        for line in self.pacer.summary() if self.pacer is not None else ():
            print(f"{self.prog}: busy polling: {line}", file=sys.stderr)  # a warning: always
        return not refused

    def _process_figures(self) -> None:
        """Per scheduler process: CPU and API requests (``commands/process_figures.py``),
        for the manifest and the summary."""
        from commands.process_figures import figures as process_figures

        parts = self._parts
        if parts is None or parts.launcher is None or parts.facade is None:
            self.per_process = {}
            return
        names = [proc.name for proc in parts.launcher.processes]
        self.per_process = process_figures(
            names, getattr(self, "process_cpu", {}), dict(parts.facade.api.request_counts)
        )
        try:
            exits = parts.launcher.exits()
        except Exception:  # a report must never be what fails the run
            exits = {}
        for name, ended in exits.items():
            self.per_process.setdefault(name, {}).update(ended=ended)

    def _print_services(self, figures: dict) -> None:
        for name, web in sorted((figures.get("services") or {}).items()):
            share = web["failed"] / web["requests"] if web["requests"] else 0.0
            print(
                f"service {name}: {web['requests']:,} requests, {web['failed']:,} failed "
                f"({share:.2%}), {web['model']} model; per tick in {self.out / SERVICES_CSV}",
                file=sys.stderr,
            )

    def _write_services(self, figures: dict):  # type: ignore[no-untyped-def]
        """out_services.csv (whatever ticks closed, even after a failure) and the
        services' figures in the manifest; returns the plotting step, if any."""
        driver = getattr(self._parts.broker, "services", None) if self._parts else None
        if driver is None:
            return None
        driver.finish()
        path = self.out / SERVICES_CSV
        write_rows(path, driver.rows)
        figures["services"] = driver.summary()
        figures["traffic_model_cpu_s"] = round(driver.cpu_s, 3)
        if self.args.no_plots:
            return None
        # the driver's: `timewarp broker` learns its services from the simulator
        timeouts = {s.spec.name: s.spec.traffic.timeout for s in driver.services}
        return lambda: plot_services(path, self.out, timeouts)

    # ----------------------------------------------------------------- manifest
    _facts: dict | None = None
    _facts_thread: threading.Thread | None = None

    def _input_files(self) -> list[str]:
        return [self.args.platform, *self.args.workload]

    def _gather_facts(self) -> None:
        import platform as _platform
        from importlib.metadata import PackageNotFoundError, version

        try:
            client = version("kubernetes")
        except PackageNotFoundError:
            client = None
        self._facts = {
            "timewarp": __version__,
            "python": _platform.python_version(),
            "kubernetes_client": client,
            "inputs": {path: sha256(Path(path)) for path in self._input_files()},
        }

    def _write_manifest(
        self, figures: dict, ok: bool, reason: str, wall: float, warnings: list[str]
    ) -> None:
        from commands.modes import mode_parameters

        args = self.args
        if self._facts_thread is not None:
            self._facts_thread.join()  # long done, unless the run failed at once
        if self._facts is None:  # no scheduler was started
            self._gather_facts()
        manifest = {
            **(self._facts or {}),
            "simulator": args.batsim or "embedded",
            "mode": args.mode,
            "mode_parameters": mode_parameters(args),
            "arguments": sys.argv[1:],
            "schedulers": args.scheduler,
            "patch_modules": args.patch_module,
            "epoch_ns": args.epoch,
            "seed": run_seed(args),
            "ok": ok,
            "reason": reason,
            "outputs": figures["outputs"],
            "wall_s": round(wall, 3),
            "figures": figures,
            "warnings": warnings,
        }
        if getattr(self, "per_process", None):
            manifest["processes"] = self.per_process
        pauser = getattr(self, "pauser", None)
        if pauser is not None and pauser.pauses:
            manifest["pauses"] = pauser.pauses  # when and why (the outputs do not change)
        if getattr(self, "traceback", None):
            manifest["traceback"] = self.traceback
        text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
        write_text_atomically(self.out / "manifest.json", text)
