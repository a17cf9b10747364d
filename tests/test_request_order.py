"""Requests a process has in flight together are handled in the order it sent them: the
runtime numbers them (a header after the request line), the facade's sequencer orders
them per process (broker/facade/facade.py)."""

from __future__ import annotations

import os
import threading

from broker.facade import facade as facade_module
from broker.facade.facade import RequestSequencer
from broker.facade.server import Request
from timewarp._core import netio


def request(seq: str | None) -> Request:
    headers = {} if seq is None else {"x-timewarp-seq": seq}
    return Request("GET", "/api/v1/pods", headers, b"", 1234, lambda: None)


def test_the_runtime_numbers_the_first_chunk_of_each_request():
    tagged = netio.tag_request(b"DELETE /api/v1/namespaces/d/pods/p HTTP/1.1\r\nHost: x\r\n\r\n")
    line, header, rest = tagged.split(b"\r\n", 2)
    assert line == b"DELETE /api/v1/namespaces/d/pods/p HTTP/1.1"
    name, _, value = header.partition(b": ")
    assert name == b"X-Timewarp-Seq" and value.split(b".")[1].isdigit()
    assert value.split(b".")[0].startswith(str(os.getpid()).encode() + b"-")
    assert rest == b"Host: x\r\n\r\n"
    again = netio.tag_request(bytearray(b"GET / HTTP/1.1\r\n\r\n"))
    assert int(again.split(b"\r\n")[1].split(b".")[1]) == int(value.split(b".")[1]) + 1
    assert netio.tag_request(b'{"kind": "Binding"}') is None  # a body, not a request
    assert netio.tag_request(b"GET /x HTTP/1.1") is None  # no complete request line


def test_requests_are_handled_in_their_process_order_whatever_the_arrival():
    seq = RequestSequencer()
    handled = []
    threads = []
    for n in (3, 1, 2):  # arrival order
        key = seq.key(request(f"42-ab12cd34.{n}"))

        def handle(key=key):
            seq.wait_turn(*key)
            handled.append(key[1])
            seq.done(*key)

        threads.append(threading.Thread(target=handle))
        threads[-1].start()
    for t in threads:
        t.join(10)
    assert handled == [1, 2, 3]


def test_processes_and_unnumbered_requests_do_not_wait_for_each_other():
    seq = RequestSequencer()
    assert seq.key(request(None)) is None
    assert seq.key(request("garbage")) is None
    a, b = seq.key(request("42-00000000.1")), seq.key(request("42-ffffffff.1"))
    assert a[0] != b[0]  # a later process with the same pid numbers afresh
    seq.wait_turn(*b)
    seq.done(*b)


def test_a_request_whose_predecessor_never_comes_goes_after_a_while(monkeypatch, capsys):
    monkeypatch.setattr(facade_module, "GAP_TIMEOUT_S", 0.05)
    seq = RequestSequencer()
    key = seq.key(request("42-ab12cd34.2"))
    seq.wait_turn(*key)  # request 1 was lost on a broken connection
    seq.done(*key)
    assert "request 2 of process 42-ab12cd34 waited" in capsys.readouterr().err
    nxt = seq.key(request("42-ab12cd34.3"))
    seq.wait_turn(*nxt)  # in order again: no wait
