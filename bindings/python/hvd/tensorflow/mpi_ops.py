"""The TensorFlow ops of dprun (horovod.tensorflow.mpi_ops 0.28): Python wrappers of
the kernels in libhvd_tensorflow.so (bindings/tensorflow), their gradients, and the
topology calls hvd.basics shares with the other front-ends.

The ops are real TensorFlow ops, usable eagerly, in tf.function and in TF1 graphs:
an asynchronous kernel enqueues its collective through the C API and TensorFlow
continues once the runtime's completion callback fires (no thread waits per op).

Names. A collective is keyed by the name of its node, which must be the same on
every rank: in a graph or tf.function, the node name (its scopes included unless
ignore_name_scope=True); `name=None` there gives "Hvd<Op>_<input tensor's name>",
as Horovod does. Eagerly TensorFlow gives every op of one type the same node name,
so eager collectives of one op type run one at a time per thread, in program
order, which every rank then shares (as in Horovod; `name` is ignored eagerly).

Errors. A failed collective raises a tf.errors.OpError whose message starts with
the C status ("HVD_MISMATCH: tensor '...': ..."): FailedPreconditionError for a
mismatch between ranks (as Horovod), InvalidArgumentError for bad input,
DeadlineExceededError for a timeout, UnavailableError for a lost rank,
AbortedError after shutdown. `hvd_error(e)` turns one into the hvd.errors class.
"""
import os
import re

import tensorflow as tf
from tensorflow.python.framework import ops

from hvd import _frontend
from hvd import _lib
from hvd import basics
from hvd import errors
from hvd.basics import (ProcessSet, add_process_set, ccl_built, check_health,  # noqa: F401
                        cross_rank, cross_size, cuda_built, ddl_built, global_process_set,
                        gloo_built, gloo_enabled, init, is_homogeneous, is_initialized,
                        local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
                        nccl_built, rank, remove_process_set, rocm_built, shutdown, size,
                        start_timeline, stop_timeline)
from hvd.tensorflow.util import _executing_eagerly

Sum = _frontend.Sum
Average = _frontend.Average
Min = _frontend.Min
Max = _frontend.Max
Product = _frontend.Product
Adasum = _frontend.Adasum

LIBRARY_NAME = "libhvd_tensorflow.so"


def _candidates():
    """Where the kernels may be, first match wins: $HVD_TF_LIBRARY; beside the
    libhvd.so this process loaded (a build tree, or this package's _native/), so
    both come from one build; this package's _native/."""
    env = os.environ.get("HVD_TF_LIBRARY")
    if env:
        return [env]
    found = [os.path.join(os.path.dirname(os.path.realpath(_lib.lib().path)), LIBRARY_NAME),
             os.path.join(os.path.dirname(_lib.lib().path), LIBRARY_NAME),
             os.path.join(os.path.dirname(_lib.BUNDLED), LIBRARY_NAME)]
    return list(dict.fromkeys(found))


def _load():
    """Loads the kernels after libhvd.so (ctypes), so that the kernels' libhvd.so.0
    is the very library the rest of the package uses (the loader matches it by its
    SONAME), checking that they were built against this TensorFlow."""
    candidates = _candidates()
    path = next((p for p in candidates if os.path.isfile(p)), None)
    if path is None:
        raise ImportError(
            "hvd.tensorflow: %s not found (looked in %s). Build it against this TensorFlow: "
            "cmake -S . -B build -DHVD_TF_PYTHON=%s && ninja -C build hvd_tensorflow, or "
            "pip install . with tensorflow installed; or set HVD_TF_LIBRARY"
            % (LIBRARY_NAME, ", ".join(candidates), _python()))
    built = _built_against(path)
    if built != tf.__version__:
        raise ImportError(
            "hvd.tensorflow: %s was built against TensorFlow %s, but this is TensorFlow %s: "
            "rebuild it (cmake -DHVD_TF_PYTHON=%s)" % (path, built, tf.__version__, _python()))
    return tf.load_op_library(path)


_MARKER = b"hvd-tensorflow-built-against:"


def _built_against(path):
    """The TensorFlow version the library at `path` was built against, read from the
    file (loading it would register its ops outside tf.load_op_library)."""
    with open(path, "rb") as f:
        data = f.read()
    at = data.find(_MARKER)
    if at < 0:
        return "an unknown version"
    end = data.index(b"\0", at)
    return data[at + len(_MARKER):end].decode()


def _python():
    import sys
    return sys.executable


MPI_LIB = _load()


def _normalize_name(name):
    """A name TensorFlow accepts as a node name."""
    return re.sub('[^a-zA-Z0-9_]', '_', name)


