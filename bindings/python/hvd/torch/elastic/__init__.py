"""hvd.torch.elastic (hvd.elastic after `import hvd.torch as hvd`): Horovod Elastic's
PyTorch API over dprun's generations (docs/elastic.md).

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    state = hvd.elastic.TorchState(model, optimizer, train_sampler=sampler, epoch=0, batch=0)
    train(state)

Run it with `dprun -np 4 --min-np 2 python3 train.py`.
"""

from hvd.elastic import (HorovodInternalError, HostsUpdatedInterrupt, ObjectState,  # noqa: F401
                         State, generation, run_fn, update_pending)
from hvd.torch.elastic.sampler import ElasticSampler
from hvd.torch.elastic.state import TorchState


def run(func):
    """Decorator: runs func(state, ...) so that it survives ranks dying or joining.

    On a failed collective (a rank lost) every worker restores its last commit; on
    HostsUpdatedInterrupt (raised by commit() when ranks were added or lost) it keeps
    its state. Then each worker shuts down, joins dprun's next generation (init),
    calls the state's reset callbacks, broadcasts the state from the new rank 0 and
    calls func again. No collective may run before func is called."""
    return run_fn(func)


__all__ = ["ElasticSampler", "HorovodInternalError", "HostsUpdatedInterrupt", "ObjectState",
           "State", "TorchState", "generation", "run", "update_pending"]
