"""Helpers horovod.tensorflow.util names: eager or graph, a function as a subgraph,
a cache keyed by arguments and mode, and variables as hashable references."""
import tensorflow as tf
from tensorflow.python.eager import context


def _executing_eagerly():
    """True when eager execution is enabled (not inside a graph or tf.function)."""
    return context.executing_eagerly()


def _make_subgraph(f):
    return tf.function(f)


def _cache(f):
    """Caches f's result by its (hashable) arguments and the execution mode."""
    cache = {}

    def wrapper(*args):
        key = (args, _executing_eagerly())
        if key not in cache:
            cache[key] = f(*args)
        return cache[key]
    return wrapper


def var_ref(variable):
    """A hashable reference to a variable: tf.Variable.ref(), or for a Keras 3
    variable (which has no ref()), that of the tf.Variable holding its value."""
    ref = getattr(variable, "ref", None)
    if ref is not None:
        return ref()
    return variable.value.ref()


class _KerasRef:
    """var_ref of a Keras 3 variable that deref()s to the Keras variable itself."""
    __slots__ = ("variable", "key")

    def __init__(self, variable):
        self.variable = variable
        self.key = var_ref(variable)

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, _KerasRef) and self.key == other.key

    def deref(self):
        return self.variable


def vars_to_refs(variables):
    if isinstance(variables, list):
        return tuple(vars_to_refs(v) for v in variables)
    if hasattr(variables, "ref"):
        return variables.ref()
    return _KerasRef(variables)


def refs_to_vars(refs):
    if isinstance(refs, tuple):
        return [refs_to_vars(r) for r in refs]
    return refs.deref()


def optimizer_variables(optimizer):
    """An optimizer's variables: a method in tf-keras, a property in Keras 3."""
    if optimizer is None:
        return []
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)
