"""The clock service seen from a runtime's connection (the stream transport: one line
per message, compact or JSON), and the standalone autopilot (time moves with no driver thread asking)."""

import contextlib
import select
import socket
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.clock.service import ClockService
from timewarp.wire import clocknet
from timewarp.wire import clockproto as cp

TIMEOUT_S = 5.0


@pytest.fixture(params=["ipc", "tcp"])
def service(request):
    clock = ClockService(endpoint="tcp://127.0.0.1:*" if request.param == "tcp" else None)
    yield clock
    clock.close()


class Peer:
    """A runtime's end of the connection, spoken by hand."""

    def __init__(self, endpoint):
        self.sock = clocknet.connect(endpoint, TIMEOUT_S)
        self.unpacker = cp.Unpacker()
        self.frames = []

    def send(self, *msgs):
        self.sock.sendall(cp.pack(msgs))

    def poll(self, timeout_s):
        while not self.frames:
            if not select.select([self.sock], [], [], timeout_s)[0]:
                return False
            data = self.sock.recv(65536)
            if not data:
                return False
            self.frames += self.unpacker.feed(data)
        return True

    def recv(self):
        assert self.poll(TIMEOUT_S), "no answer from the clock service"
        return cp.decode_to_runtime(self.frames.pop(0))

    def close(self):
        self.sock.close()


@contextlib.contextmanager
def _connected(service, name):
    peer = Peer(service.endpoint)
    try:
        peer.send(cp.hello(name, 1234, service.registry.add_token(name)))
        assert peer.recv()["op"] == "welcome"
        yield peer
    finally:
        peer.close()


def test_the_default_endpoint_is_a_unix_socket_removed_on_close():
    clock = ClockService()
    assert clock.endpoint.startswith("ipc://")
    path = clock.endpoint[len("ipc://") :]
    assert socket.socket(socket.AF_UNIX).connect_ex(path) == 0
    clock.close()
    assert socket.socket(socket.AF_UNIX).connect_ex(path) != 0


def test_a_long_tmpdir_still_gets_a_unix_socket_never_tcp(tmp_path, monkeypatch):
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr("tempfile.tempdir", None)
    clock = ClockService()
    try:
        assert clock.endpoint.startswith("ipc://")
        assert len(clock.endpoint) - len("ipc://") <= 100
    finally:
        clock.close()


def _refused(service, hello):
    """Send ``hello``; return the error message, having checked the connection ends."""
    peer = Peer(service.endpoint)
    try:
        peer.send(hello)
        msg = peer.recv()
        assert msg["op"] == "error"
        assert not peer.poll(TIMEOUT_S), "a refused connection stays open"
        return msg["message"]
    finally:
        peer.close()


def test_tcp_hellos_must_carry_the_token_of_their_process():
    service = ClockService(endpoint="tcp://127.0.0.1:*")
    try:
        token = service.expect("sched")
        assert "without the token" in _refused(service, cp.hello("sched", 1))
        assert "no process of that name was started" in _refused(
            service, cp.hello("intruder", 1, "guess")
        )
        assert "wrong token" in _refused(service, cp.hello("sched", 1, token + "x"))
        assert service.registry.refused_hellos == 3
        # refused peers are nobody: not registered, not awaited, never blamed in a report
        assert [(p.name, p.connected) for p in service.registry.processes()] == [("sched", False)]
        with contextlib.closing(Peer(service.endpoint)) as peer:
            peer.send(cp.hello("sched", 1, token))
            assert peer.recv()["op"] == "welcome"
    finally:
        service.close()


def test_a_hello_of_another_protocol_version_is_refused_naming_both(service):
    # a stale runtime (v1 spoke JSON for every message): refused at once, not at its
    # first compact frame; its token is right, so the refusal is about the version only
    token = service.registry.add_token("sched")
    message = _refused(service, {**cp.hello("sched", 1, token), "v": 1})
    assert f"speaks clock protocol v1, this broker v{cp.VERSION}" in message
    assert [(p.name, p.connected) for p in service.registry.processes()] == []


