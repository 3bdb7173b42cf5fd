"""DistributedOptimizer for Keras optimizers: Keras 3 (TensorFlow's default keras)
and tf-keras (Keras 2, TF_USE_LEGACY_KERAS=1), both their current optimizers and
tf-keras's legacy ones (OptimizerV2).

The wrapper is a subclass of the optimizer's own class made on the fly, with one
method overridden where every update passes, so model.fit, train_on_batch and
custom loops all reduce the gradients across the process set before they are
applied:
  Keras 3         apply(grads, trainable_variables): apply_gradients calls it;
  tf-keras        aggregate_gradients(grads_and_vars): apply_gradients calls it (the
                  hook Keras keeps for cross-replica aggregation);
  tf-keras legacy _aggregate_gradients(grads_and_vars), the same for OptimizerV2.
Horovod 0.28 overrides Keras 2 internals (get_gradients, _compute_gradients), so it
does not reduce anything under Keras 3. With backward_passes_per_step > 1 the
gradients are summed locally and reduced and applied every k-th step (Keras 3 and
tf-keras's current optimizers)."""
from hvd.tensorflow.gradient_aggregation import LocalGradientAggregationHelper
from hvd.tensorflow.gradients import make_allreduce_grads_fn, reduce_except_local
from hvd.tensorflow.util import var_ref


def _flavour(optimizer):
    """'keras3', 'tf_keras' or 'tf_keras_legacy'."""
    module = type(optimizer).__module__
    for cls in type(optimizer).__mro__:
        if cls.__module__.startswith("keras.src.optimizers") and cls.__name__ == "BaseOptimizer":
            return "keras3"
        if cls.__name__ == "OptimizerV2":
            return "tf_keras_legacy"
    if hasattr(optimizer, "aggregate_gradients"):
        return "tf_keras"
    raise ValueError("hvd.tensorflow.keras.DistributedOptimizer: %s (%s) is not a Keras "
                     "optimizer" % (type(optimizer).__name__, module))


class _Reduction:
    """What every flavour's override does: reduce (or aggregate locally, then
    reduce) the gradients of `variables`."""

    def _hvd_setup(self, allreduce_grads, agg_helper, process_set, scale_local_gradients):
        self._hvd_allreduce_grads = allreduce_grads
        self._hvd_agg_helper = agg_helper
        self._hvd_process_set = process_set
        self._hvd_scale_local = scale_local_gradients
        self._hvd_local_refs = agg_helper._local_vars if agg_helper is not None else set()

    def register_local_var(self, var):
        """Keeps `var`'s gradient this rank's own (not reduced)."""
        self._hvd_local_refs.add(var_ref(var))

    def _hvd_reduce(self, grads, variables):
        if self._hvd_agg_helper is not None:
            return self._hvd_agg_helper.compute_gradients(grads, variables)
        return reduce_except_local(self._hvd_allreduce_grads, grads, variables,
                                   self._hvd_local_refs, self._hvd_process_set,
                                   self._hvd_scale_local)


class _Keras3(_Reduction):
    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        if not grads:
            return super().apply(grads, trainable_variables)
        variables = (list(trainable_variables) if trainable_variables is not None
                     else list(self._trainable_variables))
        reduced = self._hvd_reduce(grads, variables)
        if self._hvd_agg_helper is None:
            return super().apply(reduced, trainable_variables)
        if not self.built:
            self.build(variables)  # not inside the branch of a tf.cond
        parent = super()
        return self._hvd_agg_helper.apply_gradients(
            lambda: parent.apply(reduced, trainable_variables), self, reduced)


class _TfKeras(_Reduction):
    def aggregate_gradients(self, grads_and_vars):
        grads_and_vars = list(grads_and_vars)
        grads = [g for g, _ in grads_and_vars]
        variables = [v for _, v in grads_and_vars]
        return list(zip(self._hvd_reduce(grads, variables), variables))

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        if self._hvd_agg_helper is None:
            return super().apply_gradients(grads_and_vars, *args, **kwargs)
        grads_and_vars = self.aggregate_gradients(grads_and_vars)
        kwargs["skip_gradients_aggregation"] = True
        parent = super()
        return self._hvd_agg_helper.apply_gradients(
            lambda: parent.apply_gradients(grads_and_vars, *args, **kwargs), self,
            [g for g, _ in grads_and_vars])


class _TfKerasLegacy(_Reduction):
    def _aggregate_gradients(self, grads_and_vars):
        grads_and_vars = list(grads_and_vars)
        grads = [g for g, _ in grads_and_vars]
        variables = [v for _, v in grads_and_vars]
        return list(zip(self._hvd_reduce(grads, variables), variables))


_MIXINS = {"keras3": _Keras3, "tf_keras": _TfKeras, "tf_keras_legacy": _TfKerasLegacy}


def distributed_class(optimizer):
    """The wrapper class of `optimizer`'s class: same name, so configs round-trip."""
    cls = type(optimizer)
    if issubclass(cls, _Reduction):
        raise ValueError("%s is already a DistributedOptimizer" % cls.__name__)
    return type(cls.__name__, (_MIXINS[_flavour(optimizer)], cls), {})


def create_distributed_optimizer(optimizer, name, device_dense, device_sparse, compression,
                                 sparse_as_dense, gradient_predivide_factor, op,
                                 backward_passes_per_step, average_aggregated_gradients, groups,
                                 process_set, scale_local_gradients, in_place=False):
    """The wrapped optimizer: a new one made from `optimizer`'s config, or, with
    in_place, `optimizer` itself, whose class becomes the wrapper (it keeps its
    state: a model loaded with its optimizer)."""
    cls = distributed_class(optimizer)
    if in_place:
        optimizer.__class__ = cls
        wrapped = optimizer
    else:
        wrapped = cls.from_config(optimizer.get_config())
    if name is None:
        name = "Distributed%s" % type(optimizer).__name__
    # Inside model.fit the reduction is traced into Keras's train function; a
    # nested tf.function would only add a call.
    allreduce_grads = make_allreduce_grads_fn(name, device_dense, device_sparse, compression,
                                              sparse_as_dense, op, gradient_predivide_factor,
                                              groups, process_set, subgraph=False)
    helper = None
    if backward_passes_per_step > 1:
        if _flavour(optimizer) == "tf_keras_legacy":
            raise ValueError("backward_passes_per_step > 1 needs a current Keras optimizer, "
                             "not a tf-keras legacy one (%s)" % type(optimizer).__name__)
        helper = LocalGradientAggregationHelper(
            backward_passes_per_step, allreduce_grads, sparse_as_dense,
            average_aggregated_gradients, process_set, scale_local_gradients)
    wrapped._hvd_setup(allreduce_grads, helper, process_set, scale_local_gradients)
    return wrapped
