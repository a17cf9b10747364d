"""Controller-made pods as Batsim dynamic jobs, and the batch/v1 Job controller.

Most tests run the broker against the embedded simulator *in process*
(:mod:`broker.drivers.inprocess`: messages through the real codec, no sockets, no scheduler
process, a first-fit binder plays the scheduler), so each run is deterministic and takes
milliseconds; a few run `timewarp simulate` with a real scheduler process.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cluster.state import DURATION_ANNOTATION, JOB_ID_ANNOTATION, NOT_SIMULATED
from broker.drivers.inprocess import InProcessRun
from broker.facade.errors import ApiError
from broker.facade.objects import format_time
from broker.k8s import naming
from broker.k8s.names import is_dns1123_subdomain
from simulator import protocol as p
from simulator.outputs import jobs_rows
from simulator.testing import write_platform, write_workload


@pytest.fixture
def world(tmp_path):
    run = InProcessRun(tmp_path)
    yield run
    run.close()


ONE_STATIC = (
    [{"id": "1", "subtime": 0, "res": 1, "profile": "short"}],
    {"short": {"type": "delay", "delay": 1, "cpu": "1", "scheduler": "default"}},
)


def job_manifest(name: str, duration: float | None = 10, **spec) -> dict:
    annotations = {} if duration is None else {DURATION_ANNOTATION: str(duration)}
    pod_spec = {
        "restartPolicy": "Never",
        "containers": [
            {"name": "work", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
        ],
    }
    pod_spec.update(spec.pop("pod", {}))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "template": {"metadata": {"annotations": annotations}, "spec": pod_spec},
            **spec,
        },
    }


def create_at_start(world, *objects):
    """Create objects through the API's admission (as a client would) when SIMULATION_BEGINS
    is being handled."""

    def before(message):
        if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
            for key, obj in objects:
                world.store.create(key, obj, prepare=world.facade.hooks.on_create)

    return before


# --------------------------------------------------------------------------- Job controller


def test_a_job_with_three_completions_two_at_a_time_runs_to_complete(world):
    jobs, profiles = ONE_STATIC
    manifest = job_manifest("pi", duration=10, completions=3, parallelism=2)
    seen = {}

    def before(message):
        create_at_start(world, ("jobs.batch", manifest))(message)
        if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
            for t in (5, 15):
                world.clock.call_at(t * 10**9, lambda t=t: seen.update({t: status_now()}))

    def status_now():
        return dict(world.store.get("jobs.batch", "default", "pi")["status"])

    sim = world.run(jobs, profiles, before=before)
    assert (seen[5]["active"], seen[5]["ready"], seen[5].get("succeeded")) == (2, 2, None)
    assert (seen[15]["active"], seen[15]["ready"], seen[15]["succeeded"]) == (1, 1, 2)
    assert "conditions" not in seen[15]
    job = world.store.get("jobs.batch", "default", "pi")
    status = job["status"]
    assert status["succeeded"] == 3 and "active" not in status and "failed" not in status
    complete = [c for c in status["conditions"] if c["type"] == "Complete"]
    assert complete and complete[0]["status"] == "True"
    assert complete[0]["reason"] == "CompletionsReached"
    epoch = world.clock.epoch_ns
    assert status["startTime"] == format_time(epoch)
    assert status["completionTime"] == format_time(epoch + 20 * 10**9)
    # two pods ran from 0 to 10, the third from 10 to 20: the Job completed at 20
    k8s = [r for r in world.rows() if r["workload_name"] == naming.API_WORKLOAD]
    assert len(k8s) == 3
    spans = sorted((float(r["starting_time"]), float(r["finish_time"])) for r in k8s)
    assert spans == [(0.0, 10.0), (0.0, 10.0), (10.0, 20.0)]
    assert all(r["final_state"] == "COMPLETED_SUCCESSFULLY" for r in k8s)
    assert sim.now == pytest.approx(20.0)
    pods = world.store.list("pods", "default", label_selector="job-name=pi")[0]
    assert len(pods) == 3 and {q["status"]["phase"] for q in pods} == {"Succeeded"}
    for pod in pods:
        meta = pod["metadata"]
        assert meta["name"].startswith("pi-")
        assert meta["labels"]["batch.kubernetes.io/job-name"] == "pi"
        assert meta["labels"]["controller-uid"] == job["metadata"]["uid"]
        owner = meta["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("Job", "pi", True)
        assert meta["annotations"][JOB_ID_ANNOTATION] == naming.api_pod_job_id(
            "default", meta["name"]
        )
    assert {r["job_id"] for r in k8s} == {f"default.{q['metadata']['name']}" for q in pods}
    assert [e["message"] for e in world.events("Completed")] == ["Job completed"]
    assert len(world.events("SuccessfulCreate")) == 3


def test_one_delay_profile_is_registered_per_duration_and_registration_finishes_last(world):
    jobs, profiles = ONE_STATIC
    before = create_at_start(
        world,
        ("jobs.batch", job_manifest("a", duration=10, completions=2)),
        ("jobs.batch", job_manifest("b", duration=10)),
    )
    world.run(jobs, profiles, before=before)
    registered = world.sent("REGISTER_PROFILE")
    assert [d for _, d in registered] == [
        {
            "workload_name": "k8s",
            "profile_name": "delay-10",
            "profile": {"type": "delay", "delay": 10.0},
        }
    ]
    finished = [t for t, d in world.sent("NOTIFY") if d["type"] == "registration_finished"]
    assert len(finished) == 1
    last_register = max(t for t, _ in world.sent("REGISTER_JOB"))
    assert finished[0] >= last_register
    # the NOTIFY is in the reply that let the simulation end
    assert any(e["type"] == "NOTIFY" for e in world.replies[-2]["events"])


def test_failures_past_the_backoff_limit_fail_the_job(world):
    """Each pod outlives its own activeDeadlineSeconds (the Batsim walltime) and fails;
    the controller retries after 10 s, then gives up: backoffLimit=1 allows one retry."""
    jobs, profiles = ONE_STATIC
    manifest = job_manifest("flaky", duration=10, backoffLimit=1, pod={"activeDeadlineSeconds": 5})
    world.run(jobs, profiles, before=create_at_start(world, ("jobs.batch", manifest)))
    status = world.store.get("jobs.batch", "default", "flaky")["status"]
    failed = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["reason"] == "BackoffLimitExceeded"
    assert status["failed"] == 2 and "succeeded" not in status and "completionTime" not in status
    k8s = [r for r in world.rows() if r["workload_name"] == "k8s"]
    assert [r["final_state"] for r in k8s] == ["COMPLETED_WALLTIME_REACHED"] * 2
    spans = sorted((float(r["starting_time"]), float(r["finish_time"])) for r in k8s)
    assert spans == [(0.0, 5.0), (15.0, 20.0)]  # 10 s back-off after the first failure
    pods = world.store.list("pods", "default", label_selector="job-name=flaky")[0]
    assert {q["status"]["reason"] for q in pods} == {"DeadlineExceeded"}
    assert len(world.events("BackoffLimitExceeded")) == 1


def test_active_deadline_seconds_stops_a_job_in_virtual_time(world):
    jobs, profiles = ONE_STATIC
    manifest = job_manifest("slow", duration=100, activeDeadlineSeconds=30)
    sim = world.run(jobs, profiles, before=create_at_start(world, ("jobs.batch", manifest)))
    status = world.store.get("jobs.batch", "default", "slow")["status"]
    assert [c["reason"] for c in status["conditions"]] == ["DeadlineExceeded"]
    assert status["failed"] == 1 and "active" not in status
    [row] = [r for r in world.rows() if r["workload_name"] == "k8s"]
    assert row["final_state"] == "COMPLETED_KILLED" and float(row["finish_time"]) == 30.0
    assert world.store.list("pods", "default", label_selector="job-name=slow")[0] == []
    assert sim.now == pytest.approx(30.0)


def test_a_job_without_durations_runs_until_deleted_and_does_not_hold_the_simulation(world):
    jobs, profiles = ONE_STATIC
    manifest = job_manifest("forever", duration=None)
    sim = world.run(jobs, profiles, before=create_at_start(world, ("jobs.batch", manifest)))
    assert sim.now == pytest.approx(1.0)  # the static job's end
    [pod] = world.store.list("pods", "default", label_selector="job-name=forever")[0]
    assert pod["status"]["phase"] == "Running"
    [warning] = world.events(NOT_SIMULATED)
    assert warning["type"] == "Warning"
    assert warning["involvedObject"]["name"] == pod["metadata"]["name"]
    assert DURATION_ANNOTATION in warning["message"] and "until deleted" in warning["message"]
    assert world.sent("REGISTER_JOB") == []
    assert world.cluster.stats.pods_outside_batsim == 1


def test_a_bad_duration_is_named_in_the_warning(world):
    jobs, profiles = ONE_STATIC
    manifest = job_manifest("typo", duration="ten")
    world.run(jobs, profiles, before=create_at_start(world, ("jobs.batch", manifest)))
    [warning] = world.events(NOT_SIMULATED)
    assert "timewarp.io/duration='ten' is not a number of seconds" in warning["message"]


def test_a_bare_api_pod_with_a_duration_is_a_dynamic_job(world):
    jobs, profiles = ONE_STATIC
    pod = {
        "metadata": {"name": "solo", "annotations": {DURATION_ANNOTATION: "7.5"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    world.run(jobs, profiles, before=create_at_start(world, ("pods", pod)))
    row = next(r for r in world.rows() if r["job_id"] == "default.solo")
    assert row["workload_name"] == "k8s" and row["profile"] == "delay-7.5"
    assert float(row["execution_time"]) == 7.5
    assert world.store.get("pods", "default", "solo")["status"]["phase"] == "Succeeded"


def test_a_pod_name_used_again_is_a_new_batsim_job(world):
    """A name is free again once its pod is gone (generateName may even draw it again):
    the second pod of that name is another Batsim job, not REGISTER_JOB of an id the
    simulator already has."""
    jobs = [{"id": "1", "subtime": 0, "res": 1, "profile": "long"}]  # keeps the run going
    profiles = {"long": {"type": "delay", "delay": 30, "cpu": "1", "scheduler": "default"}}

    def pod() -> dict:
        return {
            "metadata": {"name": "solo", "annotations": {DURATION_ANNOTATION: "5"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }

    def delete():
        world.facade.hooks.on_delete_pod("default", "solo")
        world.store.delete("pods", "default", "solo")

    def before(message):
        create_at_start(world, ("pods", pod()))(message)
        if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
            world.clock.call_at(8 * 10**9, delete)
            world.clock.call_at(
                10 * 10**9,
                lambda: world.store.create("pods", pod(), prepare=world.facade.hooks.on_create),
            )

    sim = world.run(jobs, profiles, before=before)
    rows = {r["job_id"]: r for r in world.rows() if r["workload_name"] == naming.API_WORKLOAD}
    assert sorted(rows) == ["default.solo", "default.solo~2"]
    assert all(r["final_state"] == "COMPLETED_SUCCESSFULLY" for r in rows.values())
    assert float(rows["default.solo~2"]["starting_time"]) == 10.0
    assert float(rows["default.solo~2"]["finish_time"]) == 15.0
    assert sim.now == pytest.approx(30.0)
    pod_now = world.store.get("pods", "default", "solo")
    assert pod_now["metadata"]["annotations"][JOB_ID_ANNOTATION] == "k8s!default.solo~2"
    assert naming.api_pod_of("k8s!default.solo~2") == ("default", "solo")


def test_job_admission_generates_the_selector_and_refuses_restart_always(world):
    created = world.store.create("jobs.batch", job_manifest("x"))
    uid = created["metadata"]["uid"]
    assert created["spec"]["selector"] == {
        "matchLabels": {"batch.kubernetes.io/controller-uid": uid}
    }
    labels = created["spec"]["template"]["metadata"]["labels"]
    assert labels == {
        "batch.kubernetes.io/controller-uid": uid,
        "controller-uid": uid,
        "batch.kubernetes.io/job-name": "x",
        "job-name": "x",
    }
    bad = job_manifest("y")
    del bad["spec"]["template"]["spec"]["restartPolicy"]
    with pytest.raises(ApiError) as err:
        world.store.create("jobs.batch", bad)
    assert err.value.code == 422 and 'Unsupported value: "Always"' in str(err.value)


# --------------------------------------------------------------------- ReplicaSet replacements

RS_WORKLOAD = (
    [{"id": "web-1", "subtime": 0, "res": 1, "profile": "long", "replicaset": "web"}],
    {"long": {"type": "delay", "delay": 100, "cpu": "1", "scheduler": "default"}},
)


def evict_at(world, seconds: float, pod_name: str):
    """At virtual ``seconds``, evict ``pod_name`` as the eviction endpoint would."""

    def before(message):
        if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
            world.clock.call_at(int(seconds * 1e9), evict)

    def evict():
        world.facade.hooks.on_evict("default", pod_name)
        world.store.delete("pods", "default", pod_name)

    return before


def test_an_evicted_replicaset_pod_restarts_as_a_new_batsim_job(world):
    jobs, profiles = RS_WORKLOAD
    original = naming.pod_name("w0!web-1")
    sim = world.run(jobs, profiles, before=evict_at(world, 30, original))
    rows = {r["job_id"]: r for r in world.rows()}
    assert rows["web-1"]["final_state"] == "COMPLETED_KILLED"
    assert float(rows["web-1"]["finish_time"]) == 30.0
    again = rows["web-1~r1"]
    assert again["final_state"] == "COMPLETED_SUCCESSFULLY" and again["profile"] == "long"
    assert float(again["submission_time"]) == 30.0
    assert (float(again["starting_time"]), float(again["finish_time"])) == (30.0, 130.0)
    assert sim.now == pytest.approx(130.0)
    [(_, register)] = world.sent("REGISTER_JOB")
    assert register["job_id"] == "w0!web-1~r1" and register["job"]["replicaset"] == "web"
    [pod] = world.store.list("pods", "default", label_selector="timewarp.io/replicaset=web")[0]
    assert pod["metadata"]["name"].startswith("web-")
    assert pod["metadata"]["annotations"][JOB_ID_ANNOTATION] == "w0!web-1~r1"
    assert pod["status"]["phase"] == "Succeeded"


def test_a_service_pod_replacement_serves_the_rest_of_its_lifetime(world):
    # KSE's pods are services needed for the run's length: with "replacement": "remaining"
    # a moved pod's replacement ends when the original would have, not a whole delay later.
    jobs = RS_WORKLOAD[0]
    profiles = {"long": {**RS_WORKLOAD[1]["long"], "timewarp": {"replacement": "remaining"}}}
    original = naming.pod_name("w0!web-1")
    sim = world.run(jobs, profiles, before=evict_at(world, 30, original))
    rows = {r["job_id"]: r for r in world.rows()}
    assert float(rows["web-1"]["finish_time"]) == 30.0
    again = rows["web-1~r1"]
    assert again["final_state"] == "COMPLETED_SUCCESSFULLY"
    assert again["profile"].startswith("long~rest")
    assert (float(again["starting_time"]), float(again["finish_time"])) == (30.0, 100.0)
    assert sim.now == pytest.approx(100.0)
    [(_, register)] = world.sent("REGISTER_PROFILE")
    assert register["profile"] == {"type": "delay", "delay": 70.0}


def test_without_dynamic_jobs_a_replacement_runs_outside_batsim_with_a_warning(world):
    jobs, profiles = RS_WORKLOAD
    original = naming.pod_name("w0!web-1")
    sim = world.run(jobs, profiles, dynamic=False, before=evict_at(world, 30, original))
    assert [r["job_id"] for r in world.rows()] == ["web-1"]
    assert sim.now == pytest.approx(30.0)
    [warning] = world.events(NOT_SIMULATED)
    assert "--enable-dynamic-jobs" in warning["message"]
    assert world.sent("REGISTER_JOB") == [] and world.sent("NOTIFY") == []


# --------------------------------------------------------------------------------- naming

_ids = st.text(string.ascii_lowercase + string.digits + "-!~._", min_size=1, max_size=30)


@given(_ids.filter(lambda s: s[0].isalnum()), st.integers(1, 10_000))
def test_replacement_ids_lead_back_to_the_original_and_make_valid_pod_names(local, count):
    original = f"w0!{local}"
    replacement = naming.replacement_job_id(original, count)
    assert naming.original_job_id(replacement) == naming.original_job_id(original)
    assert naming.replacement_job_id(replacement, count + 1).count("~r") == replacement.count("~r")
    name = naming.pod_name(replacement)
    assert naming.job_id(name) == replacement
    assert is_dns1123_subdomain(name) == []


@given(
    st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,40}[a-z0-9])?", fullmatch=True),
)
def test_api_pod_job_ids_are_reversible(namespace, pod):
    job_id = naming.api_pod_job_id(namespace, pod)
    assert job_id.startswith("k8s!")
    assert naming.api_pod_of(job_id) == (namespace, pod)
    assert naming.api_pod_of(f"w0!{namespace}.{pod}") is None


# ------------------------------------------------------------- official clients, old and new

ROOT = Path(__file__).resolve().parent.parent
OLD_CLIENT = ROOT / ".venv" / "k8s24"
READ_JOB = """
import json, sys
from kubernetes import client, config
import kubernetes
config.load_kube_config(sys.argv[1])
batch = client.BatchV1Api()
job = batch.read_namespaced_job("pi", "default")
assert isinstance(job, client.V1Job)
[listed] = batch.list_namespaced_job("default").items
events = client.CoreV1Api().list_namespaced_event("default").items
print(json.dumps({
    "version": kubernetes.__version__,
    "succeeded": job.status.succeeded,
    "active": job.status.active,
    "ready": job.status.ready,
    "conditions": [(c.type, c.status, c.reason) for c in job.status.conditions],
    "completed": job.status.completion_time.isoformat(),
    "started": job.status.start_time.isoformat(),
    "selector": job.spec.selector.match_labels,
    "listed": listed.metadata.uid == job.metadata.uid,
    "events": sorted({(e.reason, e.involved_object.kind) for e in events}),
}))
"""


@pytest.mark.parametrize("version", ["newest", "24"])
def test_the_finished_job_and_its_events_deserialize_in_both_client_versions(
    world, subprocess_env, version
):
    import subprocess
    import sys

    env = dict(subprocess_env)
    if version == "24":
        if not (OLD_CLIENT / "kubernetes").is_dir():
            pytest.skip("run scripts/setup-venv.sh: .venv/k8s24 missing")
        env["PYTHONPATH"] = f"{OLD_CLIENT}:{ROOT}"
    jobs, profiles = ONE_STATIC
    manifest = job_manifest("pi", duration=10, completions=3, parallelism=2)
    world.run(jobs, profiles, before=create_at_start(world, ("jobs.batch", manifest)))
    kubeconfig = world.facade.write_kubeconfig(world.tmp / "kc", "reader")
    proc = subprocess.run(
        [sys.executable, "-c", READ_JOB, str(kubeconfig)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["version"].startswith("24.") == (version == "24")
    assert seen["succeeded"] == 3 and seen["active"] is None and seen["ready"] == 0
    assert seen["conditions"] == [["Complete", "True", "CompletionsReached"]]
    assert seen["completed"].startswith(format_time(world.clock.epoch_ns + 20 * 10**9)[:19])
    assert seen["listed"] and "batch.kubernetes.io/controller-uid" in seen["selector"]
    assert ["Completed", "Job"] in seen["events"] and ["SuccessfulCreate", "Job"] in seen["events"]


# ------------------------------------------------------------------ timewarp simulate, end to end


def _simulate_one_job(tmp_path, out, env, completions, *extra, quiet=True):
    """`timewarp simulate` of one static job plus Job ``pi`` (10 s pods, parallelism 2),
    created and bound by tests/programs/job_scheduler.py."""
    from simrun import run_simulate

    jobs, profiles = ONE_STATIC
    workload = write_workload(tmp_path / "w.json", jobs, profiles)
    platform = write_platform(tmp_path / "p.xml", 2, 2)
    manifest = job_manifest("pi", duration=10, completions=completions, parallelism=2)
    manifest["spec"]["template"]["spec"]["schedulerName"] = "default"
    (tmp_path / "jobs.json").write_text(json.dumps([manifest]))
    return run_simulate(
        out, env,
        f"python tests/programs/job_scheduler.py --jobs {tmp_path / 'jobs.json'}",
        platform, workload, *extra, timeout=120, quiet=quiet,
    )  # fmt: skip


def test_simulate_runs_a_job_to_complete_with_a_real_scheduler_process(tmp_path, subprocess_env):
    """A scheduler process creates the Job through the official client and binds its pods;
    the pods are Batsim jobs in out_jobs.csv and the summary counts them."""
    import csv

    out = tmp_path / "out"
    r = _simulate_one_job(tmp_path, out, subprocess_env, completions=3, quiet=False)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = list(csv.DictReader((out / "out_jobs.csv").open()))
    k8s = [row for row in rows if row["workload_name"] == "k8s"]
    assert len(k8s) == 3 and all(row["job_id"].startswith("default.pi-") for row in k8s)
    assert sorted(float(row["finish_time"]) for row in k8s) == [10.0, 10.0, 20.0]
    figures = json.loads((out / "manifest.json").read_text())["figures"]
    assert figures["nb_jobs"] == 4 and figures["dynamic_jobs"] == 3
    assert figures["makespan"] == 20.0
    assert "jobs made by controllers (dynamic)" in r.stderr


# --------------------------------------------------------------------- more Job behaviour


def evict_job_pod_at(world, seconds: float, job: str):
    """At virtual ``seconds``, evict the first running pod of Job ``job`` (if any)."""

    def evict():
        pods = world.store.list("pods", "default", label_selector=f"job-name={job}")[0]
        running = [q for q in pods if q["status"]["phase"] == "Running"]
        if running:
            name = running[0]["metadata"]["name"]
            world.facade.hooks.on_evict("default", name)
            world.store.delete("pods", "default", name)

    world.clock.call_at(int(seconds * 1e9), evict)


def test_an_evicted_job_pod_is_a_failure_replaced_after_the_back_off(world):
    jobs, profiles = ONE_STATIC
    manifest = job_manifest("work", duration=100)

    def before(message):
        create_at_start(world, ("jobs.batch", manifest))(message)
        if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
            evict_job_pod_at(world, 30, "work")

    world.run(jobs, profiles, before=before)
    status = world.store.get("jobs.batch", "default", "work")["status"]
    assert (status["failed"], status["succeeded"]) == (1, 1)
    assert status["conditions"][0]["type"] == "Complete"
    k8s = [r for r in world.rows() if r["workload_name"] == "k8s"]
    assert [(r["final_state"], r["starting_time"], r["finish_time"]) for r in k8s] == [
        ("COMPLETED_KILLED", "0.000000", "30.000000"),
        ("COMPLETED_SUCCESSFULLY", "40.000000", "140.000000"),  # 10 s back-off
    ]


def test_a_pod_created_already_bound_runs_without_a_binding(world):
    """No scheduler binds it: the kubelet model admits a pod created with spec.nodeName."""
    jobs, profiles = ONE_STATIC
    pod = {
        "metadata": {"name": "pinned", "annotations": {DURATION_ANNOTATION: "5"}},
        "spec": {"nodeName": "n001", "containers": [{"name": "c", "image": "busybox"}]},
    }
    world.run(jobs, profiles, before=create_at_start(world, ("pods", pod)))
    row = next(r for r in world.rows() if r["job_id"] == "default.pinned")
    assert row["final_state"] == "COMPLETED_SUCCESSFULLY" and row["allocated_resources"] == "1"
    assert float(row["finish_time"]) == 5.0


def job_run_signature(tmp_path: Path) -> tuple:
    tmp_path.mkdir()
    run = InProcessRun(tmp_path)
    try:
        jobs, profiles = RS_WORKLOAD
        manifest = job_manifest("pi", duration=10, completions=3, parallelism=2)

        def before(message):
            create_at_start(run, ("jobs.batch", manifest))(message)
            evict_at(run, 30, naming.pod_name("w0!web-1"))(message)

        run.run(jobs, profiles, before=before)
        return run.replies, jobs_rows(run.sim.job_records())
    finally:
        run.close()


def test_same_inputs_same_messages_and_rows(tmp_path):
    first = job_run_signature(tmp_path / "a")
    second = job_run_signature(tmp_path / "b")
    assert first == second
    assert any("REGISTER_JOB" in json.dumps(r) for r in first[0])


@settings(deadline=None)
@given(
    completions=st.integers(1, 5),
    parallelism=st.integers(1, 4),
    backoff_limit=st.integers(0, 3),
    duration=st.integers(1, 20),
    nodes=st.integers(1, 3),
    evictions=st.lists(st.integers(1, 120), max_size=4),
)
def test_job_invariants_hold_under_evictions(
    completions, parallelism, backoff_limit, duration, nodes, evictions
):
    """Whatever the shape and the evictions: never more than `parallelism` pods run at
    once, the counts in status match out_jobs.csv, the Job ends Complete exactly when
    `completions` pods succeeded (else Failed past backoffLimit), and the simulation ends
    with registration_finished sent once."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        run = InProcessRun(Path(tmp), nodes=nodes, cores=2)
        try:
            manifest = job_manifest(
                "j",
                duration=duration,
                completions=completions,
                parallelism=parallelism,
                backoffLimit=backoff_limit,
            )

            def before(message):
                create_at_start(run, ("jobs.batch", manifest))(message)
                if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
                    for t in sorted(set(evictions)):
                        evict_job_pod_at(run, t, "j")

            jobs, profiles = ONE_STATIC
            run.run(jobs, profiles, before=before)
            status = run.store.get("jobs.batch", "default", "j")["status"]
            rows = [r for r in run.rows() if r["workload_name"] == "k8s"]
            notify = [d["type"] for _, d in run.sent("NOTIFY")]
            kills = {job_id for _, d in run.sent("KILL_JOB") for job_id in d["job_ids"]}
        finally:
            run.close()
    # a failure is a pod killed while running, or deleted while pending (its job rejected);
    # a kill reaches Batsim 1e-10 s per event after it was decided, and a job that ends
    # within that (the same printed instant as the eviction) is reported completed by
    # Batsim: for Kubernetes its pod was evicted while running all the same
    evicted = {r["job_id"] for r in rows if f"k8s!{r['job_id']}" in kills}
    ok = [
        r
        for r in rows
        if r["final_state"] == "COMPLETED_SUCCESSFULLY" and r["job_id"] not in evicted
    ]
    killed = [
        r
        for r in rows
        if r["final_state"] in ("COMPLETED_KILLED", "REJECTED") or r["job_id"] in evicted
    ]
    assert len(ok) == status.get("succeeded", 0) and len(ok) + len(killed) == len(rows)
    assert len(killed) == status.get("failed", 0)
    [condition] = status["conditions"]
    if condition["type"] == "Complete":
        assert len(ok) == completions and len(killed) <= backoff_limit
    else:
        assert condition["reason"] == "BackoffLimitExceeded" and len(killed) > backoff_limit
        assert len(ok) < completions
    ran = [r for r in rows if r["starting_time"]]
    starts = [(float(r["starting_time"]), 1) for r in ran]
    ends = [(float(r["finish_time"]), -1) for r in ran]
    running = peak = 0
    for _, delta in sorted(starts + ends):  # ends sort before starts at the same instant
        running += delta
        peak = max(peak, running)
    assert peak <= parallelism
    assert "active" not in status
    assert notify == ["registration_finished"]


