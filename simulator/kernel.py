"""A tiny SimGrid kernel: what Batsim 4.2.1's actors use, with SimGrid 3.32's scheduling.

Why: real Batsim decides *when* it talks to the decision process through SimGrid's
scheduling of its actors (server, job submitter, one actor per job, per CALL_ME_LATER, per
request-reply exchange). Which events share a message — the 16 completions of Batkube's
burst at t=170 arrive as 11, then 5 — follows from that machinery at the scale of 1e-10 s,
far below the microsecond Batsim prints. To send the same messages, the embedded simulator
runs the same actors on the same scheduling rules:

* **Actors** are generators yielding *simcalls* (tuples, first item the kind). An actor runs
  until its next simcall; every simcall costs a scheduling *sub-round*, even one answered at
  once (``BY_NAME``: Batsim looks its mailbox up by name before each send and receive;
  ``BY_NAME_THEN`` yields a lookup and its put or get together, and the kernel plays the
  two simcalls, sub-round after sub-round, without resuming the actor between them).
* **Sub-rounds**: the actors ready to run run in order; then their simcalls are handled in
  the same order; actors answered at once (and actors created meanwhile, before their
  creator) run in the next sub-round, at the same time.
* **Time** advances only when no actor is ready, as SimGrid's ``solve()`` does it (the
  L07 host model Batsim uses, "full" update): the step is the smallest time a pending
  action still needs; the clock moves by it (``clock + step``, a float sum) and every
  action's remainder is reduced by it, one float subtraction per step (``double_update``:
  a remainder below ``PRECISION``, SimGrid's 1e-9 s, becomes 0 and the action is done).
  So sleeps that end within 1e-9 s of the step end with it — Batkube's burst: 11 of 16
  completions spread 1e-10 s apart — and which ones do depends on the float rounding of
  those subtractions, reproduced exactly. Done actions wake their actors in the order the
  actions began; a communication wakes its sender, then its receiver.
* **Mailboxes** match one send with one receive; a send with no receiver waiting is queued
  (the mailbox is then not *empty*). A communication is 1 byte at the rate its sender
  gives (Batsim's messages: the master host's loopback, 1e10 B/s, so 1e-10 s; rate 0
  between hosts that no link joins: no time). ``EXEC`` is a computation (1 unit at a
  rate: a parallel task), updated like a communication. ``EXEC_TIMEOUT`` is one under a
  time limit, as Batsim runs a parallel task under a walltime (``set_timeout`` then
  ``start``): SimGrid starts a *timeout detector* — a sleep, begun when the actor asks,
  before the computation — and when the detector ends, the execution times out if the
  computation has work left (more than 1e-14 of it), else it is done. So a task whose run
  time equals the limit times out when some other event makes a step end within 1e-9 s
  before its end (the detector's remainder drops below ``PRECISION``, the computation's
  does not), and is done when the step lands on its end.
* ``PAUSE`` suspends the whole kernel inside an actor's run (Batsim's blocking ZeroMQ
  exchange, which takes no simulated time): :meth:`Kernel.run` returns the paused value
  and :meth:`Kernel.resume` continues with the answer.

Measured against the real binary (``--sg-log`` with the clock printed to 1e-15 s); the
differential tests in ``tests/test_batsim_real.py`` compare whole message sequences.
"""

from __future__ import annotations

import itertools
from bisect import insort
from collections import deque
from collections.abc import Generator
from typing import Any

PRECISION = 1e-9
_BYTES_PRECISION = 1e-14  # SimGrid's maxmin precision (1e-5) x timing precision

