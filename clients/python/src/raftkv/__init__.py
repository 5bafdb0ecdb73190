"""Python client of raftkv, a Raft-replicated key-value store (API raftkv.v1).

    import raftkv
    with raftkv.Client(["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]) as c:
        c.put("greeting", "hello")
        assert c.get("greeting") == b"hello"

See raftkv.client.Client for the calls and the retry and session rules,
raftkv.errors for the typed errors, and raftkv.v1 for the generated gRPC
stubs (low-level access).
"""

from raftkv import errors
from raftkv.client import CHANNEL_OPTIONS, Client, Stubs
from raftkv.errors import (Aborted, Cancelled, Compacted, FailedPrecondition, Internal,
                           InvalidArgument, NotFound, NotLeader, PermissionDenied, RaftkvError,
                           ResourceExhausted, SessionExpired, Timeout, Unauthenticated,
                           Unavailable, Unimplemented)
from raftkv.lease import KeepAlive
from raftkv.types import (Compare, Delete, DeleteResult, Event, Get, KeyValue, LeaseTTL, Put,
                          PutResult, RangeResult, TxnResult, prefix_range_end)
from raftkv.watch import Watcher

__version__ = "0.1.0"
#: The gRPC API package this client speaks.
API_VERSION = "raftkv.v1"

__all__ = [
    "Client", "Stubs", "CHANNEL_OPTIONS", "Watcher", "KeepAlive",
    "Compare", "Put", "Get", "Delete",
    "KeyValue", "RangeResult", "PutResult", "DeleteResult", "TxnResult", "LeaseTTL", "Event",
    "prefix_range_end", "errors",
    "RaftkvError", "InvalidArgument", "NotFound", "FailedPrecondition", "NotLeader",
    "Unavailable", "Timeout", "Aborted", "SessionExpired", "Compacted", "ResourceExhausted",
    "PermissionDenied", "Unauthenticated", "Cancelled", "Internal", "Unimplemented",
    "API_VERSION",
]
