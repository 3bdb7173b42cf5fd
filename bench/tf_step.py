"""hvd.tensorflow against TensorFlow's own collectives, and the per-op cost of an
allreduce from TensorFlow.

compare (under dprun -np N, one host): every rank builds a
tf.distribute.MultiWorkerMirroredStrategy (TF_CONFIG on 127.0.0.1; TensorFlow's
collective ops, ring over gRPC) and hvd.tensorflow in the same process, then
alternates K steps of each, round after round, on the same tensors:
  cnn-grads, resnet50-grads  the gradient set of a Keras CNN (MNIST-sized) or of
                 Keras's ResNet-50 (its trainable variables' shapes), summed
                 across ranks: dprun through the reduction DistributedGradientTape
                 uses (one tf.function, one allreduce per gradient, fused by the
                 runtime); MWMS through the replica context's all_reduce, as a
                 custom loop under the strategy does;
  cnn-step       a whole training step of the CNN (forward, backward, reduction,
                 SGD update): DistributedGradientTape and Keras's SGD, against the
                 same model under the strategy's scope with strategy.run.
Prints, per workload, the median step of each and their ratio (dprun / MWMS: below
1 is faster); rank 0 prints.

    flock /tmp/dprun-bench.lock build/dprun -np 2 PY bench/tf_step.py compare

overhead (one process): the host cost per allreduce op from TensorFlow: a
tf.function of N allreduces of 16 floats (the runtime does the rest of a 1-rank
collective), divided by N, against the same function of N tf.identity ops (what
TensorFlow charges for any op) and, with --async-floor, of N do-nothing
asynchronous ops (bench/tf_async_floor.cc, compiled on the fly: what TensorFlow
charges for an AsyncOpKernel), and one eager allreduce call. Compare with
bench/enqueue_cost.py (the torch binding's enqueue + synchronize per tensor), run
back to back:

    flock /tmp/dprun-bench.lock PY bench/tf_step.py overhead --tensors 1000
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _timed(fn, steps):
    t0 = time.perf_counter()
    for _ in range(steps):
        out = fn()
    _sync(out)
    return (time.perf_counter() - t0) / steps


def _sync(out):
    import tensorflow as tf
    for t in tf.nest.flatten(out):
        if hasattr(t, "numpy"):
            t.numpy()
            return


def _strategy(rank, size, port):
    """MultiWorkerMirroredStrategy over 127.0.0.1, made before anything else in
    TensorFlow (its collectives are configured at startup)."""
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": ["127.0.0.1:%d" % (port + i) for i in range(size)]},
        "task": {"type": "worker", "index": rank}})
    import tensorflow as tf
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def _cnn():
    import keras
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10)])


def _grad_set(name):
    """Tensors shaped like a model's trainable variables."""
    import keras
    import tensorflow as tf
    if name == "resnet50":
        model = keras.applications.ResNet50(weights=None)
    else:
        model = _cnn()
    return [tf.ones(v.shape, tf.float32) * 0.001 for v in model.trainable_variables]


def compare(args):
    rank, size = int(os.environ.get("HVD_RANK", 0)), int(os.environ.get("HVD_SIZE", 1))
    # Ranks agree on the ports through their parent, dprun.
    strategy = _strategy(rank, size, args.port or 20000 + (os.getppid() * 7) % 20000)
    import tensorflow as tf
    import keras
    import hvd.tensorflow as hvd
    from hvd.tensorflow.compression import Compression
    from hvd.tensorflow.gradients import make_allreduce_grads_fn
    hvd.init()
    assert hvd.size() == size and strategy.num_replicas_in_sync == size

    reduce_hvd = make_allreduce_grads_fn("bench", "", "", Compression.none, False, hvd.Sum, 1.0,
                                         None, hvd.global_process_set, subgraph=True)

    @tf.function
    def reduce_mwms(grads):
        def fn(gs):
            # On the replica's device, as a gradient computed there is.
            gs = [tf.identity(g) for g in gs]
            return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, gs)
        return strategy.run(fn, args=(grads,))

    # Both reduce: rank r contributes r + 1.
    probe = [tf.fill([4], float(rank + 1))]
    want = size * (size + 1) / 2
    got_hvd = reduce_hvd(probe)[0].numpy()
    got_mwms = strategy.experimental_local_results(reduce_mwms(probe))[0][0].numpy()
    assert (got_hvd == want).all() and (got_mwms == want).all(), (got_hvd, got_mwms)

    workloads = []
    for name in args.workloads:
        if name.endswith("-grads"):
            grads = _grad_set(name[:-len("-grads")])
            mb = sum(int(tf.size(g)) for g in grads) * 4 / 2 ** 20
            label = "%s (%d tensors, %.1f MiB)" % (name, len(grads), mb)
            workloads.append((label, lambda g=grads: reduce_hvd(g),
                              lambda g=grads: reduce_mwms(g)))
        elif name == "cnn-step":
            workloads.append(("cnn-step (batch %d per rank)" % args.batch,)
                             + _cnn_steps(strategy, hvd, args.batch))
    for label, run_hvd, run_mwms in workloads:
        for _ in range(args.warmup):
            _sync(run_hvd())
            _sync(run_mwms())
        t_hvd, t_mwms = [], []
        for _ in range(args.rounds):
            t_hvd.append(_timed(run_hvd, args.steps))
            t_mwms.append(_timed(run_mwms, args.steps))
        if rank == 0:
            a, b = statistics.median(t_hvd), statistics.median(t_mwms)
            print("%d ranks %-40s dprun %8.2f ms  MWMS %8.2f ms  dprun/MWMS %.3f "
                  "(per-round ratios %s)" % (
                      size, label, a * 1e3, b * 1e3, a / b,
                      " ".join("%.2f" % (x / y) for x, y in zip(t_hvd, t_mwms))), flush=True)
    hvd.barrier()


