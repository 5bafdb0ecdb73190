"""Watches that survive the loss of their member (KvClient::Watch's rules).

A :class:`Watcher` reads the Watch stream on a background thread into a
bounded buffer; iterating it gives :class:`~raftkv.types.Event` objects in
revision order. When the stream breaks (UNAVAILABLE, connection lost,
CANCELLED or DEADLINE_EXCEEDED from the server, ABORTED, or the member ended
it with OK), the watch is opened again on the next endpoint after a jittered
back-off, from the revision after the last event delivered (or the original
start revision, or the first member's revision + 1 when it was 0 and nothing
was delivered yet), so no event is lost or repeated. A new stream must be
established within ``timeout`` of the break, else the last error is raised
from the iterator. OUT_OF_RANGE moves to the next endpoint too (a restarted
member may lack history its peers keep); it is raised (as
:class:`~raftkv.errors.Compacted`) once every endpoint answered it for the
same revision, or when no stream made progress within ``timeout``. Any other
error ends the watch (InvalidArgument, ResourceExhausted, ...).
"""

import queue
import random
import threading
from typing import List, Optional

import grpc

from raftkv import errors
from raftkv._retry import RetryLoop
from raftkv.errors import RaftkvError
from raftkv.types import Event
from raftkv.v1 import watch_pb2

__all__ = ["Watcher"]

_RESUMABLE = (
    grpc.StatusCode.OK,  # the member closed the stream (shutting down)
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
)

# Answers buffered ahead of the reader; beyond it the stream is not read
# (gRPC flow control then holds the member back, which ends a watcher that
# falls behind its history window with OUT_OF_RANGE, as for any slow watcher).
_BUFFERED_ANSWERS = 1024


