"""Issue 19 #3: every list/watch query parameter read as kube-apiserver v1.30 reads it
(handlers/get.go ListResource, ValidateListOptions, the watch cache, the etcd store).
Each test names the real behaviour it pins."""

from __future__ import annotations

import pytest
from test_facade_http import POD, RawClient, wait_idle

from broker.facade import Facade, ManualClock

PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
def facade():
    f = Facade(ManualClock(), history_limit=20, bookmark_interval_s=60, seed=7)
    f.token = f.add_token("sched")
    with f:
        yield f


def _pods(facade: Facade, *names: str) -> list[str]:
    rvs = []
    for name in names:
        created = facade.store.create(
            "pods", {**POD, "metadata": {"name": name}}, namespace="default"
        )
        rvs.append(created["metadata"]["resourceVersion"])
    return rvs


def _names(body: dict) -> list[str]:
    return [i["metadata"]["name"] for i in body["items"]]


def _watch(facade: Facade, query: str) -> RawClient:
    c = RawClient(facade)
    c.send("GET", f"{PODS}?watch=true&{query}")
    assert c.head()[0] == 200
    return c


# --------------------------------------------------------------------------- timeoutSeconds


@pytest.mark.parametrize("query", ["timeoutSeconds=0", "", "timeoutSeconds=0&timeoutSeconds=5"])
def test_timeout_0_or_absent_is_not_given_the_server_limit_is_30_to_60_virtual_minutes(
    facade, query
):
    """get.go: ``timeout == 0 && minRequestTimeout > 0`` → minRequestTimeout (1800 s) ×
    (1 + rand); what ``Watch().stream(..., timeout_seconds=0)`` sends."""
    c = _watch(facade, query)
    assert wait_idle(facade, c)
    (deadline,) = facade.clock.pending()
    assert 1800 * 10**9 <= deadline < 3600 * 10**9
    facade.clock.advance_to(deadline - 1)
    assert wait_idle(facade, c), "still open just before its limit"
    facade.clock.advance_to(deadline)
    assert c.chunk() == b""  # the end of the stream


def test_the_server_limit_is_drawn_from_the_facades_seed():
    def deadlines(seed: int) -> list[int]:
        f = Facade(ManualClock(), seed=seed)
        f.token = f.add_token("sched")
        with f:
            clients = [_watch(f, "timeoutSeconds=0") for _ in range(3)]
            for c in clients:
                assert wait_idle(f, c)
            return sorted(f.clock.pending())

    assert deadlines(1) == deadlines(1)
    assert deadlines(1) != deadlines(2)


def test_a_positive_timeout_is_that_many_virtual_seconds(facade):
    c = _watch(facade, "timeoutSeconds=45")
    assert wait_idle(facade, c)
    assert facade.clock.pending() == [45 * 10**9]


def test_a_negative_timeout_ends_the_stream_at_once(facade):
    """The watch server's timer fires at once for a negative duration."""
    _pods(facade, "a")
    c = _watch(facade, "timeoutSeconds=-1")
    assert c.chunk() == b""


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", 'strconv.ParseInt: parsing "": invalid syntax'),
        ("soon", 'strconv.ParseInt: parsing "soon": invalid syntax'),
        ("1.5", 'strconv.ParseInt: parsing "1.5": invalid syntax'),
        ("9" * 401, f'strconv.ParseInt: parsing "{"9" * 401}": value out of range'),
    ],
)
def test_a_timeout_that_is_not_an_int64_is_a_400_with_gos_message(facade, value, message):
    for path in (f"{PODS}?watch=1&timeoutSeconds={value}", f"{PODS}?timeoutSeconds={value}"):
        status, body = RawClient(facade).request("GET", path)
        assert (status, body["reason"], body["message"]) == (400, "BadRequest", message)


# --------------------------------------------------------------------------- booleans


