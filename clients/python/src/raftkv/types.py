"""Plain Python views of raftkv answers, and the transaction builders.

Keys and values given to the client may be ``str`` (UTF-8 encoded) or
``bytes``; everything returned is ``bytes``.
"""

from dataclasses import dataclass, field
from typing import List, Optional, Tuple, Union

from raftkv.errors import InvalidArgument
from raftkv.v1 import kv_pb2, watch_pb2

__all__ = [
    "KeyLike",
    "to_bytes",
    "prefix_range_end",
    "KeyValue",
    "RangeResult",
    "PutResult",
    "DeleteResult",
    "TxnResult",
    "LeaseTTL",
    "Event",
    "Compare",
    "Put",
    "Get",
    "Delete",
]

KeyLike = Union[str, bytes, bytearray, memoryview]


def to_bytes(v: KeyLike, what: str = "key") -> bytes:
    """``str`` as UTF-8, bytes-like as is; anything else is an InvalidArgument."""
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise InvalidArgument("%s must be str or bytes, not %s" % (what, type(v).__name__))


def prefix_range_end(prefix: KeyLike) -> bytes:
    """The range_end that makes [prefix, range_end) every key starting with prefix.

    The last byte below 0xff is incremented and the rest dropped (etcd's
    rule); a prefix of 0xff bytes only, or an empty one, gives b"\\0" (every
    key from the prefix on).
    """
    p = bytearray(to_bytes(prefix, "prefix"))
    while p:
        if p[-1] < 0xFF:
            p[-1] += 1
            return bytes(p)
        p.pop()
    return b"\0"


def _prefix_key(prefix: KeyLike) -> Tuple[bytes, bytes]:
    """(key, range_end) of a prefix; the empty prefix is every key."""
    key = to_bytes(prefix, "prefix")
    if not key:
        return b"\0", b"\0"
    return key, prefix_range_end(key)


def _range_args(key: KeyLike, range_end: Optional[KeyLike], prefix: bool) -> Tuple[bytes, bytes]:
    if prefix:
        if range_end is not None:
            raise InvalidArgument("give either range_end or prefix=True, not both")
        return _prefix_key(key)
    return to_bytes(key), (to_bytes(range_end, "range_end") if range_end is not None else b"")


@dataclass(frozen=True)
class KeyValue:
    """A key with its value and revisions (kv.proto KeyValue)."""

    key: bytes
    value: bytes
    create_revision: int = 0
    mod_revision: int = 0
    version: int = 0
    lease: int = 0

    @classmethod
    def from_pb(cls, kv: kv_pb2.KeyValue) -> "KeyValue":
        return cls(key=kv.key, value=kv.value, create_revision=kv.create_revision,
                   mod_revision=kv.mod_revision, version=kv.version, lease=kv.lease)


@dataclass(frozen=True)
class RangeResult:
    """The answer of a range read. Iterating gives the KeyValues."""

    kvs: List[KeyValue]
    count: int
    more: bool
    revision: int
    member_id: int = 0

    def __iter__(self):
        return iter(self.kvs)

    def __len__(self):
        return len(self.kvs)

    def __getitem__(self, i):
        return self.kvs[i]

    @property
    def keys(self) -> List[bytes]:
        return [kv.key for kv in self.kvs]

    def as_dict(self):
        """{key: value} of the keys returned."""
        return {kv.key: kv.value for kv in self.kvs}

    @classmethod
    def from_pb(cls, r: kv_pb2.RangeResponse) -> "RangeResult":
        return cls(kvs=[KeyValue.from_pb(kv) for kv in r.kvs], count=r.count, more=r.more,
                   revision=r.header.revision, member_id=r.header.member_id)


@dataclass(frozen=True)
class PutResult:
    """The answer of a put: the store's revision after it, and prev_kv if asked for."""

    revision: int
    prev_kv: Optional[KeyValue] = None
    index: int = 0

    @classmethod
    def from_pb(cls, r: kv_pb2.PutResponse) -> "PutResult":
        return cls(revision=r.revision,
                   prev_kv=KeyValue.from_pb(r.prev_kv) if r.HasField("prev_kv") else None,
                   index=r.index)


