"""Slack timers (broker/clock/timers.py): a server thread's poll timeout never decides when
time moves; it fires once time reached it for another reason, in the one total order;
hardened, it is an ordinary timer. Through the clock service: what the drivers see."""

from __future__ import annotations

from broker.clock.registry import ProcessState
from broker.clock.service import ClockService
from broker.clock.timers import TimerQueue


def _queue() -> tuple[TimerQueue, ProcessState, ProcessState]:
    return TimerQueue(), ProcessState("a"), ProcessState("b")


def test_a_slack_timer_is_no_deadline_until_time_reached_it():
    q, a, b = _queue()
    q.add_wait(a, 1, 500, [1], slack=True)
    assert q.first(0) is None and q.first(499) is None  # it never moves time itself
    assert q.first_slack().timer_id == 1  # what time goes to if nothing else is pending
    q.add_wait(b, 1, 3_600, [1])
    assert q.first(0).deadline == 3_600  # the next instant is the ordinary timer's
    # time reached 3,600 for that reason: the slack timer (due since 500) fires first,
    # in (deadline, owner, key) order, then the ordinary one
    first, ids = q.pop_owner(3_600)
    assert (first.proc, first.deadline, ids) == (a, 500, [1])
    first, ids = q.pop_owner(3_600)
    assert (first.proc, ids) == (b, [1])
    assert q.first(10**12) is None and q.first_slack() is None  # each fired once


def test_a_process_timers_due_together_go_out_in_one_fire_whatever_their_kind():
    q, a, _ = _queue()
    q.add_wait(a, 1, 500, [1], slack=True)
    q.add_wait(a, 2, 900, [2])
    q.add_wait(a, 3, 700, [3], slack=True)
    q.add_wait(a, 4, 2_000, [4], slack=True)  # not reached: stays
    first, ids = q.pop_owner(900)
    assert ids == [1, 3, 2]
    assert q.first(900) is None and q.first_slack().timer_id == 4


def test_a_hardened_slack_timer_is_due_at_its_deadline():
    q, a, b = _queue()
    q.add_wait(a, 1, 500, [1], slack=True)
    q.add_wait(b, 1, 3_600, [1])
    q.harden("a", 1)
    assert q.first(0).deadline == 500  # it decides the next instant now
    first, ids = q.pop_owner(500)
    assert (first.proc, ids) == (a, [1])
    q.harden("a", 1)  # fired already: nothing to do
    q.add_wait(a, 2, 1_000, [2], slack=True)
    q.cancel_wait("a", 2)
    q.harden("a", 2)  # cancelled: stays gone
    assert q.first(10_000).proc is b and q.first_slack() is None


def test_the_driver_never_advances_to_a_slack_deadline():
    clock = ClockService()
    try:
        with clock._cond:
            clock.timers.add_wait(clock.registry.procs.setdefault("p", ProcessState("p")), 1,
                                  500, [1], slack=True)  # fmt: skip
        assert clock.next_deadline() is None
        clock.call_at(3_600, lambda: None)
        assert clock.next_deadline() == 3_600
        clock.advance_to(3_600)  # past the slack deadline: allowed
        assert clock.next_deadline() == 500  # now due: released with what is due
    finally:
        clock.close()