# simcall kinds (first item of the yielded tuple)
BY_NAME = 0  # (BY_NAME,): answered at once
CREATE = 1  # (CREATE, generator, name) -> the new Actor (it runs next sub-round, first)
SLEEP = 2  # (SLEEP, duration)
PUT = 3  # (PUT, mailbox, payload, (latency, rate)): the latency, then 1 unit at rate/s (0: no link)
GET = 4  # (GET, mailbox): returns the payload
PAUSE = 5  # (PAUSE, value): not a simcall; Kernel.run returns value
KILL = 6  # (KILL, actor): the actor dies (its pending sleep is dropped)
EXEC = 7  # (EXEC, rate): a computation of 1 unit at rate units/s (a ptask)
EXEC_TIMEOUT = 8  # (EXEC_TIMEOUT, rate, limit) -> TIMED_OUT or None (see the docstring)
# (BY_NAME_THEN, call): a BY_NAME, then ``call`` as the actor's next simcall, without
# resuming its generator in between (Batsim's send is a lookup then a put, its receive a
# lookup then a get: half of all simcalls are such lookups); returns ``call``'s answer
BY_NAME_THEN = 9
TIMED_OUT = "timed out"

Simcall = tuple
_LOOKUP = (BY_NAME,)
ActorCode = Generator[Simcall, Any, None]


class Mailbox:
    __slots__ = ("name", "queue", "receiver")

    def __init__(self, name: str) -> None:
        self.name = name
        # sends nobody received yet: (sender, payload, (latency, rate))
        self.queue: deque[tuple[Actor, Any, tuple[float, float]]] = deque()
        self.receiver: Actor | None = None

    def empty(self) -> bool:
        return not self.queue


class Actor:
    __slots__ = ("code", "name", "answer", "alive", "action", "sleep", "zombie", "then")

    def __init__(self, code: ActorCode, name: str) -> None:
        self.code = code
        self.name = name
        self.answer: Any = None
        self.alive = True
        self.action: _Action | None = None  # its pending computation or communication
        self.sleep = -1  # its pending sleep's slot in the kernel's _Sleeps
        # a computation that timed out but still uses its resources until the actor ends
        # (Batsim does not cancel a ptask past its walltime: SimGrid drops it with the
        # job's actor)
        self.zombie: _Action | None = None
        self.then: Simcall | None = None  # its next simcall, yielded with a BY_NAME_THEN


