"""The driver reads the runtimes' frames itself while it waits for quiescence
(broker/clock/transport.py, "Lending the connections"): the report that ends its wait
wakes it directly, not the clock thread first; whatever else ends a wait still does."""

import threading

import pytest
from test_clock_service import BINDING, WATCH, FakeFacade, _applied, _connected, _waiting

from broker.clock.service import ClockService, ClockStall
from timewarp.wire import clockproto as cp


@pytest.fixture
def clock():
    service = ClockService(stall_timeout=30.0)
    yield service
    service.close()


def _driver_reads(service, timeout=5.0):
    """Bounded wait until the waiting driver has the connections (the loop let go)."""
    pause = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if service.transport.driver_reads:
            return True
        pause.wait(0.01)
    return False


def _recording_receive(service, monkeypatch):
    """Which thread applied each frame, by op."""
    seen = []
    receive = service.inbox.receive

    def recorded(identity, frame):
        seen.append((cp.decode_to_broker(frame)["op"], threading.get_ident()))
        return receive(identity, frame)

    monkeypatch.setattr(service.transport, "_receive", recorded)
    return seen


def test_the_report_that_ends_a_wait_is_read_by_the_waiting_driver(clock, monkeypatch):
    seen = _recording_receive(clock, monkeypatch)
    FakeFacade(clock, {})
    with _connected(clock, "sched") as peer:
        peer.send(cp.state(True, 0, [], 1, 0, 0))  # busy: the driver waits for it
        _applied(peer)
        driver = {}
        done = threading.Event()

        def drive():
            driver["ident"] = threading.get_ident()
            clock.wait_quiescent()
            done.set()

        threading.Thread(target=drive, daemon=True).start()
        assert _driver_reads(clock)
        peer.send(cp.state(False, 0, [], 0, 1, 0))
        assert done.wait(5)
    states = [ident for op, ident in seen if op == "state"]
    assert states[-1] == driver["ident"], "the clock thread read it and had to wake the driver"
    assert clock.transport._thread.is_alive()


def test_a_notification_wakes_a_driver_that_reads_the_connections(clock, monkeypatch):
    """The facade's word (a response written) ends the driver's wait through the lent
    selector's wakeup, not at its timeout, when the driver has something to do: here the
    reader may be let go but the broker's hook has work first. (With nothing for the hook,
    the notifying thread lets the reader go itself and the driver sleeps on:
    test_clock_service.py, ``test_a_response_written_lets_the_reader_go_from_the_facades_thread``.)"""
    facade = FakeFacade(clock, {200: "busy"})
    clock.quiescence.set_before_io_release(lambda: False, pending=lambda: True)
    woken = []
    select = clock.transport._conn_sel.select

    def recorded(timeout=None):
        ready = select(timeout)
        if clock.transport.driver_reads:
            woken.append([key.data is None for key, _ in ready])
        return ready

    monkeypatch.setattr(clock.transport._conn_sel, "select", recorded)
    with _connected(clock, "sched") as peer:
        peer.send(cp.state(False, 0, [BINDING], 0, 1, 0))  # waits for its binding's answer
        _applied(peer)
        done = _waiting(clock)
        assert _driver_reads(clock)
        woken.clear()
        facade.set(p200="ready")  # answered: the driver runs the hook, lets the reader go
        msg = peer.recv()
        assert msg["op"] == "io" and [p for p, _ in msg["ports"]] == [200]
        # (a wait may also time out meanwhile on a loaded machine: that proves nothing)
        assert any(True in w for w in woken), "woken by its timeout, not by the notification"
        facade.set(p200="idle")
        peer.send(cp.state(False, 1, [], 0, 1, 0))
        assert done.wait(5)