def test_a_malformed_compact_frame_gets_an_error_naming_it_and_others_are_still_served(
    service,
):
    with _connected(service, "a") as a, _connected(service, "b") as b:
        good = cp.encode(cp.state(False, 0, [[1, 2, 3, 4]], 0, 1, 0))
        a.sock.sendall(good[:-2] + b"\n")  # the last row a byte short
        msg = a.recv()
        assert msg["op"] == "error"
        assert "clock message 'state' (runtime -> broker): not whole fields" in msg["message"]
        assert not a.poll(TIMEOUT_S), "the connection that sent it stays open"
        b.send(cp.now_request(3))
        assert b.recv() == {"op": "now", "rid": 3, "t": 0}


def test_a_unix_socket_refuses_a_wrong_token_too(service):
    token = service.registry.add_token("sched")
    assert "wrong token" in _refused(service, cp.hello("sched", 1, "not-" + token))


def test_messages_written_together_or_in_pieces_are_applied_in_order(service):
    with _connected(service, "sched") as peer:
        # two messages in one write, then one split across writes
        peer.send(cp.now_request(7), cp.now_request(8))
        wire = cp.pack([cp.state(False, 0, [], 0, 1, 0)])
        peer.sock.sendall(wire[:5])
        assert peer.recv() == {"op": "now", "rid": 7, "t": 0}
        assert peer.recv() == {"op": "now", "rid": 8, "t": 0}
        peer.sock.sendall(wire[5:])
        service.wait_quiescent()  # the idle report counts once it is whole
        assert [p.name for p in service.registry.processes()] == ["sched"]


def test_a_process_that_did_not_say_hello_gets_an_error(service):
    peer = Peer(service.endpoint)
    try:
        peer.send(cp.now_request(1))
        msg = peer.recv()
        assert msg["op"] == "error"
        assert "did not say hello" in msg["message"]
    finally:
        peer.close()


def test_a_malformed_message_gets_an_error_naming_it_and_others_are_still_served(service):
    with _connected(service, "a") as a, _connected(service, "b") as b:
        a.sock.sendall(b'{"op":"timer","id":"x"}\n')
        msg = a.recv()
        assert msg["op"] == "error" and "'id' must be an integer" in msg["message"]
        assert not a.poll(TIMEOUT_S), "the connection that sent it stays open"
        b.send(cp.now_request(3))
        assert b.recv() == {"op": "now", "rid": 3, "t": 0}


def test_a_frame_nested_too_deep_closes_its_connection_and_the_clock_lives_on(service):
    """Issue 27 item 3: 100,000 '[' then ']' raised RecursionError in the decoder and
    killed the clock's thread; now it is a protocol error for that one connection."""
    with _connected(service, "a") as a, _connected(service, "b") as b:
        a.sock.sendall(b"[" * 100_000 + b"]" * 100_000 + b"\n")
        msg = a.recv()
        assert msg["op"] == "error" and "nested too deeply" in msg["message"]
        assert not a.poll(TIMEOUT_S), "the connection that sent it stays open"
        b.send(cp.now_request(4))
        assert b.recv() == {"op": "now", "rid": 4, "t": 0}


@pytest.mark.parametrize("token", [None, "guess"])
def test_an_invented_identity_is_refused_on_every_endpoint(service, token):
    """Issue 27 item 4: a hello under a name nobody started was welcomed on the Unix
    socket; then `state busy` stalled the run and the stall report blamed that name."""
    message = _refused(service, cp.hello("invented", 4242, token))
    assert "no process of that name was started" in message
    assert service.registry.processes() == [] and service.registry.refused_hellos == 1


def test_a_registered_name_without_its_token_is_refused_on_a_unix_socket_too(service):
    service.registry.add_token("sched")
    assert "without the token" in _refused(service, cp.hello("sched", 1))


def test_an_endless_line_is_refused_and_its_connection_closed(service, monkeypatch):
    monkeypatch.setattr("broker.clock.transport.MAX_MESSAGE_BYTES", 1000)
    with _connected(service, "sched") as peer:
        peer.sock.sendall(b"x" * 5000)  # no newline: no message ever ends
        msg = peer.recv()
        assert msg["op"] == "error" and "longer than 1000 bytes" in msg["message"]
        assert not peer.poll(TIMEOUT_S), "the connection stays open"
    assert [p.gone for p in service.registry.processes()] == [True]


def test_a_process_whose_connection_ends_is_gone_and_no_longer_awaited(service):
    with _connected(service, "sched"):
        pass  # it never reported idle: only its departure lets the driver go on
    done = threading.Event()
    threading.Thread(target=lambda: (service.wait_quiescent(), done.set()), daemon=True).start()
    assert done.wait(TIMEOUT_S)
    assert [p.gone for p in service.registry.processes()] == [True]