def test_simulate_asks_real_batsim_for_dynamic_jobs_too(tmp_path, subprocess_env):
    """--batsim PATH gets Batsim's own flags, --enable-dynamic-jobs included: a stand-in
    records its arguments and runs the embedded simulator with them."""
    import csv
    import sys

    args_file = tmp_path / "batsim-args.json"
    fake = tmp_path / "batsim"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"json.dump(sys.argv[1:], open({str(args_file)!r}, 'w'))\n"
        "from commands.cli import main\n"
        "sys.exit(main(['sim', *sys.argv[1:]]))\n"
    )
    fake.chmod(0o755)
    out = tmp_path / "out"
    r = _simulate_one_job(tmp_path, out, subprocess_env, 2, "--batsim", str(fake))
    assert r.returncode == 0, r.stderr[-3000:]
    argv = json.loads(args_file.read_text())
    assert "--enable-dynamic-jobs" in argv and "--enable-compute-sharing" in argv
    assert "--enable-profile-reuse" in argv  # the broker names a profile again
    rows = list(csv.DictReader((out / "out_jobs.csv").open()))
    assert sum(row["workload_name"] == "k8s" for row in rows) == 2
    assert json.loads((out / "manifest.json").read_text())["simulator"] == str(fake)


def test_simulate_restarts_an_evicted_replicaset_pod_as_a_new_batsim_job(tmp_path, subprocess_env):
    import csv

    from simrun import run_simulate

    jobs, profiles = RS_WORKLOAD
    workload = write_workload(tmp_path / "w.json", jobs, profiles)
    platform = write_platform(tmp_path / "p.xml", 2, 2)
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env,
        "python tests/programs/evicting_scheduler.py --evict-after 25 --replicaset web"
        " --scheduler-name default",
        platform, workload, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {row["job_id"]: row for row in csv.DictReader((out / "out_jobs.csv").open())}
    assert rows["web-1"]["final_state"] == "COMPLETED_KILLED"
    assert rows["web-1"]["finish_time"] == "25.000000"
    again = rows["web-1~r1"]
    assert again["workload_name"] == "w0" and again["profile"] == "long"
    assert again["submission_time"] == "25.000000"
    assert (again["starting_time"], again["finish_time"]) == ("25.000000", "125.000000")
    figures = json.loads((out / "manifest.json").read_text())["figures"]
    assert figures["nb_jobs"] == 2 and figures["dynamic_jobs"] == 1 and figures["makespan"] == 125


