"""SyncBatchNorm: batch normalization over the concatenated batch of every rank
(horovod.torch.SyncBatchNorm 0.28).

Forward, when batch statistics are used (training, or eval without running
stats): each rank computes its per-channel count, mean and biased variance; one
allgather ("sync_batch_norm.stats", float64) brings every rank all of them, and
each rank merges them (Chan's parallel formula, stable where sum-of-squares is
not) into the global mean and biased variance, the statistics torch.nn.BatchNorm
would compute on the concatenation of all ranks' inputs. The running mean and
variance (unbiased, count/(count-1)) are updated from these, so they are identical
on every rank; num_batches_tracked and momentum=None (cumulative average) behave
as in torch. Local batches may differ in size and may be empty (a rank with zero
rows contributes nothing); a global count of one value per channel raises
ValueError on every rank, and a globally empty batch leaves the running stats alone.

Backward: the per-channel sums of dy and of dy * (x - mean) are allreduced (Sum,
"sync_batch_norm.grad_sums") and give the input gradient of the sum of all ranks'
losses, as torch.nn.BatchNorm on the concatenated batch would. The weight and bias
gradients are this rank's local contributions (their sum over ranks is the
gradient of the sum of the losses), as in torch.nn.SyncBatchNorm and Horovod: the
usual gradient allreduce (DistributedOptimizer) then completes them, and with its
Average every parameter, these included, gets the gradient of the mean loss.

Eval mode with running stats is plain batch norm on them, with no communication;
so is everything in a job of one rank.

Contract: every rank of the job calls forward, and backward, on its
SyncBatchNorm layers in the same order, with the same number of channels and the
same training mode and requires_grad on the input; the layers use the global
process set. Unlike Horovod 0.28 (CUDA only), CPU tensors work; float16 input
needs a device whose batch norm takes it (the CPU's in this torch does not).
"""
import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable
from torch.nn.modules.batchnorm import _BatchNorm

from hvd.basics import size
from hvd.torch.mpi_ops import Sum, allgather_async, allreduce_async, synchronize


def _reduce_dims(x):
    return [0] + list(range(2, x.dim()))


def _channel_view(t, x):
    """`t` (C,) shaped to broadcast against `x` (N, C, ...)."""
    return t.reshape([1, -1] + [1] * (x.dim() - 2))