def test_autopilot_advances_to_each_deadline_without_a_driver(service):
    with _connected(service, "prog") as peer:
        service.engage_autopilot()
        acks = 0
        seen = []
        for deadline in (5_000, 12_000, 30_000):
            peer.send(cp.timer(deadline, deadline, [deadline]), cp.state(False, acks, [], 0, 1, 0))
            fire = peer.recv()
            assert fire["op"] == "fire"
            seen.append((fire["ids"], fire["t"]))
            acks += 1
        assert seen == [([5_000], 5_000), ([12_000], 12_000), ([30_000], 30_000)]
        assert service.advances == 3
        # Nothing pending and the process idle: the driver's wait returns.
        peer.send(cp.state(False, acks, [], 0, 1, 0))
        done = threading.Event()
        threading.Thread(target=lambda: (service.wait_settled(), done.set()), daemon=True).start()
        assert done.wait(5)


class FakeFacade:
    """How each API connection stands, as the facade's ledger would say."""

    def __init__(self, service, states):
        self.states = dict(states)
        self.service = service
        service.quiescence.set_io_checker(lambda port, sent, consumed: self.states[port])

    def set(self, **states):
        self.states.update({int(port[1:]): s for port, s in states.items()})
        self.service.notify()


def _waiting(service):
    done = threading.Event()
    threading.Thread(target=lambda: (service.wait_quiescent(), done.set()), daemon=True).start()
    return done


WATCH, BINDING = [100, 10, 10, 1], [200, 20, 20, 2]  # [port, sent, consumed, opening order]


@contextlib.contextmanager
def _idle_but_for(service, facade, io):
    """Process "sched" idle but for threads reading ``io``, a driver waiting for
    quiescence meanwhile; on the way out the readers read everything and it settles."""
    with _connected(service, "sched") as peer:
        peer.send(cp.state(False, 0, io, 0, len(io), 0))
        done = _waiting(service)
        yield peer
        facade.set(**{f"p{port}": "idle" for port in facade.states})
        peer.send(cp.state(False, 1, [], 0, len(io), 0))
        assert done.wait(5)


def _released_ports(rx):
    msg = rx.recv()
    assert msg["op"] == "io"
    return [port for port, _ in msg["ports"]]


def test_a_response_is_let_go_before_watch_events(service):
    facade = FakeFacade(service, {100: "busy", 200: "busy"})
    with _idle_but_for(service, facade, [WATCH, BINDING]) as rx:
        facade.set(p200="ready", p100="streaming")
        assert _released_ports(rx) == [200, 100]  # both readers at once, the answer first


def test_a_flushing_connection_holds_readers_back_without_a_wall_clock_decision(service):
    """ "flushing" (frames that owe no byte yet, a stream about to close) is waited for,
    however long: no wall-clock grace decides when readers go, and nothing is counted."""
    facade = FakeFacade(service, {100: "flushing", 200: "busy"})
    with _idle_but_for(service, facade, [WATCH, BINDING]) as rx:
        facade.set(p200="ready")
        assert not rx.poll(0.3), "let go while a connection was still flushing"
        facade.set(p100="streaming")
        assert _released_ports(rx) == [200, 100]
    assert service.stall.nondeterministic_causes == []


def test_time_not_acknowledged_is_a_counted_wall_clock_decision():
    """Free-running modes push the new time and wait for its acknowledgement; going on
    without it after the stall timeout is a non-deterministic advance."""
    with ClockService(mode="lockstep", stall_timeout=0.1) as clock:
        clock.quiescence.set_io_checker(lambda port, sent, consumed: "idle")
        with _connected(clock, "sched") as peer:
            peer.send(cp.state(False, 0, [WATCH], 0, 1, 0))  # reads the API: told the time
            clock.wait_quiescent()
            clock.advance_to(5)  # the peer never acknowledges
            assert peer.recv() == {"op": "time", "t": 5}
        assert clock.stall.nondeterministic_causes == [
            "time not acknowledged at t=0.000000005 s by 'sched' within 0.1 s of wall time"
        ]


