"""What a Python launcher does in dprun's place: hvd.ray and hvd.spark start their
workers through their engine (Ray actors, Spark tasks), and this module gives those
workers what dprun gives its ranks.

    store = JobStore(host)              # the job's store (hvd_store_serve)
    places = place_ranks(nodes)         # rank, local and cross rank of each worker
    env = rank_env(places[i], store, job_id, hostname)   # HVD_* and HOROVOD_*
    store.abort("rank 2 (Ray actor ... on 10.0.0.3) died: ...")   # a dead rank, named

With HVD_RANK and HVD_STORE_ADDR set, hvd.init() in a worker connects to the
driver's store as it would to dprun's: its waits end as soon as the driver records a
dead rank (the "hvd/abort/reason" key, runtime/common/job_keys.h), naming it, and a
worker whose driver's store is gone ends itself. An elastic job's generations
(docs/elastic.md, "What dprun does") are written with publish_generation.
"""
import ctypes
import secrets

from hvd import _lib

# runtime/common/job_keys.h.
ABORT_REASON = "hvd/abort/reason"
ELASTIC_GENERATION = "hvd/elastic/generation"
ELASTIC_RESET_REQUEST = "hvd/elastic/reset_request"


def elastic_scope(generation):
    return "hvd/elastic/%d/" % generation


def started_key(rank):
    return "hvd/started/%d" % rank


_P = ctypes.POINTER
_STORE_PROTOTYPES = {
    "hvd_store_serve": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                       _P(ctypes.c_void_p)]),
    "hvd_store_connect": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64,
                                         _P(ctypes.c_void_p)]),
    "hvd_store_port": (ctypes.c_int, [ctypes.c_void_p, _P(ctypes.c_int)]),
    "hvd_store_set": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                     ctypes.c_size_t]),
    "hvd_store_get": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64,
                                     ctypes.c_void_p, ctypes.c_size_t, _P(ctypes.c_size_t)]),
    "hvd_store_add": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64,
                                     _P(ctypes.c_int64)]),
    "hvd_store_close": (ctypes.c_int, [ctypes.c_void_p]),
}


def _fn(name):
    lib = _lib.lib()
    fn = getattr(lib, name, None)
    if fn is None:
        raise RuntimeError("%s lacks %s: it is older than this hvd package; rebuild libhvd"
                           % (lib.path, name))
    fn.restype, fn.argtypes = _STORE_PROTOTYPES[name]
    return fn


class JobStore:
    """A job's store (hvd_store_*): JobStore(host) serves one in this process on host
    (port 0: an ephemeral one) with a fresh random secret; JobStore.connect(address,
    secret) connects to one, as a task that registers with its driver does.
    Thread-safe; close() ends it."""

    def __init__(self, host, port=0):
        self.host = host
        self.secret = secrets.token_hex(32)
        handle = ctypes.c_void_p()
        _lib.check(_fn("hvd_store_serve")(host.encode(), int(port), self.secret.encode(),
                                          ctypes.byref(handle)),
                   "hvd_store_serve(%s)" % host)
        self._handle = handle
        out = ctypes.c_int()
        _lib.check(_fn("hvd_store_port")(self._handle, ctypes.byref(out)), "hvd_store_port")
        self.port = out.value

    @classmethod
    def connect(cls, address, secret, timeout_s):
        store = cls.__new__(cls)
        handle = ctypes.c_void_p()
        _lib.check(_fn("hvd_store_connect")(address.encode(), secret.encode(),
                                            int(timeout_s * 1000), ctypes.byref(handle)),
                   "hvd_store_connect(%s)" % address)
        store._handle = handle
        store.host, store.port = address.rsplit(":", 1)
        store.port = int(store.port)
        store.secret = secret
        return store

    @property
    def address(self):
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "%s:%d" % (host, self.port)

    def set(self, key, value):
        data = value.encode() if isinstance(value, str) else bytes(value)
        _lib.check(_fn("hvd_store_set")(self._handle, key.encode(), data, len(data)),
                   "hvd_store_set(%s)" % key)

    def get(self, key, timeout_s=0.0):
        """The value of key (bytes), waiting up to timeout_s; HvdTimeoutError if unset."""
        n = ctypes.c_size_t()
        get = _fn("hvd_store_get")
        _lib.check(get(self._handle, key.encode(), int(timeout_s * 1000), None, 0, ctypes.byref(n)),
                   "hvd_store_get(%s)" % key)
        buf = ctypes.create_string_buffer(max(n.value, 1))
        _lib.check(get(self._handle, key.encode(), 0, buf, n.value, ctypes.byref(n)),
                   "hvd_store_get(%s)" % key)
        return buf.raw[:n.value]

    def try_get(self, key):
        """The value of key (bytes), or None if it is not set."""
        from hvd import errors
        try:
            return self.get(key, 0)
        except errors.HvdTimeoutError:
            return None

    def add(self, key, delta):
        out = ctypes.c_int64()
        _lib.check(_fn("hvd_store_add")(self._handle, key.encode(), int(delta),
                                               ctypes.byref(out)),
                   "hvd_store_add(%s)" % key)
        return out.value

    def abort(self, reason, generation=None):
        """Records the first dead rank: the ranks' waits end on it, naming it. In an
        elastic job, in that generation's scope."""
        prefix = "" if generation is None else elastic_scope(generation)
        if self.try_get(prefix + ABORT_REASON) is None:
            self.set(prefix + ABORT_REASON, reason)

    def publish_generation(self, generation, places):
        """Publishes an elastic generation: places maps each worker's elastic id to its
        place (a dict from place_ranks); then the generation's number, which the
        workers' hvd.init() waits for."""
        for worker_id, p in places.items():
            self.set(elastic_scope(generation) + "assign/" + worker_id,
                     "%d %d %d %d %d %d" % (p["rank"], p["size"], p["local_rank"],
                                            p["local_size"], p["cross_rank"], p["cross_size"]))
        self.set(ELASTIC_GENERATION, str(generation))

    def close(self):
        if getattr(self, "_handle", None):
            handle, self._handle = self._handle, None
            _lib.check(_fn("hvd_store_close")(handle), "hvd_store_close")

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: B902 -- interpreter shutdown: nothing to report to
            pass


