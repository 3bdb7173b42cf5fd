"""hvd.init(comm=...): a job made of an MPI communicator's processes, as Horovod's
init(comm=) takes an mpi4py communicator or a list of MPI_COMM_WORLD ranks.

The communicator gives each process its place: its rank and size in comm, its local
rank and size among comm's processes on its node (comm.Split_type(COMM_TYPE_SHARED)),
and Horovod's cross rank from every local rank (allgather). Rank 0 of comm serves the
job's store in its own process (hvd._job_driver.JobStore, kept for the process's
life) and sends its address and secret over MPI (bcast), so no variable is needed,
across nodes too: the address is 127.0.0.1 on one node, else HVD_STORE_ADDR's host,
MASTER_ADDR, or rank 0's host name. MPI is used only here; the collectives run over
dprun's transports. A list of ranks becomes MPI_COMM_WORLD.Create_group of them,
which only its members may call (a non-member gets InvalidArgumentError).
"""
import socket

from hvd import _job_driver
from hvd import errors

_stores = []  # rank 0's stores: the other ranks use them as long as the job lives


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise errors.InvalidArgumentError(
            "hvd.init(comm=...) needs mpi4py (Debian: python3-mpi4py; pip install mpi4py): %s"
            % e) from None
    return MPI


def _communicator(comm, MPI):
    if not isinstance(comm, (list, tuple, range)):
        if not hasattr(comm, "Get_rank") or not hasattr(comm, "bcast"):
            raise errors.InvalidArgumentError(
                "hvd.init: comm must be an mpi4py communicator or a list of ranks, got %s"
                % type(comm).__name__)
        return comm
    world = MPI.COMM_WORLD
    ranks = sorted(set(int(r) for r in comm))
    if not ranks or ranks[0] < 0 or ranks[-1] >= world.Get_size():
        raise errors.InvalidArgumentError(
            "hvd.init: comm=%s must list ranks of MPI_COMM_WORLD, 0..%d" % (list(comm),
                                                                           world.Get_size() - 1))
    if world.Get_rank() not in ranks:
        raise errors.InvalidArgumentError(
            "hvd.init: this process (rank %d of MPI_COMM_WORLD) is not in comm=%s: only its "
            "members call hvd.init" % (world.Get_rank(), ranks))
    return world.Create_group(world.Get_group().Incl(ranks))


def _store_host(local_size, size, environ):
    if local_size == size:
        return "127.0.0.1"
    given = environ.get("HVD_STORE_ADDR")
    if given:
        return given.rsplit(":", 1)[0].strip("[]")
    return environ.get("MASTER_ADDR") or socket.gethostname()


def _source_address(host):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((host, 9))  # sends nothing
        return s.getsockname()[0]


def environment(comm, environ):
    """The HVD_* variables of this process's place in comm's job."""
    MPI = _mpi()
    comm = _communicator(comm, MPI)
    rank, size = comm.Get_rank(), comm.Get_size()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    local_rank, local_size = node.Get_rank(), node.Get_size()
    node.Free()
    local_ranks = comm.allgather(local_rank)
    cross_rank = sum(1 for r in range(rank) if local_ranks[r] == local_rank)
    cross_size = sum(1 for lr in local_ranks if lr == local_rank)
    offer = None
    if rank == 0:
        host = _store_host(local_size, size, environ)
        store = _job_driver.JobStore("127.0.0.1" if host == "127.0.0.1" else "0.0.0.0")
        _stores.append(store)
        offer = ("%s:%d" % (host, store.port), store.secret, _job_driver.new_job_id("mpi"))
    address, secret, job_id = comm.bcast(offer, root=0)
    env = {"HVD_RANK": rank, "HVD_SIZE": size, "HVD_LOCAL_RANK": local_rank,
           "HVD_LOCAL_SIZE": local_size, "HVD_CROSS_RANK": cross_rank, "HVD_CROSS_SIZE": cross_size,
           "HVD_STORE_ADDR": address, "HVD_STORE_SECRET": secret, "HVD_JOB_ID": job_id}
    if local_size < size and not (environ.get("HVD_GLOO_HOSTNAME") or environ.get("HVD_GLOO_IFACE")):
        host = address.rsplit(":", 1)[0]
        try:
            env["HVD_GLOO_HOSTNAME"] = _source_address(host)
        except OSError as e:
            raise errors.InvalidArgumentError(
                "hvd.init(comm=...): cannot reach rank 0's host %r (%s): set HVD_STORE_ADDR or "
                "MASTER_ADDR to an address of rank 0's node, and HVD_GLOO_IFACE" % (host, e)) from None
    return {k: str(v) for k, v in env.items()}