class DeleteResult(int):
    """The answer of a delete: an int, the number of keys deleted, that also
    carries ``deleted`` (the same number), ``revision`` (the store's revision
    after it) and ``prev_kvs`` (the deleted key-values, when asked for)."""

    deleted: int
    revision: int
    prev_kvs: List[KeyValue]

    def __new__(cls, deleted: int, revision: int = 0, prev_kvs: Optional[List[KeyValue]] = None):
        self = super().__new__(cls, deleted)
        self.deleted = int(deleted)
        self.revision = revision
        self.prev_kvs = list(prev_kvs or [])
        return self

    def __repr__(self):
        return "DeleteResult(deleted=%d, revision=%d, prev_kvs=%r)" % (
            self.deleted, self.revision, self.prev_kvs)

    @classmethod
    def from_pb(cls, r: kv_pb2.DeleteRangeResponse) -> "DeleteResult":
        return cls(r.deleted, r.header.revision, [KeyValue.from_pb(kv) for kv in r.prev_kvs])


@dataclass(frozen=True)
class TxnResult:
    """The answer of a transaction: whether the compares held, one result per op."""

    succeeded: bool
    responses: List[Union[RangeResult, PutResult, DeleteResult]]
    revision: int

    def __bool__(self):
        return self.succeeded

    @classmethod
    def from_pb(cls, r: kv_pb2.TxnResponse) -> "TxnResult":
        out = []
        for op in r.responses:
            which = op.WhichOneof("response")
            if which == "response_range":
                out.append(RangeResult.from_pb(op.response_range))
            elif which == "response_put":
                out.append(PutResult.from_pb(op.response_put))
            elif which == "response_delete_range":
                out.append(DeleteResult.from_pb(op.response_delete_range))
            else:  # a kind added by a later v1 server
                out.append(op)
        return cls(succeeded=r.succeeded, responses=out, revision=r.header.revision)


@dataclass(frozen=True)
class LeaseTTL:
    """LeaseTimeToLive's answer. ttl == -1: the lease does not exist."""

    id: int
    ttl: int
    granted_ttl: int
    keys: List[bytes] = field(default_factory=list)


@dataclass(frozen=True)
class Event:
    """One change of a watched key.

    ``type`` is "PUT" or "DELETE"; ``kv`` the key-value after the change
    (DELETE: the key, with mod_revision the delete's revision); ``prev_kv``
    the one before when the watch asked for it and the key existed.
    """

    type: str
    kv: KeyValue
    prev_kv: Optional[KeyValue] = None

    @property
    def key(self) -> bytes:
        return self.kv.key

    @property
    def value(self) -> bytes:
        return self.kv.value

    @property
    def revision(self) -> int:
        return self.kv.mod_revision

    @classmethod
    def from_pb(cls, e: watch_pb2.Event) -> "Event":
        return cls(type=watch_pb2.Event.EventType.Name(e.type), kv=KeyValue.from_pb(e.kv),
                   prev_kv=KeyValue.from_pb(e.prev_kv) if e.HasField("prev_kv") else None)


# ---- transactions ----

_RESULTS = {
    "==": kv_pb2.Compare.EQUAL,
    "!=": kv_pb2.Compare.NOT_EQUAL,
    "<": kv_pb2.Compare.LESS,
    ">": kv_pb2.Compare.GREATER,
}