def test_the_broker_reacts_to_what_was_done_before_letting_a_reader_go(service):
    """The hook (the broker: a binding becomes a running pod) runs while every process
    is idle but for data to read; what it writes is read with the rest."""
    facade = FakeFacade(service, {100: "streaming", 200: "idle"})
    calls = []

    def hook():
        calls.append(dict(facade.states))
        if len(calls) == 1:
            facade.states[200] = "ready"  # its commit answered something too
            return True
        return False

    service.quiescence.set_before_io_release(hook)
    with _idle_but_for(service, facade, [WATCH, BINDING]) as rx:
        assert _released_ports(rx) == [200, 100]  # chosen after the hook's change
        assert calls == [{100: "streaming", 200: "idle"}, {100: "streaming", 200: "ready"}]


def _driver_waits(service, timeout=5.0):
    """Bounded wait until the driver sleeps in wait_quiescent (its work done)."""
    pause = threading.Event()
    for _ in range(int(timeout / 0.01)):
        with service._cond:
            if service.quiescence.driver_waiting:
                return True
        pause.wait(0.01)
    return False


@pytest.mark.parametrize("hook_has_work", [False, True])
def test_a_state_report_lets_readers_go_at_once_when_the_hook_has_nothing_to_do(
    service, hook_has_work
):
    """The report that makes a release possible is acted on by the thread that receives
    it — unless the broker's hook has work, which the driver must do first."""
    facade = FakeFacade(service, {100: "streaming", 200: "ready"})
    calls = []
    service.quiescence.set_before_io_release(
        lambda: calls.append("hook") or False, pending=lambda: hook_has_work
    )
    with _connected(service, "sched") as peer:
        peer.send(cp.state(True, 0, [], 1, 0, 0))  # busy: the driver waits for it
        done = _waiting(service)
        assert _driver_waits(service)
        peer.send(cp.state(False, 0, [WATCH, BINDING], 0, 2, 0))
        assert _released_ports(peer) == [200, 100]
        assert calls == (["hook"] if hook_has_work else [])
        facade.set(p100="idle", p200="idle")
        peer.send(cp.state(False, 1, [], 0, 2, 0))
        assert done.wait(5)


@pytest.mark.parametrize("hook_has_work", [False, True])
def test_a_response_written_lets_the_reader_go_from_the_facades_thread(
    service, monkeypatch, hook_has_work
):
    """The facade's word that the binding's response is written (``notify``, from its
    connection thread) lets the reader go from that thread when the driver waits with
    nothing for its hook to do — the decision the driver would make on waking, one
    wake-up sooner; the driver is not woken for it. With work for the hook, the driver
    is woken and decides, as before."""
    facade = FakeFacade(service, {100: "streaming", 200: "busy"})
    calls = []
    service.quiescence.set_before_io_release(
        lambda: calls.append("hook") or False, pending=lambda: hook_has_work
    )
    senders = []
    send = service.transport.send_locked

    def recorded(proc, msg):
        senders.append((msg["op"], threading.current_thread().name))
        send(proc, msg)

    monkeypatch.setattr(service.transport, "send_locked", recorded)
    with _connected(service, "sched") as peer:
        peer.send(cp.state(False, 0, [WATCH, BINDING], 0, 2, 0))  # the binding in flight
        done = _waiting(service)
        assert _driver_waits(service)
        written = []

        def write_response():
            # while the driver waits: with the service's lock held (reentrant, as the
            # facade's notify takes it) it cannot stop waiting before the notify is done —
            # a wait that times out under load would otherwise let the driver decide
            pause = threading.Event()
            for _ in range(int(TIMEOUT_S / 0.01)):
                with service._cond:
                    if service.quiescence.driver_waiting:
                        facade.set(p200="ready")
                        written.append(1)
                        return
                pause.wait(0.01)

        writer = threading.Thread(target=write_response, name="facade-conn")
        writer.start()
        writer.join(TIMEOUT_S)
        assert written, "the driver never waited"
        assert _released_ports(peer) == [200, 100]
        assert calls == (["hook"] if hook_has_work else [])
        assert len(senders) == 1 and senders[0][0] == "io"
        assert (senders[0][1] == "facade-conn") is not hook_has_work
        facade.set(p100="idle", p200="idle")
        peer.send(cp.state(False, 1, [], 0, 2, 0))
        assert done.wait(5)


