"""Lease times (``metav1.MicroTime``) as kube-apiserver decodes and writes them back:
RFC 3339 with exactly six fractional digits, answered in UTC; a value Go's
``time.Parse(RFC3339Micro, …)`` refuses is a 400 with Go's words — except a value with no
fraction at all, which the official client's ``LeaseLock`` sends at a whole second
(``datetime.isoformat()``) and a simulated clock often reaches: it is taken as
``.000000`` (docs/compatibility.md says why)."""

from __future__ import annotations

from datetime import datetime

import pytest
import requests
from kubernetes import config
from kubernetes.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from broker.facade import Facade, ManualClock
from broker.k8s.gotime import GoTimeError, parse_micro_time

LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
LAYOUT = '"2006-01-02T15:04:05.000000Z07:00"'


@pytest.fixture
def facade():
    f = Facade(ManualClock()).start()
    yield f
    f.stop()


def _session(facade) -> requests.Session:
    s = requests.Session()
    s.trust_env = False
    s.headers["Authorization"] = f"Bearer {facade.add_token('t')}"
    return s


def test_the_official_lease_lock_at_a_whole_second_elects_and_renews(facade, tmp_path):
    config.load_kube_config(str(facade.write_kubeconfig(tmp_path / "kc", "elector")))
    lock = LeaseLock("sched", "default", "a")
    whole = str(datetime(2026, 11, 28, 11, 0, 0))  # what leaderelection.py writes
    assert lock.create("sched", "default", LeaderElectionRecord("a", "15", whole, whole))
    stored = facade.store.get("leases.coordination.k8s.io", "default", "sched")["spec"]
    assert stored["renewTime"].endswith(".000000Z") and stored["acquireTime"] == stored["renewTime"]
    later = str(datetime(2026, 11, 28, 11, 0, 2, 250000))
    assert lock.update("sched", "default", LeaderElectionRecord("a", "15", whole, later))
    found, record = LeaseLock("sched", "default", "b").get("sched", "default")
    assert found and (record.acquire_time, record.renew_time) == (whole, later)
    stored = facade.store.get("leases.coordination.k8s.io", "default", "sched")["spec"]
    assert stored["renewTime"].endswith(":02.250000Z")


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("2026-11-28T11:00:00.000000Z", "2026-11-28T11:00:00.000000Z"),
        ("2026-11-28T12:30:00.123456+01:30", "2026-11-28T11:00:00.123456Z"),
        ("2026-11-28T11:00:00+00:00", "2026-11-28T11:00:00.000000Z"),  # the leniency
    ],
)
def test_lease_times_are_written_back_in_utc_with_six_digits(facade, sent, stored):
    s = _session(facade)
    body = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a", "renewTime": sent}}
    r = s.post(facade.url + LEASES, json=body)
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["renewTime"] == stored
    r = s.patch(
        facade.url + LEASES + "/l",
        json={"spec": {"acquireTime": sent}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.json()["spec"]["acquireTime"] == stored


@pytest.mark.parametrize(
    ("sent", "error"),
    [
        ("2026-11-28T11:00:00.103Z", f' as {LAYOUT}: cannot parse ".103Z" as ".000000"'),
        ("2026-11-28T11:00:00.1234567Z", f' as {LAYOUT}: cannot parse "7Z" as "Z07:00"'),
        ("2026-11-28 11:00:00.000000Z", f' as {LAYOUT}: cannot parse " 11:00:00.000000Z" as "T"'),
        ("2026-13-01T11:00:00.000000Z", ": month out of range"),
        ("2026-02-30T11:00:00.000000Z", ": day out of range"),
        ("2026-11-28T11:00:00.000000Z!", ': extra text: "!"'),
    ],
)
def test_what_go_refuses_is_a_400_with_gos_words(facade, sent, error):
    s = _session(facade)
    body = {"metadata": {"name": "l"}, "spec": {"renewTime": sent}}
    r = s.post(facade.url + LEASES, json=body)
    assert r.status_code == 400
    assert r.json()["message"] == (
        f'Lease in version "v1" cannot be handled as a Lease: parsing time "{sent}"{error}'
    )
    with pytest.raises(GoTimeError):
        parse_micro_time(sent, whole_seconds=True)


def test_without_the_leniency_a_whole_second_is_refused_as_go_refuses_it():
    with pytest.raises(GoTimeError) as refused:
        parse_micro_time("2026-11-28T11:00:00+00:00")
    assert str(refused.value).endswith('cannot parse "+00:00" as ".000000"')
