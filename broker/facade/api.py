"""HTTP requests to API operations: routing, query parameters, verbs, hooks, Status errors.

Transport-agnostic: ``Api.handle(Request)`` returns a ``Response`` or a ``WatchStream``;
``server.HttpServer`` does the bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from . import acting, admission, discovery, errors, listoptions, tables, versions
from .auth import Identity, TokenRegistry
from .clock import Cancellable, Clock
from .errors import ApiError
from .identity import Authenticator, forbidden
from .kinds import autoscaling
from .metrics import (
    CUSTOM_METRICS,
    CUSTOM_METRICS_GROUP,
    MetricsBoard,
    custom_metric_value,
    node_metrics,
    pod_metrics,
)
from .objects import format_time
from .patch import apply_patch
from .requestinfo import request_info
from .resources import ResourceType, lookup
from .selectors import parse_field_selector, parse_label_selector
from .server import Request, Response, WatchStream
from .store import Store
from .watch import Watcher, event_frame

JSON = "application/json"
# Deepest JSON nesting a body may have (no Kubernetes object comes near; Python's own
# recursion would fail first on a deeper one).
MAX_JSON_DEPTH = 128
BINDING = lookup("", "v1", "bindings")
assert BINDING is not None
_log = logging.getLogger(__name__)
_PUBLIC = {"healthz", "livez", "readyz"}
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")


@dataclass
class Hooks:
    """Cluster policy the broker plugs in. Each may raise ``ApiError`` to refuse the
    request (the client gets that Status). They run in the request's thread, without the
    store lock, one binding/eviction/deletion at a time; they may call the store.

    - ``on_bind(namespace, pod, node)``: before the pod is bound; the facade then sets
      ``spec.nodeName`` and ``PodScheduled=True``.
    - ``after_bind(namespace, pod, node)``: once the facade bound the pod, before the
      response: what the cluster does about it at once (the kubelet's admission).
    - ``on_evict(namespace, pod)``: before an eviction deletes the pod.
    - ``on_delete_pod(namespace, pod)``: before a DELETE of a pod removes it.
    - ``on_error(exc)``: a hook raised something other than ``ApiError`` after the
      facade committed the write (``after_bind``): the client is answered as committed,
      and the broker hears of its own failure here (also kept in ``Api.hook_failures``).
    - ``on_create(obj)``: after admission defaults, before any API create is stored (under
      the store lock: quick, no waiting on other threads); may edit ``obj``.
    - ``on_terminate_pod(namespace, pod, grace_period_seconds)``: first, for a DELETE or an
      eviction of a pod (``grace_period_seconds`` from the DeleteOptions, None if not
      given): a graceful deletion — it returns the pod marked Terminating
      (``deletionTimestamp``), which the response carries and which the kubelet removes
      later; None lets the deletion go on as below (``on_delete_pod``/``on_evict``).
    If a hook removes the pod itself, the facade does not fail on the missing pod. A hook
    that returns a true value has done the write itself (e.g. the kubelet model binds and
    sets the status in one ``Store.update``, or marks a pod terminating and deletes it
    later, after the job is killed): the facade then skips its default action; a DELETE
    answers the pod as the hook left it.
    """

    on_bind: Callable[[str, str, str], None] | None = None
    after_bind: Callable[[str, str, str], None] | None = None
    on_evict: Callable[[str, str], None] | None = None
    on_delete_pod: Callable[[str, str], None] | None = None
    on_create: Callable[[dict[str, Any]], None] | None = None
    on_terminate_pod: Callable[[str, str, int | None], dict[str, Any] | None] | None = None
    on_error: Callable[[Exception], None] | None = None


def _json(status: int, obj: Any) -> Response:
    return Response(status, json.dumps(obj, separators=(",", ":")).encode())


def _error(exc: ApiError) -> Response:
    return _json(exc.code, exc.status())


_param = listoptions.first  # a parameter given twice counts by its first value


def _watching(route: _Route, query: dict[str, list[str]]) -> bool:
    return route.watch_path or bool(listoptions.flag(query, "watch"))


@dataclass
class _Route:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    watch_path: bool


def _parse_body(request: Request) -> Any:
    ctype = request.headers.get("content-type", JSON).split(";")[0].strip().lower()
    if "protobuf" in ctype:
        raise ApiError(
            415,
            f"the body content type {ctype!r} is not supported by timewarp's API facade: send JSON (the official Python client does)",
        )
    if not request.body:
        raise errors.bad_request("the request body is empty; a JSON object was expected")
    try:
        body = json.loads(request.body, parse_constant=_no_constant)
    except RecursionError:
        raise errors.bad_request(
            f"the request body is not valid JSON: nested deeper than {MAX_JSON_DEPTH} levels"
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"the request body is not valid JSON: {exc}") from None
    if _depth_exceeds(body, MAX_JSON_DEPTH):
        raise errors.bad_request(
            f"the request body is not valid JSON: nested deeper than {MAX_JSON_DEPTH} levels"
        )
    return body


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers deeper than ``limit`` (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class Api:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        tokens: TokenRegistry,
        metrics: MetricsBoard,
        *,
        server_address: Callable[[], str],
        hooks: Hooks | None = None,
        bookmark_interval_s: float | None = 60.0,
        min_request_timeout_s: float | None = 1800.0,
        seed: int = 0,
    ) -> None:
        self.store = store
        self.clock = clock
        self.tokens = tokens
        self.authn = Authenticator(tokens)
        self.metrics = metrics
        self.hooks = hooks or Hooks()
        self.bookmark_interval_ns = (
            None if bookmark_interval_s is None else int(bookmark_interval_s * 1e9)
        )
        self.min_request_timeout_s = min_request_timeout_s  # None: watches never time out
        self._timeout_rng = random.Random(f"watch-timeouts-{seed}")
        self._timeout_lock = threading.Lock()
        self._server_address = server_address
        self.hook_failures: list[Exception] = []
        self._policy_lock = threading.Lock()  # bindings, evictions, pod deletions: one at a time
        # (identity, verb, resource) -> requests (broker/facade/requestinfo.py)
        self.request_counts: dict[tuple[str, str, str], int] = {}
        self._counts_lock = threading.Lock()

    # --- entry point ---------------------------------------------------------------

    def authenticate(self, request: Request) -> Identity | None:
        """Who sent ``request`` (see identity.py), worked out once per request."""
        if request.identity is None:
            request.identity = self.authn.identify(request.headers, request.peer_cert) or False
        return request.identity or None

    def admit_head(
        self, method: str, target: str, headers: dict[str, str], peer_cert: bytes | None = None
    ) -> Response | None:
        """The check made on a request's head, before its body is read: no work for a
        client without valid credentials (the public health paths excepted), nor for the
        observer's writes."""
        path = target.split("?", 1)[0].strip("/")
        if path in _PUBLIC:
            return None
        identity = self.authn.admission_identity(headers, peer_cert)
        if identity is None:
            return _json(401, ApiError(401, "Unauthorized").status())
        refusal = forbidden(identity, method, target)
        return None if refusal is None else _error(refusal)

    def handle(self, request: Request) -> Response | WatchStream:
        identity = self.authenticate(request)
        # the simulated process that sent it (its runtime's pid, identity.py), whatever
        # credential it carries: a client outside the simulation (the observer, kubectl
        # with a scheduler's token) is never counted in the run's per-process figures
        process = identity.process if identity is not None else None
        if process is not None:
            key = (process, *request_info(request.method, request.target))
            with self._counts_lock:
                self.request_counts[key] = self.request_counts.get(key, 0) + 1
        # who acts, for what the store's listeners record (broker/facade/acting.py)
        with acting.acting_as(_actor(identity)):
            try:
                return self._handle(request)
            except ApiError as exc:
                return _error(exc)

    def _handle(self, request: Request) -> Response | WatchStream:
        split = urlsplit(request.target)
        segments = [unquote(s) for s in split.path.split("/") if s]
        query = parse_qs(split.query, keep_blank_values=True)
        if segments and segments[0] in _PUBLIC and len(segments) == 1:
            return Response(200, b"ok", "text/plain; charset=utf-8")
        identity = self.authenticate(request)
        if identity is None:
            return _json(401, ApiError(401, "Unauthorized").status())
        refusal = forbidden(identity, request.method, request.target)
        if refusal is not None:
            raise refusal
        # JSON, or a Table of it (server-side printing: tables.py); 406 for anything else
        table = tables.negotiate(request.headers.get("accept", ""))
        if not segments:
            paths = ["/api", "/api/v1", "/apis", "/version", "/healthz"]
            return _json(200, {"paths": paths})
        head = segments[0]
        if head == "version" and len(segments) == 1:
            return _json(200, discovery.SERVER_VERSION)
        if head == "api":
            if len(segments) == 1:
                return _json(200, discovery.api_versions(self._server_address()))
            if segments[1] != "v1":
                raise ApiError(
                    404,
                    f"the server could not find the requested resource (version {segments[1]!r} of the core group)",
                )
            if len(segments) == 2:
                return _json(200, discovery.resource_list("", "v1", self.store.types))
            return self._resource_request(request, query, "", "v1", segments[2:], table)
        if head == "apis":
            if len(segments) == 1:
                return _json(200, discovery.api_group_list(self.store.types))
            group = segments[1]
            if len(segments) == 2:
                doc = discovery.api_group(group, self.store.types)
                if doc is None:
                    raise ApiError(
                        404, f"the server could not find the requested resource (group {group!r})"
                    )
                return _json(200, doc)
            doc = discovery.resource_list(group, segments[2], self.store.types)
            if doc is None:
                raise ApiError(
                    404, f"the server could not find the requested resource ({group}/{segments[2]})"
                )
            if len(segments) == 3:
                return _json(200, doc)
            return self._resource_request(request, query, group, segments[2], segments[3:], table)
        raise ApiError(404, f"the server could not find the requested resource ({split.path})")

    # --- routing -------------------------------------------------------------------

    def _route(self, group: str, version: str, rest: list[str]) -> _Route:
        watch_path = False
        if rest and rest[0] == "watch":
            watch_path, rest = True, rest[1:]
        namespace = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and not (len(rest) == 3 and rest[2] in _NAMESPACE_SUBRESOURCES and group == "")
        ):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError(404, "the server could not find the requested resource")
        rt = self.store.types.lookup(group, version, rest[0])
        gv = f"{group}/{version}" if group else version
        if rt is None:
            raise ApiError(
                404, f"the server could not find the requested resource ({rest[0]!r} in {gv})"
            )
        if namespace is not None and not rt.namespaced:
            raise ApiError(404, f"{rt.plural} in {gv} are not namespaced")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in rt.subresources:
            raise ApiError(404, f"{rt.plural} have no subresource {sub!r}")
        return _Route(rt, namespace, name, sub, watch_path)

    def _resource_request(
        self,
        request: Request,
        query: dict[str, list[str]],
        group: str,
        version: str,
        rest: list[str],
        table: str = "",
    ) -> Response | WatchStream:
        """A request on a resource: route it, check the method is allowed there, then
        hand it to the reads (GET: get, list, watch; as a Table of ``table``'s version
        when asked), the creates (POST: objects, bindings, evictions) or the writes to
        one named object (PUT, PATCH, DELETE)."""
        if group == CUSTOM_METRICS_GROUP:
            return self._custom_metrics(request, query, version, rest)
        route = self._route(group, version, rest)
        self._check_method(route, request.method, query)
        if route.rt.group == "metrics.k8s.io":
            return self._metrics(route.rt, route, query)
        answer = self._serve(request, route, query, table)
        recode = versions.recoder(route.rt, self.store.types)
        if recode is not None and isinstance(answer, Response):
            answer.body = recode(answer.body)
        return answer

    def _serve(
        self, request: Request, route: _Route, query: dict[str, list[str]], table: str
    ) -> Response | WatchStream:
        if request.method == "GET":
            want = tables.table_request(table, query) if table else None
            return self._read(request, route, query, want)
        if request.method == "POST":
            return self._post(request, route)
        if route.name is None and request.method == "DELETE":
            return self._delete_collection(route, query)
        return self._write_named(request, route)

    def _check_method(self, route: _Route, method: str, query: dict[str, list[str]]) -> None:
        """405 for a method the resource or subresource does not support (the verbs of
        its discovery document), 400 for what the facade does not do (dryRun)."""
        rt = route.rt
        if _param(query, "dryRun"):
            raise errors.bad_request("dryRun is not supported by timewarp's API facade")
        if route.subresource in ("binding", "eviction") and method != "POST":
            raise ApiError(
                405,
                f"{rt.plural}/{route.subresource} supports only POST (create)",
                "MethodNotAllowed",
            )
        if route.subresource in ("status", "scale") and method not in ("GET", "PUT", "PATCH"):
            raise ApiError(
                405,
                f"{rt.plural}/{route.subresource} supports GET, PUT and PATCH",
                "MethodNotAllowed",
            )
        if route.subresource is None:
            verb = self._verb(method, route, query)
            if verb not in rt.verbs:
                raise ApiError(
                    405,
                    f"{verb} is not supported on {rt.key}; supported verbs: {', '.join(rt.verbs)}",
                    "MethodNotAllowed",
                )

    def _read(
        self,
        request: Request,
        route: _Route,
        query: dict[str, list[str]],
        want: tables.TableRequest | None = None,
    ) -> Response | WatchStream:
        """GET: a list or a watch of a collection, a watch of one object (the old
        ``/watch/.../name`` path), or one object; each as a Table if ``want`` says so."""
        if route.name is None:
            if _watching(route, query):
                return self._watch(request, route, query, want)
            return self._list(route, query, want)
        if route.watch_path:
            query.setdefault("fieldSelector", []).append(f"metadata.name={route.name}")
            return self._watch(request, route, query, want)
        obj = self.store.get(route.rt.key, route.namespace, route.name)
        if route.subresource == "scale":
            return _json(200, _scale_of(route.rt, obj))
        if want is not None:
            meta = {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion", "")}
            return _json(200, tables.table(route.rt, [obj], meta, want, self._now_s()))
        return _json(200, obj)

    def _now_s(self) -> float:
        """Now on the simulated clock, in seconds since the epoch (the Tables' ages)."""
        return self.store.now_epoch_ns() / 1e9

    def _post(self, request: Request, route: _Route) -> Response:
        """POST: a binding (pods/binding or the legacy ``bindings``), an eviction, or a
        new object in a collection."""
        rt = route.rt
        if route.subresource == "binding":
            return self._bind(route, _parse_body(request), route.name)
        if route.subresource == "eviction":
            return self._evict(route, _parse_body(request))
        if route.name is not None:
            raise ApiError(405, f"POST is not allowed on a named {rt.singular}")
        if rt is BINDING:  # the legacy collection of bindings
            return self._bind(route, _parse_body(request), None)
        if rt.namespaced and route.namespace is None:
            raise ApiError(
                404, f"create {rt.plural} in a namespace: POST /.../namespaces/<ns>/{rt.plural}"
            )
        return self._create(route, _parse_body(request))

    def _write_named(self, request: Request, route: _Route) -> Response:
        """PUT (replace), PATCH or DELETE of one named object (or its subresource)."""
        rt, method = route.rt, request.method
        if route.name is None:
            raise ApiError(405, f"{method} needs a named {rt.singular}")
        if rt.namespaced and route.namespace is None:
            raise ApiError(
                404,
                f"{rt.plural} are namespaced: use /.../namespaces/<ns>/{rt.plural}/{route.name}",
            )
        if route.subresource == "scale" and method in ("PUT", "PATCH"):
            return self._write_scale(request, route)
        if method == "PUT":
            body = _parse_body(request)
            self._check_kind(rt, body)
            replaced = self.store.replace(
                rt.key,
                versions.to_storage(rt, body),
                namespace=route.namespace,
                name=route.name,
                subresource=route.subresource,
            )
            return _json(200, replaced)
        if method == "PATCH":
            body = _parse_body(request)
            ctype = request.headers.get("content-type", "")
            if not rt.strategy.strategic_merge and _media(ctype) == STRATEGIC:
                raise ApiError(
                    415,
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json, "
                    "application/apply-patch+yaml",
                    "UnsupportedMediaType",
                )
            patched = self.store.patch(
                rt.key,
                route.namespace,
                route.name,
                body,
                ctype,
                subresource=route.subresource,
                view=versions.patch_view(rt),
            )
            return _json(200, patched)
        if method == "DELETE":
            return self._delete(route, request)
        raise ApiError(405, f"method {method} is not supported")

    def _write_scale(self, request: Request, route: _Route) -> Response:
        """PUT or PATCH of ``.../scale``: the parent's ``spec.replicas`` (see
        ``kinds/autoscaling.py``); answers the new Scale."""
        assert route.name is not None
        body = _parse_body(request)
        if request.method == "PATCH":
            current = _scale_of(route.rt, self.store.get(route.rt.key, route.namespace, route.name))
            body = apply_patch(request.headers.get("content-type", ""), current, body)
            wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
            if wanted_rv == current["metadata"]["resourceVersion"]:
                body["metadata"].pop("resourceVersion")  # untouched by the patch: no precondition
        replicas, rv = autoscaling.wanted_replicas(body, route.name, route.namespace or "")
        stored = self.store.set_replicas(
            route.rt.key, route.namespace, route.name, replicas, resource_version=rv
        )
        return _json(200, _scale_of(route.rt, stored))

    @staticmethod
    def _verb(method: str, route: _Route, query: dict[str, list[str]]) -> str:
        if method == "GET":
            if route.name is not None:
                return "watch" if route.watch_path else "get"
            return "watch" if _watching(route, query) else "list"
        if method == "DELETE":
            return "delete"  # deletecollection is allowed where delete is
        return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())

    @staticmethod
    def _check_kind(rt: ResourceType, body: Any) -> None:
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body must be a JSON object (a {rt.kind})")
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if kind not in (None, "", rt.kind):
            raise errors.bad_request(f"the body is a {kind}, but the URL is for {rt.kind} objects")
        if api_version not in (None, "", rt.api_version):
            raise errors.bad_request(
                f"the body has apiVersion {api_version}, but the URL is for {rt.api_version}"
            )

    # --- verbs ---------------------------------------------------------------------

    def _create(self, route: _Route, body: Any) -> Response:
        rt = route.rt
        self._check_kind(rt, body)
        created = self.store.create(
            rt.key,
            versions.to_storage(rt, body),
            namespace=route.namespace,
            create_namespace=False,
            prepare=self.hooks.on_create,
        )
        return _json(201, created)

    def _list(
        self, route: _Route, query: dict[str, list[str]], want: tables.TableRequest | None = None
    ) -> Response:
        """A list, with kube-apiserver's reading of resourceVersion, resourceVersionMatch,
        limit and continue (``docs/facade.md``, "List and watch parameters")."""
        rt = route.rt
        opts = listoptions.parse(query)
        labels = parse_label_selector(opts.label_selector)
        fields = parse_field_selector(opts.field_selector, rt.key, rt.strategy.fields)
        version, limit, after = opts.resource_version, opts.limit, None
        if opts.continue_token:  # the rest of a list, exactly as it was then
            if version not in ("", "0"):
                raise errors.bad_request(
                    "specifying resource version is not allowed when using continue"
                )
            after, rv = _continue_state(opts.continue_token)
            if rv > self.store.resource_version:  # a list this server never made
                raise errors.bad_request(
                    "continue key is not valid: incorrect encoded start resourceVersion "
                    "(version meta.k8s.io/v1)"
                )
            try:
                entries = self.store.list_entries_at(rt.key, route.namespace, labels, fields, rv)
            except ApiError as exc:
                if exc.code == 410:
                    raise errors.gone(CONTINUE_TOO_OLD) from None
                raise
            entries = [e for e in entries if _entry_key(e) > after]
        elif opts.match == listoptions.EXACT or (
            not opts.match and limit > 0 and version not in ("", "0")
        ):
            rv = listoptions.resource_version(version)  # a page of the list as it was at rv
            entries = self.store.list_entries_at(rt.key, route.namespace, labels, fields, rv)
        else:  # the most recent state ("0": any state — the watch cache ignores limit)
            floor = listoptions.resource_version(version) if version not in ("", "0") else 0
            entries, rv = self.store.list_entries(rt.key, route.namespace, labels, fields)
            if floor > rv:
                raise errors.too_large_resource_version(floor, rv)
            if version == "0":
                limit = 0
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit > 0 and len(entries) > limit:
            last = _entry_key(entries[limit - 1])
            meta["remainingItemCount"] = len(entries) - limit
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"after": list(last), "rv": rv}).encode()
            ).decode()
            entries = entries[:limit]
        if want is not None:
            objs = [e.obj for e in entries]
            return _json(200, tables.table(rt, objs, meta, want, self._now_s()))
        head = json.dumps(
            {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta},
            separators=(",", ":"),
        ).encode()
        body = head[:-1] + b',"items":[' + b",".join(e.json() for e in entries) + b"]}"
        return Response(200, body)

    def _watch_timeout_s(self, given: int | None) -> float | None:
        """``timeoutSeconds`` absent or 0 is "not given": the server's own limit, a
        random duration in [minRequestTimeout, 2 x minRequestTimeout) — 30 to 60 min with
        the default 1800 s — drawn from the facade's seeded generator (virtual time)."""
        if given:
            return float(given)
        if self.min_request_timeout_s is None:
            return None
        with self._timeout_lock:
            return self.min_request_timeout_s * (self._timeout_rng.random() + 1.0)

    def _watch(
        self,
        request: Request,
        route: _Route,
        query: dict[str, list[str]],
        want: tables.TableRequest | None = None,
    ) -> WatchStream:
        rt = route.rt
        opts = listoptions.parse(query, watch_path=route.watch_path)
        identity = self.authenticate(request)
        outside = identity is not None and identity.process is None
        # a client outside the simulation never draws from the seeded generator nor sets
        # virtual timers (they would shift the schedulers' own): see _outside_watch_timer
        timeout = opts.timeout_s if outside else self._watch_timeout_s(opts.timeout_s)
        stats = identity.stats if identity is not None else None
        try:
            if timeout is not None and timeout < 0:  # the stream ends at once
                return self._ended_watch(rt, request, None)
            watcher = self.store.watch(
                rt.key,
                namespace=route.namespace,
                resource_version=opts.resource_version,
                label_selector=opts.label_selector,
                field_selector=opts.field_selector,
                bookmarks=opts.bookmarks,
                send_initial_events=opts.send_initial_events,
                on_queued=request.on_queued,
                recode=self._watch_recoder(rt, want),
            )
        except ApiError as exc:
            if exc.code != 410:
                raise  # e.g. 504 "Too large resource version", answered at once
            # Past the parameters, a real server answers 200 and reports expiry as an ERROR
            # event.
            return self._ended_watch(rt, request, exc)

        timers: list[Cancellable] = []
        lock = threading.Lock()
        finished = False
        now = self.clock.now_ns()
        if outside:
            if timeout:
                timers.append(_WallTimer(timeout, lambda: self.store.stop_watch(watcher)))
        elif timeout is not None:
            deadline = now + int(timeout * 1e9)
            timers.append(self.clock.call_at(deadline, lambda: self.store.stop_watch(watcher)))
        if opts.bookmarks and self.bookmark_interval_ns and not outside:
            interval = self.bookmark_interval_ns

            def bookmark() -> None:
                with lock:
                    if finished:
                        return
                    if self.store.bookmark(watcher):
                        timers.append(self.clock.call_at(self.clock.now_ns() + interval, bookmark))

            timers.append(self.clock.call_at(now + interval, bookmark))
            if timeout is not None and timeout > 2:  # and one 2 s before the end (the cacher's)

                def last_bookmark() -> None:
                    with lock:
                        if not finished:
                            self.store.bookmark(watcher)

                timers.append(self.clock.call_at(deadline - 2 * 10**9, last_bookmark))
        if stats is not None:
            self.tokens.adjust(stats, watches=1)

        def cleanup() -> None:
            nonlocal finished
            with lock:
                finished = True
                for t in timers:
                    t.cancel()
            self.store.stop_watch(watcher, end=False)
            if stats is not None:
                self.tokens.adjust(stats, watches=-1)

        return WatchStream(watcher, cleanup)

    def _watch_recoder(
        self, rt: ResourceType, want: tables.TableRequest | None
    ) -> Callable[[bytes], bytes] | None:
        """What each frame of a watch becomes: its served version's (custom resources),
        then a Table event if one was asked for."""
        version = versions.recoder(rt, self.store.types)
        if want is None:
            return version
        table = tables.watch_recoder(rt, want, self._now_s)
        if version is None:
            return table
        return lambda frame: table(version(frame))

    @staticmethod
    def _ended_watch(rt: ResourceType, request: Request, error: ApiError | None) -> WatchStream:
        """A watch stream that is over at once: empty, or one ERROR event."""
        watcher = Watcher(
            rt,
            None,
            parse_label_selector(None),
            parse_field_selector(None, rt.key, rt.strategy.fields),
            on_queued=request.on_queued,
        )
        if error is not None:
            watcher.push(
                event_frame("ERROR", json.dumps(error.status(), separators=(",", ":")).encode())
            )
        watcher.end()
        return WatchStream(watcher, lambda: None)

    def _bind(self, route: _Route, body: Any, pod_name: str | None) -> Response:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of a binding must be a JSON object (a Binding)")
        if body.get("kind") not in (None, "", "Binding"):
            raise errors.bad_request(f"the body is a {body.get('kind')}, not a Binding")
        BINDING.strategy.decode(BINDING, body)
        meta = body.get("metadata") or {}
        name = pod_name or meta.get("name")
        if pod_name and meta.get("name") not in (None, "", pod_name):
            raise errors.bad_request(
                f"the binding is for pod {meta.get('name')!r} but the URL names {pod_name!r}"
            )
        namespace = route.namespace or "default"
        if meta.get("namespace") not in (None, "", namespace):
            raise errors.bad_request(
                "the namespace of the binding does not match the namespace of the URL"
            )
        if not name:
            raise errors.invalid("Binding", "", ["metadata.name: Required value"])
        target = body.get("target") or {}
        node = target.get("name")
        if not node:
            raise errors.invalid("Binding", name, ["target.name: Required value"])
        if target.get("kind") not in (None, "", "Node"):
            raise errors.invalid(
                "Binding",
                name,
                [
                    f'target.kind: Unsupported value: {target.get("kind")!r}: supported values: "Node"'
                ],
            )
        with self._policy_lock:
            pod = self.store.get("pods", namespace, name)
            bound = pod["spec"].get("nodeName")
            if bound:
                raise errors.conflict(
                    "pods", name, f'pod {name} is already assigned to node "{bound}"'
                )
            uid = meta.get("uid")
            if uid and pod["metadata"]["uid"] != uid:
                raise errors.conflict(
                    "pods",
                    name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pod['metadata']['uid']}",
                )
            handled = self.hooks.on_bind(namespace, name, node) if self.hooks.on_bind else None
            if not handled:
                self.store.bind(namespace, name, node, uid=uid, copy=False)
                if self.hooks.after_bind:
                    try:
                        self.hooks.after_bind(namespace, name, node)
                    except ApiError:
                        raise
                    except Exception as exc:
                        # Committed: the client is told so (never a 500 for a binding that
                        # happened); the failure is the broker's, and goes to the broker.
                        self._hook_failed("after_bind", exc)
        return _json(201, errors.success_status(201))

    def _hook_failed(self, hook: str, exc: Exception) -> None:
        _log.error("facade: the %s hook failed after its write was committed", hook, exc_info=exc)
        self.hook_failures.append(exc)
        if self.hooks.on_error is not None:
            self.hooks.on_error(exc)

    def _evict(self, route: _Route, body: Any) -> Response:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of an eviction must be a JSON object (an Eviction)")
        if body.get("kind") not in (None, "", "Eviction"):
            raise errors.bad_request(f"the body is a {body.get('kind')}, not an Eviction")
        if body.get("apiVersion") not in (None, "", "policy/v1", "policy/v1beta1"):
            raise errors.bad_request(
                f"eviction apiVersion {body.get('apiVersion')!r} is not policy/v1 or policy/v1beta1"
            )
        admission.decode_as(admission.EVICTION, "Eviction", "policy/v1", body)
        name = route.name or ""
        meta = body.get("metadata") or {}
        if meta.get("name") not in (None, "", name):
            raise errors.bad_request(
                f"name in URL does not match name in Eviction object ({meta.get('name')!r} != {name!r})"
            )
        namespace = route.namespace or "default"
        grace = _grace_period(body.get("deleteOptions") or {}, None)
        with self._policy_lock:
            self.store.get("pods", namespace, name)
            if self.hooks.on_terminate_pod and self.hooks.on_terminate_pod(namespace, name, grace):
                return _json(201, errors.success_status(201))
            handled = self.hooks.on_evict(namespace, name) if self.hooks.on_evict else None
            if not handled and self.store.get_or_none("pods", namespace, name) is not None:
                self.store.delete("pods", namespace, name)
        return _json(201, errors.success_status(201))

    def _delete_options(self, request: Request) -> dict[str, Any]:
        if not request.body:
            return {}
        body = _parse_body(request)
        if not isinstance(body, dict):
            return {}
        admission.decode_as(admission.DELETE_OPTIONS, "DeleteOptions", "v1", body)
        return body

    def _delete(self, route: _Route, request: Request) -> Response:
        """A DELETE of one object, as its kind's strategy says it goes (``deletion``):
        graceful (a pod), finalized (a namespace), or at once."""
        rt = route.rt
        options = self._delete_options(request)
        pre = options.get("preconditions") or {}
        if rt.strategy.deletion == "graceful":
            with self._policy_lock:
                grace = _grace_period(
                    options, _param(parse_qs(urlsplit(request.target).query), "gracePeriodSeconds")
                )
                last = self._delete_pod(route.namespace or "default", route.name or "", pre, grace)
            return _json(200, last)
        if rt.strategy.deletion == "finalized":
            return _json(200, self._delete_namespace(route.name or "", pre))
        gone = self.store.delete(
            rt.key,
            route.namespace,
            route.name,
            uid=pre.get("uid"),
            resource_version=pre.get("resourceVersion"),
            finalizers=True,
        )
        if gone["metadata"].get("finalizers"):
            return _json(200, gone)  # kept until its finalizers are removed
        return _json(
            200,
            errors.success_status(
                200, name=route.name, group=rt.group, kind=rt.plural, uid=gone["metadata"]["uid"]
            ),
        )

    def _delete_pod(
        self, namespace: str, name: str, pre: dict[str, Any], grace: int | None
    ) -> dict[str, Any]:
        """A pod's deletion (caller holds the policy lock): preconditions, then the
        cluster's hooks — a graceful deletion (the pod marked Terminating, its containers
        stopped later) or one at once (its job killed, its node's capacity released) —
        then the store. Returns the pod as the response carries it."""
        last = self.store.get("pods", namespace, name)
        for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            if pre.get(field) and last["metadata"][field] != pre[field]:
                raise errors.conflict(
                    "pods",
                    name,
                    f"Precondition failed: {label} in precondition: {pre[field]}, "
                    f"{label} in object meta: {last['metadata'][field]}",
                )
        if self.hooks.on_terminate_pod:
            marked = self.hooks.on_terminate_pod(namespace, name, grace)
            if marked:
                return marked
        handled = self.hooks.on_delete_pod(namespace, name) if self.hooks.on_delete_pod else None
        if handled:
            return self.store.get_or_none("pods", namespace, name) or last
        if self.store.get_or_none("pods", namespace, name) is not None:
            last = self.store.delete(
                "pods",
                namespace,
                name,
                uid=pre.get("uid"),
                resource_version=pre.get("resourceVersion"),
            )
        return last

    def _delete_namespace(self, name: str, pre: dict[str, Any]) -> dict[str, Any]:
        """A namespace's deletion in the real server's order: the namespace turns
        Terminating (``deletionTimestamp``, ``status.phase``; API creates in it are refused
        from then on) and the namespace controller empties it (:meth:`_sweep_namespace`);
        the DELETE answers the Terminating namespace, as the real server does. The
        built-in namespaces may not be deleted (the NamespaceLifecycle admission plugin)."""
        if name in IMMORTAL_NAMESPACES:
            raise ApiError(
                403,
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                "Forbidden",
                kind="namespaces",
                name=name,
            )
        with self._policy_lock:
            terminating = self.store.terminate_namespace(
                name, uid=pre.get("uid"), resource_version=pre.get("resourceVersion")
            )
        self._sweep_namespace(name)
        return terminating

    def _sweep_namespace(self, name: str) -> None:
        """The namespace controller's pass over a Terminating namespace: its content is
        deleted — controllers and other objects at once, pods as a DELETE with default
        options deletes them (through the cluster's hooks: gracefully when they run, their
        jobs killed and capacity released once their containers stopped) — and once no
        pod is left the ``kubernetes`` finalizer is removed and the namespace is gone.
        Else the controller looks again when the longest grace period has passed (its
        estimate), in virtual time."""
        with self._policy_lock:
            namespace = self.store.get_or_none("namespaces", None, name)
            if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
                return
            self.store.delete_namespace_content(name, keep=("pods",))
            pods, _ = self.store.list("pods", name)
            for pod in pods:
                meta = pod["metadata"]
                if not meta.get("deletionTimestamp") and self.store.get_or_none(
                    "pods", name, meta["name"]
                ):
                    self._delete_pod(name, meta["name"], {}, None)
            pods, _ = self.store.list("pods", name)
            if not pods:
                self.store.finalize_namespace(name)
                return
            wait_s = max(
                [int(p["metadata"].get("deletionGracePeriodSeconds") or 0) for p in pods] + [1]
            )
        self.clock.call_at(
            self.clock.now_ns() + wait_s * 10**9, lambda: self._sweep_namespace(name)
        )

    def _delete_collection(self, route: _Route, query: dict[str, list[str]]) -> Response:
        rt = route.rt
        if not rt.strategy.delete_collection:
            raise ApiError(
                405,
                f"deletecollection of {rt.plural} is not supported (delete {rt.plural} one by one)",
            )
        objs, _ = self.store.list(
            rt.key,
            route.namespace,
            label_selector=_param(query, "labelSelector"),
            field_selector=_param(query, "fieldSelector"),
        )
        for obj in objs:
            if rt.strategy.deletion == "finalized":
                if obj["metadata"]["name"] not in IMMORTAL_NAMESPACES:
                    self._delete_namespace(obj["metadata"]["name"], {})
                continue
            self.store.delete(
                rt.key, obj["metadata"].get("namespace"), obj["metadata"]["name"], finalizers=True
            )
        return _json(200, errors.success_status(200))

    # --- metrics.k8s.io --------------------------------------------------------------

    def _metrics(self, rt: ResourceType, route: _Route, query: dict[str, list[str]]) -> Response:
        labels = parse_label_selector(_param(query, "labelSelector"))
        epoch = self.clock.wall_epoch_ns()

        def fmt(ns: int) -> str:
            return format_time(epoch + ns)

        if rt.plural == "nodes":
            items = [node_metrics(n, s, fmt) for n, s in self.metrics.node_items()]
        else:
            items = [
                pod_metrics(k[0], k[1], s, fmt) for k, s in self.metrics.pod_items(route.namespace)
            ]
        items = [i for i in items if labels.matches(i["metadata"].get("labels"))]
        if route.name is not None:
            for item in items:
                if item["metadata"]["name"] == route.name:
                    return _json(200, item)
            raise errors.not_found(rt.plural, route.name, rt.group)
        return _json(
            200,
            {
                "kind": f"{rt.kind}List",
                "apiVersion": rt.api_version,
                "metadata": {},
                "items": items,
            },
        )

    # --- custom.metrics.k8s.io -------------------------------------------------------

    def _custom_metrics(
        self, request: Request, query: dict[str, list[str]], version: str, rest: list[str]
    ) -> Response:
        """``GET /apis/custom.metrics.k8s.io/v1beta1/namespaces/<ns>/pods/<name|*>/<metric>``
        (``labelSelector`` with ``*``): a ``MetricValueList``, as an adapter answers."""
        if request.method != "GET":
            raise ApiError(
                405, f"{request.method} is not supported on custom metrics", "MethodNotAllowed"
            )
        # the official client sends the plural "pods/*/<metric>" as one percent-encoded
        # segment (pods%2F%2A%2Fconcurrency); the real server routes the decoded path
        rest = "/".join(rest).split("/")
        if len(rest) != 5 or rest[0] != "namespaces" or rest[2] != "pods":
            raise ApiError(
                404,
                "the server could not find the requested resource (custom metrics are served "
                "for pods: /apis/custom.metrics.k8s.io/v1beta1/namespaces/<ns>/pods/<name|*>/<metric>)",
            )
        namespace, target, metric = rest[1], rest[3], rest[4]
        if metric not in CUSTOM_METRICS:
            raise errors.not_found("pods", f"{target}/{metric}", CUSTOM_METRICS_GROUP)
        labels = parse_label_selector(_param(query, "labelSelector"))
        epoch = self.clock.wall_epoch_ns()
        items = [
            custom_metric_value(namespace, pod, metric, value, format_time(epoch + stamp), window)
            for pod, value, stamp, window, pod_labels in self.metrics.custom_items(
                namespace, metric
            )
            if (target == "*" or pod == target) and labels.matches(pod_labels)
        ]
        if target != "*" and not items:
            raise errors.not_found("pods", f"{target}/{metric}", CUSTOM_METRICS_GROUP)
        return _json(
            200,
            {
                "kind": "MetricValueList",
                "apiVersion": f"{CUSTOM_METRICS_GROUP}/{version}",
                "metadata": {},
                "items": items,
            },
        )


