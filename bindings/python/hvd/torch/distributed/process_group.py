"""The torch.distributed backend "dprun": its collectives, written once
(DprunCollectives), over the classes torch lets a backend be in Python. Since
torch 2.0 they are a c10d Backend (BackendDprun) that the group
(ProcessGroupDprun, torch's ProcessGroup) registers for CPU and CUDA tensors, so
every route to a collective reaches it: torch.distributed's functions, C++
callers such as DDP's reducer, and the functional collectives DTensor uses.
torch 1.13 has no Backend class; there the group itself holds them, which its
functions and DDP reach.

Each torch.distributed call becomes one dprun collective (a few become two, see
below) on the group's process set, named by _names.CallNames, enqueued through
hvd.torch's front end (its buffers, device placement and result handling) and
completed by _completion.COMPLETER, which completes the torch future that the
returned Work wraps (torch's own _create_work_from_future, so C++ callers such as
DDP's reducer wait on it and chain on it as on any backend's Work).

How each call maps (ranks are the group's; tensors of dtypes the runtime cannot
reduce but only move, bool and complex among them, travel as their bytes):
  allreduce           allreduce in place; SUM, AVG, MIN, MAX, PRODUCT, and
                      PREMUL_SUM as a sum with the factor as prescale (complex:
                      as float pairs for SUM, AVG and PREMUL_SUM; bool: MIN, MAX
                      as uint8); BAND, BOR, BXOR are refused by name
  broadcast           broadcast in place from the root
  allgather, _allgather_base, their coalesced forms
                      allgather of each rank's flattened tensor, copied into the
                      outputs
  reduce_scatter, _reduce_scatter_base, the coalesced form
                      reducescatter of the inputs laid end to end, one row per
                      rank (SUM, AVG, PREMUL_SUM); MIN, MAX, PRODUCT: an allreduce
                      of them and this rank's slice
  alltoall, alltoall_base
                      alltoall with the per-rank splits (flattened pieces for the
                      list form); the received splits checked against the
                      expected ones
  gather, scatter     alltoall in which only the root receives (gather) or sends
                      (scatter)
  reduce              allreduce, in place on the root and into a copy elsewhere
  barrier             a one-byte allreduce, named like any call, so a barrier at
                      the place of another call is reported as a mismatch
  send, recv          through the group's torch store (the rendezvous store
                      torch.distributed gives the backend): slower than the
                      collectives, for the pairs a pipeline exchanges

Errors: a call the runtime refuses raises at once (InvalidArgumentError, ...); a
collective that fails later (a mismatch, a dead or frozen rank, a timeout)
completes its future with the runtime's error, prefixed with the call as
torch.distributed spells it and its position in the group's order.
"""
import datetime
import sys

import torch
import torch.distributed as dist

from hvd import basics
from hvd import errors
from hvd.basics import ExactName
from hvd.torch import mpi_ops
from hvd.torch.distributed import _completion
from hvd.torch.distributed import _names
from hvd.torch.distributed import _p2p

_create_work_from_future = torch._C._distributed_c10d._create_work_from_future
_ops = mpi_ops._ops

_RED = dist.ReduceOp.RedOpType if hasattr(dist.ReduceOp, "RedOpType") else dist.ReduceOp
_REDUCTIONS = {
    _RED.SUM: (mpi_ops.Sum, "SUM"),
    _RED.AVG: (mpi_ops.Average, "AVG"),
    _RED.MIN: (mpi_ops.Min, "MIN"),
    _RED.MAX: (mpi_ops.Max, "MAX"),
    _RED.PRODUCT: (mpi_ops.Product, "PRODUCT"),
}
# What the runtime reduces (hvd.torch's dtypes); anything else only moves as bytes.
_REDUCIBLE = set(mpi_ops._DTYPES)
_DEFAULT_TIMEOUT_S = 1800.0


def _reduce_op(op, what):
    """(hvd op, prescale factor) for a torch ReduceOp (or RedOpType)."""
    kind = getattr(op, "op", None) or op
    if kind in _REDUCTIONS:
        return _REDUCTIONS[kind][0], 1.0
    if kind == _RED.PREMUL_SUM:
        state = op.__getstate__() if hasattr(op, "__getstate__") else None
        if not state or len(state) < 2:
            raise errors.InvalidArgumentError(
                "dprun: %s with PREMUL_SUM needs its factor, which this torch (%s) does not "
                "expose to Python; multiply the tensor first and use SUM"
                % (what, torch.__version__))
        factor = state[1]
        if torch.is_tensor(factor):
            factor = factor.item()
        return mpi_ops.Sum, float(factor)
    raise errors.InvalidArgumentError(
        "dprun: %s: reduce op %s is not supported (SUM, AVG, MIN, MAX, PRODUCT and "
        "PREMUL_SUM are)" % (what, getattr(kind, "name", kind)))


