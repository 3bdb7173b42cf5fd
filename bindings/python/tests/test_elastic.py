"""hvd.elastic's pieces that need no dprun --min-np: the sampler's split of an epoch,
run_fn's reset loop, ObjectState and TorchState commit/restore/sync, and the C
calls outside an elastic job. Whole elastic jobs (ranks killed and added) are
tests/process/elastic_test.cc."""
import pytest
import torch

import hvd.torch as hvd
from hvd import basics
from hvd import elastic as common


def test_outside_an_elastic_job():
    assert hvd.elastic.generation() == -1
    assert hvd.elastic.update_pending() is False


@pytest.mark.parametrize("replicas_before,replicas_after", [(4, 3), (2, 4), (3, 3)])
def test_sampler_never_repeats_or_skips_a_sample_across_a_resize(
        monkeypatch, replicas_before, replicas_after):
    data = list(range(96))
    batch, done_batches = 4, 3

    def samplers(n):
        out = []
        for r in range(n):
            monkeypatch.setattr(basics, "size", lambda n=n: n)
            monkeypatch.setattr(basics, "rank", lambda r=r: r)
            monkeypatch.setattr(basics, "is_initialized", lambda: True)
            s = hvd.elastic.ElasticSampler(data, shuffle=True, seed=3)
            s.set_epoch(5)
            out.append(s)
        return out

    seen = []
    before = samplers(replicas_before)
    for s in before:
        mine = list(iter(s))
        for b in range(done_batches):
            seen += mine[b * batch:(b + 1) * batch]
            assert s.get_indices(b, batch) == mine[b * batch:(b + 1) * batch]
    for s in before:
        for b in range(done_batches):
            s.record_batch(b, batch)
    state = before[0].state_dict()
    assert state == {"epoch": 5, "processed_num": done_batches * batch * replicas_before}
    # The new workers load rank 0's state and split what is left.
    after = samplers(replicas_after)
    rest = []
    for r, s in enumerate(after):
        monkeypatch.setattr(basics, "rank", lambda r=r: r)
        s.load_state_dict(state)
        assert len(s) == -(-(len(data) - len(seen)) // replicas_after)
        rest += list(iter(s))
    padding = len(after[0]) * replicas_after - (len(data) - len(seen))
    assert sorted(set(seen + rest)) == data
    assert len(seen) == len(set(seen))
    assert len(seen + rest) == len(data) + padding
    # A new epoch is a new order, and nothing of it is processed.
    after[0].set_epoch(6)
    assert after[0].processed_num == 0
    assert len(after[0]) == -(-len(data) // replicas_after)


class FakeState(common.State):
    def __init__(self):
        super().__init__(bcast_object=lambda x: x, get_rank=lambda: 0)
        self.calls = []
        self.register_reset_callbacks([lambda: self.calls.append("callback")])

    def save(self):
        self.calls.append("save")

    def restore(self):
        self.calls.append("restore")

    def sync(self):
        self.calls.append("sync")

    def reset(self):
        self.calls.append("reset")


def test_run_fn_restores_after_a_lost_rank_and_keeps_state_after_hosts_change():
    resets = []
    raised = [hvd.RemoteError("rank 2 was killed"), common.HostsUpdatedInterrupt(False)]

    def train(state, x):
        if raised:
            raise raised.pop(0)
        return x * 2

    state = FakeState()
    wrapped = common.run_fn(train, reset=lambda: resets.append(1))
    assert wrapped(state, 21) == 42
    assert len(resets) == 2
    assert state.calls == ["sync", "restore", "reset", "callback", "sync", "reset", "callback",
                           "sync"]


def test_run_fn_lets_the_programs_own_errors_through():
    def train(state):
        raise hvd.MismatchError("shapes differ")

    with pytest.raises(hvd.MismatchError):
        common.run_fn(train, reset=lambda: pytest.fail("no reset for a mismatch"))(FakeState())


def test_run_fn_gives_up_when_resets_keep_failing():
    def train(state):
        raise hvd.RemoteError("lost")

    def reset():
        raise hvd.HvdTimeoutError("no generation")

    with pytest.raises(hvd.HvdTimeoutError):
        common.run_fn(train, reset=reset)(FakeState())


def test_torch_state_commits_restores_and_syncs():
    torch.manual_seed(hvd.rank())
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    state = hvd.elastic.TorchState(model, opt, epoch=1, batch=4)
    state.sync()  # rank 0's parameters and objects everywhere
    ref = [p.detach().clone() for p in model.parameters()]
    gathered = hvd.allgather(torch.cat([p.detach().reshape(-1) for p in ref]).unsqueeze(0))
    assert all(torch.equal(gathered[0], g) for g in gathered)
    state.commit()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    state.epoch, state.batch = 9, 9
    state.restore()
    assert all(torch.equal(p, r) for p, r in zip(model.parameters(), ref))
    assert (state.epoch, state.batch) == (1, 4)


def test_a_new_runtimes_handles_start_clean():
    from hvd import _handles
    t = torch.ones(4)
    h = hvd.allreduce_async(t, name="elastic.stale")
    while not hvd.poll(h):
        pass
    assert _handles.in_flight("allreduce.elastic.stale")
    _handles.forget_all()  # what init does after an elastic reset's shutdown
    assert not _handles.in_flight("allreduce.elastic.stale")
    with pytest.raises(hvd.InvalidArgumentError):
        hvd.synchronize(h)
    assert torch.equal(hvd.allreduce(t, name="elastic.stale", op=hvd.Sum), t * hvd.size())
