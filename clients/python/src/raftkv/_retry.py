"""Endpoint parsing and the retry loop's bookkeeping (mirrors src/client/retry_loop.h)."""

import random
import re
import threading
import time
from typing import List, Optional, Sequence

from raftkv.errors import InvalidArgument

_HOST_CHARS = re.compile(r"^[A-Za-z0-9._-]+$")
_IPV6_CHARS = re.compile(r"^[A-Za-z0-9:.%]+$")


def parse_endpoint(endpoint: str):
    """Checks "host:port" (IPv6 bracketed: "[::1]:7001"); returns (host, port).

    Raises InvalidArgument naming the problem.
    """
    def fail(why):
        raise InvalidArgument('bad endpoint "%s": %s (expected host:port, e.g. 127.0.0.1:7001)'
                              % (endpoint, why))

    if not isinstance(endpoint, str):
        raise InvalidArgument("an endpoint must be a str host:port, not %s" % type(endpoint).__name__)
    if endpoint.startswith("["):
        close = endpoint.find("]")
        if close < 0:
            fail("unbalanced '[' (no closing ']')")
        host = endpoint[1:close]
        if not host:
            fail("empty host")
        if not _IPV6_CHARS.match(host):
            fail("invalid character in IPv6 address")
        if close + 1 >= len(endpoint) or endpoint[close + 1] != ":":
            fail("missing ':port'")
        colon = close + 1
    else:
        colon = endpoint.rfind(":")
        if colon < 0:
            fail("missing ':port'")
        host = endpoint[:colon]
        if not host:
            fail("empty host")
        if not _HOST_CHARS.match(host):
            fail("IPv6 addresses must be bracketed, e.g. [::1]:7001" if ":" in host
                 else "invalid character in host")
    port = endpoint[colon + 1:]
    if not port:
        fail("empty port")
    if not port.isdigit() or not port.isascii():
        fail("port '%s' is not a number" % port)
    n = int(port) if len(port) <= 5 else 0
    if not 1 <= n <= 65535:
        fail("port %s is out of range 1..65535" % port)
    return host, n


def parse_endpoints(endpoints) -> List[str]:
    """A list of endpoints from a list or a comma-separated str; each checked."""
    if isinstance(endpoints, str):
        items = [e.strip() for e in endpoints.split(",")]
    else:
        try:
            items = [e.strip() if isinstance(e, str) else e for e in endpoints]
        except TypeError:
            raise InvalidArgument("endpoints must be a list of host:port or a comma-separated str")
    items = [e for e in items if e != ""]
    if not items:
        raise InvalidArgument("no endpoints given (expected host:port[,host:port...])")
    for e in items:
        parse_endpoint(e)
    return items


class JitteredBackoff:
    """Decorrelated jitter: each sleep uniform in [min, 3 x the previous], capped at max."""

    def __init__(self, rng: random.Random, min_s: float = 0.05, max_s: float = 0.4):
        self._rng = rng
        self.min_s = min_s
        self.max_s = max_s
        self._previous = min_s

    def next(self) -> float:
        hi = min(self.max_s, 3 * self._previous)
        self._previous = self._rng.uniform(self.min_s, max(self.min_s, hi))
        return self._previous


class RetryLoop:
    """Which endpoint to try next, the back-off, and the deadline of one call.

    A known leader first (when given), then the endpoints in turn, or the
    leader a refusal names. ``sleep`` is interruptible through ``stop``
    (a threading.Event), for watches and keep-alives being closed.
    """

    def __init__(self, endpoints: Sequence[str], leader: Optional[str], timeout: float,
                 rng: random.Random, stop: Optional[threading.Event] = None,
                 start_at: Optional[str] = None):
        self._endpoints = list(endpoints)
        self._start = time.monotonic()
        self.deadline = self._start + max(0.0, timeout)
        self._backoff = JitteredBackoff(rng)
        self._stop = stop
        self._cursor = 0
        self.target = self._endpoints[0]
        self.tried: List[str] = []
        self._immediate = 0
        self._attempts = 0
        first = leader or start_at
        if first:
            self.target = first
            if first in self._endpoints:
                self._cursor = self._endpoints.index(first)
            else:  # "next" after an address outside the list is the first endpoint
                self._cursor = len(self._endpoints) - 1

    def start(self) -> bool:
        """Starts an attempt: False once the deadline passed (the first always starts)."""
        if self._attempts > 0 and time.monotonic() >= self.deadline:
            return False
        self._attempts += 1
        if self.target not in self.tried:
            self.tried.append(self.target)
        return True

    @property
    def attempts(self) -> int:
        return self._attempts

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def advance(self) -> None:
        self._cursor = (self._cursor + 1) % len(self._endpoints)
        self.target = self._endpoints[self._cursor]

    def redirect(self, hint: str) -> bool:
        """Follows a leader hint; True if the caller should back off first."""
        self.target = hint
        return self.round_done()

    def round_done(self) -> bool:
        """Counts an attempt made without sleeping; True once every endpoint had its turn."""
        self._immediate += 1
        return self._immediate > len(self._endpoints)

    def backoff(self) -> bool:
        """Sleeps the next jittered back-off (at most until the deadline); False if no time is left."""
        self._immediate = 0
        remaining = self.left()
        if remaining <= 0:
            return False
        delay = min(self._backoff.next(), remaining)
        if self._stop is not None:
            return not self._stop.wait(delay)
        time.sleep(delay)
        return True

    def gave_up_suffix(self, name: str) -> str:
        return " (%s gave up after %d ms; endpoints tried: %s)" % (
            name, int(self.elapsed() * 1000), ", ".join(self.tried))