class _Sleeps:
    """The pending sleeps: each one's remaining time, reduced by every step exactly as
    SimGrid does it (one float subtraction per step, a remainder below ``PRECISION`` is
    nothing). A list of floats while they are few; a numpy array (the same IEEE
    subtractions, without a Python loop) once there are more than ``NUMPY_FROM``, so a
    simulation of thousands of running jobs costs microseconds per step.

    ``by_end`` lists the pending sleeps' slots, smallest remainder first. Subtracting the
    same step from every remainder keeps their order (IEEE rounding is monotone: a ≤ b
    gives a − d ≤ b − d), so a sleep's place is found once, by bisection, when it is
    added or moved: the smallest remainder is the first one's, and the sleeps a step
    ends (those left below ``PRECISION``) are the first ones — no search of the array
    at each end. The smallest remainder is also followed step by step (``_min``)."""

    NUMPY_FROM = 128

    def __init__(self) -> None:
        self.remaining: Any = []  # by slot; a free slot holds inf
        self.actor: list[Actor | _Action | None] = []  # whose sleep
        self.order: list[int] = []
        self.free: list[int] = []
        self.by_end: list[int] = []  # pending slots, smallest remainder first
        self.count = 0
        self._numpy: Any = None
        self._min: float | None = float("inf")  # None: to be read from by_end

    def add(self, actor: Actor | _Action, seconds: float, order: int) -> int:
        """A sleep of ``actor`` (or a computation's timeout detector): its slot."""
        if self.free:
            slot = self.free.pop()
            self.remaining[slot] = seconds
            self.actor[slot], self.order[slot] = actor, order
        else:
            slot = len(self.actor)
            if self._numpy is not None and slot == len(self.remaining):
                # a quarter more, not twice: every step subtracts from the whole array
                grown = self._numpy.full(slot + max(slot >> 2, 64), float("inf"))
                grown[:slot] = self.remaining
                self.remaining = grown
            if self._numpy is None:
                self.remaining.append(seconds)
            else:
                self.remaining[slot] = seconds
            self.actor.append(actor)
            self.order.append(order)
        self.count += 1
        insort(self.by_end, slot, key=self.remaining.__getitem__)
        if self._min is not None and seconds < self._min:
            self._min = seconds
        if self._numpy is None and self.count > self.NUMPY_FROM:
            self._use_numpy()
        return slot

    def _use_numpy(self) -> None:
        import numpy

        self._numpy = numpy
        values = numpy.full(max(2 * len(self.remaining), 256), float("inf"))
        values[: len(self.remaining)] = self.remaining
        self.remaining = values

    def set(self, slot: int, seconds: float) -> None:
        self.by_end.remove(slot)
        self.remaining[slot] = seconds
        insort(self.by_end, slot, key=self.remaining.__getitem__)
        self._min = None

    def remove(self, slot: int) -> None:
        self.remaining[slot] = float("inf")
        self.actor[slot] = None
        self.free.append(slot)
        self.by_end.remove(slot)
        self.count -= 1
        self._min = None

    def next(self) -> float:
        """The smallest remaining time (inf: none)."""
        if self._min is None:
            by_end = self.by_end
            self._min = float(self.remaining[by_end[0]]) if by_end else float("inf")
        return self._min

    def advance(self, delta: float) -> list[tuple[int, Actor | _Action]]:
        """Reduce every remaining time by ``delta``; the sleeps that end, ``(order,
        actor)`` (their slots are freed)."""
        smallest = self._min
        if smallest is None:
            smallest = self.next()
        smallest -= delta
        values = self.remaining
        if delta:
            if self._numpy is None:
                for slot, left in enumerate(values):
                    values[slot] = left - delta
            else:
                values -= delta
        if smallest >= PRECISION:  # nothing ends: the order is kept, the smallest too
            self._min = smallest
            return []
        out = []
        by_end = self.by_end
        while by_end and values[by_end[0]] < PRECISION:  # double_update: done
            slot = by_end[0]
            actor = self.actor[slot]
            assert actor is not None
            out.append((self.order[slot], actor))
            actor.sleep = -1
            self.remove(slot)
        return out


class _Action:
    """A pending SimGrid action other than a sleep: a 1-byte communication (its route's
    ``latency`` first, then ``remaining`` = share left at ``rate`` per second; rate 0: no
    link, done when its latency is) or a computation (1 unit at ``rate``, no receiver)."""

    __slots__ = (
        "remaining", "rate", "order", "actor", "receiver", "payload", "done", "sleep", "ended",
        "latency", "elements", "bound", "value", "mu",
    )  # fmt: skip

    def __init__(self, remaining: float, rate: float, order: int, actor: Actor) -> None:
        self.remaining = remaining
        self.rate = rate
        self.latency = 0.0
        # with shared resources (Kernel.constraints): what it uses of which constraint,
        # its own bound (0: none); its rate is then solved at every step
        self.elements: tuple[tuple[Any, float], ...] = ()
        self.bound = 0.0
        self.value = self.mu = 0.0
        self.order = order
        self.actor = actor
        self.receiver: Actor | None = None
        self.payload: Any = None
        self.done = False
        self.sleep = -1  # a computation's timeout detector: its slot in the kernel's _Sleeps
        self.ended = False  # its end was handled (with its detector's, in one step)