class _CompareTarget:
    """``Compare.value(key)`` and friends; a comparison operator makes the Compare."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, key: KeyLike, target: int, field_name: str):
        self._key = to_bytes(key)
        self._target = target
        self._field = field_name

    def _make(self, op: str, other) -> "Compare":
        if self._field == "value":
            other = to_bytes(other, "compared value")
        elif isinstance(other, bool) or not isinstance(other, int):
            raise InvalidArgument("a %s compare needs an int, not %s" % (
                self._field, type(other).__name__))
        return Compare(self._key, self._target, _RESULTS[op], self._field, other)

    def __eq__(self, other):  # type: ignore[override]
        return self._make("==", other)

    def __ne__(self, other):  # type: ignore[override]
        return self._make("!=", other)

    def __lt__(self, other):
        return self._make("<", other)

    def __gt__(self, other):
        return self._make(">", other)

    def __le__(self, other):
        raise InvalidArgument("raftkv compares support ==, !=, < and > only")

    __ge__ = __le__


class Compare:
    """One condition of a transaction, built with a comparison operator::

        Compare.value("k") == b"v"
        Compare.version("k") > 3
        Compare.create_revision("k") == 0     # the key is absent
        Compare.mod_revision("k") < 100
        Compare.lease("k") == lease_id

    An absent key has version, create and mod revision 0, lease 0 and no
    value (a value compare on it is false, whatever the operator).
    """

    def __init__(self, key: bytes, target: int, result: int, field_name: str, operand):
        self.key = key
        self.target = target
        self.result = result
        self.field = field_name
        self.operand = operand

    @staticmethod
    def value(key: KeyLike) -> _CompareTarget:
        return _CompareTarget(key, kv_pb2.Compare.VALUE, "value")

    @staticmethod
    def version(key: KeyLike) -> _CompareTarget:
        return _CompareTarget(key, kv_pb2.Compare.VERSION, "version")

    @staticmethod
    def create_revision(key: KeyLike) -> _CompareTarget:
        return _CompareTarget(key, kv_pb2.Compare.CREATE, "create_revision")

    @staticmethod
    def mod_revision(key: KeyLike) -> _CompareTarget:
        return _CompareTarget(key, kv_pb2.Compare.MOD, "mod_revision")

    @staticmethod
    def lease(key: KeyLike) -> _CompareTarget:
        return _CompareTarget(key, kv_pb2.Compare.LEASE, "lease")

    # etcd-style aliases
    create = create_revision
    mod = mod_revision

    def to_pb(self) -> kv_pb2.Compare:
        c = kv_pb2.Compare(result=self.result, target=self.target, key=self.key)
        setattr(c, self.field, self.operand)
        return c

    def __repr__(self):
        op = {v: k for k, v in _RESULTS.items()}[self.result]
        return "Compare.%s(%r) %s %r" % (self.field, self.key, op, self.operand)


class Put:
    """A put operation of a transaction."""

    def __init__(self, key: KeyLike, value: KeyLike, lease: int = 0, prev_kv: bool = False):
        self.request = kv_pb2.PutRequest(key=to_bytes(key), value=to_bytes(value, "value"),
                                         lease=lease, prev_kv=prev_kv)

    def to_pb(self) -> kv_pb2.RequestOp:
        return kv_pb2.RequestOp(request_put=self.request)

    has_writes = True


class Get:
    """A read operation of a transaction: one key, [key, range_end) or a prefix."""

    def __init__(self, key: KeyLike, range_end: Optional[KeyLike] = None, *, prefix: bool = False,
                 limit: int = 0, keys_only: bool = False, count_only: bool = False):
        k, end = _range_args(key, range_end, prefix)
        self.request = kv_pb2.RangeRequest(key=k, range_end=end, limit=limit,
                                           keys_only=keys_only, count_only=count_only)

    def to_pb(self) -> kv_pb2.RequestOp:
        return kv_pb2.RequestOp(request_range=self.request)

    has_writes = False


class Delete:
    """A delete operation of a transaction: one key, [key, range_end) or a prefix."""

    def __init__(self, key: KeyLike, range_end: Optional[KeyLike] = None, *, prefix: bool = False,
                 prev_kv: bool = False):
        k, end = _range_args(key, range_end, prefix)
        self.request = kv_pb2.DeleteRangeRequest(key=k, range_end=end, prev_kv=prev_kv)

    def to_pb(self) -> kv_pb2.RequestOp:
        return kv_pb2.RequestOp(request_delete_range=self.request)

    has_writes = True
