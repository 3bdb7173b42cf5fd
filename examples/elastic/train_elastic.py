"""Elastic training with hvd.torch, Horovod Elastic's way: a small classifier on a
synthetic dataset that survives ranks dying or joining.

    dprun -np 4 --min-np 2 /usr/bin/python3 examples/elastic/train_elastic.py
    dprun -np 2 --min-np 2 --max-np 4 --host-discovery-script ./hosts.sh \
        /usr/bin/python3 examples/elastic/train_elastic.py

Options (environment): ELASTIC_EPOCHS (3), ELASTIC_BATCH (8), ELASTIC_SAMPLES (960),
ELASTIC_STEP_SLEEP (seconds after each step, 0), ELASTIC_LOG (a directory: each
worker appends "start loss L start_rank R host H" as it starts, "epoch E gen G rank R
indices i,j,..." per committed batch and, at the end, "final <checksum>"),
ELASTIC_KILL=ID:EPOCH:BATCH (worker ID SIGKILLs itself right after committing that
batch), ELASTIC_RAISE=ID:EPOCH:BATCH (it raises an exception there instead),
ELASTIC_SHUTDOWN=ID:EPOCH:BATCH (it shuts its runtime down there, once, and goes on),
ELASTIC_KILL_ON_RESET=ID (worker ID SIGKILLs itself as it rejoins after a reset),
ELASTIC_FINAL_SLEEP=ID:SECONDS (worker ID waits that long after training before it
exits): for tests.
"""

import os
import signal
import time

import torch
import torch.nn.functional as F

import hvd.torch as hvd

EPOCHS = int(os.environ.get("ELASTIC_EPOCHS", "3"))
BATCH = int(os.environ.get("ELASTIC_BATCH", "8"))
SAMPLES = int(os.environ.get("ELASTIC_SAMPLES", "960"))
SLEEP = float(os.environ.get("ELASTIC_STEP_SLEEP", "0"))
LOG_DIR = os.environ.get("ELASTIC_LOG")
WORKER = os.environ.get("HVD_ELASTIC_ID", "w?")
KILL = os.environ.get("ELASTIC_KILL", "")
KILL_ON_RESET = os.environ.get("ELASTIC_KILL_ON_RESET", "")
RAISE = os.environ.get("ELASTIC_RAISE", "")
SHUTDOWN = os.environ.get("ELASTIC_SHUTDOWN", "")
shut_down_once = []
FINAL_SLEEP = os.environ.get("ELASTIC_FINAL_SLEEP", "")

hvd.init()
torch.manual_seed(0)

# A learnable synthetic task: the label is which of 4 fixed directions x points to.
g = torch.Generator().manual_seed(1)
X = torch.randn(SAMPLES, 16, generator=g)
W_TRUE = torch.randn(16, 4, generator=g)
Y = (X @ W_TRUE).argmax(dim=1)
dataset = torch.utils.data.TensorDataset(torch.arange(SAMPLES), X, Y)

model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
base_lr = 0.05
optimizer = torch.optim.SGD(model.parameters(), lr=base_lr * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=7)
loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, sampler=sampler)


def log(line):
    if LOG_DIR:
        with open(os.path.join(LOG_DIR, WORKER + ".log"), "a") as f:
            f.write(line + "\n")


def full_loss():
    with torch.no_grad():
        return F.cross_entropy(model(X), Y).item()


@hvd.elastic.run
def train(state):
    for state.epoch in range(state.epoch, EPOCHS):
        for state.batch, (idx, x, y) in enumerate(loader):
            state.optimizer.zero_grad()
            loss = F.cross_entropy(state.model(x), y)
            loss.backward()
            state.optimizer.step()
            state.train_sampler.record_batch(state.batch, BATCH)
            log("epoch %d gen %d rank %d indices %s" % (
                state.epoch, hvd.elastic.generation(), hvd.rank(),
                ",".join(str(int(i)) for i in idx)))
            here = "%s:%d:%d" % (WORKER, state.epoch, state.batch)
            if KILL == here:
                os.kill(os.getpid(), signal.SIGKILL)
            if RAISE == here:
                raise RuntimeError("ELASTIC_RAISE: worker %s fails at %s" % (WORKER, here))
            if SHUTDOWN == here and not shut_down_once:  # the batch is redone after the reset
                shut_down_once.append(here)
                hvd.shutdown()  # nobody dies: the workers must ask dprun to reset
            if SLEEP:
                time.sleep(SLEEP)
            state.commit()
        if hvd.rank() == 0:
            print("epoch %d: loss %.4f on %d rank(s)" % (state.epoch, full_loss(), hvd.size()),
                  flush=True)
        state.train_sampler.set_epoch(state.epoch + 1)
        state.batch = 0
        state.commit()


def on_reset():
    if KILL_ON_RESET == WORKER:
        os.kill(os.getpid(), signal.SIGKILL)
    # The learning rate follows the number of ranks, as in Horovod's examples.
    for group in optimizer.param_groups:
        group["lr"] = base_lr * hvd.size()


state = hvd.elastic.TorchState(model, optimizer, train_sampler=sampler, epoch=0, batch=0)
state.register_reset_callbacks([on_reset])
# Where this worker started, from horovodrun's variables (dprun sets them too; a
# worker added later gets its place in the generation it joins).
log("start loss %.6f start_rank %s host %s" % (
    full_loss(), os.environ.get("HOROVOD_RANK"), os.environ.get("HOROVOD_HOSTNAME")))
train(state)
checksum = sum(float(p.double().sum()) for p in model.parameters())
log("final %.10f loss %.6f size %d" % (checksum, full_loss(), hvd.size()))
hvd.shutdown()
if FINAL_SLEEP.startswith(WORKER + ":"):
    time.sleep(float(FINAL_SLEEP.split(":")[1]))
