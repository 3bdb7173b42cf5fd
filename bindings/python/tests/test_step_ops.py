"""DistributedOptimizer adds no tensor work to a training step (issue 25): every
aten op that a step dispatches (zero_grad, forward, backward with the hooks,
step) is counted, and an hvd step must dispatch exactly what the same step with
the plain optimizer does. The allreduce itself runs in the runtime on the
tensors' memory, so it dispatches nothing. Also: zero_grad() keeps the wrapped
optimizer's own set_to_none default (torch 2.x: True)."""
import collections

import pytest
import torch
import torch.nn.functional as F

import hvd.torch as hvd
from helpers import make_model

TorchDispatchMode = pytest.importorskip("torch.utils._python_dispatch").TorchDispatchMode


class OpCounter(TorchDispatchMode):
    """Counts the aten ops dispatched while it is active, by name ("add_", "fill_")."""

    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def _step_ops(model, opt, x, y, zero_grad_kwargs):
    with OpCounter() as counter:
        opt.zero_grad(**zero_grad_kwargs)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return counter.counts


@pytest.mark.parametrize("set_to_none", [None, True, False])
def test_a_step_dispatches_the_ops_of_a_plain_step(set_to_none, hooked):
    kwargs = {} if set_to_none is None else {"set_to_none": set_to_none}
    x = torch.randn(8, 10)
    y = torch.randint(0, 4, (8,))
    plain_model, hvd_model = make_model(3), make_model(3)
    plain = torch.optim.SGD(plain_model.parameters(), lr=0.1, momentum=0.9)
    wrapped = hvd.DistributedOptimizer(
        torch.optim.SGD(hvd_model.parameters(), lr=0.1, momentum=0.9),
        named_parameters=hvd_model.named_parameters())
    for step in range(3):  # the first step creates the grads and the momentum buffers
        want = _step_ops(plain_model, plain, x, y, kwargs)
        got = _step_ops(hvd_model, wrapped, x, y, kwargs)
        assert got == want, "step %d: hvd dispatched %s more, %s fewer" % (
            step, dict(got - want), dict(want - got))
    # The counter saw the step's own work, and the grads were really averaged.
    assert want["addmm"] > 0 and want["add_"] > 0
    for i, p in enumerate(hvd_model.parameters()):
        again = hvd.allreduce(p.grad, name="step_ops.check.%s.%d" % (set_to_none, i))
        assert torch.allclose(p.grad, again, atol=1e-6)


class _NoneByDefaultSGD(torch.optim.SGD):
    """SGD with torch 2.x's zero_grad default, whatever torch is installed."""

    def zero_grad(self, set_to_none=True):
        return super().zero_grad(set_to_none=set_to_none)


def test_zero_grad_keeps_the_wrapped_optimizers_default(hooked):
    model = make_model(3)
    opt = hvd.DistributedOptimizer(_NoneByDefaultSGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    F.cross_entropy(model(torch.randn(4, 10)), torch.randint(0, 4, (4,))).backward()
    opt.step()
    with OpCounter() as counter:
        opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    assert counter.counts["fill_"] == 0 and counter.counts["zero_"] == 0
    # An explicit argument still wins.
    F.cross_entropy(model(torch.randn(4, 10)), torch.randint(0, 4, (4,))).backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