def _acc_dtype(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _local_moments(x):
    """This rank's (1, 2C+1) float64 row: count, per-channel mean, biased variance."""
    channels = x.size(1)
    count = x.numel() // channels if channels else 0
    row = torch.zeros(1, 2 * channels + 1, dtype=torch.float64, device=x.device)
    row[0, 0] = count
    if count:
        var, mean = torch.var_mean(x, dim=_reduce_dims(x), unbiased=False)
        row[0, 1:channels + 1] = mean
        row[0, channels + 1:] = var
    return row


def _merge_moments(rows):
    """Every rank's rows -> (global count, mean, biased variance), in float64."""
    channels = (rows.size(1) - 1) // 2
    counts = rows[:, :1]
    means = rows[:, 1:channels + 1]
    variances = rows[:, channels + 1:]
    total = counts.sum()
    if total == 0:
        return 0, None, None
    mean = (counts * means).sum(0) / total
    var = (counts * (variances + (means - mean) ** 2)).sum(0) / total
    return int(total), mean, var


def _update_running(running_mean, running_var, mean, var, count, factor):
    with torch.no_grad():
        unbiased = var * count / (count - 1)
        running_mean.copy_(factor * mean + (1 - factor) * running_mean.double())
        running_var.copy_(factor * unbiased + (1 - factor) * running_var.double())


class _SyncBatchNormFunction(torch.autograd.Function):

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, factor):
        rows = synchronize(allgather_async(_local_moments(x), name="sync_batch_norm.stats"))
        count, mean, var = _merge_moments(rows)
        ctx.count = count
        if count == 0:  # Every rank's batch is empty: nothing to normalize or update.
            ctx.save_for_backward(weight)
            return x.clone()
        if count == 1:
            raise ValueError("Expected more than 1 value per channel when training, got 1 "
                             "over all ranks (input size %s on this rank)" % (tuple(x.shape),))
        if running_mean is not None:
            _update_running(running_mean, running_var, mean, var, count, factor)
        stat_dtype = weight.dtype if weight is not None else x.dtype
        out = F.batch_norm(x, mean.to(stat_dtype), var.to(stat_dtype), weight, bias,
                           False, 0.0, eps)
        acc = _acc_dtype(x)
        ctx.save_for_backward(x, weight, mean.to(acc), torch.rsqrt(var + eps).to(acc))
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        if ctx.count == 0:
            return _empty_grads(dy, ctx.saved_tensors[0], ctx.needs_input_grad)
        x, weight, mean, invstd = ctx.saved_tensors
        need_input, need_weight, need_bias = ctx.needs_input_grad[:3]
        dims = _reduce_dims(x)
        acc = mean.dtype
        xmu = x.to(acc) - _channel_view(mean, x)
        dy_acc = dy.to(acc)
        sum_dy = dy_acc.sum(dims)
        sum_dy_xmu = (dy_acc * xmu).sum(dims)
        grad_input = grad_weight = grad_bias = None
        if need_weight and weight is not None:
            grad_weight = (sum_dy_xmu * invstd).to(weight.dtype)
        if need_bias and weight is not None:
            grad_bias = sum_dy.to(weight.dtype)
        if need_input:
            grad_input = _input_grad(dy_acc, xmu, weight, invstd, sum_dy, sum_dy_xmu,
                                     ctx.count).to(x.dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None


def _empty_grads(dy, weight, needs):
    zeros = None if weight is None else torch.zeros_like(weight)
    return (torch.zeros_like(dy) if needs[0] else None, zeros if needs[1] else None,
            zeros if needs[2] else None, None, None, None, None)


def _input_grad(dy, xmu, weight, invstd, sum_dy, sum_dy_xmu, count):
    """dL/dx from the local dy and x - mean and the global per-channel sums."""
    sums = synchronize(allreduce_async(torch.cat([sum_dy, sum_dy_xmu]), op=Sum,
                                       name="sync_batch_norm.grad_sums"))
    channels = sum_dy.numel()
    mean_dy = sums[:channels] / count
    mean_dy_xmu = sums[channels:] / count
    scale = invstd if weight is None else invstd * weight.to(invstd.dtype)
    proj = mean_dy_xmu * invstd * invstd
    return (dy - _channel_view(mean_dy, dy) - xmu * _channel_view(proj, dy)) \
        * _channel_view(scale, dy)


class SyncBatchNorm(_BatchNorm):
    """Batch normalization with statistics over every rank's batch (see the module
    docstring); takes (N, C, ...) input of any number of spatial dimensions.

    Args:
      num_features: C, the number of channels.
      eps: added to the variance for numerical stability.
      momentum: the running stats' update factor; None for a cumulative average.
      affine: whether the module has a learnable weight and bias.
      track_running_stats: whether it keeps running stats (otherwise it always uses
        batch statistics, synchronized, in eval mode too).
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)".format(input.dim()))

    def _uses_batch_stats(self):
        return self.training or (self.running_mean is None and self.running_var is None)

    def _average_factor(self):
        """Counts the batch, as torch's _BatchNorm does; the running stats' factor."""
        if not (self.training and self.track_running_stats):
            return 0.0
        self.num_batches_tracked.add_(1)
        if self.momentum is None:
            return 1.0 / float(self.num_batches_tracked)
        return self.momentum

    def forward(self, input):
        self._check_input_dim(input)
        if size() == 1 or not self._uses_batch_stats():
            return super().forward(input)
        if input.size(1) != self.num_features:
            raise ValueError("expected input with %d channels, got input of size %s"
                             % (self.num_features, tuple(input.shape)))
        factor = self._average_factor()
        update = self.training and self.track_running_stats
        return _SyncBatchNormFunction.apply(
            input, self.weight, self.bias, self.running_mean if update else None,
            self.running_var if update else None, self.eps, factor)