def _default_name(prefix, tensors):
    """Horovod's default node name in a graph (None eagerly, where it is ignored)."""
    if _executing_eagerly():
        return None
    if len(tensors) == 1:
        return '%s_%s' % (prefix, _normalize_name(tensors[0].name))
    return _normalize_name('%s_%s_%s' % (prefix, tensors[0].name, tensors[-1].name))


def _ps_id(process_set):
    return basics.process_set_id(process_set)


def _temp_process_set_object(process_set_id):
    """The registered ProcessSet of an id (a gradient knows only its op's attribute)."""
    return basics.process_set_by_id(process_set_id)


def handle_average_backwards_compatibility(op, average):
    """Horovod's rule for the deprecated `average`: op or average, not both."""
    return _frontend.resolve_op(op, average)


def check_num_rank_power_of_2(num_rank):
    return num_rank != 0 and (num_rank & (num_rank - 1)) == 0


def _elastic():
    """Whether sizes must be read when the graph runs (size_op), not when it is built."""
    from hvd import elastic
    return os.environ.get("HOROVOD_ELASTIC") == "1" or (is_initialized() and
                                                       elastic.generation() >= 0)


def _set_size(process_set, dtype):
    """The process set's size as a tensor of `dtype` (read at run time when elastic)."""
    if _elastic():
        return tf.cast(size_op(process_set_id=process_set.process_set_id), dtype=dtype)
    return tf.cast(process_set.size(), dtype=dtype)


def hvd_error(e):
    """The hvd.errors exception for a tf.errors.OpError raised by a dprun op (its
    message starts with the C status name), or None for any other error."""
    message = getattr(e, "message", str(e))
    m = re.search(r"\b(HVD_[A-Z_]+): ", message)
    if m is None:
        return None
    return errors.error_class(m.group(1))(message, status=m.group(1))


# ---- allreduce ------------------------------------------------------------------------

def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
               ignore_name_scope=False, process_set=global_process_set):
    """Reduces `tensor` across the ranks of the process set (the op; see allreduce
    in hvd.tensorflow for compression and sparse tensors). Returns a tensor of the
    same shape and dtype."""
    if name is None:
        name = _default_name('HvdAllreduce', [tensor])
    return MPI_LIB.hvd_allreduce(tensor, name=name, reduce_op=op,
                                 prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor,
                                 ignore_name_scope=ignore_name_scope,
                                 process_set_id=_ps_id(process_set))


@ops.RegisterGradient('HvdAllreduce')
def _allreduce_grad(op, grad):
    """The gradient of an allreduce is the same allreduce of the output's gradient."""
    return _allreduce(grad, op=op.get_attr('reduce_op'),
                      prescale_factor=op.get_attr('prescale_factor'),
                      postscale_factor=op.get_attr('postscale_factor'),
                      ignore_name_scope=op.get_attr('ignore_name_scope'),
                      process_set=_temp_process_set_object(op.get_attr('process_set_id')))


def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
                       ignore_name_scope=False, process_set=global_process_set):
    """Reduces the tensors as one group (one fused response); dtypes may differ."""
    if name is None:
        name = _default_name('HvdGroupedAllreduce', tensors)
    return MPI_LIB.hvd_grouped_allreduce(tensors, name=name, reduce_op=op,
                                         prescale_factor=prescale_factor,
                                         postscale_factor=postscale_factor,
                                         ignore_name_scope=ignore_name_scope,
                                         process_set_id=_ps_id(process_set))


@ops.RegisterGradient('HvdGroupedAllreduce')
def _grouped_allreduce_grad(op, *grads):
    return _grouped_allreduce(list(grads), op=op.get_attr('reduce_op'),
                              prescale_factor=op.get_attr('prescale_factor'),
                              postscale_factor=op.get_attr('postscale_factor'),
                              ignore_name_scope=op.get_attr('ignore_name_scope'),
                              process_set=_temp_process_set_object(
                                  op.get_attr('process_set_id')))


# ---- allgather ------------------------------------------------------------------------

def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Concatenates every rank's tensor along the first dimension, which may differ
    per rank (the others must match). Returns a tensor of the same dtype."""
    if name is None:
        name = _default_name('HvdAllgather', [tensor])
    return MPI_LIB.hvd_allgather(tensor, name=name, ignore_name_scope=ignore_name_scope,
                                 process_set_id=_ps_id(process_set))


def _gathered_sizes(x, process_set, ignore_name_scope):
    """Every rank's first dimension of `x`, as a [set size] int32 tensor."""
    with tf.device('/cpu:0'):
        d = tf.reshape(tf.shape(x, out_type=tf.int32)[0], [1])
        return tf.reshape(allgather(d, ignore_name_scope=ignore_name_scope,
                                    process_set=process_set), [process_set.size()])


