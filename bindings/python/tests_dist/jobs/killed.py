"""DDP trains; at step 3 the last rank kills itself (SIGKILL). Every other rank's
pending collective must fail with dprun's message naming that rank, within
HVD_TIMEOUT, and the rank prints what it caught and how long it waited."""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import hvd.torch  # noqa: F401

how = sys.argv[1] if len(sys.argv) > 1 else "kill"
dist.init_process_group("dprun")
me, n = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
start = None
try:
    for step in range(100):
        if step == 3 and me == n - 1:
            os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        if step == 3:
            start = time.monotonic()
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
    print("rank %d: NO ERROR" % me, flush=True)
except Exception as e:  # noqa: BLE001
    print("rank %d: caught after %.1f s: %s: %s" % (me, time.monotonic() - start,
                                                     type(e).__name__, e), flush=True)
    sys.exit(3)