def place_ranks(nodes):
    """Ranks for workers on `nodes` (nodes[i]: the node of worker i, any hashable):
    the workers of a node get consecutive ranks, nodes in the order they first
    appear, as dprun fills hosts. Returns, for each worker i, a dict of rank, size,
    local_rank, local_size, cross_rank, cross_size (Horovod's cross rank: the index
    among the ranks with the same local rank) and node."""
    order = []
    members = {}
    for i, node in enumerate(nodes):
        if node not in members:
            members[node] = []
            order.append(node)
        members[node].append(i)
    places = [None] * len(nodes)
    rank = 0
    cross_count = {}
    for node in order:
        for local_rank, worker in enumerate(members[node]):
            places[worker] = dict(rank=rank, size=len(nodes), local_rank=local_rank,
                                  local_size=len(members[node]),
                                  cross_rank=cross_count.get(local_rank, 0), node=node)
            cross_count[local_rank] = cross_count.get(local_rank, 0) + 1
            rank += 1
    for p in places:
        p["cross_size"] = cross_count[p["local_rank"]]
    return places


def rank_env(place, store, job_id, hostname, gloo_address=None, elastic_id=None):
    """The variables dprun would give this rank (README.md, "Configuration")."""
    env = {
        "HVD_RANK": place["rank"], "HVD_SIZE": place["size"],
        "HVD_LOCAL_RANK": place["local_rank"], "HVD_LOCAL_SIZE": place["local_size"],
        "HVD_CROSS_RANK": place["cross_rank"], "HVD_CROSS_SIZE": place["cross_size"],
        "HVD_STORE_ADDR": store.address, "HVD_STORE_SECRET": store.secret,
        "HVD_JOB_ID": job_id,
        "HOROVOD_RANK": place["rank"], "HOROVOD_SIZE": place["size"],
        "HOROVOD_LOCAL_RANK": place["local_rank"], "HOROVOD_LOCAL_SIZE": place["local_size"],
        "HOROVOD_CROSS_RANK": place["cross_rank"], "HOROVOD_CROSS_SIZE": place["cross_size"],
        "HOROVOD_HOSTNAME": hostname,
    }
    if gloo_address:
        env["HVD_GLOO_HOSTNAME"] = gloo_address
    if elastic_id is not None:
        env["HVD_ELASTIC_ID"] = elastic_id
    return {k: str(v) for k, v in env.items()}


def new_job_id(engine):
    return "%s-%s" % (engine, secrets.token_hex(8))


# hvd's errors that a rank raises because another rank failed: consequences, not causes.
CONSEQUENCES = ("RemoteError", "ShutDownError", "HvdTimeoutError")