def test_a_frame_that_breaks_its_handler_closes_only_its_connection(service, monkeypatch):
    """Whatever a frame makes go wrong, the clock's thread survives: the sender gets an
    error and its connection closes, everyone else is served."""
    decode = cp.decode_to_broker

    def fragile(frame):
        if b"boom" in frame:
            raise KeyError("boom")
        return decode(frame)

    monkeypatch.setattr("broker.clock.inbox.clockproto.decode_to_broker", fragile)
    with _connected(service, "a") as a, _connected(service, "b") as b:
        a.sock.sendall(b'{"op":"stacks","text":"boom"}\n')
        msg = a.recv()
        assert msg["op"] == "error" and "KeyError" in msg["message"]
        assert not a.poll(TIMEOUT_S), "the connection stays open"
        assert service.transport._thread.is_alive()
        b.send(cp.now_request(3))
        assert b.recv() == {"op": "now", "rid": 3, "t": 0}


_FRAMES = st.one_of(
    st.binary(max_size=300),  # garbage
    st.builds(lambda n: b"[" * n + b"]" * n, st.integers(1, 200_000)),  # deep
    st.builds(lambda n: b'{"op":"now","rid":' + b"9" * n, st.integers(1, 5000)),  # truncated
    st.sampled_from([b"{}", b"null", b'{"op":"hello"}', b'{"op":"state","busy":true}']),
    st.builds(
        lambda name, token: cp.pack([cp.hello(name, 1, token)])[:-1],
        st.text(min_size=1, max_size=30),
        st.one_of(st.none(), st.text(max_size=40)),
    ),  # hellos with invented names and tokens
    st.builds(lambda n: b"x" * n, st.integers(100_000, 300_000)),  # long, no newline yet
    st.builds(  # compact frames' ops with anything after them
        lambda op, payload: op + b" " + payload,
        st.sampled_from([b"state", b"timer", b"now", b"cancel", b"harden"]),
        st.binary(max_size=200) | st.text("0123456789abcdef", max_size=200).map(str.encode),
    ),
)


@pytest.fixture(scope="module")
def fuzzed():
    clock = ClockService()
    yield clock
    clock.close()


@settings(max_examples=60, deadline=None)
@given(frame=_FRAMES)
def test_whatever_a_stranger_sends_the_clock_thread_lives_and_serves(fuzzed, frame):
    """Issue 27: garbage, truncated, huge, deep frames and invented identities end only
    the connection that sent them; the clock's thread stays alive and a registered
    process is still answered."""
    stranger = Peer(fuzzed.endpoint)
    try:
        stranger.sock.sendall(frame + b"\n")
        stranger.poll(0.2)  # an error, or nothing (an unfinished frame)
    except OSError:
        pass  # closed on us mid-send: that is the point
    finally:
        stranger.close()
    assert fuzzed.transport._thread.is_alive()
    with _connected(fuzzed, "sched") as peer:
        peer.send(cp.now_request(9))
        assert peer.recv() == {"op": "now", "rid": 9, "t": 0}
    # only the registered process (reconnected under sched#2, #3, ...), no stranger
    assert {p.name.partition("#")[0] for p in fuzzed.registry.processes()} == {"sched"}


def _applied(peer):
    """Bounded: everything ``peer`` sent before was applied (a ``now`` round trip comes
    back after them: one connection's messages are handled in order)."""
    peer.send(cp.now_request(99))
    assert peer.recv()["op"] == "now"


def test_the_facade_wakes_nobody_while_a_process_runs(service, monkeypatch):
    """While a process runs (or owes an acknowledgement, or never connected), what the
    facade does cannot end a wait for quiescence: its notifications wake no thread (each
    was a thread switch in the broker per response and watch frame). Once the process
    waits, they do again: a response written then is what lets the reader go."""
    wakes = []
    real = threading.Condition.notify_all

    def counted(cond):
        if cond is service._cond:
            wakes.append(1)
        real(cond)

    monkeypatch.setattr(threading.Condition, "notify_all", counted)
    service.expect("late")  # launched, not connected yet: time cannot move either
    with _connected(service, "sched") as peer:
        peer.send(cp.state(True, 0, [], 1, 0, 0))
        _applied(peer)
        before = len(wakes)
        service.notify()
        assert len(wakes) == before, "a facade notification woke the waiters while 'sched' ran"
        peer.send(cp.state(False, 0, [BINDING], 0, 1, 0))
        _applied(peer)
        before = len(wakes)
        service.notify()
        assert len(wakes) == before, "woke the waiters while 'late' had not connected"
        with service._cond:
            service.registry.procs["late"].gone = True
        service.notify()
        assert len(wakes) == before + 1