class Kernel:
    """See the module docstring. ``clock`` is SimGrid's clock (a float, like Batsim's)."""

    def __init__(self) -> None:
        self.clock = 0.0
        self._ready: list[Actor] = []  # next sub-round
        self._running: list[Actor] = []  # this sub-round
        self._pos = 0
        self._calls: list[tuple[Actor, Simcall]] = []
        self._actions: list[_Action] = []  # communications and computations
        self._sleeps = _Sleeps()
        self._seq = itertools.count()
        self._paused: Actor | None = None
        self.steps = 0  # time advances (for statistics)
        #: shared resources, id -> (capacity, fatpipe): set (by the simulator, on a
        #: platform with links or communicating tasks), every action's rate is SimGrid's
        #: max-min share (:func:`fair_bottleneck`), recomputed at each step; None: each
        #: action runs at its own rate (the link-free path, cheaper)
        self.constraints: dict[Any, tuple[float, bool]] | None = None
        # the max-min shares to solve again before the next step (see _advance)
        self._solve = True
        # an action was marked done since _actions was last filtered (see _advance)
        self._dropped = False
        self._lone: dict[int, tuple[Any, float, float, float]] = {}  # (fair_bottleneck)

    # ------------------------------------------------------------------ API
    def spawn(self, code: ActorCode, name: str) -> Actor:
        actor = Actor(code, name)
        self._ready.append(actor)
        return actor

    def resume(self, answer: Any) -> None:
        """Give the paused actor its answer; the next :meth:`run` continues it."""
        actor = self._paused
        if actor is None:
            raise RuntimeError("resume() without a paused actor")
        actor.answer = answer
        self._paused = None

    def pending_sleep(self, actor: Actor) -> float | None:
        """When ``actor``'s pending sleep ends, if it sleeps."""
        if actor.sleep < 0:
            return None
        return self.clock + float(self._sleeps.remaining[actor.sleep])

    def share(self, capacities: dict[Any, tuple[float, bool]]) -> None:
        """Add or change shared resources (``constraints``): solved again at the next step."""
        assert self.constraints is not None
        self.constraints.update(capacities)
        self._solve = True
        self._lone.clear()

    def retarget(self, actor: Actor, date: float) -> None:
        """Move the end of ``actor``'s pending sleep (timewarp's sharing slowdown)."""
        if actor.sleep >= 0:
            self._sleeps.set(actor.sleep, date - self.clock)

    def run(self) -> Any:
        """Run until an actor pauses (its value is returned) or nothing is left to happen
        (``None``)."""
        if self._paused is not None:
            raise RuntimeError("run() while an actor is paused: resume() it first")
        calls = self._calls
        append = calls.append
        running, pos = self._running, self._pos
        while True:
            ready = self._ready
            end = len(running)
            while pos < end:
                actor = running[pos]
                pos += 1
                call = actor.then
                if call is not None:  # the simcall after its lookup: no resumption
                    actor.then = None
                else:
                    answer = actor.answer
                    actor.answer = None
                    try:
                        call = actor.code.send(answer)
                    except StopIteration:
                        actor.alive = False
                        if actor.zombie is not None:
                            actor.zombie.done = self._dropped = True
                        continue
                kind = call[0]
                if kind == BY_NAME_THEN:
                    if calls or pos < end or ready or not actor.alive:
                        actor.then = call[1]  # it runs next sub-round, as after a BY_NAME
                        call = _LOOKUP
                        kind = BY_NAME
                    else:
                        # the next sub-round would be this actor alone, its simcall
                        # ``call[1]``, and nothing handled before it (no call in this
                        # sub-round, no other actor ready): that sub-round, now
                        call = call[1]
                        kind = call[0]
                if kind == BY_NAME and not calls:
                    # handled now, as _handle would first: no earlier call of this
                    # sub-round can put an actor in ``ready`` before it (most sub-rounds
                    # are one actor's lookup)
                    if actor.alive:
                        ready.append(actor)
                    continue
                if kind == PAUSE:
                    self._running, self._pos, self._paused = running, pos - 1, actor
                    return call[1]
                if kind == EXEC_TIMEOUT:  # the detector first, the computation when handled
                    action = _exec_action(call[1], -1, actor)
                    action.sleep = self._sleeps.add(action, call[2], next(self._seq))
                    actor.action = action
                append((actor, call))
            if calls:
                self._handle(calls)
                calls.clear()
            if not self._ready and not self._advance():
                self._running, self._pos = [], 0
                return None
            # the next sub-round; this one's list, emptied, gathers the one after
            running.clear()
            running, self._ready, pos = self._ready, running, 0

    # ------------------------------------------------------------------ internals
    def _handle(self, calls: list[tuple[Actor, Simcall]]) -> None:
        ready = self._ready
        for actor, call in calls:
            if not actor.alive:
                continue
            kind = call[0]
            if kind == PUT:  # (the kinds by how often Batsim's actors make them)
                mailbox = call[1]
                receiver = mailbox.receiver
                if receiver is not None:
                    mailbox.receiver = None
                    self._start_comm(actor, receiver, call[2], call[3])
                else:
                    mailbox.queue.append((actor, call[2], call[3]))
            elif kind == GET:
                mailbox = call[1]
                if mailbox.queue:
                    sender, payload, cost = mailbox.queue.popleft()
                    self._start_comm(sender, actor, payload, cost)
                else:
                    mailbox.receiver = actor
            elif kind == CREATE:
                created = Actor(call[1], call[2])
                ready.append(created)
                actor.answer = created
                ready.append(actor)
            elif kind == BY_NAME:
                ready.append(actor)
            elif kind == SLEEP:
                actor.sleep = self._sleeps.add(actor, call[1], next(self._seq))
            elif kind == EXEC:
                action = _exec_action(call[1], next(self._seq), actor)
                actor.action = action
                self._actions.append(action)
                self._solve = True
            elif kind == EXEC_TIMEOUT:  # its detector was started in run()
                action = actor.action
                assert action is not None
                action.order = next(self._seq)
                self._actions.append(action)
                self._solve = True
            elif kind == KILL:
                victim = call[1]
                victim.alive = False
                if victim.zombie is not None:
                    victim.zombie.done = self._dropped = True
                if victim.action is not None:
                    victim.action.done = self._dropped = True
                    if victim.action.sleep >= 0:  # its timeout detector goes with it
                        self._sleeps.remove(victim.action.sleep)
                        victim.action.sleep = -1
                if victim.sleep >= 0:
                    self._sleeps.remove(victim.sleep)
                    victim.sleep = -1
                ready.append(actor)
            else:  # pragma: no cover - a bug in an actor
                raise RuntimeError(f"{actor.name}: unknown simcall {call!r}")

    def _start_comm(
        self, sender: Actor, receiver: Actor, payload: Any, cost: tuple[float, float]
    ) -> None:
        action = _Action(1.0, cost[1], next(self._seq), sender)
        action.latency = cost[0]
        if len(cost) > 2:  # its links, for the shared-resources solver
            action.elements, action.bound = cost[2], cost[3]
        action.receiver = receiver
        action.payload = payload
        self._actions.append(action)
        if action.latency <= 0:  # it shares from the next step on (else: once it is paid)
            self._solve = True

    def _advance(self) -> bool:
        """Time steps, SimGrid's solve() each: the step is the smallest time any pending
        action needs; the clock moves by it and every action is updated by it
        (``double_update``: what is left below the precision is nothing); what ended wakes
        in the order it began. Steps follow one another until one wakes an actor (True)
        or nothing is left to happen (False): a step that wakes nobody (a message's
        latency paid) is followed by the next at once, as :meth:`run` would do with no
        actor ready. The max-min shares are solved again only when what they depend on
        changed (``_solve``): an action past its latency began or ended, or a
        constraint's capacity changed — the solver is a function of those alone, so the
        rates are the ones solving at every step gives (pinned by
        tests/test_sim_kernel.py against that)."""
        sleeps = self._sleeps
        ready = self._ready
        while True:
            actions = self._actions
            if self._dropped:  # (not at every step: most steps end no action)
                self._dropped = False
                kept = [a for a in actions if not a.done]
                if len(kept) != len(actions):
                    self._actions = actions = kept
                    self._solve = True
            if not actions and not sleeps.count:
                return False
            smallest = sleeps._min
            if smallest is None:
                smallest = sleeps.next()
            delta = smallest
            if self._solve:
                if actions and self.constraints is not None:
                    action = actions[0]
                    if len(actions) == 1 and not action.latency > 0 and not action.done:
                        # (most solves: one message in flight, its route's share memoised:
                        # fair_bottleneck's first look-up, without its two calls)
                        memo = self._lone.get(id(action.elements))
                        if (
                            memo is not None
                            and memo[0] is action.elements
                            and memo[1] == action.bound
                        ):
                            action.mu, action.value = memo[2], memo[3]
                            action.rate = action.value
                        else:
                            fair_bottleneck(actions, self.constraints, self._lone)
                    else:
                        fair_bottleneck(actions, self.constraints, self._lone)
                self._solve = False
            for action in actions:
                if action.latency > 0:  # ptask_L07: the route's latency first, at no rate
                    need = action.latency
                else:
                    need = 0.0 if action.rate == 0 else action.remaining / action.rate
                if need < delta:
                    delta = need
            self.clock = self.clock + delta
            self.steps += 1
            ended: list[tuple[int, Any]]
            if not sleeps.count:
                ended = []
            elif smallest - delta >= PRECISION and sleeps._numpy is not None:
                # _Sleeps.advance's commonest case (no sleep ends: the array's order and
                # its front are kept) without its call
                if delta:
                    sleeps.remaining -= delta
                sleeps._min = smallest - delta
                ended = []
            else:
                ended = sleeps.advance(delta)
            for action in actions:
                if action.latency > 0:  # L07's update_actions_state: the latency is paid first
                    latency = action.latency - delta
                    if latency >= PRECISION:
                        action.latency = latency
                        continue
                    action.latency = 0.0
                    self._solve = True  # its bytes share the links from the next step on
                    if action.rate > 0:
                        continue
                    left = 0.0  # no link: done once its latency is paid
                elif action.rate > 0:
                    left = action.remaining - action.rate * delta
                    if left < _BYTES_PRECISION:
                        left = 0.0
                    action.remaining = left
                else:
                    left = 0.0
                if left <= 0.0:
                    action.done = self._dropped = True
                    ended.append((action.order, action))
            if not ended:
                continue
            if len(ended) > 1:
                ended.sort(key=_first)
            for _, what in ended:
                if isinstance(what, Actor):  # a sleep
                    if what.alive:
                        ready.append(what)
                    continue
                actor, receiver = what.actor, what.receiver
                if receiver is None:  # a computation, or its timeout detector
                    if what.ended:
                        continue  # (both ended in this step: the detector came first)
                    what.ended = True
                    if what.sleep >= 0:  # done before its detector: the detector is dropped
                        self._sleeps.remove(what.sleep)
                        what.sleep = -1
                    elif not what.done:  # the detector ended, the computation has work left
                        if what.elements:  # sharing resources: it goes on using them
                            actor.zombie = what
                        else:
                            what.done = self._dropped = True  # (alone: changes nothing)
                        actor.answer = TIMED_OUT
                    actor.action = None
                    if actor.alive:
                        ready.append(actor)
                else:
                    ready.append(actor)
                    receiver.answer = what.payload
                    ready.append(receiver)
            if ready:
                return True


