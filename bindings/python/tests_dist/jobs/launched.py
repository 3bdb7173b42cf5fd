"""init_process_group("dprun") as a launcher started this process, with no variable
of dprun's own: prints what torch and dprun each think this rank is."""
import torch
import torch.distributed as dist

import hvd.torch as hvd

dist.init_process_group("dprun")
x = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(x)
print("rank %d of %d, hvd %d of %d, sum %g" % (dist.get_rank(), dist.get_world_size(),
                                                hvd.rank(), hvd.size(), x.item()), flush=True)
dist.destroy_process_group()