class Watcher:
    """An iterator of the events of one watch. Thread-safe to cancel.

    Attributes: ``revision`` (the first member's revision when the watch was
    created), ``next_revision`` (the first revision not yet received),
    ``endpoint`` (the member currently streaming), ``reconnects`` (streams
    opened after the first).
    """

    def __init__(self, client, key: bytes, range_end: bytes, *, start_revision: int,
                 prev_kv: bool, timeout: float):
        self._client = client
        self._key = key
        self._range_end = range_end
        self._prev_kv = prev_kv
        self._timeout = timeout
        self._queue: "queue.Queue[List[Event]]" = queue.Queue(maxsize=_BUFFERED_ANSWERS)
        self._pending: List[Event] = []
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._created = threading.Event()
        self._mu = threading.Lock()
        self._call = None  # guarded by _mu
        self._error: Optional[RaftkvError] = None
        self._error_raised = False
        self.revision: int = 0
        self.next_revision: int = start_revision
        self.endpoint: Optional[str] = None
        self.reconnects: int = 0
        self._thread = threading.Thread(target=self._run, name="raftkv-watch", daemon=True)
        client._adopt(self)
        self._thread.start()

    # ------------------------------------------------------------- consumer

    def __iter__(self):
        return self

    def __next__(self) -> Event:
        ev = self.get(timeout=None)
        if ev is None:
            raise StopIteration
        return ev

    def get(self, timeout: Optional[float] = None) -> Optional[Event]:
        """The next event; None when ``timeout`` seconds pass without one, or the
        watch has ended (see ``done``). Raises the error that ended the watch."""
        deadline = None if timeout is None else _now() + timeout
        while True:
            if self._stop.is_set():
                return None
            if self._pending:
                return self._pending.pop(0)
            try:
                wait = 0.1 if deadline is None else max(0.0, min(0.1, deadline - _now()))
                batch = self._queue.get(timeout=wait)
            except queue.Empty:
                if self._finished.is_set() and self._queue.empty():
                    if self._error is not None and not self._error_raised:
                        self._error_raised = True
                        raise self._error
                    return None
                if deadline is not None and _now() >= deadline:
                    return None
                continue
            self._pending.extend(batch)

    def wait_created(self, timeout: Optional[float] = None) -> bool:
        """Waits until the first stream answered ``created``; False on timeout or end."""
        end = None if timeout is None else _now() + timeout
        while not self._created.is_set():
            if self._finished.is_set():
                return False
            left = 0.05 if end is None else min(0.05, end - _now())
            if left <= 0:
                return False
            self._created.wait(left)
        return True

    @property
    def done(self) -> bool:
        """The watch has ended: cancelled, or ended by an error (``error``)."""
        return self._stop.is_set() or self._finished.is_set()

    @property
    def error(self) -> Optional[RaftkvError]:
        return self._error

    def cancel(self) -> None:
        """Stops the watch (from any thread): iteration ends, no new stream opens."""
        self._stop.set()
        with self._mu:
            call = self._call
        if call is not None:
            call.cancel()

    close = cancel

    def join(self, timeout: Optional[float] = None) -> None:
        self._thread.join(timeout)

    def __enter__(self) -> "Watcher":
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()
        self._thread.join(2.0)

    # --------------------------------------------------------------- reader

    def _deliver(self, events: List[Event]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(events, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _new_loop(self, after: Optional[str]) -> RetryLoop:
        loop = RetryLoop(self._client.endpoints, None, self._timeout,
                         random.Random(self._client._seed()), stop=self._stop, start_at=after)
        if after is not None:
            loop.advance()  # from the member after this one
        return loop

    def _run(self) -> None:
        try:
            self._error = self._watch()
        except RaftkvError as e:
            self._error = e
        except Exception as e:  # a bug: end the watch visibly
            self._error = errors.Internal("watch failed: %r" % (e,))
        finally:
            if self._stop.is_set():
                self._error = None
            self._finished.set()
            self._client._release(self)

    def _watch(self) -> Optional[RaftkvError]:
        endpoints = self._client.endpoints
        loop = self._new_loop(None)
        last: RaftkvError = errors.Unavailable("no attempt made")
        out_of_range_at = set()
        out_of_range_revision = -1
        out_of_range: Optional[RaftkvError] = None
        created_delivered = False
        while not self._stop.is_set() and loop.start():
            target = loop.target
            req = watch_pb2.WatchRequest(key=self._key, range_end=self._range_end,
                                         start_revision=self.next_revision, prev_kv=self._prev_kv)
            try:
                call = self._client.stubs(target).watch.Watch(req, metadata=self._client._metadata)
            except RaftkvError:  # the client was closed
                return None
            with self._mu:
                self._call = call
            if self._stop.is_set():
                call.cancel()
            established = delivered = False
            err: Optional[RaftkvError] = None
            try:
                for resp in call:
                    if not established and resp.created:
                        established = True
                        self.endpoint = target
                        if self.next_revision == 0:
                            self.next_revision = resp.header.revision + 1
                        if not created_delivered:
                            created_delivered = True
                            self.revision = resp.header.revision
                            self._created.set()
                        else:
                            self.reconnects += 1
                    # Drop what was delivered already (a member that resent it).
                    events = [Event.from_pb(e) for e in resp.events
                              if e.kv.mod_revision >= self.next_revision]
                    if not events:
                        continue
                    delivered = True
                    if not self._deliver(events):
                        break
                    highest = max(e.revision for e in events)
                    if highest >= self.next_revision:
                        self.next_revision = highest + 1
            except grpc.RpcError as e:
                err = errors.from_rpc_error(e, target)
            finally:
                with self._mu:
                    self._call = None
            if self._stop.is_set():
                call.cancel()
                return None
            if err is None:
                err = errors.Unavailable("the member ended the watch", code=grpc.StatusCode.OK,
                                         endpoint=target)
            if err.code == grpc.StatusCode.OUT_OF_RANGE:
                if out_of_range_revision != self.next_revision:
                    out_of_range_at.clear()
                    out_of_range_revision = self.next_revision
                out_of_range_at.add(target)
                out_of_range = err
                if len(out_of_range_at) >= len(endpoints):
                    return err
            elif err.code not in _RESUMABLE:
                return err
            if err.code == grpc.StatusCode.OK:
                err = errors.Unavailable("the member ended the watch", endpoint=target)
            last = err
            # A stream that delivered events, or lasted until its member went
            # away, is progress; one refused at once (OUT_OF_RANGE) is not.
            if delivered or (established and err.code != grpc.StatusCode.OUT_OF_RANGE):
                loop = self._new_loop(target)
            else:
                loop.advance()
            if not loop.backoff():
                break
        if self._stop.is_set():
            return None
        if out_of_range is not None and out_of_range_revision == self.next_revision:
            return out_of_range
        last.details += loop.gave_up_suffix("Watch")
        last.args = (last.details,)
        return last


def _now() -> float:
    import time
    return time.monotonic()
