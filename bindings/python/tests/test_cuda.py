"""CUDA tensors in hvd.torch.

Runs everywhere: the ctypes mirror of hvd_allreduce_args_t against the C compiler's
layout, the arity of the device prototypes against hvd.h, the refusal of CUDA
tensors by a libhvd built without CUDA (with a tensor that only claims to be on
cuda:0), the C API reading the trailing device field, and the abandoning of a
partly enqueued device group.

Needs a GPU and a libhvd built with CUDA (skipped otherwise, on every rank alike):
every collective on CUDA tensors against the same collective on CPU tensors,
stream ordering, and DistributedOptimizer / ShardedOptimizer on model.cuda().
"""
import ctypes
import os
import re
import shutil
import subprocess
import time

import pytest
import torch

import hvd.torch as hvd
from hvd import _frontend
from hvd import _handles
from hvd import _lib
from hvd.torch import _device
from hvd.torch import mpi_ops
from helpers import dataset, flat_params, make_model

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
HEADER_DIR = os.path.join(REPO, "bindings", "c")

# ---- the C layout -------------------------------------------------------------------

_LAYOUT_PROGRAM = r"""
#include <stddef.h>
#include <stdio.h>
#include "hvd.h"
#define FIELD(f) printf("%s %zu %zu\n", #f, offsetof(hvd_allreduce_args_t, f), \
                        sizeof(((hvd_allreduce_args_t*)0)->f));
int main(void) {
  printf("sizeof %zu %zu\n", sizeof(hvd_allreduce_args_t), _Alignof(hvd_allreduce_args_t));
  printf("enum %zu %zu %zu\n", sizeof(hvd_status_t), sizeof(hvd_dtype_t),
         sizeof(hvd_reduce_op_t));
  %FIELDS%
  return 0;
}
"""