@ops.RegisterGradient('HvdAllgather')
def _allgather_grad(op, grad):
    """Averages the output's gradient across ranks and returns this rank's rows."""
    ignore = op.get_attr('ignore_name_scope')
    ps = _temp_process_set_object(op.get_attr('process_set_id'))
    grad = _allreduce(grad, op=Average, ignore_name_scope=ignore, process_set=ps)
    splits = tf.split(grad, num_or_size_splits=_gathered_sizes(op.inputs[0], ps, ignore), axis=0)
    return splits[ps.rank()]


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """Allgathers the tensors as one group."""
    if name is None:
        name = _default_name('HvdGroupedAllgather', tensors)
    return MPI_LIB.hvd_grouped_allgather(tensors, name=name, ignore_name_scope=ignore_name_scope,
                                         process_set_id=_ps_id(process_set))


@ops.RegisterGradient('HvdGroupedAllgather')
def _grouped_allgather_grad(op, *grads):
    ignore = op.get_attr('ignore_name_scope')
    ps = _temp_process_set_object(op.get_attr('process_set_id'))
    # One allreduce each: TensorFlow may give float32 zeros for an unused float64 output.
    grads = [_allreduce(g, op=Average, ignore_name_scope=ignore, process_set=ps) for g in grads]
    return [tf.split(g, num_or_size_splits=_gathered_sizes(x, ps, ignore), axis=0)[ps.rank()]
            for g, x in zip(grads, op.inputs)]


# ---- broadcast ------------------------------------------------------------------------

def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """The root rank's `tensor` on every rank of the set (root_rank is a global rank)."""
    if name is None:
        name = _default_name('HvdBroadcast', [tensor])
    return MPI_LIB.hvd_broadcast(tensor, name=name,
                                 root_rank=basics.set_root_rank(process_set, root_rank),
                                 ignore_name_scope=ignore_name_scope,
                                 process_set_id=_ps_id(process_set))


@ops.RegisterGradient('HvdBroadcast')
def _broadcast_grad(op, grad):
    """The averaged gradient reaches the root's input; the others' inputs get zeros."""
    ps = _temp_process_set_object(op.get_attr('process_set_id'))
    reduced = _allreduce(grad, op=Average, ignore_name_scope=op.get_attr('ignore_name_scope'),
                         process_set=ps)
    if ps.rank() != op.get_attr('root_rank'):
        return reduced * 0
    return reduced


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Broadcasts the root rank's values into `variables` in place (their own
    buffers) and returns their values. All resource variables (tf.Variable in
    TensorFlow 2), or all TF1 reference variables, on one device."""
    from tensorflow.python.ops import resource_variable_ops
    variables = list(variables)
    root = basics.set_root_rank(process_set, root_rank)
    ps = _ps_id(process_set)
    names = [v.name for v in variables]
    if all(resource_variable_ops.is_resource_variable(v) for v in variables):
        op = MPI_LIB.hvd_broadcast_inplace_resource(
            [v.handle for v in variables], variable_names=names, name=name, root_rank=root,
            process_set_id=ps)
        with tf.control_dependencies([op]):  # (a Keras 3 variable reads through its value)
            return [v.read_value() if hasattr(v, "read_value") else v.value.read_value()
                    for v in variables]
    if any(resource_variable_ops.is_resource_variable(v) for v in variables):
        raise ValueError("All variables passed to broadcast_() should be of the same kind, "
                         "resource or reference")
    out = [None] * len(variables)
    by_dtype = {}
    for i, v in enumerate(variables):  # the reference op takes one dtype
        by_dtype.setdefault(v.dtype.base_dtype, []).append(i)
    for dtype, idx in by_dtype.items():
        result = MPI_LIB.hvd_broadcast_inplace([variables[i] for i in idx],
                                               variable_names=[names[i] for i in idx],
                                               name=name, root_rank=root, process_set_id=ps)
        for i, r in zip(idx, result):
            out[i] = r
    return out


# ---- alltoall -------------------------------------------------------------------------

def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends splits[r] rows of the first dimension to rank r (None: an equal share)
    and returns the rows received in rank order; with `splits`, also how many rows
    came from each rank (int32)."""
    splits_ = tf.convert_to_tensor(splits) if splits is not None else tf.constant([],
                                                                                    dtype=tf.int32)
    if name is None:
        name = _default_name('HvdAlltoall', [tensor])
    output, rsplits = MPI_LIB.hvd_alltoall(tensor, splits=splits_, name=name,
                                           ignore_name_scope=ignore_name_scope,
                                           process_set_id=_ps_id(process_set))
    return (output, rsplits) if splits is not None else output


