"""Unique ids (ncclUniqueId) and communicator attributes (ncclConfig_t).

A UniqueId is 128 opaque bytes that round-trip through bytes() so that any channel can carry
it; a Config holds the ncclConfig_t fields a user sets, the rest left at NCCL's "unset" values.
"""

import ctypes

from . import _errors, _lib


# ---- Unique ids ---------------------------------------------------------------------------------

class UniqueId:
    """ncclUniqueId: 128 opaque bytes. bytes(uid) and UniqueId(data) round-trip, so an id can be
    sent to the other processes by any means (a file, a socket, pickle, MPI)."""

    __slots__ = ("_data",)

    def __init__(self, data):
        data = bytes(data)
        if len(data) != _lib.NCCL_UNIQUE_ID_BYTES:
            raise ValueError("a unique id is %d bytes, got %d" %
                             (_lib.NCCL_UNIQUE_ID_BYTES, len(data)))
        self._data = data

    def __bytes__(self):
        return self._data

    def __eq__(self, other):
        return isinstance(other, UniqueId) and other._data == self._data

    def __hash__(self):
        return hash(self._data)

    def __repr__(self):
        return "UniqueId(%s...)" % self._data[:8].hex()

    def __reduce__(self):
        return (UniqueId, (self._data,))

    def _struct(self):
        s = _lib.UniqueIdStruct()
        ctypes.memmove(ctypes.addressof(s), self._data, len(self._data))
        return s


def get_unique_id():
    """ncclGetUniqueId: a fresh id; create it on one rank and give its bytes to the others."""
    s = _lib.UniqueIdStruct()
    _errors.check(_lib.lib().ncclGetUniqueId(ctypes.byref(s)), "ncclGetUniqueId")
    return UniqueId(ctypes.string_at(ctypes.addressof(s), _lib.NCCL_UNIQUE_ID_BYTES))


def _as_uid(uid):
    if isinstance(uid, UniqueId):
        return uid
    if isinstance(uid, (bytes, bytearray, memoryview)):
        return UniqueId(uid)
    raise TypeError("uid must be a tutti.UniqueId or its 128 bytes, not %s" %
                    type(uid).__name__)


# ---- Configuration ------------------------------------------------------------------------------

class Config:
    """ncclConfig_t. Fields left None take the library's default (NCCL_CONFIG_UNDEF_*).
    blocking=False makes a nonblocking communicator (calls may return before they finish)."""

    _INT_FIELDS = {"blocking": "blocking", "cga_cluster_size": "cgaClusterSize",
                   "min_ctas": "minCTAs", "max_ctas": "maxCTAs", "split_share": "splitShare",
                   "traffic_class": "trafficClass", "collnet_enable": "collnetEnable",
                   "cta_policy": "CTAPolicy", "shrink_share": "shrinkShare",
                   "nvls_ctas": "nvlsCTAs", "n_channels_per_net_peer": "nChannelsPerNetPeer",
                   "nvlink_centric_sched": "nvlinkCentricSched"}

    def __init__(self, blocking=None, comm_name=None, net_name=None, **fields):
        unknown = set(fields) - set(self._INT_FIELDS)
        if unknown:
            raise TypeError("unknown Config field(s): %s (known: blocking, comm_name, net_name, "
                            "%s)" % (", ".join(sorted(unknown)), ", ".join(self._INT_FIELDS)))
        self.blocking = blocking
        self.comm_name = comm_name
        self.net_name = net_name
        self.fields = fields

    def _struct(self):
        c = _lib.ConfigStruct.initializer()
        if self.blocking is not None:
            c.blocking = 1 if self.blocking else 0
        for key, value in self.fields.items():
            if value is not None:
                setattr(c, self._INT_FIELDS[key], int(value))
        # ctypes keeps the bytes objects of c_char_p fields alive with the structure.
        if self.comm_name is not None:
            c.commName = self.comm_name.encode()
        if self.net_name is not None:
            c.netName = self.net_name.encode()
        return c


def _config_ptr(config):
    if config is None:
        return None, None
    if isinstance(config, dict):
        config = Config(**config)
    if not isinstance(config, Config):
        raise TypeError("config must be a tutti.Config or a dict of its fields, not %s" %
                        type(config).__name__)
    s = config._struct()
    return ctypes.byref(s), s