def c_layout(tmp_path):
    """{field: (offset, size)} plus 'sizeof' and 'enum' rows, from the C compiler."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to compile the layout probe")
    fields = "\n  ".join("FIELD(%s)" % name for name, _ in _lib.AllreduceArgs._fields_)
    src = tmp_path / "layout.c"
    src.write_text(_LAYOUT_PROGRAM.replace("%FIELDS%", fields))
    exe = tmp_path / "layout"
    build = subprocess.run([cc, "-std=c11", "-I", HEADER_DIR, str(src), "-o", str(exe)],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr  # A field ctypes has but hvd.h lacks fails here.
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True)
    rows = {}
    for line in out.stdout.splitlines():
        key, *values = line.split()
        rows[key] = tuple(int(v) for v in values)
    return rows


def header_struct_fields():
    """The field names of hvd_allreduce_args_t, in order, as written in hvd.h."""
    with open(os.path.join(HEADER_DIR, "hvd.h")) as f:
        text = f.read()
    body = re.search(r"typedef struct \{(.*?)\} hvd_allreduce_args_t;", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [decl.split()[-1].lstrip("*") for decl in body.split(";") if decl.strip()]


def test_allreduce_args_layout_matches_header(tmp_path):
    # The same fields, in the same order: a field added to hvd.h must be added here.
    assert [name for name, _ in _lib.AllreduceArgs._fields_] == header_struct_fields()
    rows = c_layout(tmp_path)
    for name, _ in _lib.AllreduceArgs._fields_:
        field = getattr(_lib.AllreduceArgs, name)
        assert (field.offset, field.size) == rows[name], name
    assert ctypes.sizeof(_lib.AllreduceArgs) == rows["sizeof"][0]
    assert ctypes.alignment(_lib.AllreduceArgs) == rows["sizeof"][1]
    # ctypes passes hvd_status_t, hvd_dtype_t and hvd_reduce_op_t as int.
    assert rows["enum"] == (ctypes.sizeof(ctypes.c_int),) * 3
    assert _lib.AllreduceArgs.device.offset > _lib.AllreduceArgs.process_set.offset


def test_new_allreduce_args_records_its_size_and_the_defaults():
    args = _lib.new_allreduce_args()
    assert args.struct_size == ctypes.sizeof(_lib.AllreduceArgs)
    assert (args.dtype, args.op, args.prescale_factor, args.postscale_factor,
            args.process_set, args.device, args.stream) == (_lib.FLOAT32, _lib.SUM, 1.0, 1.0,
                                                            0, -1, None)


def header_params(name):
    with open(os.path.join(HEADER_DIR, "hvd.h")) as f:
        text = f.read()
    params = re.search(r"\b%s\((.*?)\);" % name, text, re.S).group(1)
    return [p.strip() for p in params.split(",")]


@pytest.mark.parametrize("name", ["hvd_allgather_ex", "hvd_broadcast_ex", "hvd_alltoall_ex",
                                  "hvd_reducescatter_ex"])
def test_device_prototypes_match_header(name):
    params = header_params(name)
    restype, argtypes = _lib._OPTIONAL_PROTOTYPES[name]
    assert len(argtypes) == len(params), params
    # device and stream come just before the handle, as int32_t and void*.
    assert params[-3].startswith("int32_t device") and argtypes[-3] is ctypes.c_int32
    assert params[-2].startswith("void* stream") and argtypes[-2] is ctypes.c_void_p
    assert _lib.has(name), "%s lacks %s" % (_lib.lib().path, name)


# ---- CUDA tensors and a library without CUDA ------------------------------------------

class _Claims:
    """Anything with a .device, as _device.placement needs."""

    def __init__(self, device):
        self.device = torch.device(device)
        self.is_cuda = self.device.type == "cuda"


def test_placement_of_cpu_tensors():
    assert _device.placement(torch.ones(2), "x") == (-1, None)
    assert _device.placement(_Claims("cpu"), "x", cuda_built=False) == (-1, None)


def test_placement_refuses_cuda_without_cuda_build():
    with pytest.raises(hvd.InvalidUsageError) as info:
        _device.placement(_Claims("cuda:0"), "x", cuda_built=False)
    assert "tensor 'x' is on cuda:0 but libhvd was built without CUDA" in str(info.value)
    assert info.value.status == "HVD_INVALID_USAGE"
    with pytest.raises(hvd.InvalidUsageError, match="is on cuda:3 but"):
        _device.placement(_Claims("cuda:3"), "y", cuda_built=False)


def test_placement_refuses_other_devices():
    with pytest.raises(hvd.InvalidArgumentError, match="only CPU and CUDA tensors"):
        _device.placement(_Claims("meta"), "x", cuda_built=True)


class _ClaimsCuda(torch.Tensor):
    """A CPU tensor whose .device says cuda:0, to reach the checks through the public
    calls on a machine without a GPU (nothing may touch its memory as device memory)."""

    @property
    def device(self):
        return torch.device("cuda:0")

    @property
    def is_cuda(self):
        return True


def claims_cuda(t):
    return torch.Tensor._make_subclass(_ClaimsCuda, t)


needs_no_cuda_build = pytest.mark.skipif(
    hvd.cuda_built(), reason="libhvd is built with CUDA: it takes CUDA tensors")


@needs_no_cuda_build
def test_public_calls_refuse_cuda_tensor_without_cuda_build():
    t = claims_cuda(torch.ones(4, 2))
    assert t.device.type == "cuda" and torch.is_tensor(t)
    calls = {
        "allreduce": lambda: hvd.allreduce(t, name="claims"),
        "allreduce_": lambda: hvd.allreduce_(t, name="claims"),
        "allreduce_async": lambda: hvd.allreduce_async(t, name="claims"),
        "grouped_allreduce": lambda: hvd.grouped_allreduce([torch.ones(2), t], name="claims"),
        "allgather": lambda: hvd.allgather(t, name="claims"),
        "grouped_allgather": lambda: hvd.grouped_allgather([torch.ones(2), t], name="claims"),
        "broadcast": lambda: hvd.broadcast(t, 0, name="claims"),
        "broadcast_": lambda: hvd.broadcast_(t, 0, name="claims"),
        "alltoall": lambda: hvd.alltoall(t, name="claims"),
        "reducescatter": lambda: hvd.reducescatter(t, name="claims"),
        "grouped_reducescatter": lambda: hvd.grouped_reducescatter([t], name="claims"),
        "broadcast_parameters": lambda: hvd.broadcast_parameters({"w": t}, root_rank=0),
    }
    before = _handles.pending_count()
    for what, call in calls.items():
        with pytest.raises(hvd.InvalidUsageError) as info:
            call()
        message = str(info.value)
        assert "is on cuda:0 but libhvd was built without CUDA" in message, what
        assert "claims" in message or what == "broadcast_parameters", message
    assert _handles.pending_count() == before  # Nothing was enqueued, not even group members.
    # The runtime keeps serving CPU tensors.
    assert (hvd.allreduce(torch.ones(3), op=hvd.Sum, name="after.claims") == hvd.size()).all()


@needs_no_cuda_build
def test_c_api_reads_the_device_field():
    # Past the Python check: a library without CUDA refuses device >= 0 itself, which
    # shows that the device field is where the C side reads it.
    buf = (ctypes.c_float * 3)()
    args = _lib.new_allreduce_args()
    assert (args.device, args.stream) == (-1, None)  # hvd_allreduce_args_init's defaults.
    args.name = b"c.device.field"
    args.sendbuf = ctypes.addressof(buf)
    args.recvbuf = ctypes.addressof(buf)
    args.count = 3
    args.dtype = _lib.FLOAT32
    args.device = 0
    handle = ctypes.c_void_p()
    code = _lib.lib().hvd_allreduce_ex(ctypes.byref(args), ctypes.byref(handle))
    assert code == _lib.INVALID_USAGE
    assert "cuda:0" in _lib.lib().hvd_last_error().decode()
    code = _lib.lib().hvd_broadcast_ex(b"c.device.bcast", ctypes.addressof(buf), 3,
                                       _lib.FLOAT32, 0, 0, 0, None, ctypes.byref(handle))
    assert code == _lib.INVALID_USAGE
    assert "cuda:0" in _lib.lib().hvd_last_error().decode()


@needs_no_cuda_build
@pytest.mark.parametrize("call, c_call", [
    (lambda ts: hvd.grouped_allgather(ts, name="claims.dev"), "hvd_allgather_ex"),
    (lambda ts: hvd.grouped_reducescatter(ts, name="claims.dev"), "hvd_reducescatter_ex"),
])
def test_grouped_shaped_calls_go_tensor_by_tensor_with_the_device(monkeypatch, call, c_call):
    # With every tensor placed on cuda:0 (past the Python check), a grouped allgather
    # or reducescatter is enqueued one _ex call per tensor, and the C side, built
    # without CUDA, refuses the device: the device field reached it.
    monkeypatch.setattr(_frontend.Frontend, "_placement",
                        lambda self, buf, what, device_call: (0, None, None))
    before = _handles.pending_count()
    with pytest.raises(hvd.InvalidUsageError) as info:
        call([torch.ones(2 * hvd.size(), 2), torch.ones(hvd.size(), 3)])
    assert c_call in str(info.value) and "cuda:0" in str(info.value)
    assert _handles.pending_count() == before


def test_partly_enqueued_group_is_abandoned_then_reaped():
    # A device group is enqueued tensor by tensor; when one is refused, the ones before
    # it stay referenced until they complete. Shown with host allreduces.
    buf = torch.ones(3)
    frontend = _frontend.Frontend(mpi_ops._TorchAdapter())
    ok, _ = frontend._allreduce_args(
        "allreduce.abandon.ok", buf, buf, _lib.FLOAT32, _lib.SUM, 1.0, 1.0, 0)
    bad, _ = frontend._allreduce_args(
        "x" * 2000, buf, buf, _lib.FLOAT32, _lib.SUM, 1.0, 1.0, 0)  # Name too long.
    before = _handles.pending_count()
    with pytest.raises(hvd.InvalidArgumentError, match="hvd_allreduce_ex"):
        _frontend.Frontend._enqueue_each(
            "hvd_allreduce_ex",
            [lambda h: _lib.lib().hvd_allreduce_ex(ctypes.byref(ok), h),
             lambda h: _lib.lib().hvd_allreduce_ex(ctypes.byref(bad), h)],
            ["allreduce.abandon.ok", "allreduce.abandon.bad"], (buf, ok, bad))
    assert _handles.pending_count() == before + 1
    deadline = time.monotonic() + 60
    while _handles._abandoned and time.monotonic() < deadline:
        _handles._reap()
        time.sleep(0.01)
    assert _handles.pending_count() == before
    assert (buf == hvd.size()).all()


# ---- on a GPU -------------------------------------------------------------------------

def _gpu_skip_reason():
    if not torch.cuda.is_available():
        return "needs a CUDA device (torch.cuda.is_available() is False)"
    if not hvd.cuda_built():
        return "needs a libhvd built with CUDA (hvd.cuda_built() is False)"
    if (torch.cuda.device_count() < hvd.local_size()
            and os.environ.get("HVD_GPU_OPERATIONS", "nccl").lower() != "gloo"):
        return ("NCCL needs one GPU per local rank (%d GPUs, %d local ranks); set "
                "HVD_GPU_OPERATIONS=gloo to share one" % (torch.cuda.device_count(),
                                                         hvd.local_size()))
    return None


needs_gpu = pytest.mark.skipif(_gpu_skip_reason() is not None,
                               reason=_gpu_skip_reason() or "")


@pytest.fixture
def gpu():
    device = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


@pytest.mark.skipif(not torch.cuda.is_available() or hvd.cuda_built(),
                    reason="needs a CUDA device and a libhvd built without CUDA")
def test_real_cuda_tensor_without_cuda_build():
    with pytest.raises(hvd.InvalidUsageError, match="is on cuda:0 but libhvd was built"):
        hvd.allreduce(torch.ones(3, device="cuda:0"), name="real.cuda")


def _rank_tensor(shape, dtype, rank, seed=0):
    g = torch.Generator().manual_seed(1000 * seed + rank)
    return torch.randint(-3, 4, shape, generator=g).to(dtype)


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64])
def test_collectives_on_cuda_match_cpu(gpu, dtype):
    mine = _rank_tensor((4, 3), dtype, hvd.rank())
    d = mine.to(gpu)
    splits = [1 + (r % 2) for r in range(hvd.size())]
    ragged = _rank_tensor((hvd.rank() + 1, 3), dtype, hvd.rank(), seed=1)
    cpu, dev = {}, {}
    for where, t, r, out in (("cpu", mine, ragged, cpu), ("gpu", d, ragged.to(gpu), dev)):
        out["sum"] = hvd.allreduce(t, op=hvd.Sum, name="cu.sum." + where)
        out["max"] = hvd.allreduce(t, op=hvd.Max, name="cu.max." + where)
        out["scaled"] = hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5,
                                      name="cu.scaled." + where)
        out["inplace"] = hvd.allreduce_(t.clone(), op=hvd.Sum, name="cu.inplace." + where)
        out["grouped"] = hvd.grouped_allreduce([t, t[:1]], op=hvd.Sum, name="cu.g." + where)
        out["allgather"] = hvd.allgather(r, name="cu.ag." + where)
        out["grouped_allgather"] = hvd.grouped_allgather([r, t], name="cu.gag." + where)
        out["broadcast"] = hvd.broadcast(t, root_rank=hvd.size() - 1, name="cu.bc." + where)
        out["broadcast_"] = hvd.broadcast_(t.clone(), root_rank=0, name="cu.bc_." + where)
        rows = torch.cat([t] * hvd.size())[:sum(splits)]
        out["alltoall"] = hvd.alltoall(rows, splits=splits, name="cu.a2a." + where)
        out["reducescatter"] = hvd.reducescatter(torch.cat([t] * hvd.size()), op=hvd.Sum,
                                                 name="cu.rs." + where)
        out["grouped_reducescatter"] = hvd.grouped_reducescatter(
            [torch.cat([t] * hvd.size())], op=hvd.Sum, name="cu.grs." + where)
    for key in cpu:
        a, b = cpu[key], dev[key]
        if key == "alltoall":
            (a, a_splits), (b, b_splits) = a, b
            assert b_splits.device.type == "cpu" and torch.equal(a_splits, b_splits)
        a = a if isinstance(a, list) else [a]
        b = b if isinstance(b, list) else [b]
        for x, y in zip(a, b):
            assert y.device == gpu, key
            assert y.dtype == x.dtype and y.shape == x.shape, key
            assert torch.equal(x, y.cpu()), key


@needs_gpu
def test_cuda_non_contiguous_and_empty(gpu):
    base = torch.arange(12.0, device=gpu).reshape(3, 4)
    strided = base.t()  # Not contiguous.
    hvd.allreduce_(strided, op=hvd.Sum, name="cu.strided")
    assert torch.equal(base.cpu(), torch.arange(12.0).reshape(3, 4) * hvd.size())
    empty = hvd.allgather(torch.zeros(0, 2, device=gpu), name="cu.empty")
    assert empty.shape == (0, 2) and empty.device == gpu
    assert hvd.allreduce(torch.zeros(0, device=gpu), name="cu.empty.ar").device == gpu


@needs_gpu
def test_cuda_follows_the_current_stream(gpu):
    # Work queued on a side stream before the call is seen by the collective, and the
    # result is usable on the default stream afterwards.
    side = torch.cuda.Stream(gpu)
    with torch.cuda.stream(side):
        t = torch.full((1 << 20,), 0.0, device=gpu)
        torch.cuda._sleep(10 ** 7)  # Delays the fill below on this stream.
        t.fill_(float(hvd.rank() + 1))
        gathered = hvd.allgather(t[:4].reshape(1, 4), name="cu.stream.ag")
        summed = hvd.allreduce(t, op=hvd.Sum, name="cu.stream.ar")
    expected = float(sum(range(1, hvd.size() + 1)))
    torch.cuda.synchronize()
    assert torch.equal(gathered[:, 0].cpu(), torch.arange(1.0, hvd.size() + 1))
    assert (summed == expected).all()


@needs_gpu
def test_distributed_optimizer_on_cuda_matches_cpu(gpu, hooked):
    x, y = dataset(8, hvd.size())
    models = {}
    for where, device in (("cpu", torch.device("cpu")), ("gpu", gpu)):
        model = make_model(seed=hvd.rank()).to(device)  # Different per rank: broadcast fixes.
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        opt = hvd.DistributedOptimizer(opt, named_parameters=[
            ("%s.%s" % (where, n), p) for n, p in model.named_parameters()])
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        shard = slice(hvd.rank() * 8, (hvd.rank() + 1) * 8)
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[shard].to(device)),
                                                     y[shard].to(device))
            loss.backward()
            opt.step()
        models[where] = model
    for p in models["gpu"].parameters():
        assert p.device == gpu and p.grad.device == gpu
    assert torch.allclose(flat_params(models["cpu"]), flat_params(models["gpu"]).cpu(),
                          atol=1e-5)
    everyone = hvd.allgather(flat_params(models["gpu"]).reshape(1, -1), name="cu.opt.check")
    assert (everyone == flat_params(models["gpu"]).reshape(1, -1)).all()


@needs_gpu
@pytest.mark.parametrize("stage", [1, 2])
def test_sharded_optimizer_on_cuda(gpu, stage):
    x, y = dataset(8, hvd.size())
    model = make_model(seed=0).to(gpu)
    opt = hvd.ShardedOptimizer(torch.optim.Adam, model.parameters(), stage=stage, lr=0.01,
                               name="cu.sharded%d" % stage)
    shard = slice(hvd.rank() * 8, (hvd.rank() + 1) * 8)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[shard].to(gpu)), y[shard].to(gpu)).backward()
        opt.step()
    flat = flat_params(model)
    assert flat.device == gpu
    everyone = hvd.allgather(flat.reshape(1, -1), name="cu.sharded%d.check" % stage)
    assert (everyone == flat.reshape(1, -1)).all()


def test_device_calls_are_available():
    # Every C call a device tensor may take: present in this libhvd, or a clear error.
    for name in ("hvd_allreduce_ex", "hvd_allgather_ex", "hvd_broadcast_ex", "hvd_alltoall_ex",
                 "hvd_reducescatter_ex"):
        _lib.require(name, "tensor 'x'")
    with pytest.raises(hvd.InvalidUsageError, match="hvd_no_such_call"):
        _lib.require("hvd_no_such_call", "tensor 'x'")


# ---- the device code path, run on host memory ---------------------------------------

class _FakeStream:
    cuda_stream = 0x1234


class _ClaimsDeviceAdapter(mpi_ops._TorchAdapter):
    """Places every (CPU) tensor on "device 0" after _FakeStream; records the stream
    each device result is copied on."""

    def __init__(self):
        self.result_streams = []
        self.orders = []

    def placement(self, t, what):
        mpi_ops.check_tensor(t, what)
        return 0, _FakeStream()

    def fast_key(self, t):
        key = super().fast_key(t)
        return None if key is None else key[:2] + (0,)

    def stream_order(self, device, stream):
        order = _FakeOrder(device, stream)
        self.orders.append(order)
        return order

    def from_memory(self, address, nbytes, shape, like, stream=None):
        self.result_streams.append(stream)
        return super().from_memory(address, nbytes, shape, like)


class _FakeOrder:
    """A StreamOrder whose consumer stream is the cudaStream_t `consumer`, the enqueue
    stream when `same` is true; records retain()."""
    consumer = 0x5678
    same = True

    def __init__(self, device, stream):
        self.device, self.stream = device, stream
        self.retained = None

    def consumer_stream(self):
        return self.consumer

    def on_enqueue_stream(self):
        return self.same

    def retain(self, keepalive):
        self.retained = keepalive


class _HostedDeviceLib:
    """libhvd, except that the device forms record the device and stream they were
    given and then run on host memory (device -1, stream NULL)."""

    def __init__(self, real):
        self.real = real
        self.device_calls = []
        self.host_calls = []
        self.waits = []          # hvd_wait: the host waited for completion
        self.enqueued_waits = []  # hvd_wait_enqueued
        self.ordered = []        # hvd_handle_order_stream: (handle, stream)

    def hvd_wait(self, handle, timeout):
        self.waits.append(handle)
        return self.real.hvd_wait(handle, timeout)

    def hvd_wait_enqueued(self, handle, timeout):
        self.enqueued_waits.append(handle)
        return self.real.hvd_wait_enqueued(handle, timeout)

    def hvd_handle_order_stream(self, handle, stream):
        self.ordered.append((handle, stream))
        return self.real.hvd_handle_order_stream(handle, None)  # host handle: done already

    def __getattr__(self, name):
        fn = getattr(self.real, name)
        if (name.startswith("hvd_grouped") and not name.endswith("_ex")) or name.endswith("_async"):
            def host_call(*args):
                self.host_calls.append(name)
                return fn(*args)
            return host_call
        return fn

    def hvd_allreduce_ex(self, args_ref, handle):
        args = args_ref._obj
        self.device_calls.append(("hvd_allreduce_ex", args.device, args.stream))
        args.device, args.stream = -1, None
        return self.real.hvd_allreduce_ex(args_ref, handle)

    def hvd_grouped_allreduce_ex(self, n, c_args, handles):
        for i in range(n):
            args = c_args[i].contents
            self.device_calls.append(("hvd_grouped_allreduce_ex", args.device, args.stream))
            args.device, args.stream = -1, None
        return self.real.hvd_grouped_allreduce_ex(n, c_args, handles)

    def _device_form(name):
        def call(self, *args):
            self.device_calls.append((name, args[-3], args[-2]))
            return getattr(self.real, name)(*args[:-3], -1, None, args[-1])
        return call

    hvd_allgather_ex = _device_form("hvd_allgather_ex")
    hvd_broadcast_ex = _device_form("hvd_broadcast_ex")
    hvd_alltoall_ex = _device_form("hvd_alltoall_ex")
    hvd_reducescatter_ex = _device_form("hvd_reducescatter_ex")


def test_device_path_passes_device_and_stream(monkeypatch):
    n = hvd.size()
    mine = _rank_tensor((2 * n, 3), torch.float32, hvd.rank())
    ragged = _rank_tensor((hvd.rank() + 1, 3), torch.float32, hvd.rank(), seed=1)
    splits = [2] * n
    adapter = _ClaimsDeviceAdapter()
    dev = _frontend.Frontend(adapter)
    sync = _handles.synchronize
    hosted = _HostedDeviceLib(_lib.lib())
    monkeypatch.setattr(_lib, "lib", lambda: hosted)
    inplace = mine.t()  # Not contiguous: copied, reduced, copied back.
    got = {
        "allreduce": sync(dev.allreduce_async(mine, name="dp.ar", op=hvd.Sum)),
        "allreduce_": sync(dev.allreduce_async(inplace.clone(), name="dp.ar_", op=hvd.Sum,
                                               inplace=True)),
        "grouped_allreduce": sync(dev.grouped_allreduce_async([mine, mine[:1]], name="dp.gar",
                                                              op=hvd.Sum)),
        "allgather": sync(dev.allgather_async(ragged, name="dp.ag")),
        "grouped_allgather": sync(dev.grouped_allgather_async([ragged, mine], name="dp.gag")),
        "broadcast": sync(dev.broadcast_async(mine, n - 1, name="dp.bc")),
        "alltoall": sync(dev.alltoall_async(mine, splits=splits, name="dp.a2a"))[0],
        "reducescatter": sync(dev.reducescatter_async(mine, name="dp.rs", op=hvd.Sum)),
        "grouped_reducescatter": sync(dev.grouped_reducescatter_async(
            [mine, mine], name="dp.grs", op=hvd.Sum)),
    }
    monkeypatch.undo()
    expected = {
        "allreduce": hvd.allreduce(mine, name="hp.ar", op=hvd.Sum),
        "allreduce_": hvd.allreduce_(inplace.clone(), name="hp.ar_", op=hvd.Sum),
        "grouped_allreduce": hvd.grouped_allreduce([mine, mine[:1]], name="hp.gar", op=hvd.Sum),
        "allgather": hvd.allgather(ragged, name="hp.ag"),
        "grouped_allgather": hvd.grouped_allgather([ragged, mine], name="hp.gag"),
        "broadcast": hvd.broadcast(mine, n - 1, name="hp.bc"),
        "alltoall": hvd.alltoall(mine, splits=splits, name="hp.a2a")[0],
        "reducescatter": hvd.reducescatter(mine, name="hp.rs", op=hvd.Sum),
        "grouped_reducescatter": hvd.grouped_reducescatter([mine, mine], name="hp.grs",
                                                           op=hvd.Sum),
    }
    for key, want in expected.items():
        have = got[key]
        for a, b in zip(want if isinstance(want, list) else [want],
                        have if isinstance(have, list) else [have]):
            assert torch.equal(a, b), key
    # A grouped allreduce went as one group; the other groups went tensor by tensor
    # through the device forms.
    assert hosted.host_calls == []
    assert [c[0] for c in hosted.device_calls] == (
        ["hvd_allreduce_ex"] * 2 + ["hvd_grouped_allreduce_ex"] * 2
        + ["hvd_allgather_ex"] * 3 + ["hvd_broadcast_ex",
                                                               "hvd_alltoall_ex"]
        + ["hvd_reducescatter_ex"] * 3)
    assert all((device, stream) == (0, _FakeStream.cuda_stream)
               for _, device, stream in hosted.device_calls), hosted.device_calls
    # Every runtime-owned result was copied on the stream its collective followed.
    assert len(adapter.result_streams) == 7
    assert all(isinstance(s, _FakeStream) for s in adapter.result_streams)


def test_device_handles_order_the_consumer_stream_instead_of_waiting(monkeypatch):
    # Stream-ordered completion (hvd._handles): a device allreduce or broadcast is
    # synchronized by waiting until it is queued and ordering the consumer's
    # stream after it, never by hvd_wait; its buffers are handed to the order to
    # keep. Results the runtime owns (allgather, alltoall, reducescatter) too, when
    # the consumer's stream is the enqueue stream; else the host waits for them.
    t = torch.arange(6, dtype=torch.float32)
    adapter = _ClaimsDeviceAdapter()
    dev = _frontend.Frontend(adapter)
    hosted = _HostedDeviceLib(_lib.lib())
    monkeypatch.setattr(_lib, "lib", lambda: hosted)
    ar = dev.allreduce_async(t.clone(), name="so.ar", op=hvd.Sum, inplace=True)
    gar = dev.grouped_allreduce_async([t, t[:2]], name="so.gar", op=hvd.Sum)
    bc = dev.broadcast_async(t, 0, name="so.bc")
    results = [_handles.synchronize(h) for h in (ar, gar, bc)]
    assert hosted.waits == []  # the host never waited for the device
    assert len(hosted.enqueued_waits) == 4 and len(hosted.ordered) == 4
    assert all(stream == _FakeOrder.consumer for _, stream in hosted.ordered)
    assert len(adapter.orders) == 3
    assert all(o.retained is not None for o in adapter.orders)
    assert adapter.orders[0].retained is results[0]  # the in-place tensor itself
    n = hvd.size()
    owned = [_handles.synchronize(h) for h in (
        dev.allgather_async(t.reshape(2, 3), name="so.ag"),
        dev.grouped_allgather_async([t.reshape(2, 3), t.reshape(3, 2)], name="so.gag"),
        dev.alltoall_async(t.reshape(6, 1).repeat(n, 1), name="so.a2a"),
        dev.reducescatter_async(t.reshape(6, 1).repeat(n, 1), name="so.rs", op=hvd.Sum))]
    assert hosted.waits == []
    assert len(hosted.enqueued_waits) == 9 and len(hosted.ordered) == 9
    assert len(adapter.result_streams) == 5  # each copied out on its enqueue stream
    assert torch.equal(owned[0], t.reshape(2, 3).repeat(n, 1))
    assert torch.equal(owned[1][1], t.reshape(3, 2).repeat(n, 1))
    assert torch.equal(owned[2][0], t.reshape(6, 1).repeat(n, 1))
    assert torch.equal(owned[3], t.reshape(6, 1) * n)
    # Consumed on another stream: the runtime frees its result in the enqueue
    # stream's order, so the host waits for it instead.
    monkeypatch.setattr(_FakeOrder, "same", False)
    _handles.synchronize(dev.allgather_async(t.reshape(2, 3), name="so.ag2"))
    assert len(hosted.waits) == 1 and len(hosted.ordered) == 9

    # A gradient's prepared allreduce (DistributedOptimizer's hooks) on a device:
    # the device form with the current stream, then stream-ordered like the rest.
    prepared = dev.prepare_allreduce("so.prep", hvd.Sum, 1.0, 1.0, None)
    kept = []
    for step in range(2):
        g = t.clone() + step
        kept.append(g)
        assert _handles.synchronize(prepared.start(g)) is g
    assert [c for c in hosted.device_calls if c[0] == "hvd_allreduce_ex"][-2:] == [
        ("hvd_allreduce_ex", 0, _FakeStream.cuda_stream)] * 2
    assert len(hosted.ordered) == 11 and len(hosted.waits) == 1  # (the allgather above)
    assert adapter.orders[-1].retained is kept[-1]
    assert all(torch.equal(g, (t + i) * hvd.size()) for i, g in enumerate(kept))

    # Switched off: the host waits for completion, and no stream is ordered.
    monkeypatch.setattr(_handles, "STREAM_ORDERED", False)
    _handles.synchronize(dev.allreduce_async(t.clone(), name="so.off", op=hvd.Sum))
    assert len(hosted.waits) == 2 and len(hosted.ordered) == 11
    monkeypatch.undo()
    assert torch.equal(results[0], t * n)
    assert torch.equal(results[1][1], t[:2] * n)
