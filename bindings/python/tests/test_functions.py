"""broadcast_parameters, broadcast_optimizer_state, broadcast_object and
allgather_object: ranks start different and end equal to the root's."""
import pytest
import torch
import torch.nn.functional as F

import hvd.numpy as hnp
import hvd.torch as hvd
from helpers import dataset, flat_params, identical_across_ranks, make_model


def test_broadcast_parameters_state_dict():
    model = make_model(seed=100 + hvd.rank())  # Different on every rank.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    expected = make_model(seed=100)  # Rank 0's initial weights, rebuilt locally.
    assert torch.equal(flat_params(model), flat_params(expected))


def test_broadcast_parameters_named_and_plain_lists():
    last = hvd.size() - 1
    model = make_model(seed=200 + hvd.rank())
    hvd.broadcast_parameters(model.named_parameters(), root_rank=last)
    assert torch.equal(flat_params(model), flat_params(make_model(seed=200 + last)))
    other = make_model(seed=300 + hvd.rank())
    hvd.broadcast_parameters(list(other.parameters()), root_rank=0)
    assert torch.equal(flat_params(other), flat_params(make_model(seed=300)))
    with pytest.raises(ValueError, match="invalid params"):
        hvd.broadcast_parameters(42, root_rank=0)


def optimizer_state_vector(opt):
    parts = []
    for state in opt.state_dict()["state"].values():
        for key in sorted(state):
            v = state[key]
            parts.append(v.reshape(-1).double() if torch.is_tensor(v)
                         else torch.tensor([float(v)], dtype=torch.float64))
    return torch.cat(parts)


def step_on_rank_data(model, opt, seed):
    x, y = dataset(4, 1, seed=seed)
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()


def test_broadcast_optimizer_state_adam():
    model = make_model(seed=1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (hvd.rank() + 1),
                           betas=(0.8 + 0.01 * hvd.rank(), 0.999))
    for i in range(hvd.rank() + 1):  # Different step counts and moments per rank.
        step_on_rank_data(model, opt, seed=10 * hvd.rank() + i)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    group = opt.param_groups[0]
    same = identical_across_ranks(optimizer_state_vector(opt), "check.adam.state")
    assert same
    assert group["lr"] == 0.01 and isinstance(group["lr"], float)
    assert group["betas"] == (0.8, 0.999) and isinstance(group["betas"], tuple)
    assert float(opt.state_dict()["state"][0]["step"]) == 1.0


def test_broadcast_optimizer_state_initialises_a_fresh_optimizer():
    model = make_model(seed=2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    assert not opt.state
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert len(opt.state) == len(list(model.parameters()))
    assert all("momentum_buffer" in s for s in opt.state.values())


def test_broadcast_optimizer_state_distributed_optimizer():
    model = make_model(seed=3)
    opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)  # Must not start any allreduce.
    assert not opt._handles and len(opt.state) == 6
    step_on_rank_data(model, opt, seed=hvd.rank())
    assert identical_across_ranks(flat_params(model), "check.dopt")


class ScalarStateSGD(torch.optim.SGD):
    """Keeps Python scalars in its state, as some optimizers do."""

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["count"] = state.get("count", 0) + 1 + hvd.rank()
                state["scale"] = 0.5 * (hvd.rank() + 1)
        return super().step(closure)


def test_broadcast_optimizer_state_scalar_entries():
    model = make_model(seed=4)
    opt = ScalarStateSGD(model.parameters(), lr=0.1)
    step_on_rank_data(model, opt, seed=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for state in opt.state.values():
        assert state["count"] == 1 and isinstance(state["count"], int)
        assert state["scale"] == 0.5 and isinstance(state["scale"], float)


def test_broadcast_optimizer_state_rejects_lbfgs():
    model = make_model(seed=5)
    with pytest.raises(ValueError, match="LBFGS"):
        hvd.broadcast_optimizer_state(torch.optim.LBFGS(model.parameters()), root_rank=0)


def test_broadcast_object():
    obj = {"rank": hvd.rank(), "payload": list(range(hvd.rank() * 100)), "text": "x" * hvd.rank()}
    got = hvd.broadcast_object(obj, root_rank=0)
    assert got == {"rank": 0, "payload": [], "text": ""}
    last = hvd.size() - 1
    got = hnp.broadcast_object(("t", hvd.rank()), root_rank=last, name="tuple")
    assert got == ("t", last)


def test_allgather_object():
    objs = hvd.allgather_object({"r": hvd.rank(), "pad": "y" * (10 * hvd.rank())})
    assert objs == [{"r": r, "pad": "y" * (10 * r)} for r in range(hvd.size())]
    assert hnp.allgather_object(None) == [None] * hvd.size()
