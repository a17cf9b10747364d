"""An event loop parked on an API watch is durably blocked exactly as a thread is: the
broker sees its connection in the same ledger, so a published event makes the process
non-quiescent at once — data can never reach a loop after quiescence was declared — and
the loop reads it only when the broker lets it go. (Before, the loop's selector wait
counted as a plain virtual wait: the process stayed "quiescent" with an event on its
way.)"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading

from broker.clock.service import ClockService, FacadeClock
from broker.facade import Facade
from patcher.launch import runtime_environment
from timewarp.wire import clockproto

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = {"containers": [{"name": "c", "image": "busybox"}]}


def lines_of(proc: subprocess.Popen) -> queue.Queue:
    out: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            out.put(line.strip())

    threading.Thread(target=pump, daemon=True).start()
    return out


def test_a_parked_asyncio_watch_is_an_api_read(tmp_path, subprocess_env):
    with ClockService(stall_timeout=30) as clock:
        facade = Facade(FacadeClock(clock))
        facade.write_watch_events_directly()
        clock.quiescence.set_io_checker(facade.connection_state, facade.connection_written)
        facade.add_idle_listener(lambda _port: clock.notify())
        kubeconfig = facade.write_kubeconfig(tmp_path / "kc", "loop")
        env = runtime_environment(dict(subprocess_env))
        env.update(
            {
                "KUBECONFIG": str(kubeconfig),
                clockproto.ENV_ENDPOINT: clock.endpoint,
                clockproto.ENV_NAME: "loop",
                clockproto.ENV_FACADE: f"{facade.host}:{facade.port}",
                clockproto.ENV_TOKEN: clock.expect("loop"),
            }
        )
        with facade:
            proc = subprocess.Popen(
                [sys.executable, "-m", "patcher.run_script", "tests/programs/aio_watch_printer.py"],
                cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            out = lines_of(proc)
            try:
                clock.wait_quiescent()  # the loop parked on its watch
                [loop] = [p for p in clock.registry.processes() if p.name == "loop"]
                assert loop.io, "the loop's wait on the watch was not reported as an API read"
                assert clock.quiescent()
                facade.store.create(
                    "pods", {"metadata": {"name": "p1"}, "spec": SPEC}, namespace="default"
                )
                # written to the loop's connection, not yet read: not quiescent
                assert not clock.quiescent()
                assert out.empty()  # and not read before the broker lets it go
                clock.wait_quiescent()  # lets the loop go: it reads, prints, parks again
                assert out.get(timeout=30) == "event ADDED p1"
                assert clock.quiescent()
            finally:
                proc.kill()
                proc.wait(10)