@pytest.mark.parametrize(
    ("value", "watching"),
    [("true", True), ("1", True), ("", True), ("yes", True), ("TRUE", True),
     ("false", False), ("False", False), ("FALSE", False), ("0", False)],
)  # fmt: skip
def test_a_boolean_is_false_only_for_0_and_false(facade, value, watching):
    """Convert_Slice_string_To_bool: "Any other value (including empty string) resolves
    to true"."""
    c = RawClient(facade)
    c.send("GET", f"{PODS}?watch={value}&timeoutSeconds=5")
    status, headers = c.head()
    assert status == 200
    assert (headers.get("transfer-encoding") == "chunked") is watching


def test_a_parameter_given_twice_counts_by_its_first_value(facade):
    _pods(facade, "a", "b")
    status, body = RawClient(facade).request("GET", f"{PODS}?limit=1&limit=5")
    assert status == 200 and _names(body) == ["a"] and body["metadata"]["continue"]
    c = RawClient(facade)
    c.send("GET", f"{PODS}?watch=false&watch=true")
    status, headers = c.head()
    assert status == 200 and "content-length" in headers  # a list


# --------------------------------------------------------------------------- resourceVersion


def test_watch_without_a_resource_version_or_with_0_starts_with_the_current_state(facade):
    _pods(facade, "a", "b")
    for query in ("timeoutSeconds=5", "resourceVersion=0&timeoutSeconds=5", "resourceVersion="):
        c = _watch(facade, query)
        assert [c.event()["object"]["metadata"]["name"] for _ in range(2)] == ["a", "b"]


def test_watch_from_a_resource_version_replays_what_came_after_it(facade):
    rv_a, _ = _pods(facade, "a", "b")
    c = _watch(facade, f"resourceVersion={rv_a}&timeoutSeconds=5")
    event = c.event()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "b")


def test_watch_from_a_compacted_resource_version_is_200_and_a_410_error_event(facade):
    rv_a = _pods(facade, "a")[0]
    _pods(facade, *[f"p{i}" for i in range(25)])  # history_limit 20
    event = _watch(facade, f"resourceVersion={rv_a}").event()
    assert event["type"] == "ERROR"
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")
    assert event["object"]["message"].startswith(f"too old resource version: {rv_a} (")


def test_watch_from_a_future_resource_version_is_a_too_large_error_not_a_silent_wait(facade):
    """The watch cache fails a resourceVersion it has not reached (after waiting 3 s) with
    ``Too large resource version`` (504, cause ResourceVersionTooLarge)."""
    current = facade.store.resource_version
    status, body = RawClient(facade).request("GET", f"{PODS}?watch=1&resourceVersion={current + 5}")
    assert (status, body["reason"]) == (504, "Timeout")
    assert body["message"] == (
        f"Timeout: Too large resource version: {current + 5}, current: {current}"
    )
    assert body["details"]["causes"] == [
        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    ]


def test_a_resource_version_that_is_not_a_number_is_a_400(facade):
    for path in (f"{PODS}?resourceVersion=abc", f"{PODS}?watch=1&resourceVersion=abc"):
        status, body = RawClient(facade).request("GET", path)
        assert status == 400 and "resourceVersion: Invalid value" in body["message"]


def test_list_at_an_older_resource_version_without_limit_is_not_older_than_it(facade):
    rv_a, _ = _pods(facade, "a", "b")
    status, body = RawClient(facade).request("GET", f"{PODS}?resourceVersion={rv_a}")
    assert _names(body) == ["a", "b"]
    assert body["metadata"]["resourceVersion"] == str(facade.store.resource_version)


def test_list_at_a_future_resource_version_is_504_too_large(facade):
    current = facade.store.resource_version
    for query in (f"resourceVersion={current + 1}",
                  f"resourceVersion={current + 1}&resourceVersionMatch=NotOlderThan",
                  f"resourceVersion={current + 1}&resourceVersionMatch=Exact"):  # fmt: skip
        status, body = RawClient(facade).request("GET", f"{PODS}?{query}")
        assert (status, body["reason"]) == (504, "Timeout")
        assert "Too large resource version" in body["message"]


