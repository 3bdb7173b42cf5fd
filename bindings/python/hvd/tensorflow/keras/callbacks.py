"""Keras callbacks of horovod.tensorflow.keras.callbacks, for Keras 3 and tf-keras.

    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                 hvd.callbacks.MetricAverageCallback(),
                 hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.1 * hvd.size())]
    model.fit(x, y, callbacks=callbacks)
"""
import warnings

import tensorflow as tf

from hvd.tensorflow import functions
from hvd.tensorflow import mpi_ops
from hvd.tensorflow.collectives import allreduce
from hvd.tensorflow.util import _executing_eagerly, optimizer_variables, var_ref

keras = tf.keras


def _get_value(x):
    if isinstance(x, (int, float)):
        return float(x)
    return float(x.numpy()) if hasattr(x, "numpy") else float(keras.backend.get_value(x))


def _learning_rate(optimizer):
    return optimizer.learning_rate if hasattr(optimizer, "learning_rate") else optimizer.lr


def _momentum_settable(optimizer):
    """Whether changing the momentum takes effect: a variable, or a tf-keras legacy
    optimizer's hyperparameter (Keras 3 and tf-keras's current optimizers keep a
    Python float, captured when the train function is traced)."""
    return hasattr(optimizer.momentum, "assign") or hasattr(optimizer, "_set_hyper")


def _set_momentum(optimizer, value):
    if hasattr(optimizer.momentum, "assign"):
        optimizer.momentum.assign(value)
    else:
        optimizer._set_hyper("momentum", value)


def _set_value(variable, value):
    if hasattr(variable, "assign"):
        variable.assign(value)
    else:
        keras.backend.set_value(variable, value)


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Broadcasts the model's and the optimizer's variables from root_rank at the end
    of the first batch (when the optimizer's variables exist), so every rank trains
    the same weights (a random initialisation, or a checkpoint rank 0 restored)."""

    def __init__(self, root_rank, device='', local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.broadcast_done = False
        self._local_vars = set()
        for var in local_variables or []:
            self.register_local_var(var)

    def register_local_var(self, var):
        """Leaves `var` out of the broadcast (a worker-local variable)."""
        self._local_vars.add(var_ref(var))

    def on_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        with tf.device(self.device):
            if _executing_eagerly():
                model_vars = [v for v in self.model.variables if var_ref(v) not in self._local_vars]
                functions.broadcast_variables(model_vars, root_rank=self.root_rank)
                functions.broadcast_variables(optimizer_variables(self.model.optimizer),
                                              root_rank=self.root_rank)
            else:
                from hvd.tensorflow.optimizer import broadcast_global_variables
                tf.compat.v1.keras.backend.get_session().run(
                    broadcast_global_variables(self.root_rank))
        self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """Averages the epoch's metrics (the logs) across ranks at the end of each epoch,
    in sorted order, so later callbacks (checkpoints, early stopping) see the same
    values everywhere."""

    def __init__(self, device=''):
        super().__init__()
        self.device = device

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        with tf.device(self.device):
            for metric, value in sorted(logs.items()):
                logs[metric] = allreduce(tf.constant(value, dtype=tf.float64,
                                                     name=mpi_ops._normalize_name(metric))).numpy()


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to initial_lr * multiplier(epoch) from start_epoch to
    end_epoch: at each epoch's first batch (staircase), or every batch with a
    fractional epoch. multiplier: a function of the epoch, or a number m (then
    m ** (epoch - start_epoch)). momentum_correction scales the momentum by the
    change of the learning rate for that batch (where the optimizer's momentum is
    a variable: tf-keras legacy optimizers; Keras 3 keeps it a constant, so there
    it is left alone, with a warning)."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        if initial_lr is None:
            raise ValueError('Parameter `initial_lr` is required')
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.restore_momentum = None
        self.current_epoch = None
        self._warned = False
        if callable(multiplier):
            self.multiplier = multiplier
        else:
            self.multiplier = lambda epoch: multiplier ** (epoch - start_epoch)

    def _autodetect_steps_per_epoch(self):
        if self.params.get('steps'):
            return self.params['steps']
        if self.params.get('samples') and self.params.get('batch_size'):
            return self.params['samples'] // self.params['batch_size']
        raise ValueError('Could not autodetect the number of steps per epoch. Please specify '
                         'the steps_per_epoch parameter to the %s()' % self.__class__.__name__)

    def _adjust_learning_rate(self, epoch):
        optimizer = self.model.optimizer
        lr = _learning_rate(optimizer)
        old_lr = _get_value(lr)
        new_lr = self.initial_lr * self.multiplier(epoch)
        _set_value(lr, new_lr)
        if getattr(optimizer, "momentum", None) is None or not self.momentum_correction \
                or old_lr == 0:
            return
        if _momentum_settable(optimizer):
            self.restore_momentum = _get_value(optimizer.momentum)
            _set_momentum(optimizer, self.restore_momentum * new_lr / old_lr)
        elif not self._warned and _get_value(optimizer.momentum) != 0:
            warnings.warn("%s: the optimizer's momentum is a constant here (Keras 3, tf-keras's "
                          "current optimizers), so it is not corrected" % type(self).__name__)
            self._warned = True

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_batch_begin(self, batch, logs=None):
        if (self.current_epoch < self.start_epoch or
                (self.end_epoch is not None and self.current_epoch >= self.end_epoch)):
            return
        if self.staircase and batch == 0:
            self._adjust_learning_rate(self.current_epoch)
        elif not self.staircase:
            self._adjust_learning_rate(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_batch_end(self, batch, logs=None):
        if self.restore_momentum:
            _set_momentum(self.model.optimizer, self.restore_momentum)
            self.restore_momentum = None

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs['lr'] = _get_value(_learning_rate(self.model.optimizer))


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Goya et al.'s gradual warmup: the learning rate rises from initial_lr / size to
    initial_lr over warmup_epochs, batch by batch."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            # Round numbers at the end of each epoch.
            epoch += 1. / self.steps_per_epoch
            return 1. / mpi_ops.size() * (epoch * (mpi_ops.size() - 1) / warmup_epochs + 1)
        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and mpi_ops.rank() == 0:
            print('\nEpoch %d: finished gradual learning rate warmup to %g.'
                  % (epoch + 1, _get_value(_learning_rate(self.model.optimizer))))


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """ModelCheckpoint that keeps only the best model (save_best_only)."""

    def __init__(self, filepath, monitor='val_loss', verbose=0, mode='auto', save_freq='epoch'):
        super().__init__(filepath=filepath, monitor=monitor, verbose=verbose,
                         save_best_only=True, save_weights_only=False, mode=mode,
                         save_freq=save_freq)