def _first(item: tuple[int, Any]) -> int:
    return item[0]


class Ptask:
    """A SimGrid parallel task as ptask_L07 builds it: the largest route latency among its
    communications (paid first), the constraints it uses (each host's CPU for its flops,
    each link for the bytes crossing it) and its bound (the slowest host's speed over its
    flops, the TCP window over latency × bytes); ``rate``: its rate alone, used when the
    kernel does not share resources. ``empty``: nothing to compute nor send."""

    __slots__ = ("latency", "elements", "bound", "rate", "empty")

    def __init__(
        self, latency: float, elements: tuple[tuple[Any, float], ...], bound: float, rate: float
    ) -> None:
        self.latency, self.elements, self.bound, self.rate = latency, elements, bound, rate
        self.empty = not any(weight > 0 for _, weight in elements)


def _exec_action(spec: Any, order: int, actor: Actor) -> _Action:
    if not isinstance(spec, Ptask):
        return _Action(1.0, spec, order, actor)
    action = _Action(0.0 if spec.empty else 1.0, spec.rate, order, actor)
    action.latency, action.elements, action.bound = spec.latency, spec.elements, spec.bound
    return action


_MAXMIN_PRECISION = 1e-5  # SimGrid's maxmin/precision default


def _from_memo(action: _Action, lone: dict[int, tuple[Any, float, float, float]]) -> bool:
    """``action``'s share from ``fair_bottleneck``'s memo of a lone action on its route
    (the same route object and bound), if there; False otherwise."""
    memo = lone.get(id(action.elements))
    if memo is None or memo[0] is not action.elements or memo[1] != action.bound:
        return False
    action.mu, action.value = memo[2], memo[3]
    action.rate = action.value
    return True