def test_list_with_match_exact_is_the_list_as_it_was_at_that_resource_version(facade):
    rv_a, rv_b = _pods(facade, "a", "b")
    facade.store.delete("pods", "default", "a")
    facade.store.update("pods", "default", "b", lambda o: o["metadata"].update(labels={"x": "1"}))
    _pods(facade, "c")
    c = RawClient(facade)
    status, body = c.request("GET", f"{PODS}?resourceVersion={rv_b}&resourceVersionMatch=Exact")
    assert status == 200 and _names(body) == ["a", "b"]
    assert body["metadata"]["resourceVersion"] == rv_b
    assert "labels" not in body["items"][1]["metadata"]  # b as it was
    status, body = c.request("GET", f"{PODS}?resourceVersion={rv_a}&resourceVersionMatch=Exact")
    assert _names(body) == ["a"]
    # the labels are those of the objects then
    status, body = c.request(
        "GET", f"{PODS}?resourceVersion={rv_b}&resourceVersionMatch=Exact&labelSelector=x%3D1"
    )
    assert _names(body) == []


def test_an_exact_list_before_the_compacted_history_is_410(facade):
    rv_a = _pods(facade, "a")[0]
    _pods(facade, *[f"p{i}" for i in range(25)])
    status, body = RawClient(facade).request(
        "GET", f"{PODS}?resourceVersion={rv_a}&resourceVersionMatch=Exact"
    )
    assert (status, body["reason"]) == (410, "Expired")
    assert body["message"] == "The resourceVersion for the provided list is too old."


# --------------------------------------------------------------------------- limit, continue


def test_limit_pages_a_consistent_snapshot_and_continue_resumes_it(facade):
    _pods(facade, "a", "b", "c")
    c = RawClient(facade)
    status, first = c.request("GET", f"{PODS}?limit=2")
    assert _names(first) == ["a", "b"] and first["metadata"]["remainingItemCount"] == 1
    snapshot = first["metadata"]["resourceVersion"]
    # changes after the first page do not show in the next ones (the same revision)
    _pods(facade, "bb")
    facade.store.delete("pods", "default", "c")
    token = first["metadata"]["continue"]
    status, rest = c.request("GET", f"{PODS}?limit=2&continue={token}")
    assert status == 200 and _names(rest) == ["c"]
    assert rest["metadata"]["resourceVersion"] == snapshot and "continue" not in rest["metadata"]


def test_limit_with_resource_version_0_is_ignored_by_the_watch_cache(facade):
    _pods(facade, "a", "b", "c")
    status, body = RawClient(facade).request("GET", f"{PODS}?limit=1&resourceVersion=0")
    assert _names(body) == ["a", "b", "c"] and "continue" not in body["metadata"]


def test_limit_with_a_resource_version_and_no_match_is_an_exact_read(facade):
    """The API concepts table: limit set, resourceVersion non-zero → Exact."""
    rv_a, _ = _pods(facade, "a", "b")
    status, body = RawClient(facade).request("GET", f"{PODS}?limit=5&resourceVersion={rv_a}")
    assert _names(body) == ["a"] and body["metadata"]["resourceVersion"] == rv_a


@pytest.mark.parametrize("limit", ["0", "-3"])
def test_a_limit_of_zero_or_below_is_no_limit(facade, limit):
    _pods(facade, "a", "b")
    status, body = RawClient(facade).request("GET", f"{PODS}?limit={limit}")
    assert _names(body) == ["a", "b"] and "continue" not in body["metadata"]


def test_continue_with_a_resource_version_is_a_400(facade):
    _pods(facade, "a", "b")
    c = RawClient(facade)
    token = c.request("GET", f"{PODS}?limit=1")[1]["metadata"]["continue"]
    status, body = c.request("GET", f"{PODS}?limit=1&continue={token}&resourceVersion=3")
    assert (status, body["message"]) == (
        400,
        "specifying resource version is not allowed when using continue",
    )
    status, body = c.request("GET", f"{PODS}?limit=1&continue={token}&resourceVersion=0")
    assert status == 200 and _names(body) == ["b"]  # "0": treated as the token alone


