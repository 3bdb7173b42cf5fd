"""DistributedOptimizer (horovod.tensorflow): wraps a tf.compat.v1.train.Optimizer so
that compute_gradients() returns gradients reduced across the ranks of the process
set, or, given a Keras optimizer, hands it to hvd.tensorflow.keras's
DistributedOptimizer. BroadcastGlobalVariablesHook and broadcast_global_variables
serve TF1 graphs (tf.compat.v1 sessions)."""
import tensorflow as tf

from hvd.tensorflow.collectives import allreduce
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.functions import broadcast_variables
from hvd.tensorflow.gradient_aggregation import LocalGradientAggregationHelper
from hvd.tensorflow.gradients import check_groups, make_allreduce_grads_fn, reduce_except_local
from hvd.tensorflow.mpi_ops import Adasum, Average, global_process_set
from hvd.tensorflow.util import _executing_eagerly, var_ref

_LegacyOptimizer = tf.compat.v1.train.Optimizer


class _DistributedOptimizer(_LegacyOptimizer):
    """A tf.compat.v1 optimizer whose compute_gradients() reduces the gradients."""

    def __init__(self, optimizer, name=None, use_locking=False, device_dense='',
                 device_sparse='', compression=Compression.none, sparse_as_dense=False,
                 op=Average, gradient_predivide_factor=1.0, backward_passes_per_step=1,
                 average_aggregated_gradients=False, groups=None,
                 process_set=global_process_set, scale_local_gradients=True):
        if name is None:
            name = "Distributed{}".format(type(optimizer).__name__)
        super().__init__(name=name, use_locking=use_locking)
        self._optimizer = optimizer
        self._allreduce_grads = make_allreduce_grads_fn(
            name, device_dense, device_sparse, compression, sparse_as_dense, op,
            gradient_predivide_factor, groups, process_set=process_set)
        self._local_vars = set()
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._agg_helper = None
        if backward_passes_per_step > 1:
            if _executing_eagerly():
                raise ValueError("backward_passes_per_step > 1 is not yet supported for "
                                 "_LegacyOptimizer with eager execution.")
            self._agg_helper = LocalGradientAggregationHelper(
                backward_passes_per_step, self._allreduce_grads, sparse_as_dense,
                average_aggregated_gradients, process_set, scale_local_gradients,
                local_refs=self._local_vars)

    def register_local_var(self, var):
        """Keeps `var`'s gradient this rank's own (not reduced)."""
        self._local_vars.add(var_ref(var))

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's gradients, reduced across the process set."""
        gradients = self._optimizer.compute_gradients(*args, **kwargs)
        grads, variables = zip(*gradients)
        if self._agg_helper:
            reduced = self._agg_helper.compute_gradients(grads, variables)
        else:
            reduced = reduce_except_local(self._allreduce_grads, grads, variables,
                                          self._local_vars, self.process_set,
                                          self.scale_local_gradients)
        return list(zip(reduced, variables))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The wrapped optimizer's (every backward_passes_per_step-th step with local
        aggregation)."""
        if self._agg_helper:
            grads_and_vars = list(grads_and_vars)
            return self._agg_helper.apply_gradients(
                lambda: self._optimizer.apply_gradients(grads_and_vars, global_step=global_step,
                                                        name=name),
                self._optimizer, [g for g, _ in grads_and_vars])
        return self._optimizer.apply_gradients(grads_and_vars, global_step=global_step,
                                               name=name)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


class _DistributedAdasumOptimizer(_LegacyOptimizer):
    """Horovod's delta optimizer for op=Adasum (tf.compat.v1 graphs): each rank
    applies its own gradients, then the change of each variable since the last
    communication step is Adasum-allreduced and applied from the common start."""

    def __init__(self, optimizer, name=None, use_locking=False, device_dense='',
                 device_sparse='', compression=Compression.none, backward_passes_per_step=1):
        if name is None:
            name = "DistributedDelta{}".format(type(optimizer).__name__)
        super().__init__(name=name, use_locking=use_locking)
        self._optimizer = optimizer
        self._device_dense = device_dense
        self._device_sparse = device_sparse
        self._compression = compression
        self._backward_passes_per_step = backward_passes_per_step

    def _prepare(self):
        self._step_count = tf.compat.v1.get_variable(
            name="step_count", shape=[], dtype=tf.int64, trainable=False,
            initializer=tf.compat.v1.zeros_initializer)
        self._is_first_step = tf.equal(self._step_count, 0)
        self._is_comm_step = tf.equal(self._step_count % self._backward_passes_per_step,
                                      self._backward_passes_per_step - 1)

    def _apply_shared(self, var, get_update_op):
        start = self._get_or_make_slot(var, var, "delta_start", self._name)
        init_start = tf.cond(self._is_first_step,
                             lambda: start.assign(var, use_locking=self._use_locking).op,
                             tf.no_op)
        with tf.control_dependencies([init_start]):
            update_op = get_update_op()
            with tf.control_dependencies([update_op]):
                def communicate():
                    local_delta = var.assign_sub(start, use_locking=self._use_locking)
                    global_delta = allreduce(local_delta, device_dense=self._device_dense,
                                             device_sparse=self._device_sparse,
                                             compression=self._compression, op=Adasum)
                    new_start = start.assign_add(global_delta, use_locking=self._use_locking)
                    return var.assign(new_start, use_locking=self._use_locking).op
                return tf.cond(self._is_comm_step, communicate, tf.no_op)

    def _apply_dense(self, grad, var):
        return self._apply_shared(var, lambda: self._optimizer._apply_dense(grad, var))

    def _resource_apply_dense(self, grad, handle):
        return self._apply_shared(handle,
                                  lambda: self._optimizer._resource_apply_dense(grad, handle))

    def _apply_sparse(self, grad, var):
        return self._apply_shared(var, lambda: self._optimizer._apply_sparse(grad, var))

    def _resource_apply_sparse(self, grad, handle, indices):
        return self._apply_shared(
            handle, lambda: self._optimizer._resource_apply_sparse(grad, handle, indices))

    def _finish(self, update_ops, name_scope):
        with tf.control_dependencies(update_ops):
            return self._step_count.assign_add(1)

    def compute_gradients(self, *args, **kwargs):
        return self._optimizer.compute_gradients(*args, **kwargs)

    def get_slot(self, var, name):
        slot = super().get_slot(var, name)
        return slot if slot is not None else self._optimizer.get_slot(var, name)

    def get_slot_names(self):
        return super().get_slot_names() + self._optimizer.get_slot_names()

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense='',  # noqa: N802
                         device_sparse='', compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """Wraps `optimizer` so that its gradients are reduced across the process set
    before they are applied: a tf.compat.v1.train.Optimizer here, a Keras optimizer
    (Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1) through
    hvd.tensorflow.keras.DistributedOptimizer. Arguments as DistributedGradientTape's,
    plus backward_passes_per_step (aggregate locally, reduce every k-th step) and
    average_aggregated_gradients (divide the aggregate by k)."""
    if op == Adasum and average_aggregated_gradients:
        raise ValueError('Adasum does not support average_aggregated_gradients == True')
    groups = check_groups(gradient_predivide_factor, op, num_groups, groups)
    if isinstance(optimizer, _LegacyOptimizer):
        if op == Adasum:
            if process_set.process_set_id != 0:
                raise NotImplementedError("Adasum does not support process sets yet")
            return _DistributedAdasumOptimizer(optimizer, name, use_locking, device_dense,
                                               device_sparse, compression,
                                               backward_passes_per_step)
        return _DistributedOptimizer(
            optimizer, name=name, use_locking=use_locking, device_dense=device_dense,
            device_sparse=device_sparse, compression=compression,
            sparse_as_dense=sparse_as_dense, op=op,
            gradient_predivide_factor=gradient_predivide_factor,
            backward_passes_per_step=backward_passes_per_step,
            average_aggregated_gradients=average_aggregated_gradients, groups=groups,
            process_set=process_set, scale_local_gradients=scale_local_gradients)
    if op == Adasum:
        raise ValueError('op == Adasum is not supported yet with Keras')
    from hvd.tensorflow import keras as hvd_keras
    return hvd_keras.DistributedOptimizer(
        optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse,
        compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients, groups=groups,
        process_set=process_set, scale_local_gradients=scale_local_gradients)


def broadcast_global_variables(root_rank):
    """The op that broadcasts every global variable from root_rank (TF1 graphs only:
    eagerly, use broadcast_variables with the model's and optimizer's variables)."""
    if _executing_eagerly():
        raise RuntimeError(
            "hvd.broadcast_global_variables() does not support eager execution. "
            "Please use `hvd.broadcast_variables(<model/optimizer variables>)` instead.")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """A SessionRunHook that broadcasts every global variable from root_rank once the
    session is created (consistent initial weights, or those of a checkpoint)."""

    def __init__(self, root_rank, device=''):
        super().__init__()
        self.root_rank = root_rank
        self.bcast_op = None
        self.device = device

    def begin(self):
        if not self.bcast_op or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            with tf.device(self.device):
                self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)