def _called_from_torch_functions():
    """Whether the backend was called by torch.distributed's Python functions
    (directly, not through C++)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(__package__):
        frame = frame.f_back
    return frame is not None and frame.f_globals.get("__name__") == _C10D_MODULE


_C10D_MODULE = dist.distributed_c10d.__name__


def _work(future, raw=None):
    """The Work handed back for `future`: a DprunWork, whose wait() raises the
    collective's error, wherever it reaches its caller as that Python object (on
    torch 2.x, through torch's dispatch; on 1.13, when torch.distributed's functions
    called); else (torch 1.13's C++ callers, DDP's reducer) torch's own Work over
    the future, whose wait() C++ can call, the error arriving through the future."""
    if BackendDprun is not None or _called_from_torch_functions():
        return _completion.DprunWork(future, raw)
    return _create_work_from_future(future)


def _describe(what, tensors):
    parts = ", ".join("%s%s" % (str(t.dtype).replace("torch.", ""), list(t.shape))
                      for t in tensors[:4])
    more = ", ..." if len(tensors) > 4 else ""
    return "%s(%s%s)" % (what, parts, more)


def _as_bytes(t):
    """A contiguous uint8 view of `t`'s memory, one row of bytes per first-dimension
    row (a copy when `t` is not contiguous)."""
    t = t.contiguous()
    rows = t.shape[0] if t.dim() else 1
    return t.view(-1).view(torch.uint8).view(rows, -1) if t.numel() else \
        torch.empty((rows, 0), dtype=torch.uint8, device=t.device)


def _reducible(t, op, what):
    """(the tensor the runtime reduces in place of `t`, over t's memory; the hvd op):
    t itself, a complex tensor as float pairs (SUM, AVG), a bool one as uint8 with
    SUM and MAX as MAX (or), PRODUCT and MIN as MIN (and)."""
    if t.dtype in _REDUCIBLE:
        return t, op
    if t.is_complex() and op in (mpi_ops.Sum, mpi_ops.Average):
        return torch.view_as_real(t), op
    if t.dtype == torch.bool and op in _BOOL_OPS:
        return t.view(torch.uint8), _BOOL_OPS[op]
    raise errors.InvalidArgumentError(
        "dprun: %s cannot reduce %s tensors (reducible: %s; complex with SUM and AVG, bool with "
        "SUM, PRODUCT, MIN and MAX)" % (what, t.dtype, mpi_ops._SUPPORTED))


_BOOL_OPS = {mpi_ops.Sum: mpi_ops.Max, mpi_ops.Max: mpi_ops.Max, mpi_ops.Product: mpi_ops.Min,
             mpi_ops.Min: mpi_ops.Min}


class DprunCollectives:
    """One torch.distributed group's collectives over one dprun process set:
    `members` are the group's global ranks in group-rank order (ascending: dprun's
    set order), `process_set` the hvd.ProcessSet (None: the global set), `store`
    torch's store for the group."""

    def _setup(self, store, rank, members, process_set, timeout, owns_runtime):
        self._store = store
        self._members = list(members)
        self._ps = process_set
        self._set_id = basics.process_set_id(process_set)
        self._timeout_s = (timeout.total_seconds() if isinstance(timeout, datetime.timedelta)
                           else _DEFAULT_TIMEOUT_S)
        self._names = _names.CallNames(self._set_id, self._timeout_s)
        self._p2p = _p2p.PointToPoint(store, rank, self._timeout_s)
        self._owns_runtime = owns_runtime

    # ---- what torch asks of a backend ------------------------------------------------

    def getBackendName(self):
        return "dprun"

    def name(self):
        return "dprun"

    def shutdown(self):
        """torch >= 2.x's destroy_process_group: the world's group shuts dprun down
        if it started it (hvd.torch.distributed's creator did)."""
        if self._owns_runtime and basics.is_initialized():
            basics.shutdown()

    # ---- the machinery ---------------------------------------------------------------

    def _submit(self, what, tensors, enqueue, finish, devices=None):
        """Takes the call's name, enqueues it (enqueue(name) -> hvd handle) and returns
        the Work whose future finish(result) completes."""
        description = _describe(what, tensors)
        name, index, done = self._names.take(description)
        prefix = "dprun: %s, call %d of process group %d (as '%s')" % (
            description, index, self._set_id, name)
        try:
            handle = enqueue(ExactName(name))
        except BaseException:
            done.set()
            raise
        raw, future = _completion.new_future(devices)
        _completion.COMPLETER.add(
            _completion.Pending(handle, finish, raw, done, lambda: prefix, bool(devices)))
        return _work(future, raw)

    def _devices(self, tensors):
        devs = sorted({t.device for t in tensors if t.device.type == "cuda"}, key=str)
        return devs or None

    def _one(self, tensors, what):
        if len(tensors) != 1:
            raise errors.InvalidArgumentError(
                "dprun: %s takes one tensor per call, got %d" % (what, len(tensors)))
        return tensors[0]

    def _set_rank(self, group_rank, what):
        if not 0 <= group_rank < len(self._members):
            raise errors.InvalidArgumentError(
                "dprun: %s: rank %d is not in this group of %d" % (what, group_rank,
                                                                   len(self._members)))
        return self._members[group_rank]

    def _done_work(self, value):
        raw, future = _completion.new_future()
        raw.set_result(value)
        return _work(future, raw)

    # ---- allreduce -------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        t = self._one(tensors, "all_reduce")
        op, pre = _reduce_op(opts.reduceOp if opts is not None else _RED.SUM, "all_reduce")
        view, op = _reducible(t, op, "all_reduce")
        if self.size() == 1:  # every reduction of one tensor is itself (scaled)
            if pre != 1.0:
                view.mul_(pre)
            return self._done_work(tensors)
        return self._submit("all_reduce", tensors, lambda name: _ops.allreduce_async(
            view, name=name, op=op, prescale_factor=pre, process_set=self._ps, inplace=True),
            lambda _: tensors, self._devices(tensors))

    def allreduce_coalesced(self, tensors, opts=None):
        op, pre = _reduce_op(opts.reduceOp if opts is not None else _RED.SUM,
                             "all_reduce_coalesced")
        views = [_reducible(t, op, "all_reduce_coalesced") for t in tensors]
        if len({o for _, o in views}) > 1:
            raise errors.InvalidArgumentError(
                "dprun: all_reduce_coalesced: bool tensors cannot be coalesced with others")
        op = views[0][1] if views else op
        return self._submit(
            "all_reduce_coalesced", tensors, lambda name: _ops.grouped_allreduce_async(
                [v for v, _ in views], name=name, op=op, prescale_factor=pre, process_set=self._ps,
                inplace=True), lambda _: tensors, self._devices(tensors))

    # ---- broadcast -------------------------------------------------------------------

    def broadcast(self, tensors, opts):
        t = self._one(tensors, "broadcast")
        root = self._set_rank(opts.rootRank, "broadcast")
        moved = t if t.dtype in _REDUCIBLE else _as_bytes(t)

        def finish(_):
            if moved is not t and moved.data_ptr() != t.data_ptr():
                t.copy_(moved.view(-1).view(t.dtype).view(t.shape))
            return tensors
        return self._submit("broadcast", tensors, lambda name: _ops.broadcast_async(
            moved, root, name=name, process_set=self._ps, inplace=True), finish,
            self._devices(tensors))

    # ---- allgather -------------------------------------------------------------------

    def _gather_rows(self, what, inputs, write, all_tensors):
        """An allgather of each input as one row of bytes or elements per rank;
        write(results) places the gathered [ranks, n] tensors."""
        rows = [t.reshape(1, -1) if t.dtype in _REDUCIBLE else _as_bytes(t).reshape(1, -1)
                for t in inputs]
        if len(rows) == 1:
            enqueue = lambda name: _ops.allgather_async(  # noqa: E731
                rows[0], name=name, process_set=self._ps)

            def finish(result):
                write([result])
                return all_tensors
        else:
            enqueue = lambda name: _ops.grouped_allgather_async(  # noqa: E731
                rows, name=name, process_set=self._ps)

            def finish(results):
                write(results)
                return all_tensors
        return self._submit(what, inputs, enqueue, finish, self._devices(inputs))

    @staticmethod
    def _place(gathered, out):
        """Copies a gathered row (elements, or bytes) into `out`."""
        if gathered.dtype == out.dtype:
            out.copy_(gathered.view(out.shape))
        else:
            out.copy_(gathered.view(-1).view(out.dtype).view(out.shape))

    def allgather(self, output_tensors, input_tensors, opts=None):
        if len(input_tensors) != 1 or len(output_tensors) != 1:
            raise errors.InvalidArgumentError(
                "dprun: all_gather takes one input and one output list per call")
        outs = output_tensors[0]
        if len(outs) != self.size():
            raise errors.InvalidArgumentError(
                "dprun: all_gather: the output list has %d tensors, the group %d ranks"
                % (len(outs), self.size()))

        def write(results):
            for r, out in enumerate(outs):
                self._place(results[0][r], out)
        return self._gather_rows("all_gather", input_tensors, write, output_tensors)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        def write(results):
            for result, outs in zip(results, output_lists):
                for r, out in enumerate(outs):
                    self._place(result[r], out)
        return self._gather_rows("all_gather_coalesced", list(input_list), write, output_lists)

    def _allgather_base(self, output, input, opts=None):
        def write(results):
            self._place(results[0], output)
        return self._gather_rows("all_gather_into_tensor", [input], write, [output])

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        def write(results):
            for result, out in zip(results, outputs):
                self._place(result, out)
        return self._gather_rows("all_gather_into_tensor_coalesced", list(inputs), write, outputs)

    # ---- reduce_scatter --------------------------------------------------------------

    def _scatter_reduce(self, what, stacked, outputs, op_arg):
        """Reduces `stacked` ([ranks, n] each, one per output) across the group and
        leaves row `rank` of each in its output."""
        op, pre = _reduce_op(op_arg if op_arg is not None else _RED.SUM, what)
        for s in stacked:
            if s.dtype not in _REDUCIBLE:
                raise errors.InvalidArgumentError(
                    "dprun: %s cannot reduce %s tensors" % (what, s.dtype))
        me = self.rank()
        if op in (mpi_ops.Sum, mpi_ops.Average):
            if len(stacked) == 1:
                enqueue = lambda name: _ops.reducescatter_async(  # noqa: E731
                    stacked[0], name=name, op=op, prescale_factor=pre, process_set=self._ps)
            else:
                enqueue = lambda name: _ops.grouped_reducescatter_async(  # noqa: E731
                    stacked, name=name, op=op, prescale_factor=pre, process_set=self._ps)

            def finish(results):
                results = results if isinstance(results, list) else [results]
                for result, out in zip(results, outputs):
                    out.copy_(result.view(out.shape))
                return outputs
        else:
            enqueue = lambda name: _ops.grouped_allreduce_async(  # noqa: E731
                stacked, name=name, op=op, prescale_factor=pre, process_set=self._ps,
                inplace=True)

            def finish(_):
                for s, out in zip(stacked, outputs):
                    out.copy_(s[me].view(out.shape))
                return outputs
        return self._submit(what, outputs, enqueue, finish, self._devices(outputs))

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        if len(output_tensors) != 1 or len(input_tensors) != 1:
            raise errors.InvalidArgumentError(
                "dprun: reduce_scatter takes one output and one input list per call")
        out, ins = output_tensors[0], input_tensors[0]
        if len(ins) != self.size() or any(x.numel() != out.numel() for x in ins):
            raise errors.InvalidArgumentError(
                "dprun: reduce_scatter needs %d inputs of %d elements each (the output's), got "
                "%s" % (self.size(), out.numel(), [x.numel() for x in ins]))
        stacked = torch.stack([x.reshape(-1) for x in ins])
        return self._scatter_reduce("reduce_scatter", [stacked], [out],
                                    opts.reduceOp if opts is not None else None)

    def _reduce_scatter_base(self, output, input, opts=None):
        if input.numel() != output.numel() * self.size():
            raise errors.InvalidArgumentError(
                "dprun: reduce_scatter_tensor: the input has %d elements, not the output's %d "
                "times the group's %d ranks" % (input.numel(), output.numel(), self.size()))
        stacked = input.reshape(self.size(), -1)
        if not stacked.is_contiguous():
            stacked = stacked.contiguous()
        return self._scatter_reduce("reduce_scatter_tensor", [stacked], [output],
                                    opts.reduceOp if opts is not None else None)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        stacked = [x.reshape(self.size(), -1).contiguous() for x in inputs]
        return self._scatter_reduce("reduce_scatter_tensor_coalesced", stacked, list(outputs),
                                    opts.reduceOp if opts is not None else None)

    # ---- alltoall, gather, scatter ---------------------------------------------------

    def _alltoall_flat(self, what, send, splits, receive, described):
        """An alltoall of the 1-D tensor `send` with `splits` elements to each rank;
        receive(result, received_splits) places what arrived."""
        def finish(result):
            output, received = result
            receive(output, [int(x) for x in received])
            return described
        return self._submit(what, described, lambda name: _ops.alltoall_async(
            send, splits=splits, name=name, process_set=self._ps), finish,
            self._devices(described))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        rows = input.shape[0] if input.dim() else 1
        n = self.size()
        if input_split_sizes:
            splits = [int(x) for x in input_split_sizes]
        else:
            if rows % n:
                raise errors.InvalidArgumentError(
                    "dprun: all_to_all_single: %d rows do not split evenly over %d ranks"
                    % (rows, n))
            splits = [rows // n] * n
        expected = ([int(x) for x in output_split_sizes] if output_split_sizes
                    else [output.shape[0] // n] * n if output.dim() else None)
        moved = input if input.dtype in _REDUCIBLE else _as_bytes(input)

        def finish(result):
            got, received = result
            received = [int(x) for x in received]
            if expected is not None and received != expected:
                raise errors.InvalidArgumentError(
                    "dprun: all_to_all_single: this rank expected %s rows from each rank and "
                    "received %s" % (expected, received))
            self._place(got, output)
            return [output]
        return self._submit("all_to_all_single", [input], lambda name: _ops.alltoall_async(
            moved, splits=splits, name=name, process_set=self._ps), finish,
            self._devices([input, output]))

    @staticmethod
    def _flat(t):
        return t.reshape(-1) if t.dtype in _REDUCIBLE else _as_bytes(t).reshape(-1)

    @staticmethod
    def _unflatten_into(piece, out):
        if piece.numel() * piece.element_size() != out.numel() * out.element_size():
            raise errors.InvalidArgumentError(
                "dprun: received %d bytes for a tensor of %d" % (
                    piece.numel() * piece.element_size(), out.numel() * out.element_size()))
        DprunCollectives._place(piece, out)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        n = self.size()
        if len(input_tensors) != n or len(output_tensors) != n:
            raise errors.InvalidArgumentError(
                "dprun: all_to_all needs %d inputs and outputs, got %d and %d"
                % (n, len(input_tensors), len(output_tensors)))
        flats = [self._flat(t) for t in input_tensors]
        send = torch.cat(flats) if flats else torch.empty(0)

        def receive(got, received):
            for piece, out in zip(torch.split(got, received), output_tensors):
                self._unflatten_into(piece, out)
        return self._alltoall_flat("all_to_all", send, [f.numel() for f in flats], receive,
                                   list(output_tensors))

    def gather(self, output_tensors, input_tensors, opts):
        t = self._one(input_tensors, "gather")
        root = opts.rootRank
        flat = self._flat(t)
        splits = [flat.numel() if r == root else 0 for r in range(self.size())]
        outs = output_tensors[0] if output_tensors else []
        if self.rank() == root and len(outs) != self.size():
            raise errors.InvalidArgumentError(
                "dprun: gather: the root's output list has %d tensors, the group %d ranks"
                % (len(outs), self.size()))

        def receive(got, received):
            if self.rank() == root:
                for piece, out in zip(torch.split(got, received), outs):
                    self._unflatten_into(piece, out)
        return self._alltoall_flat("gather", flat, splits, receive, list(input_tensors))

    def scatter(self, output_tensors, input_tensors, opts):
        out = self._one(output_tensors, "scatter")
        root = opts.rootRank
        if self.rank() == root:
            ins = input_tensors[0] if input_tensors else []
            if len(ins) != self.size():
                raise errors.InvalidArgumentError(
                    "dprun: scatter: the root's input list has %d tensors, the group %d ranks"
                    % (len(ins), self.size()))
            flats = [self._flat(t) for t in ins]
            send = torch.cat(flats)
            splits = [f.numel() for f in flats]
        else:
            send = self._flat(out)[:0]
            splits = [0] * self.size()

        def receive(got, received):
            self._unflatten_into(got, out)
        return self._alltoall_flat("scatter", send, splits, receive, list(output_tensors))

    # ---- reduce, barrier --------------------------------------------------------------

    def reduce(self, tensors, opts):
        t = self._one(tensors, "reduce")
        op, pre = _reduce_op(opts.reduceOp, "reduce")
        root = opts.rootRank
        view, op = _reducible(t if self.rank() == root else t.clone(), op, "reduce")
        return self._submit("reduce", tensors, lambda name: _ops.allreduce_async(
            view, name=name, op=op, prescale_factor=pre, process_set=self._ps, inplace=True),
            lambda _: tensors, self._devices(tensors))

    def barrier(self, opts=None):
        token = torch.zeros(1, dtype=torch.uint8)
        return self._submit("barrier", [token], lambda name: _ops.allreduce_async(
            token, name=name, op=mpi_ops.Sum, process_set=self._ps, inplace=True),
            lambda _: [token])

    # ---- send and recv ---------------------------------------------------------------

    def send(self, tensors, dst, tag=0):
        t = self._one(tensors, "send")
        self._set_rank(dst, "send")
        self._p2p.send(t, dst, tag)
        return self._done_work(tensors)

    def recv(self, tensors, src, tag=0):
        t = self._one(tensors, "recv")
        self._set_rank(src, "recv")
        raw, future = self._p2p.recv(t, src, tag)
        return _work(future, raw)

    def recv_anysource(self, tensors, tag=0):
        t = self._one(tensors, "recv")
        return self._p2p.recv_any(t, self.size(), tag)

    # ---- torch 2.x's names for the single-tensor forms --------------------------------

    def all_gather_single(self, output, input, opts=None):
        return self._allgather_base(output, input, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)

    def reduce_scatter_single(self, output, input, opts=None):
        return self._reduce_scatter_base(output, input, opts)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        return self.reduce_scatter_tensor_coalesced(outputs, inputs, opts)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes,
                          opts=None):
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def gather_single(self, output, input, opts):
        """The root's `output` holds every rank's `input`, end to end, in rank order."""
        rows = output.reshape(self.size(), -1) if self.rank() == opts.rootRank else None
        outs = [[rows[r] for r in range(self.size())]] if rows is not None else []
        return self.gather(outs, [input], opts)

    gather_into_tensor = gather_single


_C10D = torch._C._distributed_c10d

if hasattr(_C10D, "Backend"):
    class BackendDprun(DprunCollectives, _C10D.Backend):
        """The collectives on torch 2.x: a c10d Backend, which the group registers
        for CPU and CUDA tensors, so torch's dispatch reaches it from every route."""

        def __init__(self, store, rank, size, members, process_set, timeout, owns_runtime):
            _C10D.Backend.__init__(self, rank, size)
            self._setup(store, rank, members, process_set, timeout, owns_runtime)

        # Plain answers to what torch asks a backend (the C++ defaults, looked up
        # through Python, would call themselves).
        supports_coalescing = False
        supports_splitting = False

        def supports_tensor_alloc(self, device):
            return False

    class ProcessGroupDprun(_C10D.ProcessGroup):
        """The group on torch 2.x: torch's ProcessGroup over one BackendDprun. It
        answers itself only what must stay a Python object on its way back to
        Python: recv_anysource's Work, whose source rank torch.distributed.recv
        asks."""

        def __init__(self, store, rank, size, members, process_set, timeout,
                     owns_runtime=False):
            _C10D.ProcessGroup.__init__(self, rank, size)
            self.backend = BackendDprun(store, rank, size, members, process_set, timeout,
                                        owns_runtime)
            kind = _C10D.ProcessGroup.BackendType.CUSTOM
            for device in ("cpu", "cuda"):
                self._register_backend(torch.device(device), kind, self.backend)
            self._set_default_backend(kind)

        def getBackendName(self):
            return "dprun"

        def name(self):
            return "dprun"

        def recv_anysource(self, tensors, tag=0):
            return self.backend.recv_anysource(tensors, tag)

        def shutdown(self):
            self.backend.shutdown()
else:
    BackendDprun = None

    class ProcessGroupDprun(DprunCollectives, dist.ProcessGroup):
        """The group on torch 1.13, which has no Backend class: the ProcessGroup
        itself, which torch.distributed's functions and DDP reach."""

        def __init__(self, store, rank, size, members, process_set, timeout,
                     owns_runtime=False):
            dist.ProcessGroup.__init__(self, rank, size)
            self._setup(store, rank, members, process_set, timeout, owns_runtime)

        # batch_isend_irecv brackets its calls with these; each call runs as it comes.
        def _start_coalescing(self, *args):
            pass

        def _end_coalescing(self, *args):
            return None
