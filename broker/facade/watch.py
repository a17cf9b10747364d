"""Watch streams: what one watcher has yet to receive, in resourceVersion order.

Invariant (the quiescence ledger depends on it): every frame a watcher will deliver is
counted, in the thread that queued it and before that thread returns from the store call
that caused it, either through ``on_queued(frame)`` (the consumer accounts it as written
before sending it; ``frame`` is None for a direct write's backlog, whose bytes the writer
counted already) or, when a direct writer is attached (``attach_writer``), as written at
once.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from .resources import ResourceType
from .selectors import FieldSelector, LabelSelector

END = b""  # the sentinel frame: the stream is over (timeout, store shutdown, error sent)
# The most bytes of live events a watcher may hold unsent: past that its client is not
# reading, and the watcher is dropped as the API server's watch cache drops one: it gets
# nothing more, and its stream ends (cleanly) after what it holds, whenever its client
# reads again; the client then re-watches. Events sent at the start of a watch do not
# count.
WATCH_QUEUE_BYTES = 16 * 1024 * 1024


def event_frame(event_type: str, object_json: bytes) -> bytes:
    """One watch event as the API server writes it: a JSON object and a newline."""
    return b'{"type":"' + event_type.encode() + b'","object":' + object_json + b"}\n"


def bookmark_object(rt: ResourceType, resource_version: int, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(resource_version)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return json.dumps(
        {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}, separators=(",", ":")
    ).encode()


class EncodedObject(Protocol):
    """A stored object with its JSON encoding (the store's entries)."""

    obj: dict[str, Any]

    def json(self) -> bytes: ...


class StoredEvent:
    """A committed change: type, the object after it (for DELETED: its last state with the
    deletion's resourceVersion) and before it."""

    __slots__ = ("rv", "type", "entry", "prev", "_frames")

    def __init__(
        self, rv: int, type_: str, entry: EncodedObject, prev: dict[str, Any] | None
    ) -> None:
        self.rv = rv
        self.type = type_
        self.entry = entry
        self.prev = prev
        self._frames: dict[str, bytes] = {}

    @property
    def obj(self) -> dict[str, Any]:
        return self.entry.obj

    def frame(self, as_type: str) -> bytes:
        frame = self._frames.get(as_type)
        if frame is None:
            frame = self._frames[as_type] = event_frame(as_type, self.entry.json())
        return frame


class Watcher:
    """One watch: a namespace/selector filter and a queue of encoded event frames.

    The store calls ``offer``/``push`` with its lock held; exactly one consumer calls
    ``take``. After ``end`` the queue accepts nothing more and ``take`` returns ``END``
    once the frames before it are drained.
    """

    def __init__(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        *,
        bookmarks: bool = False,
        on_queued: Callable[[bytes | None], None] | None = None,
        on_overflow: Callable[[], None] | None = None,
        max_queued_bytes: int = WATCH_QUEUE_BYTES,
        recode: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self.rt = rt
        # what turns each frame into the version watched (a custom resource's served
        # version that is not its storage version: crds.version_recoder)
        self.recode = recode
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.bookmarks = bookmarks
        self._on_queued = on_queued
        self._on_overflow = on_overflow
        self.max_queued_bytes = max_queued_bytes
        self._queued_bytes = 0
        self.overflowed = False
        self._frames: deque[bytes] = deque()
        self._cond = threading.Condition()
        self._ended = False
        # A direct writer sends a frame from the committing thread when nothing is queued
        # or being written; what the socket did not take is the backlog, which the
        # consumer sends before anything else (it counts as one queued frame).
        self._writer: Callable[[bytes], bytes] | None = None
        self._backlog = b""
        self._consuming = False  # the consumer is sending what it took
        self.delivered_rv = 0  # highest resourceVersion queued (events and bookmarks)

    def matches(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return self.labels.matches(meta.get("labels")) and self.fields.matches(obj)

    def offer(
        self, event: StoredEvent, obj: dict[str, Any] | None = None, *, bounded: bool = True
    ) -> None:
        """Queue ``event`` as this watcher sees it: a change that makes an object stop
        (start) matching the selectors arrives as DELETED (ADDED), as on a real server.
        ``obj``: the committed object itself, when the committer holds it (a packed
        entry's ``obj`` is a decode per call)."""
        now_match = self.matches(event.obj if obj is None else obj)
        if event.type == "ADDED":
            kind = "ADDED" if now_match else None
        elif event.type == "DELETED":
            kind = "DELETED" if now_match or self.matches(event.prev) else None
        else:
            was_match = self.matches(event.prev)
            kind = {
                (True, True): "MODIFIED",
                (True, False): "DELETED",
                (False, True): "ADDED",
            }.get((was_match, now_match))
        if kind is not None:
            self.push(event.frame(kind), event.rv, bounded=bounded)

    def push(self, frame: bytes, rv: int = 0, *, bounded: bool = True, raw: bool = False) -> bool:
        """Queue ``frame`` (False if the watch is over). A ``bounded`` frame that would
        take the queue past ``max_queued_bytes`` ends the watch instead (``overflowed``;
        ``on_overflow`` is called): nothing more is queued. A ``raw`` frame is not an
        event (a WebSocket control frame): never recoded."""
        if self.recode is not None and not raw:
            frame = self.recode(frame)
        with self._cond:
            if self._ended:
                return False
            if bounded and self._queued_bytes + len(frame) > self.max_queued_bytes:
                self.overflowed = True
                self._ended = True
                self._frames.append(END)
                if self._on_queued is not None:
                    self._on_queued(END)
                self._cond.notify()
                overflow = self._on_overflow
            else:
                overflow = None
        if overflow is not None:
            overflow()
            return False
        with self._cond:
            if self._ended:
                return False
            self.delivered_rv = max(self.delivered_rv, rv)
            if (
                self._writer is not None
                and not self._frames
                and not self._backlog
                and not self._consuming
            ):
                self._backlog = self._writer(frame)
                if not self._backlog:
                    return True
                queued: bytes | None = None  # the writer counted the backlog's bytes
            else:
                self._frames.append(frame)
                self._queued_bytes += len(frame)
                queued = frame
            if self._on_queued is not None:
                self._on_queued(queued)
            self._cond.notify()
            return True

    def attach_writer(self, writer: Callable[[bytes], bytes] | None) -> None:
        """``writer(frame)`` sends ``frame`` at once without blocking (the store lock is
        held), having counted all of it as written, and returns what the socket did not
        take. None detaches it."""
        with self._cond:
            self._writer = writer

    def take_batch(self, timeout: float | None = None) -> tuple[bytes, list[bytes]] | None:
        """The consumer's turn: the backlog of a direct write and every frame queued
        (``END`` last if it came), waiting up to ``timeout`` seconds of real time; None if
        nothing came. Until :meth:`sent`, no frame is written directly."""
        with self._cond:
            if not self._frames and not self._backlog:
                self._cond.wait(timeout)
            if not self._frames and not self._backlog:
                return None
            backlog, self._backlog = self._backlog, b""
            frames = list(self._frames)
            self._frames.clear()
            self._queued_bytes = 0
            self._consuming = True
            return backlog, frames

    def sent(self) -> None:
        """The consumer sent what it took (or gave up on the connection)."""
        with self._cond:
            self._consuming = False

    def end(self) -> bool:
        """Queue the end of the stream (counted like a frame); False if already ended."""
        with self._cond:
            if self._ended:
                return False
            self._ended = True
            self._frames.append(END)
            if self._on_queued is not None:
                self._on_queued(END)
            self._cond.notify()
            return True

    @property
    def ended(self) -> bool:
        with self._cond:
            return self._ended

    def wake(self) -> None:
        """Wake a consumer blocked in ``take_batch`` without queueing anything (shutdown)."""
        with self._cond:
            self._cond.notify_all()

    def pending(self) -> int:
        with self._cond:
            return len(self._frames) + bool(self._backlog)

    def drain(self) -> list[bytes]:
        """Everything queued so far, a direct write's backlog first (tests, in-process
        consumers, and a consumer giving up)."""
        with self._cond:
            frames = [self._backlog] if self._backlog else []
            frames += self._frames
            self._backlog = b""
            self._frames.clear()
            self._queued_bytes = 0
            return frames
