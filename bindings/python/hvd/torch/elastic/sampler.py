"""ElasticSampler: a DistributedSampler that survives resets without repeating or
skipping a sample of the epoch.

The epoch's order is one shuffle of the dataset's indices, the same on every worker
(seed + epoch). Worker r of n takes positions r, r + n, r + 2n, ... of what remains,
so batch b of every worker together covers positions b*B*n .. (b+1)*B*n - 1 (B the
batch size). record_batch(b, B) after each step therefore counts B*n samples as done
for the whole job, and after a reset the remainder is split among the new workers:
samples processed before the last commit are not seen again, none is skipped (as
Horovod's ElasticSampler; keep it in the TorchState so it is committed and
restored with the model). The last batch of an epoch is padded with samples from its
start, as DistributedSampler does, so every worker has as many.
"""

import math
import random

import torch.utils.data

from hvd import basics


class ElasticSampler(torch.utils.data.Sampler):
    """Args:
      dataset: what is sampled (its length must not change).
      shuffle: shuffle the order every epoch (default True).
      seed: the shuffle's seed, the same on every worker (default 0).
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch` (a new order); nothing of it is processed yet."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Counts batch `batch_idx` of `batch_size` samples as processed on every worker."""
        self.processed_num += batch_size * self.num_replicas

    def record_indices(self, indices):
        """Counts `indices` (this worker's, in order) as processed on every worker."""
        self.processed_num += len(indices) * self.num_replicas

    def get_indices(self, batch_idx, batch_size):
        """This worker's indices for batch `batch_idx` of the current pass."""
        mine = self._mine()
        return mine[batch_idx * batch_size:(batch_idx + 1) * batch_size]

    def state_dict(self):
        return dict(epoch=self.epoch, processed_num=self.processed_num)

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        """Splits what remains of the epoch among the current workers."""
        self.num_replicas = basics.size() if basics.is_initialized() else 1
        self.rank = basics.rank() if basics.is_initialized() else 0
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def _mine(self):
        padded = self.remaining_indices[:]
        padded += padded[:self.total_size - len(padded)]
        return padded[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        return iter(self._mine())

    def __len__(self):
        return self.num_samples
