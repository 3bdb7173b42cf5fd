"""Life cycle, topology, process sets and collective names: the framework-neutral
part of hvd.numpy and hvd.torch.

Process sets follow horovod 0.28: a ProcessSet lists global ranks; it gets an id
when registered (add_process_set, or init(process_sets=...)); every rank, member or
not, must register and remove the same sets in the same order. As in Horovod,
`root_rank` arguments are global ranks even for a process set; this module
translates them to the rank within the set that the C API takes.

Names: the runtime identifies a collective by its name, which must be the same on
every rank. An explicit name becomes "<op>.<name>" (as Horovod does); no name gives
"<op>.noname.<n>", where n counts the unnamed collectives of that process set on
this rank since init. Ranks that make their unnamed calls in the same order thus
agree on the names.
"""
import atexit
import ctypes
import itertools
import threading

from hvd import _handles
from hvd import _lib
from hvd import errors


def _query_int(fn_name):
    out = ctypes.c_int()
    _lib.check(getattr(_lib.lib(), fn_name)(ctypes.byref(out)), fn_name)
    return out.value


class ProcessSet:
    """A subset of the job's ranks with its own negotiation (horovod.ProcessSet).

    Attributes:
      ranks: the global ranks of the set, in set-rank order (all ranks for the
        global set once initialised).
      process_set_id: the runtime's id; None until registered.
    """

    def __init__(self, ranks):
        self.ranks = sorted(set(int(r) for r in ranks))
        self.process_set_id = None

    def _id(self):
        if self.process_set_id is None:
            raise errors.InvalidArgumentError(
                "%r is not registered: call hvd.add_process_set() on it first" % self)
        return self.process_set_id

    def size(self):
        """The number of ranks in the set."""
        out = ctypes.c_int()
        _lib.check(_lib.lib().hvd_process_set_size(self._id(), ctypes.byref(out)),
                   "hvd_process_set_size")
        return out.value

    def rank(self):
        """This process's rank within the set, or -1 if it is not a member."""
        out = ctypes.c_int()
        _lib.check(_lib.lib().hvd_process_set_rank(self._id(), ctypes.byref(out)),
                   "hvd_process_set_rank")
        return out.value

    def included(self):
        """Whether this process is a member of the set."""
        return self.rank() >= 0

    def __repr__(self):
        if self.process_set_id == _lib.GLOBAL_PROCESS_SET:
            return "ProcessSet(global)"
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)


global_process_set = ProcessSet([])
global_process_set.process_set_id = _lib.GLOBAL_PROCESS_SET

_state_lock = threading.Lock()
_process_sets = {}      # id -> registered ProcessSet (not the global one)
_name_counters = {}     # process set id -> itertools.count
_atexit_registered = False


def _read_ranks(ps_id):
    n = ctypes.c_int()
    _lib.check(_lib.lib().hvd_process_set_ranks(ps_id, None, 0, ctypes.byref(n)),
               "hvd_process_set_ranks")
    buf = (ctypes.c_int * max(n.value, 1))()
    _lib.check(_lib.lib().hvd_process_set_ranks(ps_id, buf, n.value, ctypes.byref(n)),
               "hvd_process_set_ranks")
    return list(buf[:n.value])


def init(comm=None, process_sets=None):
    """Starts the runtime (a no-op when already running) and registers `process_sets`,
    a list of ProcessSet or rank lists, in order. Reads the environment dprun (or
    mpirun, srun, torchrun, ...) sets; a process started without any is rank 0 of 1.
    comm, as Horovod's: an mpi4py communicator, or a list of MPI_COMM_WORLD ranks, whose
    processes make the job (hvd._comm_init); it needs no variable, across nodes too."""
    global _atexit_registered
    was_running = is_initialized()
    if comm is not None and not was_running:
        import os
        from hvd import _comm_init
        os.environ.update(_comm_init.environment(comm, os.environ))
    _lib.check(_lib.lib().hvd_init(), "hvd_init")
    if not was_running:
        _handles.forget_all()  # an earlier runtime's (an elastic reset's) handles
        with _state_lock:
            _name_counters.clear()
            for ps in _process_sets.values():
                ps.process_set_id = None
            _process_sets.clear()
        global_process_set.ranks = _read_ranks(_lib.GLOBAL_PROCESS_SET)
        if not _atexit_registered:
            atexit.register(_shutdown_at_exit)
            _atexit_registered = True
    for ps in process_sets or []:
        add_process_set(ps)


def shutdown():
    """Stops the runtime after every rank has asked to; pending collectives fail with
    ShutDownError. Raises the background loop's failure if it had one."""
    _lib.check(_lib.lib().hvd_shutdown(), "hvd_shutdown")


def _shutdown_at_exit():
    try:
        if is_initialized():
            shutdown()
    except errors.HvdError as e:  # The process is exiting: report, never raise.
        import sys
        print("hvd: shutdown at exit: %s" % e, file=sys.stderr)


def is_initialized():
    return _query_int("hvd_is_initialized") == 1


def rank():
    return _query_int("hvd_rank")


def size():
    return _query_int("hvd_size")


def local_rank():
    return _query_int("hvd_local_rank")


def local_size():
    return _query_int("hvd_local_size")


def cross_rank():
    return _query_int("hvd_cross_rank")


def cross_size():
    return _query_int("hvd_cross_size")


def check_health():
    """Raises the background loop's sticky failure (a lost rank, ...), if any."""
    _lib.check(_lib.lib().hvd_check_health(), "hvd_check_health")