def fair_bottleneck(
    actions: list[_Action],
    constraints: dict[Any, tuple[float, bool]],
    lone: dict[int, tuple[Any, float, float, float]] | None = None,
) -> None:
    """SimGrid's "fairbottleneck" solver (ptask_L07's default): the rate of every action
    past its latency, the constraints' capacities shared among the actions using them
    (FATPIPE: not shared), each action capped by its bound; repeated until each action
    is saturated. The same operations in the same order as SimGrid 3.32's. ``lone``: the
    caller's memo of an action alone on its route, ``id(elements)`` -> ``(elements,
    bound, mu, value)``, valid while ``constraints`` do not change (the caller empties
    it when they do): a message's route is one tuple for all its messages."""
    if lone is not None and len(actions) == 1:  # (most solves: one message in flight)
        action = actions[0]
        if not action.latency > 0 and not action.done and _from_memo(action, lone):
            return
    variables = []
    for action in actions:
        if action.latency > 0 or action.done or not action.elements:
            continue
        action.value = action.mu = 0.0
        if any(weight != 0 for _, weight in action.elements):
            variables.append(action)
        else:
            action.rate = 1.0
    if not variables:
        return
    if len(variables) == 1:
        action = variables[0]
        elements = action.elements
        if lone is not None and _from_memo(action, lone):
            return
        # _alone is a function of these alone: its answer for a route is reused
        key = (elements, action.bound, tuple([constraints[cid] for cid, _ in elements]))
        known = _ALONE.get(key)
        if known is None and _alone(action, constraints):
            if len(_ALONE) >= _ALONE_MAX:  # (parallel tasks' routes: bounded)
                _ALONE.clear()
            known = _ALONE[key] = (action.mu, action.value)
        if known is not None:
            action.mu, action.value = known
            action.rate = action.value
            if lone is not None:
                if len(lone) >= _ALONE_MAX:
                    lone.clear()
                lone[id(elements)] = (elements, action.bound, *known)
            return
    _share(variables, constraints)


