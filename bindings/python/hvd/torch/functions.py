"""Broadcasting model and optimizer state, and arbitrary objects
(horovod.torch.functions)."""
import collections

import torch

from hvd import _objects
from hvd.basics import global_process_set
from hvd.torch.mpi_ops import broadcast_async_, synchronize


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites every tensor of `params` in place with root_rank's.

    `params` is a state_dict (a mapping name -> tensor; broadcast in sorted name
    order), a list of (name, tensor) as from model.named_parameters(), or a list
    of tensors. Every rank must pass the same structure.
    """
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, (list, tuple)) or hasattr(params, "__next__"):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    handles = [broadcast_async_(p, root_rank, name, process_set) for name, p in params]
    for handle in handles:
        synchronize(handle)


def _get_types(x):
    if isinstance(x, (list, tuple)):
        return type(x), [_get_types(xi) for xi in x]
    return type(x)


def _recursive_cast(x, dtype):
    if isinstance(dtype, tuple):
        t, dtypes = dtype
        return t(_recursive_cast(x[i], dtypes[i]) for i in range(len(dtypes)))
    return dtype(x)


def _is_number_tree(x):
    if isinstance(x, (list, tuple)):
        return len(x) > 0 and all(_is_number_tree(xi) for xi in x)
    return isinstance(x, (bool, int, float))


def _sparse_parameter_ids(model):
    """ids of the parameters of `model`'s sparse embeddings (none without a model)."""
    if model is None:
        return set()
    return {id(p) for m in model.modules()
            if isinstance(m, torch.nn.Embedding) and m.sparse for p in m.parameters()}


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Overwrites the optimizer's state and numeric hyperparameters (lr, betas, ...)
    with root_rank's.

    As Horovod does: an optimizer whose state is still empty (nothing stepped yet)
    is first initialised by a step with zero gradients (the wrapped optimizer's own
    step for a DistributedOptimizer, so no allreduce is started): sparse gradients
    for SparseAdam, and for SGD on the parameters of `model`'s sparse embeddings
    (`model`, optional, is only used to find those); scalar state entries are sent
    as float64 tensors and cast back to their type. LBFGS is refused.
    Hyperparameters and state entries that are neither tensors nor numbers (None,
    strings) are left alone.
    """
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    state_dict = optimizer.state_dict()

    if len(state_dict["state"]) == 0:
        sparse = _sparse_parameter_ids(model)
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)
                    if isinstance(optimizer, torch.optim.SparseAdam) or (
                            isinstance(optimizer, torch.optim.SGD) and id(p) in sparse):
                        p.grad = p.grad.to_sparse()
        if getattr(optimizer, "_hvd_distributed", False):
            super(optimizer.__class__, optimizer).step()
        else:
            optimizer.step()
        state_dict = optimizer.state_dict()
    if len(state_dict["state"]) == 0:
        return  # A stateless optimizer: only hyperparameters, handled below.

    params = []
    callbacks = {}
    occurrences = collections.defaultdict(int)

    def option_callback(index, key, tensor, types):
        def apply():
            value = tensor.tolist()[0]
            optimizer.param_groups[index][key] = _recursive_cast(value, types)
        return apply

    def state_callback(pid, name, tensor, t):
        def apply():
            state_dict["state"][pid][name] = t(tensor.tolist()[0])
        return apply

    def sparse_state_callback(pid, name, dense):
        def apply():
            state_dict["state"][pid][name] = dense.to_sparse()
        return apply

    for index, group in enumerate(state_dict["param_groups"]):
        for key, value in sorted(group.items()):
            if key == "params" or not _is_number_tree(value):
                continue
            name = "%s.%d" % (key, index)
            tensor = torch.tensor([value], dtype=torch.float64)
            callbacks[name] = option_callback(index, key, tensor, _get_types(value))
            params.append((name, tensor))
        for pid in group["params"]:
            if pid not in state_dict["state"]:
                continue
            for key, value in sorted(state_dict["state"][pid].items()):
                if not torch.is_tensor(value) and not _is_number_tree(value):
                    continue  # None (SGD's momentum_buffer without momentum) and the like.
                occurrences[key] += 1
                name = "%s.%d" % (key, occurrences[key])
                if not torch.is_tensor(value):
                    t = type(value)
                    value = torch.tensor([value], dtype=torch.float64)
                    callbacks[name] = state_callback(pid, key, value, t)
                elif value.is_sparse:  # SGD's momentum on sparse gradients: sent dense
                    value = value.to_dense()
                    callbacks[name] = sparse_state_callback(pid, key, value)
                params.append((name, value))

    broadcast_parameters(params, root_rank, process_set)
    for name, _ in params:
        if name in callbacks:
            callbacks[name]()


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's `obj` (any picklable object) on every rank of the set."""
    return _objects.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every set rank's `obj`, in set-rank order."""
    return _objects.allgather_object(obj, name, process_set)
