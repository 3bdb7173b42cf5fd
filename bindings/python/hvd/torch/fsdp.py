"""FullyShardedDataParallel: ZeRO stage 3 (and 2, and hybrid) over hvd collectives.

    model = hvd.FullyShardedDataParallel(module, auto_wrap_policy={Block},
                                         mixed_precision=hvd.MixedPrecision(torch.bfloat16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)   # over the local shards
    loss = loss_fn(model(x), y); loss.backward(); optimizer.step(); optimizer.zero_grad()

Mapping (torch FSDP / DeepSpeed):
  ShardingStrategy.FULL_SHARD     torch FULL_SHARD       DeepSpeed ZeRO stage 3
  ShardingStrategy.SHARD_GRAD_OP  torch SHARD_GRAD_OP    ZeRO stage 2 (see below)
  ShardingStrategy.HYBRID_SHARD   torch HYBRID_SHARD     ZeRO-3 inside a group + data
                                                         parallel across groups (MiCS, hpZ)
  ShardingStrategy.NO_SHARD       torch NO_SHARD         DDP; ZeRO stage 0
hvd.ShardedOptimizer is ZeRO 1 and 2 as DeepSpeed has them: full parameters kept on
every rank between steps. SHARD_GRAD_OP here is torch's: parameters are sharded
between steps too, gathered once in forward and kept until their gradients exist.

Layout. assign_units (hvd.torch.wrap) splits the module's parameters into units by
the auto-wrap policy; plan_flat_layout lays each unit out flat, in its parameter
order, padded to a multiple of N (the shard set's size) and split by elements
into N equal chunks; rank r keeps chunk r, its *shard*, as an fp32 (the
parameters' dtype) master Parameter. fsdp.parameters() yields the shards, so the
optimizer, built over them, keeps state for 1/N of the elements and steps only
this rank's shard. The original Parameters are removed from their modules;
between steps each module attribute (`linear.weight`) is a meta-device tensor of
the right shape, and while a unit is gathered it is a view of the unit's
gathered flat tensor. A rank's memory between steps is its shards, their
gradients and the optimizer state over them: 1/N of the replicated bytes, plus
at most N-1 padding elements per unit. Construction goes unit by unit, innermost
first (materialise meta tensors, synchronise or fingerprint, shard, drop the
originals), so no more than one unit's full parameters exist beside the shards.

A step, per unit (the root unit is the wrapped module's own parameters, kept
gathered from its forward to its backward, as torch FSDP does):
  forward   before the unit's module runs, wait for its allgather (prefetched) and
            point the module attributes at views of the gathered flat tensor;
            start the allgather of the next unit in forward order (the order the
            previous forward ran, registration order the first time) so it
            overlaps this unit's compute; after the module returns, free the
            gathered tensor (FULL_SHARD and HYBRID_SHARD, except for the unit
            expected to run last, whose backward comes first; SHARD_GRAD_OP and
            NO_SHARD keep every unit for backward).
  backward  autograd's saved tensors that are views of a gathered unit are
            packed as (unit, geometry) (torch.autograd.graph.saved_tensors_hooks),
            not kept, so freeing really frees; unpacking them re-gathers the unit
            (waiting for its allgather, which the unit after it in backward order
            prefetched) and starts the allgather of the next unit to run
            backward (skipping the units the previous backward pass did not
            re-gather, such as a first layer whose input needs no gradient, which
            saves only that input). When the unit's flat gradient is complete (a hook on the
            gathered tensor's AccumulateGrad, which fires once all of the unit's
            uses are done) its reduce-scatter (Average over the shard set) starts
            and the gathered tensor is freed; at most two reduce-scatters stay
            in flight (the older is waited for by the next unit's hook, after
            overlapping that unit's backward). In HYBRID_SHARD the averaged shard
            is then all-reduced (Average) over the replicate set. A callback at the
            end of backward reduces zeros for units that got no gradient (so every
            rank makes the same collectives), waits for the rest, adds the results
            into the shards' .grad and frees anything still gathered.

Mixed precision (MixedPrecision(param_dtype, reduce_dtype, buffer_dtype)): the
shards stay in their dtype (fp32 masters); the gather sends the shard cast to
param_dtype, so the module computes in param_dtype (floating inputs of the root
forward are cast to it); the flat gradient is cast to reduce_dtype (default
param_dtype) for the reduce-scatter and the result back to the master dtype.
Buffers are cast to buffer_dtype once, at wrap time.

Checkpoints: full_state_dict() gathers every unit and returns the original
module's state_dict (names as in the unwrapped module, so a plain model loads
it), on every rank or only on rank 0; load_full_state_dict() takes it back (from
rank 0 alone with rank0_only=True). sharded_state_dict() is this rank's shards
and the layout they assume; load_sharded_state_dict() checks the layout and
copies them back. state_dict()/load_state_dict() are either, by
set_state_dict_type() or the state_dict_type() context manager. The optimizer's
own state_dict() is per rank (it holds the shards' state).

Contract (as torch FSDP's): every rank of the shard set (and, for HYBRID_SHARD,
the replicate set) wraps the same module structure with the same initial values
(checked at wrap time: shapes, dtypes and a fingerprint of every parameter; or
sync_module_states=True broadcasts them) and runs the same units in the same
order, forward and backward. The optimizer must be element-wise (SGD, Adam,
AdamW, RMSprop, Adagrad, ...): one that needs whole-tensor statistics (LBFGS,
LAMB, LARS, Adafactor, SparseAdam, ...) is refused when it is built over
fsdp.parameters() (see check_optimizer). Do not wrap the optimizer in
DistributedOptimizer or ShardedOptimizer: the shards' gradients are already
reduced. Buffers are not synchronised after wrap time (as in torch FSDP).

Devices: the module's parameters may be CUDA tensors (all of a unit on one
device); gathered tensors and collectives then live on that device.

Every collective name is "<name>.<kind><unit>" (name: "fsdp<n>", n counting the
FullyShardedDataParallel made by this process); a unit has at most one allgather,
one reduce-scatter and one allreduce in flight, each synchronized before the next
with its name is enqueued.
"""
import collections
import contextlib
import enum
import hashlib
import itertools
import sys
import time

import torch
from torch.autograd.graph import saved_tensors_hooks

from hvd import basics
from hvd.basics import global_process_set
from hvd.torch.functions import allgather_object, broadcast_object, broadcast_parameters
from hvd.torch.mpi_ops import (Average, Max, Sum, allgather_async, allreduce,
                               allreduce_async, broadcast_, reducescatter_async, synchronize)
from hvd.torch.wrap import assign_units

_instance_ids = itertools.count()


# ---- the layout: a pure function -------------------------------------------------------