# _alone's answers: (elements, bound, their constraints' (capacity, fatpipe)) -> (mu, value)
_ALONE: dict[tuple, tuple[float, float]] = {}
_ALONE_MAX = 4096


def _share(variables: list[_Action], constraints: dict[Any, tuple[float, bool]]) -> None:
    """:func:`fair_bottleneck`'s loop over the actions that use some constraint."""
    usage: dict[Any, float] = {}
    remaining: dict[Any, float] = {}
    users: dict[Any, list[tuple[_Action, float]]] = {}
    for action in variables:
        for cid, weight in action.elements:
            if cid not in users:
                users[cid] = []
                remaining[cid] = constraints[cid][0]
                usage[cid] = 0.0
            users[cid].append((action, weight))
    saturated = set(map(id, variables))
    var_list = list(variables)
    cnst_list = list(users)
    while var_list:
        kept = []
        for cid in cnst_list:
            nb = sum(1 for a, w in users[cid] if w > 0 and id(a) in saturated)
            if nb > 0 and constraints[cid][1]:
                nb = 1
            if nb == 0:
                remaining[cid] = usage[cid] = 0.0
            else:
                usage[cid] = remaining[cid] / nb
                kept.append(cid)
        cnst_list = kept
        still = []
        for action in var_list:
            min_inc = float("inf")
            for cid, weight in action.elements:
                if weight > 0:
                    min_inc = min(min_inc, usage[cid] / weight)
            if action.bound > 0:
                min_inc = min(min_inc, action.bound - action.value)
            action.mu = min_inc
            action.value += min_inc
            if action.value == action.bound:
                saturated.discard(id(action))
            else:
                still.append(action)
        var_list = still
        kept = []
        for cid in cnst_list:
            left = remaining[cid]
            if not constraints[cid][1]:
                for action, weight in users[cid]:
                    left -= weight * action.mu
                    if left < _MAXMIN_PRECISION:
                        left = 0.0
            else:
                for action, weight in users[cid]:
                    usage[cid] = min(usage[cid], weight * action.mu)
                left -= usage[cid]
                if left < _MAXMIN_PRECISION:
                    left = 0.0
            remaining[cid] = left
            if left <= 0.0:
                for action, weight in users[cid]:
                    if weight > 0 and id(action) in saturated:
                        saturated.discard(id(action))
                var_list = [a for a in var_list if id(a) in saturated]
            else:
                kept.append(cid)
        cnst_list = kept
    for action in variables:
        action.rate = action.value


