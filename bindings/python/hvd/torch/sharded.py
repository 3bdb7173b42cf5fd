"""ShardedOptimizer: ZeRO stage 1 and 2 data parallelism over hvd collectives.

Layout. The parameters of each param group are packed, in reverse registration
order (roughly the order backward produces their gradients), into *buckets* of
about `bucket_bytes`. A bucket is one flat tensor whose length is padded up to a
multiple of N, the size of the process set, and it is split by elements into N
equal *chunks*: rank r owns chunk r of every bucket. Every parameter becomes a view
of its bucket (p.data is re-pointed), so sharding is flat, by elements, and a
parameter may straddle two ranks' chunks. A rank's *shard* is its chunks: 1/N of
the elements (plus at most N-1 padding elements per bucket).

The wrapped optimizer is built over the chunks (views into the buckets) only, so
its state (momentum, Adam moments, ...) exists for 1/N of the elements on each
rank, and its in-place update of a chunk updates the model's parameters directly.

Each step:
  1. the gradients are averaged and scattered: a reducescatter of every bucket's
     gradient leaves each rank the average of its own chunks (the chunk's .grad);
  2. the wrapped optimizer steps the chunks;
  3. an allgather of the chunks brings every rank the updated parameters.

Stage 1 keeps a full gradient for every parameter (p.grad is a view into a flat
per-bucket gradient buffer, reduced at step; the rank's own chunk of that buffer is
then overwritten with the averaged chunk, so after synchronize() p.grad holds local
gradients except where this rank owns the elements). Stage 2 keeps no full gradient: a
hook on each parameter's gradient accumulator copies the gradient into its
bucket's staging buffer as soon as autograd produces it and drops p.grad; when the
bucket is complete its reducescatter starts (overlapping the rest of backward) and
the staging buffer is freed once it completes, its result being added to the
chunk's gradient. After backward, p.grad is None for every parameter in stage 2.

Equivalence: for optimizers whose update is element-wise (SGD, momentum, Adam,
AdamW, RMSprop, Adagrad, ...) the parameters follow DistributedOptimizer's up to
the rounding of the reduction. Optimizers that need whole-tensor statistics (LAMB,
LARS, LBFGS) do not shard this way. Use clip_grad_norm_ (after synchronize) for a
global-norm clip.

Devices: parameters may be CUDA tensors (a bucket holds parameters of one dtype and
one device, and its buffers live there); the collectives then run on the GPU.

Contract: every rank of the process set constructs its ShardedOptimizers in the
same order over the same parameter shapes, and (stage 2) produces gradients for
the same parameters in each backward pass.
"""
import itertools

import torch

from hvd.basics import global_process_set
from hvd.torch.mpi_ops import (Average, Max, Sum, allreduce, grouped_allgather_async,
                               grouped_reducescatter_async, reducescatter_async, synchronize)

_instance_ids = itertools.count()


