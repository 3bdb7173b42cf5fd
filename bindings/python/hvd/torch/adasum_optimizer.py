"""DistributedOptimizer(op=Adasum): horovod.torch 0.28's _DistributedAdasumOptimizer.

Adasum combines the ranks' *updates*, not their gradients. For each parameter p,
once its gradient is ready (a hook on its gradient accumulator, after
backward_passes_per_step backward passes, as in optimizer.py), the wrapper:
  1. copies p into start[p];
  2. steps the wrapped optimizer with p alone in its param group, which leaves
     p = start + delta, delta being the update the optimizer computed from this
     rank's gradient (its state, e.g. momentum, advances as usual);
  3. turns p into delta (p -= start) and starts an async in-place allreduce of it
     with op=Adasum (through `compression`).
step() starts the allreduce of every parameter whose hook did not run (unused in
this pass: other ranks may have used it), waits for each, and sets
p = start + combined delta. So every rank's wrapped optimizer sees only its own
gradients, and the parameters agree across ranks after each step.

As in Horovod: synchronize() does nothing, skip_synchronize() raises, and
zero_grad() between backward() and step() raises. Gradients accumulate over
backward_passes_per_step passes without being divided. groups and
sparse_as_dense do not apply (the allreduced deltas are dense). Unlike Horovod,
any process set and any number of ranks work (runtime/kernels/adasum.h); on a rank
outside the process set, step() is the wrapped optimizer's own step.
"""
from contextlib import contextmanager

import torch

from hvd.basics import global_process_set
from hvd.torch.compression import Compression
from hvd.torch.mpi_ops import Adasum, allreduce_async_, synchronize
from hvd.torch.optimizer import _checked_parameter_names, _count_backward_pass


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    # Marks instances for broadcast_optimizer_state (which must step the wrapped class).
    _hvd_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self.process_set = process_set

        ordered = _checked_parameter_names(self, named_parameters)
        self._parameter_names = {v: k for k, v in ordered}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in ordered}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False)
                                 for _, p in ordered}
        if self.process_set.included():
            self._register_hooks()

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    p.grad = p.data.new(p.size()).zero_()
                    self._requires_update.add(p)
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_delta_async(self, p):
        """Steps the wrapped optimizer on p alone, makes p its delta and starts the
        Adasum allreduce of it."""
        start = self._starting_models[p]
        stashed = [group["params"] for group in self.param_groups]
        for group in self.param_groups:
            group["params"] = [p] if any(p is v for v in group["params"]) else []
        try:
            start.data.copy_(p.data)
            super(self.__class__, self).step()
        finally:
            for group, params in zip(self.param_groups, stashed):
                group["params"] = params
        p.data.sub_(start)
        compressed, ctx = self._compression.compress(p.data)
        handle = allreduce_async_(compressed, name=self._parameter_names.get(p), op=Adasum,
                                  process_set=self.process_set)
        return handle, ctx

    def _make_hook(self, p):
        def hook(*ignore):
            handle, ctx = None, None
            if _count_backward_pass(self, p):
                handle, ctx = self._allreduce_delta_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        pass

    @contextmanager
    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when using Adasum "
                             "optimizer.")
        yield  # Makes this a generator, as contextmanager needs.

    def step(self, closure=None):
        if not self.process_set.included():
            return super(self.__class__, self).step(closure)
        loss = None
        if closure is not None:
            loss = closure()
        # Every allreduce is started before any is waited for, so ranks that start
        # them in different orders cannot wait on each other.
        for p in self._requires_update - set(self._handles):
            self._handles[p] = self._allreduce_delta_async(p)
        for p, (handle, _) in list(self._handles.items()):
            if handle is None:  # step() before backward_passes_per_step passes.
                self._handles[p] = self._allreduce_delta_async(p)
        for p, (handle, ctx) in self._handles.items():
            delta = self._compression.decompress(synchronize(handle), ctx)
            start = self._starting_models[p]
            start.data.add_(delta.data)
            p.data.copy_(start)
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
        return loss

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() "
                                 "but before optimizer.step() or optimizer.synchronize(). "
                                 "This is prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedAdasumOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                               backward_passes_per_step=1, process_set=global_process_set):
    """Wraps `optimizer` so that each step applies the Adasum combination of every
    rank's update (see the module docstring). The result is an instance of a
    subclass of optimizer's class sharing its param_groups and state."""
    if backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedAdasumOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               process_set)
