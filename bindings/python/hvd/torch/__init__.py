"""hvd.torch: horovod.torch 0.28's API over the dprun runtime, for CPU tensors and,
with a libhvd built with CUDA (cuda_built()), CUDA tensors.

    import hvd.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

Also: ShardedOptimizer (ZeRO stage 1 and 2) and FullyShardedDataParallel (ZeRO stage
3, torch FSDP's API). See mpi_ops for the collectives, optimizer for
DistributedOptimizer, sharded for ShardedOptimizer, fsdp and wrap for
FullyShardedDataParallel and its auto-wrap policies.
"""
from hvd.basics import (ProcessSet, add_process_set, ccl_built, check_health,  # noqa: F401
                        cross_rank, cross_size, cuda_built, ddl_built, global_process_set,
                        gloo_built, gloo_enabled, init, is_homogeneous, is_initialized,
                        local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
                        nccl_built, rank, remove_process_set, rocm_built, shutdown, size,
                        start_timeline, stop_timeline)
from hvd._version import __version__  # noqa: F401
from hvd.errors import (HorovodInternalError, HvdError, HvdTimeoutError, InternalError,  # noqa: F401
                        InvalidArgumentError, InvalidUsageError, MismatchError,
                        NotInitializedError, RemoteError, ShutDownError)
from hvd.torch.compression import Compression  # noqa: F401
from hvd.torch.functions import (allgather_object, broadcast_object,  # noqa: F401
                                 broadcast_optimizer_state, broadcast_parameters)
from hvd.torch.mpi_ops import (Adasum, Average, Max, Min, Product, Sum, allgather,  # noqa: F401
                               allgather_async, allreduce, allreduce_, allreduce_async,
                               allreduce_async_, alltoall, alltoall_async, barrier, broadcast,
                               broadcast_, broadcast_async, broadcast_async_, grouped_allgather,
                               grouped_allgather_async, grouped_allreduce, grouped_allreduce_,
                               grouped_allreduce_async, grouped_allreduce_async_,
                               grouped_reducescatter, grouped_reducescatter_async, join, poll,
                               reducescatter, reducescatter_async, sparse_allreduce_async,
                               synchronize)
from hvd.torch.optimizer import DistributedOptimizer  # noqa: F401
from hvd.torch.sharded import ShardedOptimizer  # noqa: F401
from hvd.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
from hvd.torch.fsdp import (FullyShardedDataParallel, MixedPrecision,  # noqa: F401
                            ShardingStrategy, StateDictType, hybrid_process_sets)
from hvd.torch import wrap  # noqa: F401
from hvd.torch import elastic  # noqa: F401
from hvd.torch import distributed as _distributed  # noqa: E402

# torch.distributed.init_process_group("dprun") from here on (hvd.torch.distributed).
_distributed.register()
