"""Local gradient aggregation (backward_passes_per_step > 1), Horovod's
LocalGradientAggregationHelper: gradients are summed in local variables for
`backward_passes_per_step` steps and reduced across ranks only on the last one
(divided by backward_passes_per_step with average_aggregated_gradients); the
wrapped optimizer applies them only then, and otherwise just counts the step.
Works eagerly, in tf.function and in TF1 graphs (tf.cond on a step counter)."""
import tensorflow as tf

from hvd.tensorflow.gradients import reduce_except_local
from hvd.tensorflow.mpi_ops import global_process_set


class LocalGradientAggregationHelper:
    def __init__(self, backward_passes_per_step, allreduce_func, sparse_as_dense,
                 average_aggregated_gradients, process_set=global_process_set,
                 scale_local_gradients=True, local_refs=None, **_):
        if backward_passes_per_step <= 0:
            raise ValueError("backward_passes_per_step must be > 0")
        self.backward_passes_per_step = backward_passes_per_step
        self.allreduce_grads = allreduce_func
        self.sparse_as_dense = sparse_as_dense
        self.average_aggregated_gradients = average_aggregated_gradients
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._local_vars = local_refs if local_refs is not None else set()
        self.counter = tf.Variable(0, trainable=False, name="hvd_aggregation_counter")
        self.locally_aggregated_grads = {}

    def register_local_var(self, var):
        from hvd.tensorflow.util import var_ref
        self._local_vars.add(var_ref(var))

    def compute_gradients(self, grads, variables):
        """Adds `grads` to the local sums; on the last pass of a cycle returns the
        reduced sums (and clears them), else the local sums."""
        summed = []
        for i, grad in enumerate(grads):
            if isinstance(grad, tf.IndexedSlices):
                if not self.sparse_as_dense:
                    raise ValueError("IndexedSlices are not supported when "
                                     "`backward_passes_per_step` > 1 and `sparse_as_dense` is "
                                     "False.")
                grad = tf.convert_to_tensor(grad)
            if grad is None:
                summed.append(None)
                continue
            if i not in self.locally_aggregated_grads:
                self.locally_aggregated_grads[i] = tf.Variable(
                    tf.zeros_like(grad), trainable=False, dtype=grad.dtype)
            acc = self.locally_aggregated_grads[i]
            summed.append(acc.assign_add(grad).read_value() if hasattr(acc, "assign_add")
                          else acc)
        count = self.counter.assign_add(1)
        with tf.control_dependencies([g for g in summed if g is not None]):
            last = tf.equal(count, self.backward_passes_per_step)

        def reduce_and_clear():
            reduced = reduce_except_local(self.allreduce_grads, summed, variables,
                                          self._local_vars, self.process_set,
                                          self.scale_local_gradients)
            if self.average_aggregated_gradients:
                reduced = [g / self.backward_passes_per_step if g is not None else g
                           for g in reduced]
            with tf.control_dependencies([g for g in reduced if g is not None]):
                clear = [self.counter.assign(0)] + [
                    v.assign(tf.zeros_like(v)) for v in self.locally_aggregated_grads.values()]
            with tf.control_dependencies(clear):
                return [tf.identity(g) if g is not None else g for g in reduced]

        return tf.cond(last, reduce_and_clear, lambda: summed)

    def apply_gradients(self, apply_grads_closure, optimizer, grads):
        """Applies (apply_grads_closure) when a cycle just completed (the counter was
        reset), else only advances the optimizer's iteration count; decided after
        `grads` (compute_gradients' result, which moved the counter) are computed.
        Returns a bool tensor: whether it applied (run it, or depend on it, in a graph)."""
        def _after(dependency, applied):
            deps = [dependency] if dependency is not None else []
            with tf.control_dependencies(deps):
                return tf.constant(applied)

        def skip():
            iterations = getattr(optimizer, "iterations", None)
            return _after(iterations.assign_add(1) if iterations is not None else None, False)

        with tf.control_dependencies([g for g in grads if g is not None]):
            cycle_done = tf.equal(self.counter.read_value(), 0)
        return tf.cond(cycle_done, lambda: _after(apply_grads_closure(), True), skip)