def _alone(action: _Action, constraints: dict[Any, tuple[float, bool]]) -> bool:
    """:func:`fair_bottleneck` for one action alone on its constraints (most steps of a
    platform with links: one message in flight): the same loop, the same float operations
    in the same order, on scalars instead of dicts and sets. False (nothing done) when the
    action uses a constraint twice (the general loop counts it twice)."""
    elements = action.elements
    cids = [cid for cid, _ in elements]
    if len(set(cids)) != len(cids):
        return False
    weights = [weight for _, weight in elements]
    fatpipe = [constraints[cid][1] for cid in cids]
    remaining = [constraints[cid][0] for cid in cids]
    usage = [0.0] * len(cids)
    alive = list(range(len(cids)))  # the general loop's cnst_list, by element index
    bound = action.bound
    value = 0.0
    saturated = running = True  # in ``saturated``, in ``var_list``
    while running:
        kept = []
        for i in alive:
            nb = 1 if weights[i] > 0 and saturated else 0
            if nb == 0:
                remaining[i] = usage[i] = 0.0
            else:
                usage[i] = remaining[i] / nb
                kept.append(i)
        alive = kept
        min_inc = float("inf")
        for i, weight in enumerate(weights):
            if weight > 0:
                min_inc = min(min_inc, usage[i] / weight)
        if bound > 0:
            min_inc = min(min_inc, bound - value)
        mu = min_inc
        value += min_inc
        if value == bound:
            saturated = running = False
        kept = []
        for i in alive:
            left = remaining[i]
            weight = weights[i]
            if not fatpipe[i]:
                left -= weight * mu
                if left < _MAXMIN_PRECISION:
                    left = 0.0
            else:
                usage[i] = min(usage[i], weight * mu)
                left -= usage[i]
                if left < _MAXMIN_PRECISION:
                    left = 0.0
            remaining[i] = left
            if left <= 0.0:
                if weight > 0 and saturated:
                    saturated = False
                running = running and saturated
            else:
                kept.append(i)
        alive = kept
    action.mu = mu
    action.value = value
    action.rate = value
    return True