def start_timeline(file_path, mark_cycles=False):
    """Starts writing a timeline (a Chrome/Perfetto trace of every collective) to
    `file_path`, replacing the one being written; mark_cycles marks each cycle that
    ran work. Rank 0 writes it; every rank may call this. Raises ValueError before
    init (NotInitializedError), InvalidArgumentError if the file cannot be created."""
    _lib.check(_lib.lib().hvd_start_timeline(str(file_path).encode(), 1 if mark_cycles else 0),
               "hvd_start_timeline(%s)" % file_path)


def stop_timeline():
    """Stops the timeline; its file is complete JSON once this returns."""
    _lib.check(_lib.lib().hvd_stop_timeline(), "hvd_stop_timeline")


def is_homogeneous():
    return size() == local_size() * cross_size()


def mpi_built():
    return False


def gloo_built():
    return True


def nccl_built():
    """Horovod's rule: the NCCL version code libhvd was built with (e.g. 22807 for
    2.28.7), or 0 without NCCL."""
    return _lib.nccl_version()


def ddl_built():
    return False


def ccl_built():
    return False


def rocm_built():
    return False


def mpi_threads_supported():
    """As Horovod without MPI: dprun does not run over MPI, so this raises ValueError."""
    raise ValueError("Horovod MPI is not enabled: dprun does not run over MPI "
                     "(its CPU transports are shared memory and Gloo)")


def cuda_built():
    """Whether libhvd was built with CUDA, so that hvd.torch takes CUDA tensors (says
    nothing about whether a GPU is present)."""
    return _lib.cuda_built()


def mpi_enabled():
    return False


def gloo_enabled():
    return True


def add_process_set(process_set):
    """Registers a ProcessSet (or a list of global ranks) on every rank; a collective
    over all ranks. Returns the registered ProcessSet."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise errors.InvalidArgumentError("%r is already registered" % process_set)
    ranks = (ctypes.c_int * max(len(process_set.ranks), 1))(*process_set.ranks)
    ps_id = ctypes.c_int32()
    _lib.check(_lib.lib().hvd_add_process_set(ranks, len(process_set.ranks), ctypes.byref(ps_id)),
               "hvd_add_process_set(%s)" % process_set.ranks)
    process_set.process_set_id = ps_id.value
    process_set.ranks = _read_ranks(ps_id.value)
    with _state_lock:
        _process_sets[ps_id.value] = process_set
    return process_set


def remove_process_set(process_set):
    """Removes a registered set on every rank (a collective over all ranks). Returns
    True if it was removed, False if it was not registered."""
    if process_set.process_set_id is None:
        return False
    if process_set.process_set_id == _lib.GLOBAL_PROCESS_SET:
        raise errors.InvalidArgumentError("the global process set cannot be removed")
    ps_id = process_set.process_set_id
    _lib.check(_lib.lib().hvd_remove_process_set(ps_id), "hvd_remove_process_set(%d)" % ps_id)
    with _state_lock:
        _process_sets.pop(ps_id, None)
    process_set.process_set_id = None
    return True


def process_set_id(process_set):
    """The C id for a `process_set=` argument (a ProcessSet; None means global)."""
    if process_set is None:
        return _lib.GLOBAL_PROCESS_SET
    if not isinstance(process_set, ProcessSet):
        raise errors.InvalidArgumentError(
            "process_set must be an hvd.ProcessSet, got %s" % type(process_set).__name__)
    return process_set._id()


def process_set_by_id(ps_id):
    """The registered ProcessSet with id `ps_id` (the global set for 0)."""
    if ps_id == _lib.GLOBAL_PROCESS_SET:
        return global_process_set
    with _state_lock:
        ps = _process_sets.get(ps_id)
    if ps is None:
        raise errors.InvalidArgumentError("process set %d is not registered" % ps_id)
    return ps


def set_root_rank(process_set, root_rank):
    """Translates a global root rank to the rank within `process_set` (C's convention)."""
    root_rank = int(root_rank)
    if process_set is None or process_set.process_set_id == _lib.GLOBAL_PROCESS_SET:
        return root_rank
    try:
        return process_set.ranks.index(root_rank)
    except ValueError:
        raise errors.InvalidArgumentError(
            "root_rank %d is not a member of %r (root_rank is a global rank)"
            % (root_rank, process_set)) from None


def global_rank(process_set, set_rank):
    """Translates a rank within `process_set` to the global rank."""
    if process_set is None or process_set.process_set_id == _lib.GLOBAL_PROCESS_SET:
        return set_rank
    return process_set.ranks[set_rank]


class ExactName(str):
    """A collective's name to be used as it is, without the call's prefix
    ("allreduce.", ...): the same name for different collectives then meets in one
    negotiation, which reports the mismatch (the torch.distributed backend's
    names, hvd.torch.distributed)."""
    __slots__ = ()


def op_name(prefix, name, ps_id):
    """The runtime name of a collective (see the module docstring)."""
    if type(name) is ExactName:
        full = str(name)
    elif name is not None:
        full = "%s.%s" % (prefix, name)
    else:
        with _state_lock:
            counter = _name_counters.setdefault(ps_id, itertools.count())
            n = next(counter)
        full = ("%s.noname.%d" % (prefix, n) if ps_id == _lib.GLOBAL_PROCESS_SET
                else "%s.noname.ps%d.%d" % (prefix, ps_id, n))
    if len(full.encode()) > _lib.MAX_NAME_LENGTH:
        raise errors.InvalidArgumentError(
            "collective name %r is longer than %d bytes" % (full[:64] + "...", _lib.MAX_NAME_LENGTH))
    if _handles.in_flight(full):
        raise errors.InvalidUsageError(
            "tensor '%s' is already in flight: a name may be enqueued again only after the "
            "handle of its earlier collective was synchronized" % full, status="HVD_INVALID_USAGE")
    return full
