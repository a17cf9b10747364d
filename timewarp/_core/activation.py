"""Turning the runtime on: from the environment a launcher set, once per process.

With no ``TIMEWARP_CLOCK`` in the environment nothing happens and every drop-in behaves
exactly like the standard library (passthrough), so patched code still runs on a real
cluster. With it, the first drop-in that asks for the runtime (``current.active``)
connects to the broker, adopts the current thread as the root of the thread tree and
installs every interception mechanism of ``intercept/registry.py`` (the ``Thread``
hooks, fork, the after-import adapters, the facade's sockets).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from timewarp._core import current, selftime
from timewarp._core import runtime as _runtime
from timewarp._core.intercept.registry import MECHANISMS
from timewarp.wire import clockproto

_activation_lock = threading.Lock()
CLIENT = None  # the ClockClient, when active


def activate_from_env() -> _runtime.Runtime | None:
    global CLIENT
    with _activation_lock:
        if current.ACTIVE is not None:
            return current.ACTIVE
        endpoint = os.environ.get(clockproto.ENV_ENDPOINT)
        if not endpoint:
            return None
        from timewarp._core.client import BrokerUnreachable, ClockClient

        name = os.environ.get(clockproto.ENV_NAME) or f"pid{os.getpid()}"
        broker_pid = os.environ.get(clockproto.ENV_BROKER_PID)
        timeout = float(os.environ.get(clockproto.ENV_CONNECT_TIMEOUT, "10"))
        client = ClockClient(
            endpoint,
            name,
            broker_pid=int(broker_pid) if broker_pid else None,
            token=os.environ.get(clockproto.ENV_TOKEN),
        )
        try:
            welcome = client.handshake(timeout)
        except BrokerUnreachable as exc:
            sys.stderr.write(f"{exc}\n")
            sys.stderr.flush()
            os._exit(3)
        rt = _runtime.Runtime(
            now_ns=welcome["t"],
            epoch_ns=welcome["epoch"],
            mono_ns=welcome["mono"],
            mode=welcome["mode"],
            poke=client.poke,
            flush=client.flush_locked,
            now_roundtrip=os.environ.get("TIMEWARP_NOW") == "roundtrip",
        )
        rt.adopt_main()
        selftime.start_thread_profile()  # --profile: the main thread, from here on
        current.ACTIVE = rt
        client.start(rt)
        CLIENT = client
        current.on_deactivate(_forget_client)
        atexit.register(client.send_bye)
        if selftime.profiling():  # a process that exits on its own writes its profile too
            atexit.register(_write_profile_at_exit, name)
        for mechanism in MECHANISMS:
            mechanism.install(rt)
        return rt


def _write_profile_at_exit(name: str) -> None:
    selftime.stop_thread_profile()
    try:
        selftime.write_profile(name)
    except Exception as exc:  # a profile is a bonus: never fail the program's exit
        sys.stderr.write(f"timewarp: profile not written: {exc!r}\n")


def _forget_client() -> None:
    global CLIENT
    CLIENT = None
