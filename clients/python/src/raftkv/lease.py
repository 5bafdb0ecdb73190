"""A background keep-alive of one lease."""

import threading
from typing import Callable, Optional

from raftkv.errors import NotFound, RaftkvError

__all__ = ["KeepAlive"]

# After a failed renewal (no leader, ...), the next try comes this soon (seconds).
_RETRY_AFTER = 0.5


class KeepAlive:
    """Renews a lease every TTL/3 (or every ``interval`` seconds) on a thread.

    Each renewal is :meth:`Client.lease_keep_alive` (through the leader, with
    the client's redirects and retries). The first renewal is sent at once.
    A failed renewal (no leader for now, ...) is tried again after 0.5 s. When the lease is gone (the
    cluster answers TTL 0, or NotFound) ``lost`` becomes True, ``on_lost(id)``
    is called and the thread ends.

    Use as a context manager (``with client.keep_alive(lease):``) or call
    :meth:`stop`. Attributes: ``ttl`` (the last TTL granted), ``renewals``
    (successful renewals), ``last_error``.
    """

    def __init__(self, client, lease_id: int, interval: Optional[float] = None,
                 on_lost: Optional[Callable[[int], None]] = None):
        if interval is not None and interval <= 0:
            raise ValueError("interval must be > 0 seconds")
        self._client = client
        self.lease_id = lease_id
        self._interval = interval
        self._on_lost = on_lost
        self._stop = threading.Event()
        self.ttl: int = 0
        self.renewals: int = 0
        self.lost: bool = False
        self.last_error: Optional[RaftkvError] = None
        self._first = threading.Event()
        self._thread = threading.Thread(target=self._run, name="raftkv-keepalive-%d" % lease_id,
                                        daemon=True)
        client._adopt(self)
        self._thread.start()

    def _lose(self) -> None:
        self.lost = True
        self._first.set()
        if self._on_lost is not None:
            try:
                self._on_lost(self.lease_id)
            except Exception:
                pass

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    ttl = self._client.lease_keep_alive(self.lease_id)
                except NotFound as e:
                    self.last_error = e
                    self._lose()
                    return
                except RaftkvError as e:
                    # No leader for now, ...: try again soon (a new leader
                    # gives every lease its full TTL again).
                    self.last_error = e
                    self._stop.wait(_RETRY_AFTER)
                    continue
                if ttl <= 0:
                    self._lose()
                    return
                self.ttl = ttl
                self.renewals += 1
                self._first.set()
                self._stop.wait(self._interval if self._interval is not None else max(ttl / 3.0, 0.1))
        finally:
            self._first.set()
            self._client._release(self)

    def wait_first(self, timeout: Optional[float] = None) -> bool:
        """Waits for the first renewal's answer; True if the lease was renewed."""
        self._first.wait(timeout)
        return self.renewals > 0

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: Optional[float] = 5.0) -> None:
        """Stops renewing (the lease then expires after its TTL unless revoked)."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    close = stop

    def __enter__(self) -> "KeepAlive":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
