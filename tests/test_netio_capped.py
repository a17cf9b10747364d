"""Deterministic-mode reads of an API connection ask for no more than the broker let the
thread read (timewarp/_core/netio.py): the size argument of every read signature is capped."""

import pytest

from timewarp._core.netio import _capped


@pytest.mark.parametrize(
    ("args", "kwargs", "budget", "expected"),
    [
        ((65536,), {}, 100, ((100,), {})),  # socket.recv(bufsize)
        ((10, 0), {}, 100, ((10, 0), {})),  # already smaller, flags kept
        ((), {"buflen": 8192}, 7, ((), {"buflen": 7})),  # SSLSocket.recv(buflen=...)
        ((), {}, 5000, ((), {"bufsize": 1024})),  # SSLSocket.recv() defaults to 1024
    ],
)
def test_recv_sizes_are_capped(args, kwargs, budget, expected):
    assert _capped(False, args, kwargs, budget) == expected


def test_recv_into_sizes_are_capped_whatever_the_spelling():
    buf = bytearray(8192)
    assert _capped(True, (buf,), {}, 300) == ((buf, 300), {})
    assert _capped(True, (buf, 0), {}, 300) == ((buf, 300), {})  # 0 means the whole buffer
    assert _capped(True, (buf, 100, 0), {}, 300) == ((buf, 100, 0), {})
    view = memoryview(buf)[:50]
    assert _capped(True, (view,), {"flags": 0}, 300) == ((view,), {"flags": 0, "nbytes": 50})