def _cnn_steps(strategy, hvd, batch):
    import keras
    import numpy as np
    import tensorflow as tf
    rng = np.random.default_rng(hvd.rank())
    x = tf.constant(rng.normal(size=(batch, 28, 28, 1)).astype(np.float32))
    y = tf.constant(rng.integers(0, 10, size=(batch,)))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    model = _cnn()
    opt = keras.optimizers.SGD(0.01)

    @tf.function
    def step_hvd():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    with strategy.scope():
        model_m = _cnn()
        opt_m = keras.optimizers.SGD(0.01)

    @tf.function
    def step_mwms():
        def fn():
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model_m(x, training=True)) / strategy.num_replicas_in_sync
            grads = tape.gradient(loss, model_m.trainable_variables)
            opt_m.apply_gradients(zip(grads, model_m.trainable_variables))
            return loss
        return strategy.run(fn)
    return step_hvd, step_mwms


def _async_floor_op():
    """BenchAsyncNoop from bench/tf_async_floor.cc, built with tf.sysconfig's flags."""
    import subprocess
    import tempfile
    import tensorflow as tf
    lib = os.path.join(tempfile.mkdtemp(), "tf_async_floor.so")
    subprocess.check_call(["g++", "-O2", "-shared", "-fPIC", "-w",
                           os.path.join(HERE, "tf_async_floor.cc"), "-o", lib] +
                          tf.sysconfig.get_compile_flags() + tf.sysconfig.get_link_flags())
    return tf.load_op_library(lib).bench_async_noop


def overhead(args):
    import tensorflow as tf
    import hvd.tensorflow as hvd
    hvd.init()
    tensors = [tf.ones([args.numel]) * i for i in range(args.tensors)]
    noop = _async_floor_op() if args.async_floor else None

    @tf.function
    def noops(ts):
        return [noop(t) for t in ts]

    @tf.function
    def allreduces(ts):
        return [hvd.allreduce(t, op=hvd.Sum, name="bench.%d" % i) for i, t in enumerate(ts)]

    @tf.function
    def identities(ts):
        return [tf.identity(t) for t in ts]

    one = tensors[0]
    results = {}
    for label, fn, n in (("tf.function of %d allreduces" % args.tensors,
                          lambda: allreduces(tensors), args.tensors),
                         ("tf.function of %d tf.identity" % args.tensors,
                          lambda: identities(tensors), args.tensors),
                         ("one eager allreduce", lambda: hvd.allreduce(one, op=hvd.Sum), 1)) + (
                             (("tf.function of %d async no-ops" % args.tensors,
                               lambda: noops(tensors), args.tensors),) if noop else ()):
        for _ in range(3):
            _sync(fn())
        per = [_timed(fn, args.steps) / n for _ in range(args.rounds)]
        results[label] = statistics.median(per)
        print("%-40s %8.2f us per op (median of %d rounds; min %.2f)"
              % (label, statistics.median(per) * 1e6, args.rounds, min(per) * 1e6), flush=True)
    extra = results["tf.function of %d allreduces" % args.tensors] - \
        results["tf.function of %d tf.identity" % args.tensors]
    print("allreduce beyond TensorFlow's own per-op cost: %.2f us per op" % (extra * 1e6))
    if noop:
        floor = results["tf.function of %d async no-ops" % args.tensors]
        print("allreduce beyond TensorFlow's cost of an async op: %.2f us per op"
              % ((results["tf.function of %d allreduces" % args.tensors] - floor) * 1e6))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["compare", "overhead"])
    p.add_argument("--workloads", nargs="+",
                   default=["cnn-grads", "resnet50-grads", "cnn-step"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--port", type=int, default=0, help="MWMS base port (default from dprun's pid)")
    p.add_argument("--tensors", type=int, default=1000)
    p.add_argument("--numel", type=int, default=16)
    p.add_argument("--async-floor", action="store_true",
                   help="also time do-nothing async ops (compiles bench/tf_async_floor.cc)")
    args = p.parse_args()
    compare(args) if args.mode == "compare" else overhead(args)


if __name__ == "__main__":
    main()
