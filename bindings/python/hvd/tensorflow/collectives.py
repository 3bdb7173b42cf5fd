"""horovod.tensorflow's front functions over the ops of mpi_ops: compression,
tf.IndexedSlices (sparse gradients: gathered, not reduced, as Horovod does) and
Average of sparse values; and the conditional forms the gradient wrappers use
(no collective in a job of one rank, or on a rank outside the process set)."""
import tensorflow as tf

from hvd.tensorflow.compression import Compression
from hvd.tensorflow.mpi_ops import (Adasum, Average, Sum, _allreduce, _elastic,  # noqa: F401
                                    _grouped_allreduce, _grouped_reducescatter, _reducescatter,
                                    _set_size, global_process_set, grouped_allgather,
                                    allgather, handle_average_backwards_compatibility,
                                    process_set_included_op, size_op)


def _check_sparse(op, prescale_factor, postscale_factor):
    if op == Adasum:
        raise NotImplementedError('The Adasum reduction does not currently support sparse '
                                  'tensors. As a workaround please pass sparse_as_dense=True '
                                  'to DistributedOptimizer')
    if op != Sum and op != Average:
        raise NotImplementedError('Only Sum and Average ops are supported with tf.IndexedSlices')
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError("Pre/postscale_factor are not supported with tf.IndexedSlices")


def _sparse_result(values, indices, like, op, process_set):
    if op == Average:
        values = values / _set_size(process_set, values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=like.dense_shape)


def allreduce(tensor, average=None, device_dense='', device_sparse='',
              compression=Compression.none, op=None, prescale_factor=1.0, postscale_factor=1.0,
              name=None, process_set=global_process_set, ignore_name_scope=False):
    """Reduces a tf.Tensor (or tf.Variable) across the ranks of the process set, or,
    for a tf.IndexedSlices, allgathers its values and indices (dividing the values
    by the set's size for Average), which represents the same sum.

    op: Sum, Average (default), Min, Max, Product or Adasum. compression: sends a
    compressed tensor (Compression.fp16). prescale_factor/postscale_factor multiply
    before and after the reduction. Returns a tensor of the same shape and dtype."""
    op = handle_average_backwards_compatibility(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        _check_sparse(op, prescale_factor, postscale_factor)
        with tf.device(device_sparse):
            values = allgather(tensor.values, process_set=process_set,
                               ignore_name_scope=ignore_name_scope)
            indices = allgather(tensor.indices, process_set=process_set,
                                ignore_name_scope=ignore_name_scope)
            return _sparse_result(values, indices, tensor, op, process_set)
    with tf.device(device_dense):
        compressed, ctx = compression.compress(tensor)
        reduced = _allreduce(compressed, op=op, prescale_factor=prescale_factor,
                             postscale_factor=postscale_factor, name=name,
                             process_set=process_set, ignore_name_scope=ignore_name_scope)
        return compression.decompress(reduced, ctx)


def grouped_allreduce(tensors, average=None, device_dense='', device_sparse='',
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set,
                      ignore_name_scope=False, name=None):
    """Reduces the tensors as one group (one fused response); tf.IndexedSlices among
    them are gathered as allreduce does, in one grouped allgather. Returns the list
    of results in the order of `tensors`."""
    if not tensors:
        return tensors
    op = handle_average_backwards_compatibility(op, average)
    results = [None] * len(tensors)
    sparse = [i for i, t in enumerate(tensors) if isinstance(t, tf.IndexedSlices)]
    dense = [i for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    if sparse:
        _check_sparse(op, prescale_factor, postscale_factor)
        with tf.device(device_sparse):
            values = grouped_allgather([tensors[i].values for i in sparse],
                                       process_set=process_set,
                                       ignore_name_scope=ignore_name_scope)
            indices = grouped_allgather([tensors[i].indices for i in sparse],
                                        process_set=process_set,
                                        ignore_name_scope=ignore_name_scope)
        for i, v, x in zip(sparse, values, indices):
            results[i] = _sparse_result(v, x, tensors[i], op, process_set)
    if dense:
        with tf.device(device_dense):
            compressed, ctxs = zip(*[compression.compress(tensors[i]) for i in dense])
            reduced = _grouped_allreduce(list(compressed), op=op, prescale_factor=prescale_factor,
                                         postscale_factor=postscale_factor,
                                         process_set=process_set, name=name,
                                         ignore_name_scope=ignore_name_scope)
        for i, r, ctx in zip(dense, reduced, ctxs):
            results[i] = compression.decompress(r, ctx)
    return results


def reducescatter(tensor, device_dense='', compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces (Sum or Average, the default) across the ranks and returns this rank's
    block of the first dimension (the first dim0 % size ranks get one row more)."""
    with tf.device(device_dense):
        compressed, ctx = compression.compress(tensor)
        reduced = _reducescatter(compressed, op=op, name=name, process_set=process_set,
                                 ignore_name_scope=ignore_name_scope,
                                 prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor)
        return compression.decompress(reduced, ctx)


def grouped_reducescatter(tensors, device_dense='', compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Reducescatters the tensors as one group."""
    if not tensors:
        return tensors
    with tf.device(device_dense):
        compressed, ctxs = zip(*[compression.compress(t) for t in tensors])
        reduced = _grouped_reducescatter(list(compressed), op=op, process_set=process_set,
                                         prescale_factor=prescale_factor,
                                         postscale_factor=postscale_factor)
        return [compression.decompress(r, ctx) for r, ctx in zip(reduced, ctxs)]


def _reduce_condition(process_set):
    """True where a collective is needed: a member of a set of more than one rank
    (read at run time in an elastic job)."""
    with tf.device("cpu"):
        if _elastic():
            return tf.logical_and(
                tf.equal(process_set_included_op(process_set.process_set_id), 1),
                tf.greater(size_op(process_set.process_set_id), 1))
        return tf.convert_to_tensor(process_set.included() and process_set.size() > 1)


def allreduce_cond(tensor, *args, process_set=global_process_set, **kwargs):
    """allreduce where _reduce_condition holds, else the tensor itself."""
    return tf.cond(_reduce_condition(process_set),
                   lambda: allreduce(tensor, *args, process_set=process_set, **kwargs),
                   lambda: tensor)


def grouped_allreduce_cond(tensors, *args, process_set=global_process_set, **kwargs):
    """grouped_allreduce where _reduce_condition holds, else the tensors themselves."""
    return tf.cond(_reduce_condition(process_set),
                   lambda: grouped_allreduce(tensors, *args, process_set=process_set, **kwargs),
                   lambda: tensors)
