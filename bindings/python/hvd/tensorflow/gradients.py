"""The gradient reduction that DistributedGradientTape and both DistributedOptimizers
share (Horovod's _make_allreduce_grads_fn): one allreduce per gradient, or grouped
allreduces (`groups`), Average by default split into pre- and postscale by
gradient_predivide_factor, sparse gradients densified with sparse_as_dense, and
gradients of worker-local variables left out of the reduction (divided by the set's
size instead when scale_local_gradients). Eagerly, the reduction runs as one
tf.function (a subgraph), so its collectives are enqueued together and fused."""
import tensorflow as tf

from hvd.tensorflow.collectives import allreduce_cond, grouped_allreduce_cond
from hvd.tensorflow.mpi_ops import Average, _set_size
from hvd.tensorflow.util import _cache, _executing_eagerly, _make_subgraph, var_ref


def split_list(items, n):
    """`items` in n consecutive parts of sizes differing by at most one."""
    d, r = divmod(len(items), n)
    return [items[i * d + min(i, r):(i + 1) * d + min(i + 1, r)] for i in range(n)]


def _explicit_groups(groups, variables):
    """Explicit groups (lists of variables) as lists of positions in `variables`; a
    variable in no group is a group by itself."""
    position = {var_ref(v): i for i, v in enumerate(variables)}
    assigned, split = set(), []
    for group in groups:
        members = [position[var_ref(v)] for v in group if var_ref(v) in position]
        members = [i for i in members if i not in assigned]
        assigned.update(members)
        split.append(tuple(members))
    split.extend((i,) for i in range(len(variables)) if i not in assigned)
    return tuple(s for s in split if s)


def _groups_of(groups, grads, assignment):
    """[(index, grad)] lists: the explicit `assignment` (positions per group), or
    `groups` parts of equal size; None gradients are left out."""
    if assignment is not None:
        split = [[(i, grads[i]) for i in group if grads[i] is not None] for group in assignment]
        return [s for s in split if s]
    return split_list([(i, g) for i, g in enumerate(grads) if g is not None], groups)


@_cache
def _make_cached_allreduce_grads_fn(name, device_dense, device_sparse, compression,
                                    sparse_as_dense, op, gradient_predivide_factor, groups,
                                    process_set, subgraph):
    if op == Average:
        # The runtime divides by the size for Average; the predivide factor moves
        # part of that before the sum.
        prescale_factor = 1.0 / gradient_predivide_factor
        postscale_factor = gradient_predivide_factor
    else:
        prescale_factor = postscale_factor = 1.0

    def allreduce_grads(grads, assignment=None, use_generic_names=False):
        with tf.name_scope(name + "_Allreduce"):
            if sparse_as_dense:
                grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                         for g in grads]
            kwargs = dict(device_dense=device_dense, device_sparse=device_sparse,
                          compression=compression, op=op, prescale_factor=prescale_factor,
                          postscale_factor=postscale_factor, process_set=process_set,
                          ignore_name_scope=use_generic_names)
            if groups is not None:
                reduced = [None] * len(grads)
                for gi, group in enumerate(_groups_of(groups, grads, assignment)):
                    idx, members = [list(t) for t in zip(*group)]
                    out = grouped_allreduce_cond(
                        members, name="grad_%d" % gi if use_generic_names else None, **kwargs)
                    for i, r in zip(idx, out):
                        reduced[i] = r
                return reduced
            return [allreduce_cond(g, name="grad_%d" % i if use_generic_names else None, **kwargs)
                    if g is not None else g for i, g in enumerate(grads)]

    if subgraph:
        return _make_subgraph(allreduce_grads)
    return allreduce_grads


def make_allreduce_grads_fn(name, device_dense, device_sparse, compression, sparse_as_dense, op,
                            gradient_predivide_factor, groups, process_set, subgraph=None):
    """The function (grads, variables=None, use_generic_names=False) -> reduced
    grads. With `subgraph` (default: when made eagerly) the reduction runs as one
    tf.function, cached per arguments so that eager steps reuse it; explicit groups
    (lists of variables) reach it as positions in `variables`."""
    explicit = groups if isinstance(groups, list) else None
    if explicit is not None:
        groups = "explicit"
    if subgraph is None:
        subgraph = _executing_eagerly()
    inner = _make_cached_allreduce_grads_fn(name, device_dense, device_sparse, compression,
                                            sparse_as_dense, op, gradient_predivide_factor,
                                            groups, process_set, subgraph)

    def allreduce_grads(grads, variables=None, use_generic_names=False):
        assignment = None
        if explicit is not None:
            if variables is None:
                raise ValueError("groups of variables need the gradients' variables")
            assignment = _explicit_groups(explicit, list(variables))
        return inner(list(grads), assignment, use_generic_names)
    return allreduce_grads


def check_groups(gradient_predivide_factor, op, num_groups, groups):
    """Horovod's argument checks and the deprecated num_groups; returns groups."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError('gradient_predivide_factor not supported with op != Average')
    if num_groups != 0:
        import warnings
        warnings.warn('Parameter `num_groups` has been replaced by `groups` and will be removed '
                      'in v0.23.0.', DeprecationWarning)
        if groups is None:
            groups = num_groups
    if groups is not None and not (isinstance(groups, list) or groups > 0):
        raise ValueError('groups should be a non-negative integer or a list of list of '
                         'tf.Variable.')
    return groups


def reduce_except_local(allreduce_grads, grads, variables, local_refs, process_set,
                        scale_local_gradients, use_generic_names=False):
    """Reduces the gradients of the variables not in `local_refs` (var.ref()s); the
    local ones stay this rank's, divided by the set's size when
    scale_local_gradients. Returns the gradients in the order of `variables`."""
    grads = list(grads)
    variables = list(variables)
    shared = [i for i, v in enumerate(variables) if var_ref(v) not in local_refs]
    reduced = allreduce_grads([grads[i] for i in shared], [variables[i] for i in shared],
                              use_generic_names) if shared else []
    out = list(grads)
    for i, r in zip(shared, reduced):
        out[i] = r
    if scale_local_gradients and local_refs:
        for i, v in enumerate(variables):
            g = out[i]
            if var_ref(v) in local_refs and g is not None:
                if isinstance(g, tf.IndexedSlices):
                    out[i] = tf.IndexedSlices(g.values / _set_size(process_set, g.values.dtype),
                                              g.indices, g.dense_shape)
                else:
                    out[i] = g / _set_size(process_set, g.dtype)
    return out
