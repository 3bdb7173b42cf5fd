"""broadcast_object and allgather_object: any picklable object, sent as a uint8
array (pickle) after its length, as horovod.torch does with cloudpickle. Shared by
hvd.numpy, hvd.torch and hvd.tensorflow; the objects never touch a framework tensor.

The collectives' default name is fixed, not the object's type (Horovod's): the root
typically passes the object and the others None, and names that differ by rank
would never match."""
import pickle

import numpy as np

from hvd import basics


def _np():
    import hvd.numpy as hnp  # Deferred: hvd.numpy imports this module.
    return hnp


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Returns root_rank's `obj` on every rank of the set (root_rank is global)."""
    hnp = _np()
    process_set = process_set or basics.global_process_set
    if name is None:
        name = "object"
    if basics.rank() == root_rank:
        payload = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL),
                                dtype=np.uint8).copy()
        length = np.array([payload.size], dtype=np.int64)
    else:
        payload, length = None, np.zeros(1, dtype=np.int64)
    hnp.broadcast_(length, root_rank, name + ".sz", process_set)
    if payload is None:
        payload = np.zeros(int(length[0]), dtype=np.uint8)
    hnp.broadcast_(payload, root_rank, name + ".t", process_set)
    if basics.rank() == root_rank:
        return obj
    return pickle.loads(payload.tobytes())


def allgather_object(obj, name=None, process_set=None):
    """Returns the list of every set rank's `obj`, in set-rank order."""
    hnp = _np()
    process_set = process_set or basics.global_process_set
    if name is None:
        name = "object"
    payload = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL),
                            dtype=np.uint8).copy()
    sizes = hnp.allgather(np.array([payload.size], dtype=np.int64), name + ".sz", process_set)
    gathered = hnp.allgather(payload, name + ".t", process_set)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return [pickle.loads(gathered[offsets[i]:offsets[i + 1]].tobytes())
            for i in range(len(sizes))]
