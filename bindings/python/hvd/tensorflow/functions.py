"""Broadcasting variables and Python objects (horovod.tensorflow.functions).

Objects travel pickled as uint8 arrays (hvd._objects, shared with the other
front-ends); they need no TensorFlow op, so they work eagerly and beside TF1
sessions alike (the `session` arguments are accepted and unused)."""
import tensorflow as tf

from hvd import _objects
from hvd.tensorflow.mpi_ops import broadcast, broadcast_, global_process_set
from hvd.tensorflow.util import _cache, _executing_eagerly


@_cache
def _make_broadcast_group_fn():
    """Graphs need one op: the group of every variable's assign of its broadcast."""
    def broadcast_group(variables, root_rank, process_set):
        return tf.group(*[var.assign(broadcast(var, root_rank, process_set=process_set))
                          for var in variables])
    return broadcast_group


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Sets `variables` to root_rank's values on every rank of the process set.

    Eagerly, and with inplace=True, the root's values are broadcast straight into
    the variables' buffers (broadcast_, one op per device); in a TF1 graph without
    inplace, returns the op grouping each variable's assign of its broadcast."""
    variables = list(variables)
    if not variables:
        return None if _executing_eagerly() else tf.no_op()
    if inplace or _executing_eagerly():
        by_device = {}
        for var in variables:  # (a Keras 3 variable's device is its tf.Variable's)
            device = var.device if hasattr(var, "device") else var.value.device
            by_device.setdefault(device, []).append(var)
        done = [broadcast_(group, root_rank, process_set=process_set)
                for group in by_device.values()]
        return None if _executing_eagerly() else tf.group(*[v for d in done for v in d])
    return _make_broadcast_group_fn()(variables, root_rank, process_set)


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """Returns root_rank's `obj` (any picklable object) on every rank of the set."""
    return _objects.broadcast_object(obj, root_rank, name=name, process_set=process_set)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function obj -> root_rank's obj (Horovod's form for TF1 sessions)."""
    def fn(obj):
        return broadcast_object(obj, root_rank, session, name, process_set)
    return fn


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Returns the list of every set rank's `obj`, in set-rank order."""
    return _objects.allgather_object(obj, name=name, process_set=process_set)
