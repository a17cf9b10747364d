"""The embedded simulator's two ways to the broker agree: message objects over a
``local://`` link (what `timewarp simulate` uses) and JSON over ZeroMQ ``inproc://`` (the
wire path, as `--batsim` and `timewarp sim` speak it) give the same outputs and the same
message log on seeded scenarios."""

from __future__ import annotations

import io
import random
import threading

import pytest

from broker.drivers.engine import Broker
from broker.drivers.inprocess import InProcessRun
from simulator import local_link, runner
from simulator import protocol as p
from simulator.inputs import make_sim, write_platform, write_workload
from simulator.outputs import jobs_rows
from simulator.runner import Aborted, ReplyTimeout


def scenario(seed: int) -> tuple[list[dict], dict]:
    """One-core jobs arriving in bursts (same-instant submissions included), three
    profiles of whole and fractional durations."""
    rng = random.Random(seed)
    profiles = {
        f"p{i}": {"type": "delay", "delay": delay, "cpu": "1", "scheduler": "default"}
        for i, delay in enumerate((1, 2.5, rng.choice((0.3, 7, 12.25))))
    }
    jobs, t = [], 0.0
    for i in range(rng.randint(8, 20)):
        t += rng.choice((0, 0, 0.5, 1, 3.25))
        jobs.append({"id": str(i), "subtime": t, "res": 1, "profile": f"p{i % 3}"})
    return jobs, profiles


def linked(tmp_path, name: str, endpoint: str, jobs: list[dict], profiles: dict, hosted=False):
    folder = tmp_path / name
    folder.mkdir()
    world = InProcessRun(folder, nodes=3, cores=2, endpoint=endpoint)
    log = io.StringIO()
    try:
        sim = world.run_linked(jobs, profiles, log, hosted=hosted)
        # SIMULATION_BEGINS names the workload's path: the one difference of the folders
        return jobs_rows(sim.job_records()), log.getvalue().replace(str(folder), "<run>")
    finally:
        world.close()


@pytest.mark.parametrize("seed", range(4))
def test_message_objects_and_json_over_zeromq_agree(tmp_path, seed):
    jobs, profiles = scenario(seed)
    wire_rows, wire_log = linked(tmp_path, "wire", f"inproc://link-{seed}", jobs, profiles)
    local_rows, local_log = linked(tmp_path, "local", f"local://link-{seed}", jobs, profiles)
    assert "EXECUTE_JOB" in wire_log and "SIMULATION_ENDS" in wire_log  # a whole run
    assert len(wire_rows) == len(jobs) + 1  # every job ended (and the header)
    assert local_log == wire_log
    assert local_rows == wire_rows
    hosted = linked(tmp_path, "hosted", f"local://hosted-{seed}", jobs, profiles, hosted=True)
    assert hosted == (wire_rows, wire_log)


def test_a_hosted_simulator_runs_in_the_brokers_thread(tmp_path, monkeypatch):
    """Hosted, every request is answered by a call in the thread that runs the broker:
    no second thread, no wait on the link."""
    threads = set()
    answer = Broker._answer

    def counted(self, message):
        threads.add(threading.get_ident())
        return answer(self, message)

    monkeypatch.setattr(Broker, "_answer", counted)
    monkeypatch.setattr(local_link.LocalLink, "reply", None)  # a wait on the link: an error
    jobs, profiles = scenario(1)
    rows, log = linked(tmp_path, "hosted", "local://hosted-thread", jobs, profiles, hosted=True)
    assert threads == {threading.get_ident()}
    assert len(rows) == len(jobs) + 1 and "SIMULATION_ENDS" in log


def _hosting(link, answer, between) -> BaseException | None:
    """``link.host(answer)`` for a guest that asks twice, ``between()`` running after the
    first answer (the simulator's own code); returns what ``host`` returns and records
    how the guest's requests went in ``link.seen``."""
    link.seen = []

    def guest() -> None:
        for i in range(2):
            try:
                link.seen.append(link.handler(p.Message(float(i), [])).now)
            except local_link.HostFailed:
                link.seen.append("stopped")
                return
            if i == 0:
                between()

    link.guest = guest
    return link.host(answer)


def test_a_failure_of_the_host_stops_the_guest_and_is_returned():
    link = local_link.bind("local://host-fails")
    try:

        def answer(message):
            if message.now:
                raise KeyError("a bug")
            return message

        failure = _hosting(link, answer, lambda: None)
        assert isinstance(failure, KeyError) and link.seen == [0.0, "stopped"]
        assert link.guest is None and link.handler is None  # hosted once
    finally:
        local_link.unbind(link)


def test_a_stop_signal_in_the_guests_code_is_held_until_the_next_answer():
    """A stop signal that comes while the simulator's own code runs in the broker's thread
    is held (it would land in the middle of applying a reply), then raised where the
    broker's answer would run: the guest stops between messages, the cause is returned."""
    link = local_link.bind("local://host-signal")
    interrupt = KeyboardInterrupt("SIGTERM")
    held = []
    try:
        failure = _hosting(
            link, lambda m: m, lambda: held.append(local_link.SHIELD.hold(interrupt))
        )
        assert held == [True] and failure is interrupt and link.seen == [0.0, "stopped"]
        assert not local_link.SHIELD.hold(interrupt)  # hosting over: raised at once again
    finally:
        local_link.unbind(link)


def test_a_local_endpoint_is_bound_once_and_freed_by_close(tmp_path):
    world = InProcessRun(tmp_path, endpoint="local://link-once")
    try:
        with pytest.raises(ValueError, match="already bound"):
            local_link.bind("local://link-once")
    finally:
        world.close()
    local_link.unbind(local_link.bind("local://link-once"))  # free again
    with pytest.raises(ValueError, match="nothing is bound at local://nobody"):
        local_link.connect("local://nobody")


def _lonely_sim(tmp_path):
    """A simulator whose first message nobody will answer."""
    jobs, profiles = scenario(0)
    platform = write_platform(tmp_path / "platform.xml", 2)
    return make_sim(platform, [write_workload(tmp_path / "w.json", jobs, profiles)])


def test_a_reply_that_does_not_come_ends_the_run_with_the_reason(tmp_path):
    link = local_link.bind("local://silent")
    try:
        with pytest.raises(ReplyTimeout, match="no reply .* local://silent within 0.05 s"):
            runner.run(_lonely_sim(tmp_path), "local://silent", reply_timeout=0.05)
        assert link.poll(0)  # the request was made: it was the reply that did not come
    finally:
        local_link.unbind(link)


def test_stop_ends_a_wait_for_a_reply(tmp_path):
    link = local_link.bind("local://stopped")
    stop = threading.Event()

    def stop_once_asked() -> None:
        if link.poll(30):  # the simulator's request is waiting: stop it now
            stop.set()

    helper = threading.Thread(target=stop_once_asked)
    helper.start()
    try:
        with pytest.raises(Aborted, match="stopped while waiting for a reply"):
            # (the bound only turns a stop that is not seen into a failure, not a hang)
            runner.run(_lonely_sim(tmp_path), "local://stopped", stop=stop, reply_timeout=20)
    finally:
        helper.join(30)
        local_link.unbind(link)
