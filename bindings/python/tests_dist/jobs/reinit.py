"""init_process_group, destroy_process_group, init again: collectives work each time.
torch 1.13 keeps its first rendezvous store listening after destroy_process_group
(Gloo cannot start again on the same port either), so there each round after the
first rendezvouses on a free port that rank 0 picks and the previous round shares."""
import os
import socket

import torch
import torch.distributed as dist

import hvd.torch  # noqa: F401


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


for round in range(3):
    dist.init_process_group("dprun")
    x = torch.ones(3) * (dist.get_rank() + 1)
    dist.all_reduce(x)
    g = dist.new_group(list(range(dist.get_world_size())))
    y = torch.ones(1)
    dist.all_reduce(y, group=g)
    print("round %d rank %d: %s %s" % (round, dist.get_rank(), x.tolist(), y.tolist()),
          flush=True)
    if not torch.__version__.startswith("2"):
        port = [free_port() if dist.get_rank() == 0 else 0]
        dist.broadcast_object_list(port, src=0)
        os.environ["MASTER_PORT"] = str(port[0])
    dist.destroy_process_group()
