"""SyncBatchNormalization (horovod.tensorflow): a Keras BatchNormalization whose
batch statistics in training are those of every rank's batch together, so the
moving statistics are the same on every rank. For Keras 3 and tf-keras alike: it
overrides the layer's _moments, whichever its signature (Keras 3:
(inputs, mask); tf-keras: (inputs, reduction_axes, keep_dims)).

The mean and the mean of squares of each rank's batch are averaged in one
allreduce (Var[X] = E[X^2] - E[X]^2), as Horovod does: every rank's batch counts
alike, so local batches should be the same size. Gradients flow through the
allreduce (its gradient is the same allreduce)."""
import tensorflow as tf

from hvd.tensorflow.mpi_ops import Sum, _allreduce, size


class SyncBatchNormalization(tf.keras.layers.BatchNormalization):
    """Synchronous batch normalization: statistics across all ranks in training."""

    def __init__(self, fused=False, **kwargs):
        if fused in (True, None):
            raise ValueError('SyncBatchNormalization does not support fused=True.')
        if not kwargs.get('name', None):
            kwargs['name'] = 'sync_batch_normalization'
        if not tf.keras.layers.BatchNormalization.__module__.startswith("keras.src"):
            kwargs['fused'] = fused  # tf-keras: its fused kernel would bypass _moments
        super().__init__(**kwargs)

    def _moments(self, *args, **kwargs):
        mean, variance = super()._moments(*args, **kwargs)
        if size() == 1:
            return mean, variance
        mean_of_square = variance + tf.math.square(mean)
        stacked = _allreduce(tf.stack([mean, mean_of_square]), op=Sum) / size()
        group_mean, group_mean_of_square = tf.unstack(stacked)
        return group_mean, group_mean_of_square - tf.math.square(group_mean)