def patch_job_at(world, seconds: float, name: str, **spec) -> None:
    """At virtual ``seconds``, change the Job's spec as a client's PATCH would."""

    def patch():
        world.store.update("jobs.batch", "default", name, lambda job: job["spec"].update(spec))

    world.clock.call_at(int(seconds * 1e9), patch)


LONG_STATIC = (
    [{"id": "1", "subtime": 0, "res": 1, "profile": "long"}],
    {"long": {"type": "delay", "delay": 100, "cpu": "1", "scheduler": "default"}},
)


def test_a_suspended_job_starts_when_resumed_and_suspending_deletes_without_failing(world):
    jobs, profiles = LONG_STATIC
    manifest = job_manifest("s", duration=10, suspend=True)

    def before(message):
        create_at_start(world, ("jobs.batch", manifest))(message)
        if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
            patch_job_at(world, 5, "s", suspend=False)
            patch_job_at(world, 8, "s", suspend=True)
            patch_job_at(world, 20, "s", suspend=False)
            world.clock.call_at(3 * 10**9, lambda: seen.append(read()))

    def read():
        return world.store.get("jobs.batch", "default", "s")["status"]

    seen = []
    world.run(jobs, profiles, before=before)
    [early] = seen
    assert "startTime" not in early and "active" not in early
    assert [(c["type"], c["status"], c["reason"]) for c in early["conditions"]] == [
        ("Suspended", "True", "JobSuspended")
    ]
    status = read()
    assert status["succeeded"] == 1 and "failed" not in status
    conditions = [(c["type"], c["status"], c["reason"]) for c in status["conditions"]]
    assert conditions == [
        ("Suspended", "False", "JobResumed"),
        ("Complete", "True", "CompletionsReached"),
    ]
    k8s = [r for r in world.rows() if r["workload_name"] == "k8s"]
    assert [(r["final_state"], r["starting_time"], r["finish_time"]) for r in k8s] == [
        ("COMPLETED_KILLED", "5.000000", "8.000000"),
        ("COMPLETED_SUCCESSFULLY", "20.000000", "30.000000"),
    ]
    assert status["startTime"] == format_time(world.clock.epoch_ns + 20 * 10**9)  # resumed


