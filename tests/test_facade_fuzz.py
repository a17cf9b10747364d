"""A bounded fuzzer for the facade (issue 17, "Proof"): malformed HTTP, wrong-typed and
invalid objects, absurd quantities, hostile headers and query parameters, sent over real
sockets to one running facade. For every request: an answer within a bound (no hang),
never a 5xx, the facade still serving afterwards (no broker death), and for each
malformed class the status kube-apiserver gives.

The default run is bounded and derandomized (the same requests every run: no flakes);
``HYPOTHESIS_PROFILE=long`` (or ``scripts/fuzz-facade.sh``) runs many more, randomized,
and prints the statuses seen per class.
"""

from __future__ import annotations

import atexit
import collections
import json
import logging
import os
import socket
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.facade import Facade, ManualClock
from broker.facade import validation as v
from broker.facade.objects import make_node
from broker.k8s import quantity

LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"
FUZZ = settings(
    max_examples=2000 if LONG else 40,
    derandomize=not LONG,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
WAIT_S = 30.0  # an answer must come within this (a bound, not a speed expectation)
SEEN: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


def _report() -> None:
    if LONG and SEEN:
        total = sum(sum(c.values()) for c in SEEN.values())
        print(f"\nfacade fuzz: {total} requests")
        for name, counts in sorted(SEEN.items()):
            print(f"  {name:<22} {dict(sorted(counts.items(), key=str))}")


atexit.register(_report)


class _InternalErrors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


@pytest.fixture(scope="module")
def facade():
    f = Facade(ManualClock())
    f.store.create("nodes", make_node("n1"))
    f.token = f.add_token("fuzz")
    errors = _InternalErrors()
    logging.getLogger("broker.facade").addHandler(errors)
    with f:
        yield f
    logging.getLogger("broker.facade").removeHandler(errors)
    assert not errors.records, f"internal errors logged: {errors.records[:3]}"


# --- the wire ------------------------------------------------------------------------------


def exchange(facade: Facade, raw: bytes) -> tuple[int | None, bytes]:
    """Send ``raw`` on a new connection; the status and body of the answer (None: the
    server closed without answering, which only unparsable garbage may get). A streamed
    answer (a watch) is cut after its head."""
    sock = socket.create_connection((facade.host, facade.port), timeout=WAIT_S)
    try:
        try:
            sock.sendall(raw)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = b""
        while b"\r\n\r\n" not in data:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                break
            data += chunk
    except TimeoutError:
        pytest.fail(f"no answer within {WAIT_S} s to {raw[:120]!r}")
    finally:
        sock.close()
    if not data.startswith(b"HTTP/1."):
        assert not data, f"not an HTTP answer: {data[:80]!r}"
        return None, b""
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def request(
    facade: Facade,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    *,
    token: bool = True,
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: fuzz", "Connection: close"]
    if token:
        lines.append(f"Authorization: Bearer {facade.token}")
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def check(facade: Facade, kind: str, raw: bytes, allowed: set[int | None]) -> int | None:
    status, _ = check_answer(facade, kind, raw, allowed)
    return status


def check_answer(
    facade: Facade, kind: str, raw: bytes, allowed: set[int | None]
) -> tuple[int | None, bytes]:
    status, body = exchange(facade, raw)
    SEEN[kind][status] += 1
    assert status is None or status < 500, f"{kind}: {status} {body[:300]!r} for {raw[:300]!r}"
    assert status in allowed, f"{kind}: {status} {body[:300]!r} for {raw[:300]!r}"
    alive, _ = exchange(facade, request(facade, "GET", "/api/v1/nodes/n1"))
    assert alive == 200, f"the facade stopped serving after {raw[:200]!r}"
    return status, body


# --- strategies ----------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
label_text = st.text(alphabet=string.ascii_letters + string.digits + "-_./ %:é", max_size=70)
quantity_text = st.one_of(
    st.from_regex(
        r"\A[+-]?[0-9]{0,25}(\.[0-9]{0,12})?([eE][+-]?[0-9]{1,12}|[numkMGTPE]|[KMGTPE]i)?\Z"
    ),
    st.text(alphabet="0123456789.eE+-numkKMGTPiE ", max_size=30),
)
PODS = "/api/v1/namespaces/default/pods"


def _pod(name: str, **fields) -> dict:
    container = {"name": "c", "image": "busybox"}
    container.update(fields.pop("container", {}))
    pod = {"metadata": {"name": name}, "spec": {"containers": [container]}}
    pod["metadata"].update(fields.pop("metadata", {}))
    pod["spec"].update(fields.pop("spec", {}))
    return pod


_names = iter(range(10**9))


def fresh(prefix: str = "f") -> str:
    return f"{prefix}-{next(_names)}"


# --- classes of malformed requests ---------------------------------------------------------


@FUZZ
@given(st.binary(min_size=1, max_size=300))
def test_garbage_bytes_get_a_400_or_a_close(facade, raw):
    check(facade, "garbage", raw + b"\r\n\r\n", {None, 400, 401, 404, 405, 406, 413, 431})


@FUZZ
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "BREW"]),
    path=st.lists(
        st.sampled_from(
            [
                "api",
                "apis",
                "v1",
                "namespaces",
                "default",
                "pods",
                "nodes",
                "n1",
                "binding",
                "status",
                "watch",
                "apps",
                "batch",
                "%00",
                "..",
                "x" * 300,
                "",
                "?",
                "%zz",
            ]
        ),
        max_size=7,
    ),
    token=st.booleans(),
)
def test_any_path_and_method_is_answered_without_a_5xx(facade, method, path, token):
    target = "/" + "/".join(path)
    status = check(
        facade,
        "paths",
        request(
            facade,
            method,
            target,
            b"{}" if method in ("POST", "PUT", "PATCH") else None,
            token=token,
        ),
        {200, 201, 400, 401, 403, 404, 405, 406, 409, 415, 422},
    )
    if not token and target.strip("/").split("?")[0] not in ("healthz", "livez", "readyz"):
        assert status == 401


