"""DistributedGradientTape and PartialDistributedGradientTape (horovod.tensorflow):
a tf.GradientTape whose gradient() returns the gradients averaged (by default)
across the ranks of the process set.

    with tf.GradientTape() as tape:
        loss = loss_fn(model(x), y)
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)
"""
import tensorflow as tf

from hvd.tensorflow.compression import Compression
from hvd.tensorflow.gradients import check_groups, make_allreduce_grads_fn, reduce_except_local
from hvd.tensorflow.mpi_ops import Average, global_process_set
from hvd.tensorflow.util import var_ref


class _DistributedGradientTape(tf.GradientTape):
    """The methods mixed into a copy of the wrapped tape's class (DistributedGradientTape)."""

    def __init__(self, tape, device_dense, device_sparse, compression, sparse_as_dense, op,
                 gradient_predivide_factor, groups, persistent=False,
                 watch_accessed_variables=True, process_set=global_process_set,
                 scale_local_gradients=True):
        super(self.__class__, self).__init__(persistent, watch_accessed_variables)
        self._tape = tape
        self._allreduce_grads = make_allreduce_grads_fn(
            'DistributedGradientTape', device_dense, device_sparse, compression, sparse_as_dense,
            op, gradient_predivide_factor, groups, process_set)
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._local_sources = set()

    def register_local_source(self, source):
        """Keeps `source`'s gradient this rank's own: not reduced (divided by the set's
        size when scale_local_gradients)."""
        self._local_sources.add(var_ref(source))

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False):
        """The wrapped tape's gradients, reduced across the process set."""
        gradients = super(self.__class__, self).gradient(target, sources, output_gradients)
        if isinstance(sources, dict) or not isinstance(sources, (list, tuple)):
            flat_sources = tf.nest.flatten(sources)
            flat_grads = tf.nest.flatten(gradients, expand_composites=False)
            reduced = reduce_except_local(self._allreduce_grads, flat_grads, flat_sources,
                                          self._local_sources, self.process_set,
                                          self.scale_local_gradients, use_generic_names)
            return tf.nest.pack_sequence_as(gradients, reduced)
        return reduce_except_local(self._allreduce_grads, gradients, sources,
                                   self._local_sources, self.process_set,
                                   self.scale_local_gradients, use_generic_names)

    def get_local_and_global_gradients(self, target, sources, output_gradients=None,
                                       use_generic_names=False):
        """([(local source, grad)], [(reduced source, grad)]) in the order of `sources`."""
        gradients = self.gradient(target, sources, output_gradients, use_generic_names)
        local, shared = [], []
        for s, g in zip(sources, gradients):
            (local if var_ref(s) in self._local_sources else shared).append((s, g))
        return local, shared


def DistributedGradientTape(gradtape, device_dense='', device_sparse='',  # noqa: N802
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set, scale_local_gradients=True):
    """A tape that wraps `gradtape` and reduces its gradients across the process set.

    op: Average (default), Sum, ... ; gradient_predivide_factor (Average only):
    gradients are scaled by 1/factor before the sum and factor/size after;
    sparse_as_dense: densify tf.IndexedSlices gradients (else they are gathered);
    groups: an int (that many grouped allreduces) or a list of variable lists;
    compression: Compression.fp16 sends float16."""
    groups = check_groups(gradient_predivide_factor, op, num_groups, groups)
    cls = type(gradtape.__class__.__name__, (gradtape.__class__,),
               dict(_DistributedGradientTape.__dict__))
    return cls(gradtape._tape, device_dense, device_sparse, compression, sparse_as_dense, op,
               gradient_predivide_factor, groups, gradtape._persistent,
               gradtape._watch_accessed_variables, process_set=process_set,
               scale_local_gradients=scale_local_gradients)


def PartialDistributedGradientTape(gradtape, device_dense='', device_sparse='',  # noqa: N802
                                   compression=Compression.none, sparse_as_dense=False,
                                   op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set,
                                   local_layers=None, scale_local_gradients=True):
    """DistributedGradientTape that leaves the gradients of `local_layers` (Keras
    layers) this rank's own."""
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    for layer in local_layers:
        if not hasattr(layer, "trainable_weights"):
            raise ValueError("All local layers must be Keras layers, not %s"
                             % type(layer).__name__)
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression,
                                   sparse_as_dense, op, gradient_predivide_factor, num_groups,
                                   groups, process_set, scale_local_gradients)
    for layer in local_layers:
        for var in layer.trainable_weights:
            tape.register_local_source(var)
    return tape
