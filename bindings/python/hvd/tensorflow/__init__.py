"""hvd.tensorflow: horovod.tensorflow 0.28's API over the dprun runtime, for
TensorFlow 2 (eager and tf.function) and TF1-style graphs (tf.compat.v1 sessions).

    import hvd.tensorflow as hvd
    hvd.init()
    with tf.GradientTape() as tape:
        loss = loss_fn(model(x, training=True), y)
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    if first_batch:
        hvd.broadcast_variables(model.variables, root_rank=0)

The collectives are TensorFlow ops (mpi_ops; kernels in libhvd_tensorflow.so over
the C API). Keras: hvd.tensorflow.keras (also hvd.keras). Differences from
Horovod: docs/tensorflow.md.
"""
from hvd._version import __version__  # noqa: F401
from hvd.basics import (ProcessSet, add_process_set, ccl_built, check_health,  # noqa: F401
                        cross_rank, cross_size, cuda_built, ddl_built, global_process_set,
                        gloo_built, gloo_enabled, init, is_homogeneous, is_initialized,
                        local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
                        nccl_built, rank, remove_process_set, rocm_built, shutdown, size,
                        start_timeline, stop_timeline)
from hvd.errors import (HorovodInternalError, HvdError, HvdTimeoutError, InternalError,  # noqa
                        InvalidArgumentError, InvalidUsageError, MismatchError,
                        NotInitializedError, RemoteError, ShutDownError)
from hvd.tensorflow import util  # noqa: F401
from hvd.tensorflow.mpi_ops import (Adasum, Average, Max, Min, Product, Sum,  # noqa: F401
                                    _allreduce, _grouped_allreduce, _grouped_reducescatter,
                                    _reducescatter, allgather, alltoall, barrier, broadcast,
                                    broadcast_, check_num_rank_power_of_2, grouped_allgather,
                                    handle_average_backwards_compatibility, hvd_error, join,
                                    local_rank_op, local_size_op, process_set_included_op,
                                    rank_op, size_op)
from hvd.tensorflow.util import (_cache, _executing_eagerly, _make_subgraph,  # noqa: F401
                                 refs_to_vars, vars_to_refs)
from hvd.tensorflow.compression import Compression  # noqa: F401
from hvd.tensorflow.collectives import (allreduce, grouped_allreduce,  # noqa: F401
                                        grouped_reducescatter, reducescatter)
from hvd.tensorflow.collectives import allreduce_cond as _allreduce_cond  # noqa: F401
from hvd.tensorflow.collectives import grouped_allreduce_cond as _grouped_allreduce_cond  # noqa
from hvd.tensorflow.functions import (allgather_object, broadcast_object,  # noqa: F401
                                      broadcast_object_fn, broadcast_variables)
from hvd.tensorflow.gradients import make_allreduce_grads_fn as _make_allreduce_grads_fn  # noqa
from hvd.tensorflow.gradients import _make_cached_allreduce_grads_fn  # noqa: F401
from hvd.tensorflow.gradient_aggregation import LocalGradientAggregationHelper  # noqa: F401
from hvd.tensorflow.gradient_tape import (DistributedGradientTape,  # noqa: F401
                                          PartialDistributedGradientTape,
                                          _DistributedGradientTape)
from hvd.tensorflow.optimizer import (BroadcastGlobalVariablesHook,  # noqa: F401
                                      DistributedOptimizer, _DistributedAdasumOptimizer,
                                      _DistributedOptimizer, broadcast_global_variables)
from hvd.tensorflow.sync_batch_norm import SyncBatchNormalization  # noqa: F401
from hvd.tensorflow import elastic  # noqa: F401
