"""hvd.tensorflow.keras (and hvd.keras): horovod.tensorflow.keras 0.28's API for
Keras 3, TensorFlow's default keras, and tf-keras (Keras 2, with
TF_USE_LEGACY_KERAS=1), whichever tf.keras is.

    import hvd.tensorflow.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size()))
    model.compile(optimizer=opt, loss=...)
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()])
"""
import tensorflow as tf

from hvd.basics import (ProcessSet, add_process_set, ccl_built, cross_rank,  # noqa: F401
                        cross_size, cuda_built, ddl_built, global_process_set, gloo_built,
                        gloo_enabled, init, is_initialized, local_rank, local_size, mpi_built,
                        mpi_enabled, mpi_threads_supported, nccl_built, rank,
                        remove_process_set, rocm_built, shutdown, size, start_timeline,
                        stop_timeline)
from hvd.errors import HorovodInternalError  # noqa: F401
from hvd.tensorflow import collectives as _collectives
from hvd.tensorflow import mpi_ops as _mpi_ops
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.gradients import check_groups
from hvd.tensorflow.keras import callbacks, elastic  # noqa: F401
from hvd.tensorflow.keras.optimizer import create_distributed_optimizer
from hvd.tensorflow.mpi_ops import Average, Sum

keras = tf.keras


def DistributedOptimizer(optimizer, name=None, device_dense='', device_sparse='',  # noqa: N802
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A new optimizer like `optimizer` (made from its config) whose updates use the
    gradients averaged (op=Average) or summed (op=Sum) across the process set, in
    model.fit and custom loops alike (see hvd.tensorflow.keras.optimizer).

    gradient_predivide_factor splits the averaging around the sum;
    backward_passes_per_step > 1 sums gradients locally and reduces and applies
    them every k-th step (average_aggregated_gradients divides by k); groups
    groups the allreduces; sparse_as_dense densifies tf.IndexedSlices;
    register_local_var(var) on the result keeps var's gradient local."""
    if op != Average and op != Sum:
        raise ValueError('op currently only supports Average and Sum')
    groups = check_groups(gradient_predivide_factor, op, num_groups, groups)
    return create_distributed_optimizer(
        optimizer, name, device_dense, device_sparse, compression, sparse_as_dense,
        gradient_predivide_factor, op, backward_passes_per_step, average_aggregated_gradients,
        groups, process_set, scale_local_gradients)


def broadcast_global_variables(root_rank):
    """TF1 graphs: the op broadcasting every global variable (eagerly: RuntimeError;
    use BroadcastGlobalVariablesCallback or hvd.tensorflow.broadcast_variables)."""
    from hvd.tensorflow.optimizer import broadcast_global_variables as bgv
    return bgv(root_rank)


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none):
    """Reduces a tensor-compatible value across ranks (Average by default); returns a
    tensor (eagerly, evaluate it with .numpy())."""
    return _collectives.allreduce(tf.constant(value, name=name), average=average,
                                  prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor, op=op,
                                  compression=compression)


def allgather(value, name=None):
    """Concatenates every rank's value along the first dimension."""
    return _mpi_ops.allgather(tf.constant(value, name=name))


def broadcast(value, root_rank, name=None):
    """root_rank's value on every rank."""
    return _mpi_ops.broadcast(tf.constant(value, name=name), root_rank)


def reducescatter(value, name=None, op=Average):
    """Reduces across ranks; returns this rank's block of the first dimension."""
    return _collectives.reducescatter(tf.constant(value, name=name), op=op)


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none, legacy_opts=False):
    """Loads a Keras model saved with its optimizer and makes that optimizer a
    DistributedOptimizer in place, keeping its restored state (slots, iterations).
    custom_optimizers: optimizer classes the file refers to, as custom objects."""
    objects = dict(custom_objects or {})
    for cls in custom_optimizers or []:
        objects[cls.__name__] = cls
    model = keras.models.load_model(filepath, custom_objects=objects)
    if getattr(model, "optimizer", None) is not None:
        create_distributed_optimizer(model.optimizer, None, '', '', compression, False, 1.0,
                                     Average, 1, False, None, global_process_set, True,
                                     in_place=True)
    return model


__all__ = ["Average", "Compression", "DistributedOptimizer", "HorovodInternalError",
           "ProcessSet", "Sum", "add_process_set", "allgather", "allreduce", "broadcast",
           "broadcast_global_variables", "callbacks", "ccl_built", "cross_rank", "cross_size",
           "cuda_built", "ddl_built", "elastic", "global_process_set", "gloo_built",
           "gloo_enabled", "init", "is_initialized", "load_model", "local_rank", "local_size",
           "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "rank",
           "reducescatter", "remove_process_set", "rocm_built", "shutdown", "size",
           "start_timeline", "stop_timeline"]