def _actor(identity: Identity | None) -> str:
    """Who acts for ``acting``: the simulated process, else the authenticated user (a
    client outside the simulation), else nobody ("")."""
    if identity is None:
        return ""
    return identity.process or identity.user


class _WallTimer:
    """A watch timeout for a client outside the simulation: wall time is its time."""

    def __init__(self, seconds: float, fn: Callable[[], None]) -> None:
        self._timer = threading.Timer(seconds, fn)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()


def _grace_period(options: dict[str, Any], query_value: str | None) -> int | None:
    """``gracePeriodSeconds`` of a deletion: the DeleteOptions', else the query's; 400 for a
    value that is not an integer (a negative one means 0, as on the real server)."""
    value: Any = options.get("gracePeriodSeconds")
    if value is None and query_value not in (None, ""):
        value = query_value
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise errors.bad_request(
            f"invalid value for gracePeriodSeconds: {value!r} (want an integer)"
        ) from None
    return max(0, number)


CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter."
)


STRATEGIC = "application/strategic-merge-patch+json"


def _media(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()


def _scale_of(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """The object's Scale: its strategy's (a custom resource's paths), else the apps
    kinds' reading of ``spec.replicas``."""
    return rt.strategy.scale_of(rt, obj) or autoscaling.scale_of(obj)


def _continue_state(token: str) -> tuple[tuple[str, str], int]:
    """(the last key listed, the list's resourceVersion) of a continue token made by
    ``_list``; 400 as the API server answers a token it did not make."""
    try:
        state = json.loads(base64.urlsafe_b64decode(token.encode()))
        after, rv = state["after"], state["rv"]
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from None
    if not (
        isinstance(after, list)
        and len(after) == 2
        and all(isinstance(part, str) for part in after)
        and isinstance(rv, int)
        and not isinstance(rv, bool)
        and rv >= 0
    ):
        raise errors.bad_request("continue key is not valid: it was not made by this server")
    return (after[0], after[1]), rv


def _entry_key(entry: Any) -> tuple[str, str]:
    meta = entry.obj["metadata"]
    return meta.get("namespace") or "", meta["name"]
