"""hvd.tensorflow.elastic (hvd.elastic after `import hvd.tensorflow as hvd`): Horovod
Elastic's TensorFlow API over dprun's generations (docs/elastic.md), on
hvd.elastic's State and run_fn.

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, batch=0)
    train(state)

A collective that fails because a rank was lost raises a tf.errors.OpError from
its op; run() turns those of dprun's ops (UnavailableError, DeadlineExceededError,
AbortedError, InternalError with an HVD_ status) into the hvd.errors class that
triggers a reset, as hvd.torch's collectives raise them directly.
"""
import functools

import tensorflow as tf

from hvd.elastic import (HorovodInternalError, HostsUpdatedInterrupt, ObjectState,  # noqa: F401
                         State, generation, run_fn, update_pending)
from hvd.tensorflow import mpi_ops
from hvd.tensorflow.functions import broadcast_object, broadcast_variables
from hvd.tensorflow.util import _executing_eagerly, optimizer_variables


def run(func):
    """Decorator: runs func(state, ...) so that it survives ranks dying or joining
    (see hvd.elastic.run_fn). No collective may run before func is called."""
    @functools.wraps(func)
    def translated(state, *args, **kwargs):
        try:
            return func(state, *args, **kwargs)
        except tf.errors.OpError as e:
            err = mpi_ops.hvd_error(e)
            if err is None:
                raise
            raise err from e
    return run_fn(translated)


def _model_built(model):
    return model.built if hasattr(model, 'build') else True


class _VariablesState(ObjectState):
    """An ObjectState that also keeps variables: _save_model on commit (and sync),
    _load_model on restore."""

    def save(self):
        self._save_model()
        super().save()

    def restore(self):
        self._load_model()
        super().restore()


class TensorFlowKerasState(_VariablesState):
    """A Keras model and its optimizer (Keras 3 or tf-keras), kept in host memory on
    commit, restored on failure and broadcast from rank 0 on sync; kwargs are more
    objects, exposed as attributes. The model must be built."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.model = model
        if not _model_built(model):
            raise ValueError('Model must be built first. Run `model.build(input_shape)`.')
        self.optimizer = optimizer or model.optimizer
        self.backend = backend
        self._save_model()
        super().__init__(bcast_object=broadcast_object, get_rank=mpi_ops.rank, **kwargs)

    def _variables(self):
        return list(self.model.variables), optimizer_variables(self.optimizer)

    def sync(self):
        model_vars, opt_vars = self._variables()
        broadcast_variables(model_vars, root_rank=0)
        broadcast_variables(opt_vars, root_rank=0)
        self._save_model()
        super().sync()

    def _save_model(self):
        model_vars, opt_vars = self._variables()
        self._saved_model_state = [tf.identity(v) for v in model_vars]
        self._saved_optimizer_state = [tf.identity(v) for v in opt_vars]

    def _load_model(self):
        model_vars, opt_vars = self._variables()
        for var, saved in zip(model_vars, self._saved_model_state):
            var.assign(saved)
        for var, saved in zip(opt_vars, self._saved_optimizer_state):
            var.assign(saved)


class TensorFlowState(_VariablesState):
    """A list of TensorFlow variables (default: the TF1 graph's global variables),
    eagerly or in a TF1 session; kwargs are more objects, exposed as attributes."""

    def __init__(self, variables=None, session=None, **kwargs):
        self.variables = variables or tf.compat.v1.global_variables()
        self.session = session or (None if _executing_eagerly()
                                   else tf.compat.v1.get_default_session())
        self._bcast_op = None if _executing_eagerly() else \
            broadcast_variables(self.variables, root_rank=0)
        self._save_model()
        super().__init__(bcast_object=broadcast_object, get_rank=mpi_ops.rank, **kwargs)

    def sync(self):
        if self.session is not None:
            self.session.run(self._bcast_op)
        else:
            broadcast_variables(self.variables, root_rank=0)
        self._save_model()
        super().sync()

    def _save_model(self):
        if self.session is not None:
            self._values = [var.eval(self.session) for var in self.variables]
        else:
            self._values = [var.numpy() for var in self.variables]

    def _load_model(self):
        for var, value in zip(self.variables, self._values):
            if self.session is not None:
                var.load(value, self.session)
            else:
                var.assign(value)


__all__ = ['HorovodInternalError', 'HostsUpdatedInterrupt', 'ObjectState', 'State',
           'TensorFlowKerasState', 'TensorFlowState', 'generation', 'run', 'update_pending']
