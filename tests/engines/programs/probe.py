"""A rank of the engines' tests: hvd.init() with no variable of dprun's, one
all-reduce, and one JSON line with what it saw. PROBE_KILL=R: rank R SIGKILLs itself
after a first all-reduce, and the others print what their next one failed with.
PROBE_OUT=DIR: each rank also writes its line to DIR/rank.<rank> (mpiexec drops the
output of ranks that outlive a failed one).
PROBE_COMM (mpi4py): "world" hvd.init(comm=MPI.COMM_WORLD); "split": the even and the
odd ranks each make a job of their own (comm=MPI.COMM_WORLD.Split); "ranks":
comm=[the even ranks], the odd ones take no part."""
import json
import os
import signal
import socket
import sys

import numpy as np

import hvd.numpy as hvd


def init():
    """Returns False for a process that takes no part."""
    mode = os.environ.get("PROBE_COMM")
    if not mode:
        hvd.init()
        return True
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    if mode == "world":
        hvd.init(comm=world)
    elif mode == "split":
        hvd.init(comm=world.Split(world.Get_rank() % 2, world.Get_rank()))
    elif world.Get_rank() % 2 == 0:
        hvd.init(comm=[r for r in range(world.Get_size()) if r % 2 == 0])
    else:
        return False
    return True


def main():
    if not init():
        print(json.dumps(dict(member=False)), flush=True)
        return 0
    out = dict(rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank(),
               local_size=hvd.local_size(), cross_rank=hvd.cross_rank(),
               cross_size=hvd.cross_size(), host=socket.gethostname())
    x = hvd.allreduce(np.full(4, hvd.rank() + 1.0), op=hvd.Sum, name="first")
    out["sum"] = x.tolist()
    kill = os.environ.get("PROBE_KILL")
    if kill is not None:
        if hvd.rank() == int(kill):
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            hvd.allreduce(np.ones(2), op=hvd.Sum, name="second")
        except hvd.HvdError as e:
            out["error"] = str(e)
    print(json.dumps(out), flush=True)
    if os.environ.get("PROBE_OUT"):
        with open(os.path.join(os.environ["PROBE_OUT"], "rank.%d" % hvd.rank()), "w") as f:
            f.write(json.dumps(out) + "\n")
    return 1 if "error" in out else 0


if __name__ == "__main__":
    sys.exit(main())