class FlatLayout(collections.namedtuple("FlatLayout", "numels offsets total padded chunk world")):
    """The flat layout of one unit over `world` ranks; see plan_flat_layout."""

    def shard_range(self, rank):
        """[start, end) of rank's chunk in the flat tensor."""
        return rank * self.chunk, (rank + 1) * self.chunk

    def pieces(self, rank):
        """The parts of parameters in rank's chunk: a list of (param index, start
        within the parameter, end within the parameter, start within the chunk), in
        flat order."""
        lo, hi = self.shard_range(rank)
        out = []
        for i, (off, n) in enumerate(zip(self.offsets, self.numels)):
            a, b = max(lo, off), min(hi, off + n)
            if a < b:
                out.append((i, a - off, b - off, a - lo))
        return out


def plan_flat_layout(numels, world):
    """Lays out parameters of `numels` elements flat, in order, for `world` ranks.

    Contract (tested as a property in tests/test_fsdp.py):
      - offsets[i] = sum(numels[:i]); total = sum(numels);
      - padded is the least multiple of world >= total (0 when total is 0), so
        padded - total < world; chunk = padded // world;
      - rank r's chunk is [r * chunk, (r + 1) * chunk): the chunks tile [0, padded);
      - the pieces of all ranks partition every parameter's elements, each element
        in exactly one rank's chunk, at the same flat position.
    """
    world = int(world)
    if world < 1:
        raise ValueError("world must be at least 1, got %d" % world)
    numels = [int(n) for n in numels]
    if any(n < 0 for n in numels):
        raise ValueError("numels must be non-negative: %r" % (numels,))
    offsets, total = [], 0
    for n in numels:
        offsets.append(total)
        total += n
    padded = -(-total // world) * world
    return FlatLayout(tuple(numels), tuple(offsets), total, padded, padded // world, world)


# ---- options ---------------------------------------------------------------------------

class ShardingStrategy(enum.Enum):
    """torch FSDP's strategies; see the module docstring for the ZeRO stages."""
    FULL_SHARD = 1
    SHARD_GRAD_OP = 2
    NO_SHARD = 3
    HYBRID_SHARD = 4


class StateDictType(enum.Enum):
    FULL_STATE_DICT = 1
    SHARDED_STATE_DICT = 2


class MixedPrecision:
    """torch FSDP's MixedPrecision: param_dtype for the gathered parameters (the
    compute), reduce_dtype for the gradient reduce-scatter (default param_dtype),
    buffer_dtype for the buffers (default: left alone). The shards (masters) keep
    the module's dtype."""

    def __init__(self, param_dtype=None, reduce_dtype=None, buffer_dtype=None):
        self.param_dtype = param_dtype
        self.reduce_dtype = reduce_dtype
        self.buffer_dtype = buffer_dtype

    def __repr__(self):
        return "MixedPrecision(param_dtype=%s, reduce_dtype=%s, buffer_dtype=%s)" % (
            self.param_dtype, self.reduce_dtype, self.buffer_dtype)


# ---- optimizers ------------------------------------------------------------------------

_WHOLE_TENSOR_OPTIMIZERS = ("lbfgs", "lamb", "lars", "larc", "adafactor", "sparseadam",
                            "shampoo", "novograd")


def check_optimizer(optimizer):
    """Raises ValueError if `optimizer` (an instance or a class) needs whole-tensor
    statistics, which flat shards, split by elements across ranks, do not have:
    LBFGS (the whole model's flat gradient and a line search), LAMB/LARS/LARC and
    NovoGrad (a norm per parameter tensor), Adafactor and Shampoo (statistics by
    the tensor's shape), SparseAdam (sparse gradients). Matched by class name (any
    class in the MRO, ignoring case, equal to or ending in one of those names); a
    class setting `hvd_elementwise = True` is accepted. Also refuses
    DistributedOptimizer and ShardedOptimizer, which would reduce the shards'
    already reduced gradients again."""
    cls = optimizer if isinstance(optimizer, type) else type(optimizer)
    if getattr(cls, "hvd_elementwise", False):
        return
    if getattr(cls, "_hvd_distributed", False) or cls.__name__ == "ShardedOptimizer":
        what = ("a DistributedOptimizer (over %s)" % cls.__name__
                if getattr(cls, "_hvd_distributed", False) else "a ShardedOptimizer")
        raise ValueError("FullyShardedDataParallel: build a plain torch optimizer over "
                         "fsdp.parameters(), not %s: the shards' gradients are already "
                         "reduced" % what)
    for klass in cls.__mro__:
        name = klass.__name__.lower()
        for key in _WHOLE_TENSOR_OPTIMIZERS:
            if name == key or name.endswith(key):
                raise ValueError(
                    "FullyShardedDataParallel: %s needs whole-tensor statistics (%s), but "
                    "fsdp.parameters() are flat shards split by elements across ranks; use an "
                    "element-wise optimizer (SGD, Adam, AdamW, RMSprop, Adagrad, ...)"
                    % (cls.__name__, "the whole model's flat gradient and a line search"
                       if key == "lbfgs" else "statistics per parameter tensor"))


# ---- process sets ----------------------------------------------------------------------

class HybridProcessSets(collections.namedtuple("HybridProcessSets", "shard replicate all")):
    """This rank's shard set and replicate set, and every set registered (remove()
    removes them all, a collective over all ranks)."""

    def remove(self):
        for ps in reversed(self.all):
            basics.remove_process_set(ps)


def hybrid_process_sets(shard_size=None):
    """Registers, on every rank (a collective over all ranks), the shard sets of
    `shard_size` consecutive ranks (default local_size(): one host's ranks) and the
    replicate sets of ranks at the same position in each; returns this rank's
    pair as HybridProcessSets, for process_set=(shard, replicate) with
    ShardingStrategy.HYBRID_SHARD."""
    n = basics.size()
    s = int(shard_size or basics.local_size())
    if s < 1 or n % s:
        raise ValueError("shard_size %d does not divide the job's %d ranks" % (s, n))
    shards = [basics.add_process_set(list(range(i, i + s))) for i in range(0, n, s)]
    replicas = [basics.add_process_set(list(range(j, n, s))) for j in range(s)]
    r = basics.rank()
    return HybridProcessSets(shards[r // s], replicas[r % s], shards + replicas)


# ---- the wrapper -----------------------------------------------------------------------

class _Saved:
    """A saved tensor that was a view of a gathered unit: enough to rebuild it."""
    __slots__ = ("unit", "size", "stride", "offset")

    def __init__(self, unit, t):
        self.unit = unit
        self.size = t.size()
        self.stride = t.stride()
        self.offset = t.storage_offset()


class _Unit:
    """One unit's state; see the module docstring."""

    def __init__(self, index, spec, layout, shard, compute_dtype, reduce_dtype):
        self.index = index
        self.name = spec.name or "<root>"
        self.module = spec.module
        self.shapes = [tuple(s.param.shape) for s in spec.params]
        # [ParamSpec] without the Parameters themselves: holding them would keep the
        # full, unsharded values alive.
        self.params = [s._replace(param=None) for s in spec.params]
        self.layout = layout
        self.shard = shard                             # nn.Parameter: this rank's chunk
        self.master_dtype = shard.dtype
        self.compute_dtype = compute_dtype
        self.reduce_dtype = reduce_dtype
        self.requires_grad = shard.requires_grad
        self.device = shard.device
        self.empty = torch.empty(0, dtype=compute_dtype, device=shard.device)
        self.full = self.empty.clone().requires_grad_(self.requires_grad)  # The gathered flat.
        self.placeholders = [torch.empty(s, dtype=compute_dtype, device="meta")
                             for s in self.shapes]
        self.split_sizes = list(layout.numels) + ([layout.padded - layout.total]
                                                  if layout.padded > layout.total else [])
        self.materialized = False
        self.version = None          # shard._version when the gathered values were taken
        self.gather = None           # (handle, version) of the allgather in flight
        self.rs_handle = None
        self.ar_handle = None
        self.reduced = False         # a gradient was reduced in this backward pass
        self.in_backward = False     # its saved tensors were unpacked in this backward pass
        self.bwd_needed = None       # whether the last backward pass unpacked them
        self.acc = None
        self.rs_bytes = 0
        self.t_forward = None
        self.t_backward = None

    @property
    def full_bytes(self):
        return self.layout.padded * self.empty.element_size()

    def gathered_bytes(self, world):
        """What gathering adds: nothing when it aliases the shard (one rank, one dtype)."""
        alias = world == 1 and self.compute_dtype == self.master_dtype
        return 0 if alias else self.full_bytes

    def set_views(self):
        pieces = self.full.split(self.split_sizes)
        for spec, piece, shape in zip(self.params, pieces, self.shapes):
            view = piece.view(shape)
            for owner, attr in spec.owners:
                owner.__dict__[attr] = view

    def set_placeholders(self):
        for spec, ph in zip(self.params, self.placeholders):
            for owner, attr in spec.owners:
                owner.__dict__[attr] = ph


def _tensors_in(obj):
    if torch.is_tensor(obj):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors_in(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors_in(x)


def _cast_floating(obj, dtype):
    if torch.is_tensor(obj):
        return obj.to(dtype) if obj.is_floating_point() and obj.dtype != dtype else obj
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[_cast_floating(x, dtype) for x in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cast_floating(x, dtype) for x in obj)
    if isinstance(obj, dict):
        return {k: _cast_floating(v, dtype) for k, v in obj.items()}
    return obj


def _fingerprint(t):
    h = hashlib.sha1(t.detach().to("cpu", torch.float64).contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


class FullyShardedDataParallel(torch.nn.Module):
    """Fully sharded data parallelism (ZeRO-3); see the module docstring.

    Args:
      module: the model (its parameters floating point, CPU or CUDA, or on the meta
        device to be materialised one unit at a time).
      process_set: the ranks to shard over (FULL_SHARD, SHARD_GRAD_OP), to replicate
        over (NO_SHARD), or for HYBRID_SHARD a pair (shard set, replicate set), e.g.
        from hybrid_process_sets(). A rank outside it may construct the wrapper
        (nothing is made or communicated) but not run it.
      sharding_strategy: a ShardingStrategy (default FULL_SHARD).
      auto_wrap_policy: which submodules become units (hvd.torch.wrap): None (one
        unit, the whole module), a set of module classes, or a policy callable.
      mixed_precision: a MixedPrecision, or None.
      forward_prefetch, backward_prefetch: start the next unit's allgather before
        the current unit's compute (default True; False gathers on demand).
      sync_module_states: broadcast every unit's parameters and the buffers from
        the first rank of the set(s) instead of checking that they agree.
      check_parameters: (without sync_module_states) compare a fingerprint of every
        parameter across the set(s) at wrap time and raise naming the unit, the
        parameter and the ranks that differ (default True).
      param_init_fn: for a module on the meta device: called with each module that
        holds meta parameters or buffers of its own, innermost unit first, and must
        replace them by real tensors (default: to_empty on the module's own
        tensors, then reset_parameters() if it has one). Use sync_module_states=True
        (or seeded initialisation) so that every rank gets the same values.
      device: where meta parameters are materialised (default: CPU).
      max_inflight_reduces: reduce-scatters in flight before the oldest is waited for.
      name: the collectives' name prefix (default "fsdp<n>").
    """

    def __init__(self, module, process_set=global_process_set,
                 sharding_strategy=ShardingStrategy.FULL_SHARD, auto_wrap_policy=None,
                 mixed_precision=None, forward_prefetch=True, backward_prefetch=True,
                 sync_module_states=False, check_parameters=True, param_init_fn=None,
                 device=None, max_inflight_reduces=2, name=None):
        super().__init__()
        if not isinstance(sharding_strategy, ShardingStrategy):
            raise ValueError("sharding_strategy must be a ShardingStrategy, got %r"
                             % (sharding_strategy,))
        self.sharding_strategy = sharding_strategy
        self.module = module
        self.mixed_precision = mixed_precision
        self.forward_prefetch = forward_prefetch
        self.backward_prefetch = backward_prefetch
        self.max_inflight_reduces = max(1, int(max_inflight_reduces))
        self._name = name if name is not None else "fsdp%d" % next(_instance_ids)
        self._state_dict_type = StateDictType.FULL_STATE_DICT
        self._state_dict_rank0_only = False
        self.trace = None        # A list to record timed spans into (see _span), or None.
        self._setup_process_sets(process_set)
        self._units = []
        self._flat = torch.nn.ParameterList()
        self._full_ids = {}
        self._fwd_order = []     # Units in the order the last complete forward ran them.
        self._cur_order = []
        self._rs_queue = []
        self._final_queued = False
        self._hooks = []
        self.reset_peak_stats()
        if not self._member:
            return
        specs = assign_units(module, auto_wrap_policy)
        self._sd_keys = list(module.state_dict().keys())
        self._check_units(specs)
        # Unit by unit, innermost first: materialise (meta), synchronise or
        # fingerprint, shard, and drop the original parameters, so that at most one
        # unit's full parameters exist beyond the shards.
        unit_of_module = {}
        for i, spec in enumerate(specs):
            for m in spec.module.modules():
                unit_of_module[m] = i  # Pre-order: inner units overwrite outer ones.
        units, prints = [None] * len(specs), [None] * len(specs)
        for i in reversed(range(len(specs))):
            spec = self._materialize_meta(specs[i], [m for m, u in unit_of_module.items()
                                                     if u == i], param_init_fn, device)
            if sync_module_states:
                self._sync_tensors([s.param.data for s in spec.params], "u%d" % i)
            elif check_parameters:
                prints[i] = (spec.name, [(s.fqn, _fingerprint(s.param)) for s in spec.params])
            units[i] = self._make_unit(i, spec)
            specs[i] = spec = None  # The last references to the unit's full parameters.
        self._units = units
        for unit in units:
            if unit.params:
                self._flat.append(unit.shard)
        if mixed_precision is not None and mixed_precision.buffer_dtype is not None:
            for b_owner, b_name, b in self._named_buffer_slots():
                if b is not None and b.is_floating_point():
                    b_owner._buffers[b_name] = b.to(mixed_precision.buffer_dtype)
        if sync_module_states:
            self._sync_tensors([b for _, _, b in self._named_buffer_slots() if b is not None],
                               "buffers")
        elif check_parameters:
            self._check_values(prints)
        self._root = self._units[0]
        for unit in self._units[1:]:
            self._hooks.append(unit.module.register_forward_pre_hook(
                lambda m, inputs, unit=unit: self._pre_forward(unit)))
            self._hooks.append(unit.module.register_forward_hook(
                lambda m, inputs, output, unit=unit: self._post_forward(unit)))

    # ---- construction ---------------------------------------------------------------

    def _setup_process_sets(self, process_set):
        strategy = self.sharding_strategy
        if strategy == ShardingStrategy.HYBRID_SHARD:
            if not (isinstance(process_set, tuple) and len(process_set) == 2):
                raise ValueError("HYBRID_SHARD needs process_set=(shard set, replicate set), "
                                 "e.g. hybrid_process_sets(); got %r" % (process_set,))
            shard, replicate = process_set
        elif strategy == ShardingStrategy.NO_SHARD:
            shard, replicate = None, process_set
        else:
            if isinstance(process_set, tuple):
                raise ValueError("a (shard set, replicate set) pair needs HYBRID_SHARD")
            shard, replicate = process_set, None
        sets = [ps for ps in (shard, replicate) if ps is not None]
        self.process_set = process_set
        self._member = all(ps.included() for ps in sets)
        self._sets = sets
        self._shard_ps = shard
        self._repl_ps = replicate
        if not self._member:
            self._shard_world = self._shard_rank = self._repl_world = self._repl_rank = 0
            return
        self._shard_world = shard.size() if shard is not None else 1
        self._shard_rank = shard.rank() if shard is not None else 0
        self._repl_world = replicate.size() if replicate is not None else 1
        self._repl_rank = replicate.rank() if replicate is not None else 0

    def _not_member_error(self):
        return ValueError(
            "FullyShardedDataParallel %s: rank %d is not a member of %s, so it holds no shard "
            "and cannot run this model" % (self._name, basics.rank(), " and ".join(
                repr(ps) for ps in self._sets if not ps.included())))

    def _materialize_meta(self, spec, modules, param_init_fn, device):
        """Materialises the meta tensors of `modules` (those whose innermost unit is
        `spec`'s); returns `spec` with its ParamSpecs pointing at the new Parameters."""
        dev = torch.device(device) if device is not None else torch.device("cpu")
        metas = [m for m in modules if any(t is not None and t.is_meta for t in itertools.chain(
            m._parameters.values(), m._buffers.values()))]
        if not metas:
            return spec
        for m in metas:
            if param_init_fn is not None:
                param_init_fn(m)
            else:
                with torch.no_grad():
                    for name, p in list(m._parameters.items()):
                        if p is not None and p.is_meta:
                            m._parameters[name] = torch.nn.Parameter(
                                torch.empty_like(p, device=dev), requires_grad=p.requires_grad)
                    for name, b in list(m._buffers.items()):
                        if b is not None and b.is_meta:
                            m._buffers[name] = torch.empty_like(b, device=dev)
                if hasattr(m, "reset_parameters"):
                    m.reset_parameters()
            for t in itertools.chain(m._parameters.values(), m._buffers.values()):
                if t is not None and t.is_meta:
                    raise ValueError("param_init_fn left a meta tensor in %s" % type(m).__name__)
        params = []
        for p in spec.params:
            owner, attr = p.owners[0]
            new = owner._parameters[attr]
            if new.device.type not in ("cpu", "cuda"):
                raise ValueError("parameter %r is on %s after initialisation" % (p.fqn, new.device))
            params.append(p._replace(param=new))
        return spec._replace(params=params)

    def _check_units(self, specs):
        """Local checks, then the layout across the set(s): every rank must describe
        every unit alike."""
        for spec in specs:
            ps = [s.param for s in spec.params]
            for s in spec.params:
                p = s.param
                if p.device.type not in ("cpu", "cuda", "meta") or not p.dtype.is_floating_point:
                    raise ValueError("FullyShardedDataParallel takes floating-point CPU or CUDA "
                                     "parameters; %r is %s on %s" % (s.fqn, p.dtype, p.device))
                if (p.dtype, p.device, p.requires_grad) != (ps[0].dtype, ps[0].device,
                                                            ps[0].requires_grad):
                    raise ValueError(
                        "unit %r mixes parameters: %r is %s on %s (requires_grad=%s) but %r is "
                        "%s on %s (requires_grad=%s); a unit is one flat tensor, so wrap them "
                        "in different units" % (spec.name or "<root>", spec.params[0].fqn,
                                                ps[0].dtype, ps[0].device, ps[0].requires_grad,
                                                s.fqn, p.dtype, p.device, p.requires_grad))
        mine = [(spec.name, [(s.fqn, tuple(s.param.shape), str(s.param.dtype))
                             for s in spec.params]) for spec in specs]
        for ps in self._sets:
            everyone = allgather_object(mine, name="%s.layout" % self._name, process_set=ps)
            self._compare(everyone, ps, "layout", self._describe_layout_difference)

    @staticmethod
    def _describe_layout_difference(a, b):
        units_a, units_b = [u for u, _ in a], [u for u, _ in b]
        if units_a != units_b:
            return "units %s against %s" % ([u or "<root>" for u in units_a],
                                            [u or "<root>" for u in units_b])
        for (unit, pa), (_, pb) in zip(a, b):
            if pa != pb:
                for x, y in itertools.zip_longest(pa, pb):
                    if x != y:
                        return "unit %r parameter %s against %s" % (
                            unit or "<root>", "%s %s %s" % x if x else "(none)",
                            "%s %s %s" % y if y else "(none)")
        return "differs"

    def _compare(self, everyone, ps, what, describe):
        ranks = ps.ranks
        ref = everyone[0]
        bad = [i for i, x in enumerate(everyone) if x != ref]
        if bad:
            raise ValueError(
                "FullyShardedDataParallel %s: the ranks of %r disagree on the module's %s: rank "
                "%d has %s (ranks %s differ from rank %d); every rank must wrap the same module"
                % (self._name, ps, what, ranks[bad[0]], describe(everyone[bad[0]], ref),
                   [ranks[i] for i in bad], ranks[0]))

    def _check_values(self, mine):
        """Compares [(unit name, [(parameter name, fingerprint)])] across the set(s)."""
        for ps in self._sets:
            everyone = allgather_object(mine, name="%s.values" % self._name, process_set=ps)

            def describe(a, b):
                for (unit, pa), (_, pb) in zip(a, b):
                    diff = [x[0] for x, y in zip(pa, pb) if x != y]
                    if diff:
                        return ("different values in unit %r, parameter%s %s (pass "
                                "sync_module_states=True to broadcast the first rank's)"
                                % (unit or "<root>", "s" if len(diff) > 1 else "",
                                   ", ".join(diff)))
                return "different values"
            self._compare(everyone, ps, "parameter values", describe)

    def _named_buffer_slots(self):
        for name, m in self.module.named_modules():
            for b_name, b in m._buffers.items():
                yield m, b_name, b

    def _sync_tensors(self, tensors, what):
        """Broadcasts `tensors` in place from the first rank of the replicate set, then
        of the shard set, so every rank ends with the first rank's values."""
        for ps in ([self._repl_ps] if self._repl_ps is not None else []) + (
                [self._shard_ps] if self._shard_ps is not None else []):
            if ps.size() > 1 and tensors:
                broadcast_parameters([("%s.sync.%s.%d.%d" % (self._name, what,
                                                             ps.process_set_id, i), t)
                                      for i, t in enumerate(tensors)],
                                     root_rank=ps.ranks[0], process_set=ps)

    def _make_unit(self, index, spec):
        params = [s.param for s in spec.params]
        world, rank = self._shard_world, self._shard_rank
        layout = plan_flat_layout([p.numel() for p in params], world)
        if params:
            master_dtype, device = params[0].dtype, params[0].device
            requires_grad = params[0].requires_grad
        else:
            master_dtype, device, requires_grad = torch.get_default_dtype(), torch.device(
                "cpu"), False
        lo, hi = layout.shard_range(rank)
        shard = torch.zeros(hi - lo, dtype=master_dtype, device=device)
        with torch.no_grad():
            for i, start, end, at in layout.pieces(rank):
                shard[at:at + end - start].copy_(params[i].detach().reshape(-1)[start:end])
        shard = torch.nn.Parameter(shard, requires_grad=requires_grad)
        mp = self.mixed_precision
        compute = mp.param_dtype if mp is not None and mp.param_dtype is not None else master_dtype
        reduce = mp.reduce_dtype if mp is not None and mp.reduce_dtype is not None else compute
        unit = _Unit(index, spec, layout, shard, compute, reduce)
        for s in spec.params:
            for owner, attr in s.owners:
                del owner._parameters[attr]
        unit.set_placeholders()
        self._full_ids[id(unit.full)] = unit
        if requires_grad and params:
            # The AccumulateGrad node records the tensor's shape when it is made, and
            # checks every gradient against it: make it while the shape is the gathered one.
            unit.full.data = torch.empty(layout.padded, dtype=compute, device=device)
            unit.acc = unit.full.expand_as(unit.full).grad_fn.next_functions[0][0]
            unit.full.data = unit.empty
            unit.acc.register_hook(lambda *unused, unit=unit: self._post_backward(unit))
        return unit

    # ---- the optimizer's view ---------------------------------------------------------

    def parameters(self, recurse=True):
        """This rank's flat shards (one per unit with parameters; none on a rank
        outside the set). An optimizer built over them is checked (check_optimizer)
        as it takes them: this generator looks at the frame that consumes it."""
        caller = sys._getframe(1).f_locals.get("self")
        if isinstance(caller, torch.optim.Optimizer):
            check_optimizer(caller)
        yield from self._flat.parameters()

    # ---- forward --------------------------------------------------------------------

    def forward(self, *args, **kwargs):
        if not self._member:
            raise self._not_member_error()
        self._begin_forward()
        mp = self.mixed_precision
        if mp is not None and mp.param_dtype is not None:
            args = _cast_floating(args, mp.param_dtype)
            kwargs = _cast_floating(kwargs, mp.param_dtype)
        try:
            with saved_tensors_hooks(self._pack, self._unpack):
                self._pre_forward(self._root)
                out = self.module(*args, **kwargs)
                self._post_forward(self._root)
        except BaseException:
            self._drain(failed=True)
            raise
        if torch.is_grad_enabled():
            hooked = False
            for t in _tensors_in(out):
                if t.requires_grad:
                    t.register_hook(self._root_pre_backward)
                    hooked = True
            if not hooked:
                self._free(self._root)
        return out

    def _begin_forward(self):
        if any(u.rs_handle is not None or u.ar_handle is not None for u in self._units):
            self._drain()  # A backward pass that ended without its callback.
        if self._cur_order:
            self._fwd_order = self._cur_order
        self._cur_order = []
        for unit in self._units:
            if unit.materialized and unit.version != unit.shard._version:
                self._free(unit)

    def _order(self, backward=False):
        """The expected order of the units but the root: in backward, the forward
        just run; in forward, the previous forward's (registration order at first)."""
        if backward and self._cur_order:
            return self._cur_order
        return self._fwd_order or self._units[1:]

    def _neighbour(self, unit, step):
        order = self._order(backward=step < 0)
        try:
            i = order.index(unit)
        except ValueError:
            return order[0] if step > 0 and unit is self._root and order else None
        j = i + step
        return order[j] if 0 <= j < len(order) else None

    def _pre_forward(self, unit):
        if unit is not self._root and unit not in self._cur_order:
            self._cur_order.append(unit)
        self._materialize(unit)
        unit.set_views()
        if self.forward_prefetch:
            nxt = self._neighbour(unit, 1)
            if nxt is not None:
                self._issue_gather(nxt)
        self._event("fwd_begin", unit)
        unit.t_forward = time.time()

    def _post_forward(self, unit):
        self._event("fwd_end", unit)
        self._span("forward %s" % unit.name, unit.t_forward, time.time(), "compute")
        order = self._order()
        # Kept for backward: the root (torch FSDP's rule), every unit under SHARD_GRAD_OP
        # and NO_SHARD, and the unit expected to run last, whose backward comes first.
        keep = (torch.is_grad_enabled() and unit.requires_grad and
                (unit is self._root or self.sharding_strategy in (ShardingStrategy.SHARD_GRAD_OP,
                                                                   ShardingStrategy.NO_SHARD)
                 or (order and unit is order[-1])))
        if not keep:
            self._free(unit)

    # ---- gathering ------------------------------------------------------------------

    def _send_buffer(self, unit):
        return unit.shard.detach().to(unit.compute_dtype, copy=True)

    def _issue_gather(self, unit):
        if unit.materialized or unit.gather is not None or not unit.params:
            return
        if self._shard_world == 1:
            return  # Nothing to communicate: _materialize takes the shard itself.
        handle = allgather_async(self._send_buffer(unit), name="%s.ag%d" % (self._name, unit.index),
                                 process_set=self._shard_ps)
        unit.gather = (handle, unit.shard._version)
        self._event("issue_ag", unit)
        self._note_peak()

    def _materialize(self, unit):
        if unit.materialized and unit.version == unit.shard._version:
            return
        if unit.materialized:
            self._free(unit)
        if not unit.params:
            unit.materialized = True
            unit.version = unit.shard._version
            return
        if unit.gather is not None and unit.gather[1] != unit.shard._version:
            synchronize(unit.gather[0])  # Stale: the shard changed since it was sent.
            unit.gather = None
        if self._shard_world == 1:
            full = (unit.shard.detach() if unit.compute_dtype == unit.master_dtype
                    else unit.shard.detach().to(unit.compute_dtype))
        else:
            if unit.gather is None:
                self._issue_gather(unit)
            t0 = time.time()
            full = synchronize(unit.gather[0])
            self._span("wait allgather %s" % unit.name, t0, time.time(), "wait")
            unit.gather = None
        unit.full.data = full
        unit.materialized = True
        unit.version = unit.shard._version
        self._note_peak()

    def _free(self, unit):
        if unit.materialized:
            unit.full.data = unit.empty
            unit.materialized = False
            unit.set_placeholders()

    # ---- saved tensors --------------------------------------------------------------

    def _pack(self, t):
        base = t._base
        if base is not None:
            unit = self._full_ids.get(id(base))
            if unit is not None and base is unit.full:
                return _Saved(unit, t)
        return t

    def _unpack(self, x):
        if not isinstance(x, _Saved):
            return x
        unit = x.unit
        if not unit.in_backward:
            self._begin_backward(unit)
        if not unit.materialized:
            self._materialize(unit)
        return unit.full.detach().as_strided(x.size, x.stride, x.offset)

    # ---- backward -------------------------------------------------------------------

    def _queue_final(self):
        if not self._final_queued:
            self._final_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._final_callback)

    def _root_pre_backward(self, grad):
        self._queue_final()
        if not self._root.in_backward:
            self._begin_backward(self._root)
        return grad

    def _begin_backward(self, unit):
        unit.in_backward = True
        self._event("bwd_begin", unit)
        self._queue_final()
        if unit is not self._root or self._root.materialized:
            self._materialize(unit)
        if self.backward_prefetch:
            order = self._order(backward=True)
            prev = self._neighbour(unit, -1) if unit is not self._root else (
                order[-1] if order else None)
            # Skip the units the last pass did not re-gather (e.g. the first layer, whose
            # input needs no gradient, needs only its input in backward, not its weight).
            while prev is not None and prev.bwd_needed is False:
                prev = self._neighbour(prev, -1)
            if prev is not None:
                self._issue_gather(prev)
        unit.t_backward = time.time()

    def _post_backward(self, unit):
        self._queue_final()
        grad = unit.full.grad
        unit.full.grad = None
        if grad is None:
            return
        if unit.t_backward is not None:
            self._span("backward %s" % unit.name, unit.t_backward, time.time(), "compute")
        unit.t_backward = None
        self._free(unit)
        self._reduce(unit, grad)

    def _reduce(self, unit, grad):
        unit.reduced = True
        grad = grad.detach()
        if grad.dtype != unit.reduce_dtype:
            grad = grad.to(unit.reduce_dtype)
        if self._shard_world == 1:
            self._reduced(unit, grad)
            return
        unit.rs_handle = reducescatter_async(grad, name="%s.rs%d" % (self._name, unit.index),
                                             op=Average, process_set=self._shard_ps)
        unit.rs_bytes = grad.numel() * grad.element_size()
        self._event("issue_rs", unit)
        self._rs_queue.append(unit)
        self._note_peak()
        while len(self._rs_queue) > self.max_inflight_reduces:
            self._finish_rs(self._rs_queue.pop(0))

    def _finish_rs(self, unit):
        self._event("wait_rs", unit)
        t0 = time.time()
        out = synchronize(unit.rs_handle)
        self._span("wait reducescatter %s" % unit.name, t0, time.time(), "wait")
        unit.rs_handle = None
        self._reduced(unit, out)

    def _reduced(self, unit, out):
        if self._repl_world > 1:
            unit.ar_handle = allreduce_async(out, name="%s.ar%d" % (self._name, unit.index),
                                             op=Average, process_set=self._repl_ps)
        else:
            self._accumulate(unit, out)

    def _accumulate(self, unit, out):
        out = out.to(unit.master_dtype)
        if unit.shard.grad is None:
            unit.shard.grad = out if out.is_contiguous() else out.contiguous()
        else:
            unit.shard.grad.add_(out)

    def _final_callback(self):
        self._event("final", None)
        for unit in self._units:
            if unit.requires_grad and unit.params and not unit.reduced:
                # No gradient reached this unit here; others may have one: reduce zeros.
                self._free(unit)
                self._reduce(unit, torch.zeros(unit.layout.padded, dtype=unit.reduce_dtype,
                                               device=unit.device))
        for unit in self._units:
            unit.bwd_needed = unit.in_backward
        self._drain()

    def _drain(self, failed=False):
        """Waits for every collective in flight (results added to the gradients unless
        `failed`), frees every gathered unit and resets the pass's state."""
        first_error = None
        for unit in self._rs_queue + [u for u in self._units if u.ar_handle is not None]:
            try:
                if unit.rs_handle is not None:
                    if failed:
                        synchronize(unit.rs_handle)
                        unit.rs_handle = None
                    else:
                        self._finish_rs(unit)
                if unit.ar_handle is not None:
                    out = synchronize(unit.ar_handle)
                    unit.ar_handle = None
                    if not failed:
                        self._accumulate(unit, out)
            except Exception as e:  # Still wait for the others before raising.
                unit.rs_handle = unit.ar_handle = None
                first_error = first_error or e
        self._rs_queue = []
        for unit in self._units:
            if unit.gather is not None:
                try:
                    synchronize(unit.gather[0])
                except Exception as e:
                    first_error = first_error or e
                unit.gather = None
            self._free(unit)
            unit.full.grad = None
            unit.reduced = False
            unit.in_backward = False
        self._final_queued = False
        if first_error is not None and not failed:
            raise first_error

    # ---- accounting and tracing --------------------------------------------------------

    def reset_peak_stats(self):
        """Restarts the high-water marks (peak_unsharded_bytes, peak_units)."""
        self.peak_unsharded_bytes = 0
        self.peak_units = 0

    def _note_peak(self):
        live = [u for u in self._units if u is not self._root
                and (u.materialized or u.gather is not None)]
        params = sum(u.gathered_bytes(self._shard_world) for u in live)
        if self._root.materialized:
            params += self._root.gathered_bytes(self._shard_world)
        grads = sum(u.rs_bytes for u in self._rs_queue)
        self.peak_unsharded_bytes = max(self.peak_unsharded_bytes, params + grads)
        self.peak_units = max(self.peak_units, len(live))

    def _event(self, kind, unit):
        if self.trace is not None:
            self.trace.append({"event": kind, "unit": None if unit is None else unit.index,
                               "t": time.time()})

    def _span(self, name, t0, t1, row):
        if self.trace is not None and t0 is not None:
            self.trace.append({"span": name, "t0": t0, "t1": t1, "row": row})

    def shard_numel(self):
        """Elements of this rank's shards (padding included)."""
        return sum(u.shard.numel() for u in self._units)

    def shard_bytes(self):
        """Bytes of this rank's master shards."""
        return sum(u.shard.numel() * u.shard.element_size() for u in self._units)

    def gradient_bytes(self):
        """Bytes of the shards' gradients held now."""
        return sum(u.shard.grad.numel() * u.shard.grad.element_size() for u in self._units
                   if u.shard.grad is not None)

    def unit_bytes(self):
        """{unit name: bytes of its gathered flat tensor}."""
        return collections.OrderedDict((u.name, u.full_bytes) for u in self._units)

    def gathered_units(self):
        """Names of the units gathered now (none between steps)."""
        return [u.name for u in self._units if u.materialized and u.params]

    @property
    def units(self):
        """[(unit name, [parameter names])], root first."""
        return [(u.name, [s.fqn for s in u.params]) for u in self._units]

    # ---- full parameters ---------------------------------------------------------------

    def _gather_full(self, unit, dtype=None):
        """The unit's flat tensor (master dtype) gathered now, synchronously."""
        if self._shard_world == 1:
            return unit.shard.detach().clone()
        return synchronize(allgather_async(unit.shard.detach().clone(),
                                           name="%s.full%d" % (self._name, unit.index),
                                           process_set=self._shard_ps))

    @contextlib.contextmanager
    def summon_full_params(self, writeback=True):
        """Within the block, the module's parameters are full tensors (master dtype,
        gathered from the shards); with writeback, changes to them are copied back
        into the shards on exit. Every rank of the set must enter it."""
        if not self._member:
            raise self._not_member_error()
        self._drain()
        fulls = []
        for unit in self._units:
            flat = self._gather_full(unit) if unit.params else None
            fulls.append(flat)
            if flat is not None:
                for spec, piece, shape in zip(unit.params, flat.split(unit.split_sizes),
                                              unit.shapes):
                    for owner, attr in spec.owners:
                        owner.__dict__[attr] = piece.view(shape)
        try:
            yield self.module
        finally:
            for unit, flat in zip(self._units, fulls):
                if flat is None:
                    continue
                if writeback:
                    lo, hi = unit.layout.shard_range(self._shard_rank)
                    with torch.no_grad():
                        unit.shard.copy_(flat[lo:hi])
                unit.set_placeholders()

    # ---- checkpoints ------------------------------------------------------------------

    def full_state_dict(self, rank0_only=False, cpu_offload=True):
        """The unwrapped module's state_dict (its own names; master dtype), gathered
        unit by unit; every rank of the set(s) must call it. With rank0_only, only
        the set's first rank gets it (others get an empty dict). cpu_offload puts
        the tensors on the CPU."""
        if not self._member:
            raise self._not_member_error()
        self._drain()
        keep = not rank0_only or (self._shard_rank == 0 and self._repl_rank == 0)
        values = {}
        for unit in self._units:
            if not unit.params:
                continue
            flat = self._gather_full(unit)
            if keep:
                for spec, piece, shape in zip(unit.params, flat.split(unit.split_sizes),
                                              unit.shapes):
                    t = piece.view(shape).clone()
                    values[spec.fqn] = t.cpu() if cpu_offload else t
            del flat
        if not keep:
            return collections.OrderedDict()
        buffers = self._buffers_by_name()
        out = collections.OrderedDict()
        for key in self._sd_keys:
            if key in values:
                out[key] = values[key]
            elif key in buffers:
                b = buffers[key].detach().clone()
                out[key] = b.cpu() if cpu_offload else b
        return out

    def _buffers_by_name(self):
        return {name: b for name, b in self.module.named_buffers()}

    def load_full_state_dict(self, state_dict, rank0_only=False, strict=True):
        """Loads a full (unwrapped module's) state_dict into the shards and buffers;
        every rank of the set(s) must call it. With rank0_only, only the first
        rank's `state_dict` is read (others may pass None) and it is broadcast.
        Returns (missing keys, unexpected keys); with strict, either raises."""
        if not self._member:
            raise self._not_member_error()
        self._drain()
        source = (self._shard_rank == 0 and self._repl_rank == 0) if rank0_only else True
        keys = set(self._sd_keys)
        if source:
            missing = [k for k in self._sd_keys if k not in state_dict]
            unexpected = [k for k in state_dict if k not in keys]
        else:
            missing, unexpected = [], []
        if rank0_only:
            missing, unexpected = self._bcast_object((missing, unexpected), "keys")
        if strict and (missing or unexpected):
            raise RuntimeError("Error(s) in loading state_dict for FullyShardedDataParallel: "
                               "missing keys %s, unexpected keys %s" % (missing, unexpected))
        for unit in self._units:
            if not unit.params:
                continue
            if source:
                flat = torch.zeros(unit.layout.padded, dtype=unit.master_dtype, device=unit.device)
                for spec, off, n, shape in zip(unit.params, unit.layout.offsets,
                                               unit.layout.numels, unit.shapes):
                    if spec.fqn in state_dict:
                        v = state_dict[spec.fqn]
                        if tuple(v.shape) != shape:
                            raise RuntimeError("size mismatch for %s: the checkpoint has %s, the "
                                               "model %s" % (spec.fqn, tuple(v.shape), shape))
                        flat[off:off + n].copy_(v.reshape(-1))
                    else:
                        with torch.no_grad():
                            flat[off:off + n].copy_(self._current_param(unit, spec))
            else:
                flat = torch.empty(unit.layout.padded, dtype=unit.master_dtype, device=unit.device)
            if rank0_only:
                self._bcast(flat, "load%d" % unit.index)
            lo, hi = unit.layout.shard_range(self._shard_rank)
            with torch.no_grad():
                unit.shard.copy_(flat[lo:hi])
        buffers = self._buffers_by_name()
        for i, key in enumerate(k for k in self._sd_keys if k in buffers):
            b = buffers[key]
            if source and key in state_dict:
                with torch.no_grad():
                    b.copy_(state_dict[key])
            if rank0_only:
                self._bcast(b, "loadbuf%d" % i)
        return collections.namedtuple("IncompatibleKeys", "missing_keys unexpected_keys")(
            missing, unexpected)

    def _current_param(self, unit, spec):
        """The full current value of one parameter (only on the sourcing rank, for a
        non-strict load that leaves it out): gathered, which is collective-free only
        when the shard set has one rank."""
        if self._shard_world != 1:
            raise RuntimeError("a non-strict load without %r needs it in the checkpoint when "
                               "the model is sharded" % spec.fqn)
        i = unit.params.index(spec)
        off, n = unit.layout.offsets[i], unit.layout.numels[i]
        return unit.shard.detach()[off:off + n]

    def _bcast(self, t, what):
        for ps in ([self._repl_ps] if self._repl_ps is not None else []) + (
                [self._shard_ps] if self._shard_ps is not None else []):
            if ps.size() > 1:
                broadcast_(t, ps.ranks[0], name="%s.%s.%d" % (self._name, what,
                                                               ps.process_set_id),
                           process_set=ps)

    def _bcast_object(self, obj, what):
        for ps in ([self._repl_ps] if self._repl_ps is not None else []) + (
                [self._shard_ps] if self._shard_ps is not None else []):
            if ps.size() > 1:
                obj = broadcast_object(obj, ps.ranks[0], name="%s.%s.%d" % (
                    self._name, what, ps.process_set_id), process_set=ps)
        return obj

    def _layout_meta(self):
        return {"format": 1, "world": self._shard_world, "rank": self._shard_rank,
                "units": [{"name": u.name, "params": [(s.fqn, shape) for s, shape in
                                                      zip(u.params, u.shapes)],
                           "padded": u.layout.padded} for u in self._units]}

    def sharded_state_dict(self):
        """This rank's shards ("flat_param.<unit>", master dtype, cloned), the buffers
        under their names, and the layout they assume ("_fsdp")."""
        if not self._member:
            raise self._not_member_error()
        out = collections.OrderedDict()
        out["_fsdp"] = self._layout_meta()
        for unit in self._units:
            out["flat_param.%d" % unit.index] = unit.shard.detach().clone()
        buffers = self._buffers_by_name()
        for key in self._sd_keys:
            if key in buffers:
                out[key] = buffers[key].detach().clone()
        return out

    def load_sharded_state_dict(self, state_dict):
        """Loads what sharded_state_dict() returned on this rank, with the same layout
        (same units, shard set size and rank); raises ValueError saying what differs."""
        if not self._member:
            raise self._not_member_error()
        self._drain()
        meta = state_dict.get("_fsdp")
        mine = self._layout_meta()
        if meta is None:
            raise ValueError("not a sharded state dict (no '_fsdp' entry); for a full state "
                             "dict use load_full_state_dict")
        if (meta["world"], meta["rank"]) != (mine["world"], mine["rank"]):
            raise ValueError("the sharded state dict was saved by shard rank %d of %d; this is "
                             "shard rank %d of %d (load a full state dict to reshard)"
                             % (meta["rank"], meta["world"], mine["rank"], mine["world"]))
        if meta["units"] != mine["units"]:
            raise ValueError("the sharded state dict's units differ from this model's")
        with torch.no_grad():
            for unit in self._units:
                unit.shard.copy_(state_dict["flat_param.%d" % unit.index])
            buffers = self._buffers_by_name()
            for key, b in buffers.items():
                if key in state_dict:
                    b.copy_(state_dict[key])

    def set_state_dict_type(self, state_dict_type, rank0_only=False):
        """What state_dict()/load_state_dict() mean: StateDictType.FULL_STATE_DICT
        (default; rank0_only as in full_state_dict) or SHARDED_STATE_DICT."""
        if not isinstance(state_dict_type, StateDictType):
            raise ValueError("state_dict_type must be a StateDictType, got %r"
                             % (state_dict_type,))
        self._state_dict_type = state_dict_type
        self._state_dict_rank0_only = rank0_only

    @staticmethod
    @contextlib.contextmanager
    def state_dict_type(module, state_dict_type, rank0_only=False):
        """torch FSDP's context manager: sets the state dict type of every
        FullyShardedDataParallel in `module` for the block."""
        wrappers = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        before = [(w._state_dict_type, w._state_dict_rank0_only) for w in wrappers]
        for w in wrappers:
            w.set_state_dict_type(state_dict_type, rank0_only)
        try:
            yield
        finally:
            for w, (t, r) in zip(wrappers, before):
                w.set_state_dict_type(t, r)

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if self._state_dict_type == StateDictType.SHARDED_STATE_DICT:
            sd = self.sharded_state_dict()
        else:
            sd = self.full_state_dict(rank0_only=self._state_dict_rank0_only)
        if destination is None:
            destination = collections.OrderedDict()
        for k, v in sd.items():
            destination[prefix + k] = v
        return destination

    def load_state_dict(self, state_dict, strict=True):
        if self._state_dict_type == StateDictType.SHARDED_STATE_DICT:
            return self.load_sharded_state_dict(state_dict)
        return self.load_full_state_dict(state_dict, rank0_only=self._state_dict_rank0_only,
                                         strict=strict)

    # ---- gradients --------------------------------------------------------------------

    def clip_grad_norm_(self, max_norm, norm_type=2.0):
        """Clips the shards' gradients by the norm of the whole model's gradient (as
        torch.nn.utils.clip_grad_norm_ on the unwrapped model); returns that norm.
        Every rank of the set must call it."""
        if not self._member:
            raise self._not_member_error()
        norm_type = float(norm_type)
        grads = [u.shard.grad for u in self._units if u.shard.grad is not None]
        device = self._root.device if not grads else grads[0].device
        if norm_type == float("inf"):
            local = max((float(g.abs().max()) for g in grads if g.numel()), default=0.0)
            total = torch.tensor([local], dtype=torch.float64)
            if self._shard_world > 1:
                total = allreduce(total, name="%s.norm" % self._name, op=Max,
                                  process_set=self._shard_ps)
            total = float(total[0])
        else:
            local = sum(float(g.double().abs().pow(norm_type).sum()) for g in grads)
            total = torch.tensor([local], dtype=torch.float64)
            if self._shard_world > 1:
                total = allreduce(total, name="%s.norm" % self._name, op=Sum,
                                  process_set=self._shard_ps)
            total = float(total[0]) ** (1.0 / norm_type)
        coef = float(max_norm) / (total + 1e-6)
        if coef < 1:
            for g in grads:
                g.mul_(coef)
        return torch.tensor(total, device=device)

    def extra_repr(self):
        return "strategy=%s, shard %d of %d, replicas %d, units=%d, name=%s" % (
            self.sharding_strategy.name, self._shard_rank, self._shard_world, self._repl_world,
            len(self._units), self._name)


FSDP = FullyShardedDataParallel
