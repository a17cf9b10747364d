"""``Facade``: the store, the HTTP server, tokens and metrics in one object the broker owns."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from .api import Api, Hooks
from .auth import TokenStats
from .clock import Clock
from .endpoint import Endpoint
from .interest import SchedulerNameInterest
from .metrics import MetricsBoard
from .sequencer import RequestSequencer
from .server import Hold, HttpServer, Ledger, Request
from .store import HISTORY_BYTES, Store


class Facade:
    """A Kubernetes API server made of an in-memory store, on ``host:port`` (0 = free).

    Life cycle: ``Facade(clock)`` → ``add_token``/``store`` writes → ``start()`` →
    ``stop()`` (also a context manager). With ``tls=True`` it serves HTTPS with a freshly
    generated CA (``ca_file``), as the in-cluster configuration requires. Given an
    ``endpoint`` (see :mod:`.endpoint`: bound, with tokens, before this module is even
    imported) it serves there, and ``host``/``port``/``tls``/``tls_dir`` are the
    endpoint's.

    Quiescence: ``connection_idle(peer_port, sent, consumed)`` and ``add_idle_listener``
    (see ``server.Ledger``); ``token_stats(name)`` counts requests per scheduler process.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
        tls_dir: str | Path | None = None,
        endpoint: Endpoint | None = None,
        history_limit: int = 1000,
        history_bytes: int = HISTORY_BYTES,
        seed: int = 0,
        bookmark_interval_s: float | None = 60.0,
        min_request_timeout_s: float | None = 1800.0,
        hooks: Hooks | None = None,
        hold_until_cluster: bool = False,
    ) -> None:
        if endpoint is None:
            endpoint = Endpoint(host=host, port=port, tls=tls, tls_dir=tls_dir)
        self.endpoint = endpoint
        self.clock = clock
        self.store = Store(
            clock, history_limit=history_limit, history_bytes=history_bytes, seed=seed
        )
        self.tokens = endpoint.tokens
        self.tls_files = endpoint.tls_files
        self.metrics = MetricsBoard()
        self.ledger = Ledger()
        # which spec.schedulerName each process selects pods by (no-progress reports)
        self.scheduler_names = SchedulerNameInterest()
        self.host: str = endpoint.host
        self.port: int = endpoint.port
        self.api = Api(
            self.store,
            clock,
            self.tokens,
            self.metrics,
            server_address=lambda: f"{self.host}:{self.port}",
            hooks=hooks,
            bookmark_interval_s=bookmark_interval_s,
            min_request_timeout_s=min_request_timeout_s,
            seed=seed,
        )
        self._sequencer = RequestSequencer()
        # a real cluster has its nodes before any scheduler starts; here they come with
        # SIMULATION_BEGINS, after the schedulers may have started: with
        # hold_until_cluster their requests wait for cluster_ready() (a program that lists
        # the nodes once, at start, must not see an empty cluster)
        self._cluster_ready = threading.Event()
        if not hold_until_cluster:
            self._cluster_ready.set()
        if self.tls_files is not None:
            from .clientcert import CertAuthenticator

            self.api.authn.certs = CertAuthenticator(self.tls_files.ca_cert.read_bytes())
        self._server = HttpServer(
            self._handle_in_order,
            self.ledger,
            listener=endpoint.listener,
            ssl_context=self.tls_files.server_context() if self.tls_files else None,
            plain_too=not endpoint.tls_only,
            on_request=self._count_request,
            admit_head=self.api.admit_head,
            on_unhandled=self._sequencer.unhandled,
        )

    def _handle_in_order(self, request: Request):  # type: ignore[no-untyped-def]
        """The API's handler, one process's numbered requests in the order it sent them,
        none before the cluster is ready (see ``hold_until_cluster``). A request from
        outside the simulation (the observer, kubectl) is never ordered."""
        self._cluster_ready.wait()  # set by cluster_ready() or stop(): never for ever
        identity = self.api.authenticate(request)
        # numbered by a runtime, unless its credentials say a client outside the
        # simulation (identity.py): an unauthenticated health probe is ordered all the same
        outside = identity is not None and identity.process is None
        key = None if outside else self._sequencer.key(request)
        if key is None:
            return self.api.handle(request)
        self._sequencer.wait_turn(*key)
        try:
            return self.api.handle(request)
        finally:
            self._sequencer.done(*key)

    # --- life cycle ----------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.endpoint.url

    @property
    def hooks(self) -> Hooks:
        return self.api.hooks

    def start(self) -> Facade:
        self._server.start()
        return self

    def cluster_ready(self) -> None:
        """The simulated cluster exists (its nodes are stored): requests held since the
        start are handled now, in the order each process sent them."""
        self._cluster_ready.set()

    def write_watch_events_directly(self) -> None:
        """Watch events go out from the thread that commits them, not the stream's
        thread (for a driver that waits for them anyway: see HttpServer)."""
        self._server.direct_watch_writes = True

    def hold_responses(self, hook: Callable[[Request], Hold | None] | None) -> None:
        """``hook(request)`` may return a :class:`~.server.Hold` for the response to a
        request (decided, not yet written): it is written when the hold is released, and
        the connection is quiescent meanwhile (modelled API latency: broker/drivers/pacing.py)."""
        self._server.hold_response = hook

    def revision(self) -> int:
        """The store's revision, read without its lock (an int read is atomic): for
        callers that hold locks of their own, such as the clock service's progress probe."""
        return self.store._rv

    def charged_process(self, request: Request) -> str | None:
        """The simulated process ``request`` belongs to (None: a client outside the
        simulation, or no valid credentials): see identity.py."""
        identity = self.api.authenticate(request)
        return None if identity is None else identity.process

    def attribute_by_pid(self, process_of_pid: Callable[[int], str | None]) -> None:
        """Attribute requests to simulated processes by their runtime's pid (the clock
        service knows them) rather than by the token they carry."""
        self.api.authn.process_of_pid = process_of_pid

    def write_observer_kubeconfig(self, path: str | Path) -> Path:
        """The people's kubeconfig: HTTPS, the run's CA, the read-only observer."""
        return self.endpoint.write_observer_kubeconfig(path)

    def stop(self) -> None:
        self._cluster_ready.set()  # requests still held are answered, not left waiting
        self._server.stop()
        self.endpoint.close()

    def __enter__(self) -> Facade:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- tokens and configuration files ----------------------------------------------

    def add_token(self, name: str, token: str | None = None) -> str:
        """A bearer token for the scheduler process ``name`` (same name, same token)."""
        return self.endpoint.add_token(name, token)

    @property
    def request_order_causes(self) -> list[str]:
        """Requests handled out of their process's order after a wall-clock wait for a
        predecessor that never arrived (see ``sequencer``): non-deterministic advances,
        one line each."""
        return list(self._sequencer.gap_causes)

    def token_stats(self, name: str) -> TokenStats:
        return self.tokens.stats(name)

    def _count_request(self, request: Request) -> Callable[[], None] | None:
        identity = self.api.authenticate(request)
        stats = None if identity is None else identity.stats
        if stats is None:
            return None
        self.tokens.adjust(stats, in_flight=1, requests=1)
        self.scheduler_names.observe(stats.name, request.method, request.target)
        return lambda: self.tokens.adjust(stats, in_flight=-1)

    def write_kubeconfig(self, path: str | Path, name: str, *, namespace: str = "default") -> Path:
        """A kubeconfig for process ``name`` (registering its token if new)."""
        return self.endpoint.write_kubeconfig(path, name, namespace=namespace)

    def write_incluster(
        self, directory: str | Path, name: str, *, namespace: str = "default"
    ) -> dict[str, str]:
        """Service-account files for process ``name`` in ``directory``; returns the
        environment (``KUBERNETES_SERVICE_HOST``/``PORT``, ``TIMEWARP_INCLUSTER_DIR``).
        Needs ``tls=True``: ``load_incluster_config`` always uses HTTPS."""
        return self.endpoint.write_incluster(directory, name, namespace=namespace)

    # --- quiescence ------------------------------------------------------------------

    def connection_idle(self, peer_port: int, sent: int, consumed: int) -> bool:
        return self.ledger.idle(peer_port, sent, consumed)

    def connection_state(self, peer_port: int, sent: int, consumed: int) -> str:
        """``idle`` / ``busy`` / ``flushing`` / ``ready`` / ``streaming``: see
        :meth:`server.Ledger.state`."""
        return self.ledger.state(peer_port, sent, consumed)

    def connection_states(self, rows: Iterable[Sequence[int]]) -> list[str]:
        """:meth:`connection_state` of each ``[port, sent, consumed, ...]`` row, in one
        question to the ledger (a runtime's state report)."""
        return self.ledger.states(rows)

    def connection_written(self, peer_port: int) -> int:
        """Bytes written so far on the connection from ``peer_port`` (0 if unknown)."""
        return self.ledger.written(peer_port)

    def connections(self) -> dict[int, dict[str, object]]:
        """Ledger snapshot per client port (counters, handling, queued, last request)."""
        return self.ledger.snapshot()

    def add_idle_listener(self, fn: Callable[[int], None]) -> None:
        """``fn(peer_port)`` is called whenever that connection may have become idle (after
        a response, a watch frame leaving nothing queued, a watch parking, a close). It runs
        in the facade's connection threads, without facade locks held: make it thread-safe
        and quick (e.g. set an event the broker waits on)."""
        self.ledger.add_listener(fn)

    # --- metrics ---------------------------------------------------------------------

    def set_node_metrics(
        self, name: str, cpu_nanocores: int, memory_bytes: int, *, window_s: float = 30.0
    ) -> None:
        node = self.store.get_or_none("nodes", None, name)
        labels = (node or {}).get("metadata", {}).get("labels") or {}
        self.metrics.set_node(
            name,
            cpu_nanocores,
            memory_bytes,
            timestamp_ns=self.clock.now_ns(),
            window_s=window_s,
            labels=labels,
        )

    def set_pod_metrics(
        self,
        namespace: str,
        name: str,
        containers: dict[str, tuple[int, int]],
        *,
        window_s: float = 30.0,
    ) -> None:
        """``containers``: container name -> (cpu nanocores, memory bytes)."""
        pod = self.store.get_or_none("pods", namespace, name)
        labels = (pod or {}).get("metadata", {}).get("labels") or {}
        self.metrics.set_pod(
            namespace,
            name,
            containers,
            timestamp_ns=self.clock.now_ns(),
            window_s=window_s,
            labels=labels,
        )