class _Bucket:
    """One flat buffer of whole parameters; see the module docstring."""

    def __init__(self, index, params, dtype, world, rank):
        self.index = index
        self.params = params
        self.offsets = []
        total = 0
        for p in params:
            self.offsets.append(total)
            total += p.numel()
        self.numel = total
        self.padded = -(-total // world) * world
        self.chunk = self.padded // world
        self.flat = torch.zeros(self.padded, dtype=dtype, device=params[0].device)
        with torch.no_grad():
            for p, off in zip(params, self.offsets):
                self.flat[off:off + p.numel()].copy_(p.detach().reshape(-1))
                p.data = self.flat[off:off + p.numel()].view_as(p)
        self.shard = self.flat[rank * self.chunk:(rank + 1) * self.chunk]
        self.shard.grad = torch.zeros_like(self.shard)
        self.grad_flat = None       # Stage 1: the full gradient.
        self.staging = None         # Stage 2: the gradient being gathered this pass.
        self.ready = set()          # Stage 2: ids of params copied into staging.
        self.handle = None          # Stage 2: the reducescatter in flight.

    def grad_view(self, p, off):
        return self.grad_flat[off:off + p.numel()].view_as(p)


class ShardedOptimizer(torch.optim.Optimizer):
    """ZeRO-sharded data parallelism (see the module docstring).

    Args:
      optimizer: a torch.optim.Optimizer class (then `params` and **kwargs build it),
        or an instance, whose class and param groups (with their hyperparameters)
        are used; the instance itself must not have stepped yet.
      params: an iterable of parameters or of param-group dicts; None with an instance.
      stage: 1 (shard optimizer state) or 2 (also shard gradients).
      process_set: the ranks to shard over (this rank must be a member).
      bucket_bytes: the target size of a bucket (a larger parameter gets its own).
      name: the collectives' name prefix; default "sharded<n>", n counting the
        ShardedOptimizers made by this process (so it matches across ranks).
    """

    def __init__(self, optimizer, params=None, stage=1, process_set=global_process_set,
                 bucket_bytes=8 << 20, name=None, **kwargs):
        if stage not in (1, 2):
            raise ValueError("stage must be 1 or 2, got %r" % (stage,))
        if isinstance(optimizer, torch.optim.Optimizer):
            if optimizer.state:
                raise ValueError("ShardedOptimizer needs an optimizer that has not stepped yet "
                                 "(its state would be replicated, not sharded)")
            cls = optimizer.__class__
            defaults = dict(optimizer.defaults)
            groups = [dict(g) for g in optimizer.param_groups]
            if kwargs:
                raise ValueError("keyword arguments are only used with an optimizer class")
        else:
            if params is None:
                raise ValueError("params is required with an optimizer class")
            cls = optimizer
            defaults = {}
            params = list(params)
            groups = ([dict(g) for g in params] if params and isinstance(params[0], dict)
                      else [{"params": params}])
        if not process_set.included():
            raise ValueError("this rank is not a member of %r" % (process_set,))
        self.stage = stage
        self.process_set = process_set
        self._world = process_set.size()
        self._rank = process_set.rank()
        self._name = name if name is not None else "sharded%d" % next(_instance_ids)
        self._buckets = []
        self._param_bucket = {}   # param -> (bucket, offset)
        inner_groups = []
        for group in groups:
            ps = [p for p in group["params"] if p.requires_grad]
            buckets = self._make_buckets(ps, bucket_bytes)
            hyper = {k: v for k, v in group.items() if k != "params"}
            inner_groups.append(dict(hyper, params=[b.shard for b in buckets]))
        self._inner = cls(inner_groups, **kwargs) if not defaults else cls(inner_groups)
        self._synchronized = False
        self._grad_accs = []
        if stage == 1:
            for b in self._buckets:
                b.grad_flat = torch.zeros_like(b.flat)
                # The chunk's gradient is its own region of the full gradient, which
                # the averaged chunk overwrites once the reducescatter has read it.
                b.shard.grad = b.grad_flat[self._rank * b.chunk:(self._rank + 1) * b.chunk]
                for p, off in zip(b.params, b.offsets):
                    p.grad = b.grad_view(p, off)
        else:
            for b in self._buckets:
                for p in b.params:
                    p.grad = None
                    acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(acc)
        self.peak_staging_bytes = 0

    def _make_buckets(self, params, bucket_bytes):
        buckets, current, size = [], [], 0
        for p in reversed(params):
            if p.device.type not in ("cpu", "cuda") or not p.dtype.is_floating_point:
                raise ValueError("ShardedOptimizer takes floating-point CPU or CUDA parameters, "
                                 "got %s on %s" % (p.dtype, p.device))
            if current and (size + p.numel() * p.element_size() > bucket_bytes
                            or p.dtype != current[0].dtype or p.device != current[0].device):
                buckets.append(current)
                current, size = [], 0
            current.append(p)
            size += p.numel() * p.element_size()
        if current:
            buckets.append(current)
        made = []
        for ps in buckets:
            b = _Bucket(len(self._buckets), ps, ps[0].dtype, self._world, self._rank)
            self._buckets.append(b)
            for p, off in zip(b.params, b.offsets):
                self._param_bucket[p] = (b, off)
            made.append(b)
        return made

    # ---- torch.optim.Optimizer surface, delegated to the sharded optimizer -------------

    @property
    def param_groups(self):
        return self._inner.param_groups

    @property
    def state(self):
        return self._inner.state

    @property
    def defaults(self):
        return self._inner.defaults

    def __repr__(self):
        return "ShardedOptimizer(stage=%d, rank %d of %d, %r)" % (
            self.stage, self._rank, self._world, self._inner)

    def state_dict(self):
        """This rank's shard of the state (load it on the same rank and layout)."""
        return {"stage": self.stage, "rank": self._rank, "size": self._world,
                "shard": self._inner.state_dict()}

    def load_state_dict(self, state_dict):
        if (state_dict["rank"], state_dict["size"]) != (self._rank, self._world):
            raise ValueError("state_dict was saved by rank %d of %d, this is rank %d of %d"
                             % (state_dict["rank"], state_dict["size"], self._rank, self._world))
        self._inner.load_state_dict(state_dict["shard"])

    # ---- gradients -------------------------------------------------------------------

    def _make_hook(self, p):
        def hook(*unused):
            b, off = self._param_bucket[p]
            if p.grad is None:
                return
            if b.handle is not None and not b.ready:
                self._finish_bucket(b)  # A new pass: the previous one's name must be done.
            if b.staging is None:
                b.staging = torch.zeros_like(b.flat)
                self._track_staging()
            b.staging[off:off + p.numel()].add_(p.grad.reshape(-1))
            p.grad = None
            b.ready.add(id(p))
            if len(b.ready) == len(b.params):
                self._start_bucket(b)
        return hook

    def _track_staging(self):
        live = sum(b.staging.numel() * b.staging.element_size()
                   for b in self._buckets if b.staging is not None)
        self.peak_staging_bytes = max(self.peak_staging_bytes, live)

    def _start_bucket(self, b):
        if b.handle is not None:
            self._finish_bucket(b)
        b.handle = reducescatter_async(b.staging, name="%s.b%d" % (self._name, b.index),
                                       op=Average, process_set=self.process_set)
        b.staging = None  # The handle keeps it alive until the reducescatter is done.
        b.ready = set()

    def _finish_bucket(self, b):
        b.shard.grad.add_(synchronize(b.handle))
        b.handle = None

    def synchronize(self):
        """Leaves each chunk's .grad holding the average gradient over the set."""
        if self.stage == 1:
            for b in self._buckets:
                for p, off in zip(b.params, b.offsets):
                    view = b.grad_view(p, off)
                    if p.grad is None:
                        view.zero_()
                    elif p.grad.data_ptr() != view.data_ptr():
                        view.copy_(p.grad)
                    p.grad = view
            handle = grouped_reducescatter_async([b.grad_flat for b in self._buckets],
                                                 name="%s.grads" % self._name, op=Average,
                                                 process_set=self.process_set)
            for b, g in zip(self._buckets, synchronize(handle)):
                b.shard.grad.copy_(g)
        else:
            for b in self._buckets:
                if b.staging is not None or b.handle is None:
                    if b.staging is None:
                        b.staging = torch.zeros_like(b.flat)
                    self._start_bucket(b)
            for b in self._buckets:
                self._finish_bucket(b)
        self._synchronized = True

    def clip_grad_norm_(self, max_norm, norm_type=2.0):
        """Clips the (already synchronized) gradients by their global norm, like
        torch.nn.utils.clip_grad_norm_ over the whole model; returns the norm."""
        if not self._synchronized:
            self.synchronize()
        norm_type = float(norm_type)
        grads = [b.shard.grad for b in self._buckets]
        if norm_type == float("inf"):
            local = max((g.abs().max() for g in grads if g.numel()), default=torch.tensor(0.))
            total = allreduce(local.reshape(1).double(), name="%s.norm" % self._name,
                              op=Max, process_set=self.process_set)[0]
        else:
            local = sum(g.double().abs().pow(norm_type).sum() for g in grads)
            total = allreduce(torch.as_tensor(local).reshape(1), name="%s.norm" % self._name,
                              op=Sum, process_set=self.process_set)[0] ** (1.0 / norm_type)
        coef = float(max_norm) / (float(total) + 1e-6)
        if coef < 1:
            for g in grads:
                g.mul_(coef)
        return total

    def step(self, closure=None):
        """Reduces the gradients (unless synchronize() was called since the last
        step), steps this rank's shard, then gathers the updated parameters."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if not self._synchronized:
            self.synchronize()
        self._inner.step()
        handle = grouped_allgather_async([b.shard for b in self._buckets],
                                         name="%s.params" % self._name,
                                         process_set=self.process_set)
        with torch.no_grad():
            for b, full in zip(self._buckets, synchronize(handle)):
                b.flat.copy_(full)
        self._synchronized = False
        return loss

    def zero_grad(self, set_to_none=False):
        """Zeroes the gradients (stage 1 keeps p.grad as views into its buffers, so
        set_to_none is ignored)."""
        if any(b.handle is not None for b in self._buckets):
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize()")
        for b in self._buckets:
            b.shard.grad.zero_()
            b.staging = None
            b.ready = set()
            if b.grad_flat is not None:
                b.grad_flat.zero_()  # (Includes the chunk gradient, a view into it.)
                for p, off in zip(b.params, b.offsets):
                    p.grad = b.grad_view(p, off)

    # ---- accounting -------------------------------------------------------------------

    def optimizer_state_bytes(self):
        """Bytes of tensors in this rank's optimizer state."""
        total = 0
        for per_param in self._inner.state.values():
            for v in per_param.values():
                if torch.is_tensor(v):
                    total += v.numel() * v.element_size()
        return total

    def gradient_bytes(self):
        """Bytes of gradient buffers this rank keeps between steps."""
        if self.stage == 1:  # The chunk gradients are views into the full ones.
            return sum(b.grad_flat.numel() * b.grad_flat.element_size() for b in self._buckets)
        return sum(b.shard.grad.numel() * b.shard.grad.element_size() for b in self._buckets)

    def shard_numel(self):
        """Elements this rank owns (its chunks, padding included)."""
        return sum(b.chunk for b in self._buckets)