def test_lowering_parallelism_deletes_the_newest_pods(world):
    jobs, profiles = ONE_STATIC
    manifest = job_manifest("par", duration=10, completions=3, parallelism=3)

    def before(message):
        create_at_start(world, ("jobs.batch", manifest))(message)
        if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
            patch_job_at(world, 4, "par", parallelism=1)

    world.run(jobs, profiles, before=before)
    status = world.store.get("jobs.batch", "default", "par")["status"]
    assert status["succeeded"] == 3 and "failed" not in status
    k8s = [r for r in world.rows() if r["workload_name"] == "k8s"]
    killed = [r for r in k8s if r["final_state"] == "COMPLETED_KILLED"]
    assert [(r["starting_time"], r["finish_time"]) for r in killed] == [
        ("0.000000", "4.000000")
    ] * 2
    done = sorted((r["starting_time"], r["finish_time"]) for r in k8s if r not in killed)
    assert done == [
        ("0.000000", "10.000000"),
        ("10.000000", "20.000000"),
        ("20.000000", "30.000000"),
    ]
    assert len(world.events("SuccessfulDelete")) == 2


def test_a_job_whose_pods_the_api_refuses_says_so_and_the_run_ends(world):
    """A Job is accepted even if its pods will not be (an unknown PriorityClass): the
    controller records FailedCreate and retries after the back-off — it used to raise
    into the driver thread and kill the run — and such a Job does not keep an otherwise
    finished simulation going."""
    jobs, profiles = ONE_STATIC
    manifest = job_manifest("bad", duration=10, pod={"priorityClassName": "nope"})
    sim = world.run(jobs, profiles, before=create_at_start(world, ("jobs.batch", manifest)))
    assert sim.ended and sim.now < 10
    failed = world.events("FailedCreate")
    assert failed and all(e["type"] == "Warning" for e in failed)
    assert "no PriorityClass with name nope was found" in failed[0]["message"]
    assert world.store.list("pods", "default", label_selector="job-name=bad")[0] == []
    status = world.store.get("jobs.batch", "default", "bad")["status"]
    assert "active" not in status and "conditions" not in status


