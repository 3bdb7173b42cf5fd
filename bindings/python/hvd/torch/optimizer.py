"""DistributedOptimizer (horovod.torch.DistributedOptimizer, 0.28 semantics).

The wrapper registers a hook on every parameter's gradient accumulator (the
AccumulateGrad node, reached as p.expand_as(p).grad_fn.next_functions[0][0]). The
hook runs as soon as autograd has accumulated that parameter's gradient and starts
an async in-place allreduce of it, so communication for the last layers overlaps
the backward pass of the earlier ones. step() first calls synchronize(), which
waits for every handle (starting the allreduce of any parameter whose hook did not
run, e.g. one unused in this forward pass: other ranks may have used it), and
writes the averaged gradients into p.grad.

In a job of one rank (and not elastic) no hooks are registered, as in Horovod:
there is nothing to average, and step() is the wrapped optimizer's own.

With backward_passes_per_step=k, a gradient is allreduced only on every k-th
backward pass, and gradients accumulate locally in between (scale the loss by 1/k
yourself, as with Horovod).

gradient_predivide_factor f splits the averaging: gradients are multiplied by 1/f
before the sum and by f/size after it.

Device work: the hooks and step() queue nothing on the device beyond the
collective itself (and its fusion copies, inside the runtime): the allreduce
writes p.grad in place, and zero_grad() keeps the wrapped optimizer's own
set_to_none default. For CUDA gradients, synchronize() does not wait on the host
for the GPU: it returns once the allreduces are queued on the device and makes
torch's current stream wait for them (hvd._handles, "stream-ordered
completion"), so the optimizer's kernels follow them and the host runs ahead.
"""
import os
import warnings
from contextlib import contextmanager

import torch

from hvd import basics
from hvd import elastic
from hvd.basics import global_process_set
from hvd.torch.compression import Compression
from hvd.torch.functions import broadcast_object
from hvd.torch.mpi_ops import (Adasum, Average, _ops, allreduce_async_,
                               grouped_allreduce_async_, sparse_allreduce_async, synchronize)


def _split_list(items, n):
    """Splits `items` into n nearly equal consecutive parts."""
    d, r = divmod(len(items), n)
    return [items[i * d + min(i, r):(i + 1) * d + min(i + 1, r)] for i in range(n)]


def _elastic_job():
    """True in a worker of an elastic job (its runtime joined a dprun generation, or
    Horovod's HOROVOD_ELASTIC=1), whose size can change after the optimizer was built."""
    return os.environ.get("HOROVOD_ELASTIC") == "1" or elastic.generation() >= 0


def _count_backward_pass(opt, p):
    """A backward pass produced p's gradient: counts it against the optimizer's
    backward_passes_per_step and says whether p's allreduce is due now. Raises when
    the gradient was computed again after its allreduce started and before step()."""
    if p in opt._handles and opt._handles[p][0] is not None and opt._allreduce_delay[p] <= 0:
        raise AssertionError(
            "Gradients were computed more than backward_passes_per_step times "
            "before call to step(). Increase backward_passes_per_step to "
            "accumulate gradients locally.")
    assert not p.grad.requires_grad
    assert opt._allreduce_delay[p] > 0
    opt._allreduce_delay[p] -= 1
    return opt._allreduce_delay[p] == 0


def _write_grad(p, result):
    """Makes `result` p's gradient. The in-place allreduce wrote p.grad itself, so
    without compression there is nothing to do (no tensor op); a decompressed
    result becomes p.grad's storage (set_: no kernel)."""
    if result is not p.grad:
        p.grad.set_(result)


def _checked_parameter_names(opt, named_parameters):
    """`named_parameters` (or, if None, names made up from `opt`'s parameter groups) as
    a list of (name, parameter) sorted by name, after Horovod's checks: a tuple each,
    every name once, every parameter of `opt` named."""
    if named_parameters is not None:
        named_parameters = list(named_parameters)
    else:
        named_parameters = [("allreduce.noname.%d.%d" % (i, j), v)
                            for i, param_group in enumerate(opt.param_groups)
                            for j, v in enumerate(param_group["params"])]
    if any(not isinstance(p, tuple) for p in named_parameters):
        raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                         "usually produced by model.named_parameters().")
    dups = _DistributedOptimizer.find_duplicates([k for k, _ in named_parameters])
    if len(dups) > 0:
        raise ValueError("Parameter names in named_parameters must be unique. "
                         "Found duplicates: %s" % ", ".join(sorted(dups)))
    all_param_ids = {id(v) for param_group in opt.param_groups for v in param_group["params"]}
    unnamed_param_ids = all_param_ids - {id(v) for _, v in named_parameters}
    if len(unnamed_param_ids):
        raise ValueError("named_parameters was specified, but one or more model "
                         "parameters were not named. Python object ids: "
                         "%s" % ", ".join(str(i) for i in unnamed_param_ids))
    return sorted(named_parameters, key=lambda kv: kv[0])