def test_a_wait_broken_off_gives_the_connections_back_to_the_loop(clock, monkeypatch):
    """A stop signal raised in the driver while it reads (KeyboardInterrupt here) ends
    its wait; the clock thread serves every connection again."""
    FakeFacade(clock, {100: "streaming"})
    select = clock.transport._conn_sel.select
    broken = []

    def interrupted(timeout=None):
        if clock.transport.driver_reads and not broken:
            broken.append(1)
            raise KeyboardInterrupt
        return select(timeout)

    monkeypatch.setattr(clock.transport._conn_sel, "select", interrupted)
    with _connected(clock, "sched") as peer:
        peer.send(cp.state(True, 0, [], 1, 0, 0))
        _applied(peer)
        with pytest.raises(KeyboardInterrupt):
            clock.wait_quiescent()
        assert not clock.transport.driver_reads
        _applied(peer)  # answered by the clock thread: the connections are watched again
        peer.send(cp.state(False, 0, [WATCH], 0, 1, 0))
        done = _waiting(clock)
        assert peer.recv()["op"] == "io"  # and a later wait reads them again
        clock.quiescence.set_io_checker(lambda port, sent, consumed: "idle")
        peer.send(cp.state(False, 1, [], 0, 1, 0))
        assert done.wait(5)


def test_the_stall_guard_still_gets_the_stacks_it_asks_for():
    """A stall found while the driver reads the connections: the connections go back to
    the clock thread before the guard asks for the stuck process's stacks, so its answer
    is read and the report (here: stop) carries it."""
    with ClockService(stall_timeout=0.2, on_stall="stop") as clock:
        FakeFacade(clock, {})
        with _connected(clock, "sched") as peer:
            peer.send(cp.state(False, 0, [], 0, 1, 0))  # it waited once: no start-up grace
            peer.send(cp.state(True, 0, [], 1, 0, 0))  # then runs, and never waits again
            _applied(peer)
            failed = []
            done = threading.Event()

            def drive():
                try:
                    clock.wait_quiescent()
                except ClockStall as exc:
                    failed.append(str(exc))
                done.set()

            threading.Thread(target=drive, daemon=True).start()
            assert peer.recv()["op"] == "dump"  # the guard asks (bounded: 5 s)
            peer.send(cp.stacks('  File "sched.py", line 7, in spin_forever'))
            assert done.wait(5)
    assert failed and "spin_forever" in failed[0], failed


@pytest.mark.parametrize("window", ["reading", "hook"])
def test_a_stop_signal_while_the_driver_takes_the_lock_back_ends_the_wait_as_itself(
    clock, monkeypatch, window
):
    """The first stop signal raises in the command's main thread wherever the driver is,
    and ``threading`` lets that exception out of a blocking ``acquire()`` without the
    lock. Met while the driver takes the lock back after a wait that read the
    connections, or after the hook it runs unlocked, it must end the wait as itself
    (the command then says "interrupted by SIGTERM") — not as "cannot release
    un-acquired lock", which a CI run of ``timewarp simulate`` printed once as a bug."""
    FakeFacade(clock, {100: "streaming"})
    acquire = clock._cond.acquire
    raised = []
    armed = threading.Event()  # from the driver's wait on, in this (the driver's) thread
    driver = threading.get_ident()

    def interrupted_acquire(*args):
        if armed.is_set() and threading.get_ident() == driver and not raised:
            raised.append(1)
            raise KeyboardInterrupt  # as from a blocking acquire: the lock is not taken
        return acquire(*args)

    if window == "reading":
        select = clock.transport._conn_sel.select

        def at_once(timeout=None):  # the driver's wait ends at once; the loop's as before
            return [] if threading.get_ident() == driver else select(timeout)

        monkeypatch.setattr(clock.transport._conn_sel, "select", at_once)
    else:  # the hook the driver runs unlocked (the broker's facade I/O): armed there

        def hook():
            armed.set()
            return False

        clock.quiescence._before_io_release = hook
        clock.quiescence._hook_pending = lambda: True
    monkeypatch.setattr(clock._cond, "acquire", interrupted_acquire)
    with _connected(clock, "sched") as peer:
        if window == "reading":  # busy: the driver waits reading the connections
            peer.send(cp.state(True, 0, [], 1, 0, 0))
        else:  # idle but for data on its watch: the hook runs before the reader goes
            peer.send(cp.state(False, 0, [WATCH], 0, 1, 0))
        _applied(peer)
        if window == "reading":
            armed.set()
        with pytest.raises(KeyboardInterrupt):
            clock.wait_quiescent()
        assert raised
        assert not clock.transport.driver_reads
        assert not clock._cond._is_owned()  # the driver's `with` let it go, once
        _applied(peer)  # the clock thread takes it and serves the connections again