@ops.RegisterGradient('HvdAlltoall')
def _alltoall_grad(op, grad_wrt_output, grad_wrt_received_splits):
    """Sends each row's gradient back where the row came from."""
    grad, _ = alltoall(grad_wrt_output, splits=op.outputs[1],
                       ignore_name_scope=op.get_attr('ignore_name_scope'),
                       process_set=_temp_process_set_object(op.get_attr('process_set_id')))
    return [grad, None]


# ---- reducescatter --------------------------------------------------------------------

def _reducescatter(tensor, name=None, op=Sum, ignore_name_scope=False,
                   process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces across ranks and returns this rank's block of the first dimension
    (the first dim0 % size ranks get one row more)."""
    if name is None:
        name = _default_name('HvdReducescatter', [tensor])
    return MPI_LIB.hvd_reducescatter(tensor, name=name, reduce_op=op,
                                     ignore_name_scope=ignore_name_scope,
                                     process_set_id=_ps_id(process_set),
                                     prescale_factor=prescale_factor,
                                     postscale_factor=postscale_factor)


def _scatter_grad_scale(op, ps, grad):
    if op.get_attr('reduce_op') == Sum:
        grad *= ps.size()
    if op.get_attr('prescale_factor') != 1.0:
        grad *= op.get_attr('prescale_factor')
    if op.get_attr('postscale_factor') != 1.0:
        grad *= op.get_attr('postscale_factor')
    return grad


@ops.RegisterGradient('HvdReducescatter')
def _reducescatter_grad(op, grad):
    """Gathers the blocks' gradients (Horovod's rule: times the set's size for Sum,
    times the scale factors)."""
    ps = _temp_process_set_object(op.get_attr('process_set_id'))
    return allgather(_scatter_grad_scale(op, ps, grad),
                     ignore_name_scope=op.get_attr('ignore_name_scope'), process_set=ps)


def _grouped_reducescatter(tensors, name=None, op=Sum, ignore_name_scope=False,
                           process_set=global_process_set, prescale_factor=1.0,
                           postscale_factor=1.0):
    """Reducescatters the tensors as one group."""
    if name is None:
        name = _default_name('HvdGroupedReducescatter', tensors)
    return MPI_LIB.hvd_grouped_reducescatter(tensors, name=name, reduce_op=op,
                                             ignore_name_scope=ignore_name_scope,
                                             process_set_id=_ps_id(process_set),
                                             prescale_factor=prescale_factor,
                                             postscale_factor=postscale_factor)


@ops.RegisterGradient('HvdGroupedReducescatter')
def _grouped_reducescatter_grad(op, *grads):
    ps = _temp_process_set_object(op.get_attr('process_set_id'))
    ignore = op.get_attr('ignore_name_scope')
    return [allgather(_scatter_grad_scale(op, ps, g), ignore_name_scope=ignore, process_set=ps)
            for g in grads]


# ---- join, barrier, topology ops ------------------------------------------------------

def join(process_set=global_process_set):
    """This rank has no more data: it takes part in the others' allreduces with zeros
    until every rank has joined. Returns (an int32 scalar tensor) the global rank of
    the last rank to join."""
    return MPI_LIB.hvd_join(process_set_id=_ps_id(process_set))


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has entered the barrier (in a graph: the op)."""
    return MPI_LIB.hvd_barrier(process_set_id=_ps_id(process_set))


def size_op(process_set_id=0, name=None):
    """The process set's size when the graph runs, not when it is built (int32)."""
    return MPI_LIB.hvd_size(process_set_id=process_set_id, name=name)


def process_set_included_op(process_set_id=0, name=None):
    """1 when this rank belongs to the process set when the graph runs, else 0."""
    return MPI_LIB.hvd_process_set_included(process_set_id=process_set_id, name=name)


def local_size_op(name=None):
    return MPI_LIB.hvd_local_size(name=name)


def rank_op(name=None):
    return MPI_LIB.hvd_rank(name=name)


def local_rank_op(name=None):
    return MPI_LIB.hvd_local_rank(name=name)


for _op in ('HvdSize', 'HvdLocalSize', 'HvdRank', 'HvdLocalRank', 'HvdProcessSetIncluded',
            'HvdJoin', 'HvdBarrier', 'HvdBroadcastInplace', 'HvdBroadcastInplaceResource'):
    ops.NotDifferentiable(_op)