@FUZZ
@given(json_values)
def test_any_json_body_for_a_pod_is_400_or_422_or_created(facade, body):
    status = check(
        facade,
        "json bodies",
        request(facade, "POST", PODS, json.dumps(body).encode()),
        {201, 400, 409, 422},
    )
    if not isinstance(body, dict):
        assert status == 400


@FUZZ
@given(
    where=st.sampled_from(
        [
            ("metadata", "labels"),
            ("metadata", "annotations"),
            ("metadata", "name"),
            ("metadata", "namespace"),
            ("metadata", "ownerReferences"),
            ("spec", "containers"),
            ("spec", "nodeSelector"),
            ("spec", "priority"),
            ("spec", "tolerations"),
            ("spec", "nodeName"),
            ("container", "resources"),
            ("container", "name"),
            ("container", "image"),
        ]
    ),
    value=json_values,
)
def test_a_wrong_typed_field_is_a_400_and_a_bad_value_a_422(facade, where, value):
    section, key = where
    pod = _pod(fresh(), **{section: {key: value}})
    status, body = check_answer(
        facade,
        "typed fields",
        request(facade, "POST", PODS, json.dumps(pod).encode()),
        {201, 400, 404, 409, 422},
    )
    answer = json.loads(body)
    if status == 400:  # a decoding error (or the URL's namespace contradicted)
        assert "cannot be handled as a Pod" in answer["message"] or (
            "namespace" in answer["message"]
        ), answer
    if status == 422:
        assert answer["reason"] == "Invalid" and answer["details"]["causes"], answer


@FUZZ
@given(quantity_text, st.sampled_from(["cpu", "memory"]))
def test_quantities_follow_the_grammar(facade, text, resource):
    pod = _pod(fresh("q"), container={"resources": {"requests": {resource: text}}})
    try:
        parsed = quantity.parse(text)
        expected = {422} if parsed.sign < 0 else {201}
    except quantity.QuantityError:
        expected = {400}
    check(facade, "quantities", request(facade, "POST", PODS, json.dumps(pod).encode()), expected)


@FUZZ
@given(label_text, label_text)
def test_labels_follow_the_api_servers_rules(facade, key, value):
    pod = _pod(fresh("l"), metadata={"labels": {key: value}})
    valid = not v.is_qualified_name(key) and not v.is_label_value(value)
    check(
        facade,
        "labels",
        request(facade, "POST", PODS, json.dumps(pod).encode()),
        {201} if valid else {422},
    )


@FUZZ
@given(
    length=st.one_of(st.none(), st.sampled_from(["-1", "abc", "99999999999999999999", "0", "5"])),
    chunked=st.booleans(),
    chunks=st.lists(st.binary(max_size=20), max_size=5),
    size_line=st.sampled_from([None, b"zz", b"-1", b"ffffffffffffffffffff", b"1;ext=1"]),
)
def test_framing_mistakes_are_4xx_never_a_hang(facade, length, chunked, chunks, size_line):
    head = [f"POST {PODS} HTTP/1.1", "Host: fuzz", f"Authorization: Bearer {facade.token}"]
    head.append("Connection: close")
    if length is not None:
        head.append(f"Content-Length: {length}")
    if chunked:
        head.append("Transfer-Encoding: chunked")
    body = b""
    for chunk in chunks:
        line = size_line if size_line is not None else f"{len(chunk):x}".encode()
        body += line + b"\r\n" + chunk + b"\r\n"
    if chunked:
        body += b"0\r\n\r\n"
    raw = ("\r\n".join(head) + "\r\n\r\n").encode() + body
    check(facade, "framing", raw, {None, 201, 400, 409, 411, 413, 422, 431, 501})