def test_a_forged_or_stale_continue_token_is_refused_not_echoed(facade):
    import base64
    import json

    _pods(facade, "a")
    c = RawClient(facade)
    forged = base64.urlsafe_b64encode(json.dumps({"after": ["", ""], "rv": 10**9}).encode())
    status, body = c.request("GET", f"{PODS}?continue={forged.decode()}")
    assert status == 400 and body["message"].startswith("continue key is not valid")
    status, body = c.request("GET", f"{PODS}?continue=not-a-token")
    assert (status, body["reason"]) == (400, "BadRequest")
    token = c.request("GET", f"{PODS}?limit=1")[1]
    _pods(facade, *[f"p{i}" for i in range(25)])  # the snapshot's history is compacted
    old = base64.urlsafe_b64encode(json.dumps({"after": ["default", "a"], "rv": 2}).encode())
    status, body = c.request("GET", f"{PODS}?continue={old.decode()}")
    assert status == 410 and body["message"].startswith(
        "The provided continue parameter is too old"
    )
    assert token  # (a one-item list has no continue)


def test_limit_and_continue_are_ignored_by_a_watch(facade):
    _pods(facade, "a", "b")
    c = _watch(facade, "limit=1&continue=whatever&timeoutSeconds=5")
    assert [c.event()["object"]["metadata"]["name"] for _ in range(2)] == ["a", "b"]


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("resourceVersionMatch=NotOlderThan",
         "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
         "resourceVersion is provided"),
        ("resourceVersion=0&resourceVersionMatch=Exact",
         'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
         'resourceVersion "0"'),
        ("resourceVersion=1&resourceVersionMatch=Newest",
         'resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", '
         '"NotOlderThan", ""'),
        ("sendInitialEvents=true", "sendInitialEvents: Forbidden: sendInitialEvents is "
         "forbidden for list"),
        ("watch=1&resourceVersionMatch=NotOlderThan",
         "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch "
         "unless sendInitialEvents is provided"),
        ("watch=1&sendInitialEvents=true",
         "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
         "resourceVersionMatch to NotOlderThan"),
    ],
)  # fmt: skip
def test_list_options_are_validated_as_ValidateListOptions_does(facade, query, message):
    status, body = RawClient(facade).request("GET", f"{PODS}?{query}")
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == f'ListOptions.meta.k8s.io "" is invalid: {message}'
    assert body["details"]["group"] == "meta.k8s.io" and body["details"]["causes"]


def test_send_initial_events_then_the_initial_events_end_bookmark_when_bookmarks_are_allowed(
    facade,
):
    _pods(facade, "a")
    base = "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=30"
    c = _watch(facade, base + "&allowWatchBookmarks=true")
    assert c.event()["type"] == "ADDED"
    end = c.event()
    assert end["type"] == "BOOKMARK"
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    # without allowWatchBookmarks no bookmark is sent, that one included
    c = _watch(facade, base)
    assert c.event()["type"] == "ADDED"
    assert wait_idle(facade, c)


def test_send_initial_events_false_starts_at_the_most_recent_state_without_them(facade):
    _pods(facade, "a")
    c = _watch(facade, "sendInitialEvents=false&resourceVersionMatch=NotOlderThan")
    assert wait_idle(facade, c)
    _pods(facade, "b")
    assert c.event()["object"]["metadata"]["name"] == "b"


def test_send_initial_events_from_a_compacted_version_is_the_state_now(facade):
    """NotOlderThan: any state at least as new will do, so no 410."""
    rv_a = _pods(facade, "a")[0]
    _pods(facade, *[f"p{i}" for i in range(25)])
    q = f"sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={rv_a}"
    assert _watch(facade, q).event()["type"] == "ADDED"