def test_a_job_a_billion_wide_creates_bursts_while_time_moves(world):
    """issue 27 item 2, the Job controller's side: ``parallelism: 1000000000`` (a valid
    int32) makes 500 pods per 25 s of virtual time instead of all of them in one instant."""
    from broker.controllers import bursts

    forty = (
        [{"id": "1", "subtime": 0, "res": 1, "profile": "p"}],
        {"p": {"type": "delay", "delay": 40, "cpu": "1", "scheduler": "default"}},
    )
    # no duration: its pods run until deleted, and the Job does not hold up the end
    manifest = job_manifest("wide", duration=None, parallelism=10**9, completions=10**9)
    seen = {}

    def count() -> int:
        return len(world.store.list("pods", "default", label_selector="job-name=wide")[0])

    def before(message):
        if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
            # at t=1: the static job has its node by then (the Job's pods never end)
            world.clock.call_at(
                10**9, lambda: create_at_start(world, ("jobs.batch", manifest))(message)
            )
            for t in (2, 25, 27):
                world.clock.call_at(t * 10**9, lambda t=t: seen.update({t: count()}))

    sim = world.run(*forty, before=before)
    assert sim.ended and 40 <= sim.now < 76
    burst = bursts.BURST
    assert (seen[2], seen[25], seen[27]) == (burst, burst, 2 * burst)
    made = count()
    assert made == burst * len([t for t in (1, 26, 51) if t <= sim.now])
    assert world.cluster.stats.pods_deferred == 10**9 - made
    (warning,) = world.events(bursts.DEFERRED)
    assert f"{10**9 - burst} pods are still to create" in warning["message"]
    assert world.store.get("jobs.batch", "default", "wide")["status"]["active"] == made