@FUZZ
@given(
    params=st.dictionaries(
        st.sampled_from(
            [
                "watch",
                "timeoutSeconds",
                "resourceVersion",
                "limit",
                "continue",
                "labelSelector",
                "fieldSelector",
                "allowWatchBookmarks",
                "sendInitialEvents",
                "resourceVersionMatch",
            ]
        ),
        st.one_of(
            st.text(alphabet=string.printable, max_size=30),
            st.sampled_from(["1", "true", "0", "9" * 401, "-5", "abc", "app=x,", "!!", "="]),
        ),
        max_size=4,
    ),
    accept=st.sampled_from(["", "application/json", "application/xml", "*/*", "text/html;q=1"]),
)
def test_query_parameters_and_accept_are_4xx_never_a_5xx(facade, params, accept):
    from urllib.parse import urlencode

    target = "/api/v1/namespaces/default/pods?" + urlencode(params)
    headers = {"Accept": accept} if accept else {}
    status = check(
        facade,
        "queries",
        request(facade, "GET", target, headers=headers),
        {200, 400, 406, 410, 422, 504},  # 422: ValidateListOptions
    )
    if accept in ("application/xml", "text/html;q=1"):
        assert status == 406


@FUZZ
@given(st.integers(0, 200), st.binary(max_size=50))
def test_unauthenticated_requests_never_reach_a_handler(facade, n, junk):
    raw = (
        f"POST {PODS} HTTP/1.1\r\nHost: fuzz\r\nAuthorization: Bearer {'x' * n}\r\n"
        f"Content-Length: 67108864\r\n\r\n"
    ).encode() + junk
    check(facade, "unauthenticated", raw, {401})


_STATUS_KEYS = {
    "deployments": ["replicas", "readyReplicas", "availableReplicas", "updatedReplicas",
                    "unavailableReplicas", "observedGeneration", "collisionCount", "conditions"],
    "replicasets": ["replicas", "readyReplicas", "availableReplicas", "fullyLabeledReplicas",
                    "observedGeneration", "conditions"],
    "horizontalpodautoscalers": ["currentReplicas", "desiredReplicas", "observedGeneration",
                                 "lastScaleTime", "currentMetrics", "conditions"],
}  # fmt: skip
_STATUS_PATHS = {
    "deployments": "/apis/apps/v1/namespaces/default/deployments/web",
    "replicasets": "/apis/apps/v1/namespaces/default/replicasets/web",
    "horizontalpodautoscalers": "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/web",
}


def _status_targets(facade: Facade) -> None:
    """The objects whose status the fuzzer writes (made once per module)."""
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]},
    }
    spec = {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": template}
    hpa = {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}
    for plural, body in (
        ("deployments", spec),
        ("replicasets", spec),
        ("horizontalpodautoscalers", hpa),
    ):
        key = f"{plural}.{'autoscaling' if plural.startswith('h') else 'apps'}"
        if facade.store.get_or_none(key, "default", "web") is None:
            facade.store.create(
                key, {"metadata": {"name": "web"}, "spec": body}, namespace="default"
            )


@FUZZ
@given(
    plural=st.sampled_from(sorted(_STATUS_KEYS)),
    status=st.one_of(
        json_values,
        st.sampled_from(sorted(_STATUS_KEYS)).flatmap(
            lambda p: st.dictionaries(st.sampled_from(_STATUS_KEYS[p]), json_values, max_size=3)
        ),
    ),
    put=st.booleans(),
)
def test_status_writes_store_only_what_decodes_and_the_scale_always_answers(
    facade, plural, status, put
):
    """Issue 27 #1: whatever a client writes to ``…/status``, what is stored decodes into
    the Go status type (so the controllers can read it) and ``…/scale`` answers."""
    from broker.facade.resources import resource_type

    _status_targets(facade)
    path = _STATUS_PATHS[plural]
    if put:
        _, current = exchange(facade, request(facade, "GET", path))
        body = {**json.loads(current), "status": status}
        raw = request(facade, "PUT", f"{path}/status", json.dumps(body).encode())
    else:
        raw = request(
            facade, "PATCH", f"{path}/status", json.dumps({"status": status}).encode()
        ).replace(b"application/json", b"application/merge-patch+json", 1)
    check(facade, "status writes", raw, {200, 400, 409, 422})
    rt = next(t for t in (resource_type(k) for k in ("deployments.apps", "replicasets.apps",
              "horizontalpodautoscalers.autoscaling")) if t.plural == plural)  # fmt: skip
    stored = facade.store.get(rt.key, "default", "web")
    rt.strategy.decode(rt, stored)  # raises ApiError(400) for a shape that does not decode
    scale = "/apis/apps/v1/namespaces/default/deployments/web/scale"
    check(facade, "scale", request(facade, "GET", scale), {200})