class _DistributedOptimizer(torch.optim.Optimizer):
    # Marks instances for broadcast_optimizer_state (which must step the wrapped class).
    _hvd_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=Average, gradient_predivide_factor=1.0, groups=None, sparse_as_dense=False,
                 process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression

        ordered = _checked_parameter_names(self, named_parameters)
        self._parameter_names = {v: k for k, v in ordered}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in ordered}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set

        self._handles = {}
        self._prepared = {}  # parameter -> its gradient's PreparedAllreduce
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True

        if groups is not None:
            if not (isinstance(groups, list) or groups > 0):
                raise ValueError("groups should be a non-negative integer or "
                                 "a list of list of torch.Tensor.")
            if isinstance(groups, list):
                grouped_parameter_ids = set()
                for group in groups:
                    for p in group:
                        if not isinstance(p, torch.Tensor):
                            raise ValueError("groups must consist of torch.Tensor.")
                        if id(p) in grouped_parameter_ids:
                            raise ValueError("A parameter can only appear once in groups.")
                        grouped_parameter_ids.add(id(p))
        self._groups = groups
        self._p_to_group = {}
        self._group_counts = {}

        # As Horovod: a job of one rank has nothing to average, so no hooks (the
        # step is the wrapped optimizer's own); an elastic job may grow.
        if self.process_set.included() and (basics.size() > 1 or _elastic_job()):
            self._register_hooks()

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    @staticmethod
    def find_duplicates(lst):
        seen, dups = set(), set()
        for el in lst:
            if el in seen:
                dups.add(el)
            seen.add(el)
        return dups

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step

    def _register_hooks(self):
        if self._groups is not None:
            p_list = [p for param_group in self.param_groups for p in param_group["params"]
                      if p.requires_grad]
            # Every rank forms the same groups in the same order: rank 0's order wins.
            names = [self._parameter_names.get(p) for p in p_list]
            names = broadcast_object(names, root_rank=basics.global_rank(self.process_set, 0),
                                     name="DistributedOptimizer.groups",
                                     process_set=self.process_set)
            p_list = sorted(p_list, key=lambda p: names.index(self._parameter_names.get(p)))
            if isinstance(self._groups, list):
                p_groups, grouped_ids = [], set()
                p_list_ids = {id(p) for p in p_list}
                for group in self._groups:
                    p_groups.append([p for p in group if id(p) in p_list_ids])
                    grouped_ids.update(id(p) for p in p_groups[-1])
                p_groups.extend([p] for p in p_list if id(p) not in grouped_ids)
            else:
                p_groups = _split_list(p_list, self._groups)
            for group in (tuple(g) for g in p_groups if g):
                for p in group:
                    self._p_to_group[p] = group
                self._group_counts[group] = 0

        for param_group in self.param_groups:
            for p in param_group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    p_tmp = p.expand_as(p)
                    grad_acc = p_tmp.grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _scale_factors(self):
        if self.op == Average:
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # Not computed here, but another rank may have: still take part.
            p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if self.sparse_as_dense:
                tensor = tensor.to_dense()
            else:
                return self._sparse_allreduce_grad_async(p, name)
        pre, post = self._scale_factors()
        if self._compression is Compression.none:
            # The hot path: one prepared in-place allreduce per parameter.
            how = (self.op, pre, post, self.process_set)
            made = self._prepared.get(p)
            if made is None or made[0] != how:
                made = self._prepared[p] = (how, _ops.prepare_allreduce(name, *how))
            return made[1].start(tensor), None
        compressed, ctx = self._compression.compress(tensor)
        handle = allreduce_async_(compressed, name=name, op=self.op, prescale_factor=pre,
                                  postscale_factor=post, process_set=self.process_set)
        return handle, ctx

    def _sparse_allreduce_grad_async(self, p, name):
        return sparse_allreduce_async(p.grad, name, self.op, self.process_set), None

    def _grouped_allreduce_grad_async(self, ps):
        name = self._parameter_names.get(ps[0])
        compressed, ctxs = zip(*[self._compression.compress(p.grad) for p in ps])
        pre, post = self._scale_factors()
        handle = grouped_allreduce_async_(list(compressed), name=name, op=self.op,
                                          prescale_factor=pre, postscale_factor=post,
                                          process_set=self.process_set)
        return handle, ctxs

    def _make_hook(self, p):
        def hook(*ignore):
            handle, ctx = None, None
            if _count_backward_pass(self, p):
                if self._groups is not None:
                    group = self._p_to_group[p]
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        handle, ctxs = self._grouped_allreduce_grad_async(group)
                        self._handles[group] = (handle, ctxs)
                        for gp in group:
                            self._handles.pop(gp, None)
                        self._group_counts[group] = 0
                        return
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce and writes the results into p.grad."""
        if not self.process_set.included():
            self._synchronized = True
            return

        completed = set()
        for x in self._handles.keys():
            completed.update(x) if isinstance(x, tuple) else completed.add(x)
        for p in self._requires_update - completed:
            if self._groups is not None and p in self._p_to_group:
                continue  # Its group is started below, as a whole.
            self._handles[p] = self._allreduce_grad_async(p)
        if self._groups is not None:
            for group in self._group_counts:
                if group not in self._handles and not completed.issuperset(group):
                    for gp in group:
                        if gp.grad is None:
                            gp.grad = gp.data.new(gp.size()).zero_()
                        self._handles.pop(gp, None)
                    self._handles[group] = self._grouped_allreduce_grad_async(group)

        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in self._handles.items():
            if isinstance(p, tuple):
                outputs = synchronize(handle)
                for gp, output, gctx in zip(p, outputs, ctx):
                    self._allreduce_delay[gp] = self.backward_passes_per_step
                    _write_grad(gp, self._compression.decompress(output, gctx))
                if self._groups is not None:
                    self._group_counts[p] = 0
            else:
                output = synchronize(handle) if not callable(handle) else handle()
                self._allreduce_delay[p] = self.backward_passes_per_step
                if self._groups is not None and p in self._p_to_group:
                    self._group_counts[self._p_to_group[p]] = 0
                if p.grad.is_sparse:
                    aggregated = self._compression.decompress(output, ctx)
                    if not aggregated.is_sparse:
                        aggregated = aggregated.to_sparse()
                    p.grad.zero_().add_(aggregated)
                else:
                    _write_grad(p, self._compression.decompress(output, ctx))
        self._handles.clear()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """Makes step() skip synchronize(), for use after an explicit synchronize():

            optimizer.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            with optimizer.skip_synchronize():
                optimizer.step()
        """
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    # torch.optim.Optimizer wraps a class's step in a profiler range (a
    # record_function, which dispatches an op) unless it is marked hooked; the
    # wrapped class's own step, called below, already has one.
    step.hooked = True

    def zero_grad(self, *args, **kwargs):
        # The wrapped class's own default for set_to_none (True from torch 2.0): a
        # gradient set to None is not filled with zeros, and backward then writes
        # the new one instead of adding it to zeros (forcing False would cost a
        # fill_ and an add_ kernel per gradient per step).
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() "
                                 "but before optimizer.step() or optimizer.synchronize(). "
                                 "This is prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps `optimizer` (any torch.optim.Optimizer) so that gradients are averaged
    over the ranks of `process_set` before each step.

    The returned object is an instance of a subclass of optimizer's class that shares
    its param_groups and state. See the module docstring for the hooks, and
    horovod.torch.DistributedOptimizer for the arguments: named_parameters names the
    allreduces (the same names on every rank; default: by position);
    compression=Compression.fp16 sends float gradients as float16;
    groups (a number of groups, or lists of parameters) fuses allreduces explicitly;
    num_groups is the deprecated spelling of groups.
    """
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op == Adasum and basics.size() > 1:
        # Horovod's _DistributedAdasumOptimizer (one rank: the wrapper below, as Horovod).
        from hvd.torch.adasum_optimizer import DistributedAdasumOptimizer
        return DistributedAdasumOptimizer(optimizer, named_parameters, compression,
                                          backward_passes_per_step, process_set)
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` "
                      "and will be removed in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups, sparse_as_dense, process_set)
