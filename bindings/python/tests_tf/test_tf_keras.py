"""hvd.tensorflow.keras with the Keras that tf.keras is: Keras 3 by default, tf-keras
(Keras 2) under TF_USE_LEGACY_KERAS=1 (run_tf_tests.sh runs this file both ways).

The gradients are really averaged: ranks train on different data, and end with
identical weights that equal a one-process run on the union of their batches
(equal local batches, plain SGD: the mean of the ranks' mean-loss gradients is the
union's mean-loss gradient). Also the callbacks, SyncBatchNormalization, local
gradient aggregation and the elastic Keras state."""
import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as hvd_tf
import hvd.tensorflow.keras as hvd
from hvd.tensorflow.util import optimizer_variables

keras = tf.keras
LEGACY = not keras.__name__.startswith("keras") or keras.__version__.startswith("2.")
B, STEPS, FEATURES = 4, 3, 5


def _data(rank, steps=STEPS, seed=0):
    rng = np.random.default_rng(100 * seed + rank)
    x = rng.normal(size=(steps * B, FEATURES)).astype(np.float32)
    y = rng.normal(size=(steps * B, 2)).astype(np.float32)
    return x, y


def _union(steps=STEPS, per_step=1, seed=0):
    """Every rank's batches interleaved so that union step k holds each rank's
    batches k*per_step .. (k+1)*per_step - 1."""
    n = hvd.size()
    data = [_data(q, steps, seed) for q in range(n)]
    xs, ys = [], []
    for k in range(steps // per_step):
        rows = slice(k * per_step * B, (k + 1) * per_step * B)
        for q in range(n):
            xs.append(data[q][0][rows])
            ys.append(data[q][1][rows])
    return np.concatenate(xs), np.concatenate(ys)


def _model(seed=0):
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(2)])
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(scale=0.5, size=w.shape).astype(np.float32)
                       for w in model.get_weights()])
    return model


def _same_everywhere(weights):
    flat = np.concatenate([w.ravel() for w in weights]).astype(np.float64)
    gathered = hvd_tf.allgather(tf.constant(flat[None, :])).numpy()
    return all(np.array_equal(gathered[0], g) for g in gathered)


def _fit_union(steps=STEPS, per_step=1, lr=0.1):
    ref = _model()
    ref.compile(optimizer=keras.optimizers.SGD(lr), loss="mse")
    x, y = _union(steps, per_step)
    ref.fit(x, y, batch_size=hvd.size() * B * per_step, epochs=1, shuffle=False, verbose=0)
    return ref.get_weights()


def test_fit_averages_gradients_like_one_process_on_the_union():
    model = _model()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
    model.compile(optimizer=opt, loss="mse")
    x, y = _data(hvd.rank())
    model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
    assert _same_everywhere(model.get_weights())
    for got, want in zip(model.get_weights(), _fit_union()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if hvd.size() > 1:  # without the wrapper the ranks diverge
        plain = _model()
        plain.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        plain.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
        assert not _same_everywhere(plain.get_weights())


def test_custom_loop_with_distributed_gradient_tape_and_optimizer():
    model = _model()
    loss_fn = keras.losses.MeanSquaredError()
    opt = keras.optimizers.SGD(0.1)
    x, y = _data(hvd.rank())

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        tape = hvd_tf.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    for k in range(STEPS):
        step(x[k * B:(k + 1) * B], y[k * B:(k + 1) * B])
    for got, want in zip(model.get_weights(), _fit_union()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # The same with the optimizer wrapped and eager steps.
    model2 = _model()
    dist = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
    for k in range(STEPS):
        with tf.GradientTape() as tape:
            loss = loss_fn(y[k * B:(k + 1) * B], model2(x[k * B:(k + 1) * B], training=True))
        grads = tape.gradient(loss, model2.trainable_variables)
        dist.apply_gradients(zip(grads, model2.trainable_variables))
    for got, want in zip(model2.get_weights(), _fit_union()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(LEGACY, reason="Keras 3's own optimizers only")
def test_keras3_optimizer_apply_reduces():
    model = _model()
    dist = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
    x, y = _data(hvd.rank())
    for k in range(STEPS):
        with tf.GradientTape() as tape:
            pred = model(x[k * B:(k + 1) * B])
            loss = tf.reduce_mean(tf.square(pred - y[k * B:(k + 1) * B]))
        dist.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
    for got, want in zip(model.get_weights(), _fit_union()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not LEGACY, reason="tf-keras's legacy optimizers (Keras 2 only)")
def test_tf_keras_legacy_optimizer_reduces():
    model = _model()
    opt = hvd.DistributedOptimizer(keras.optimizers.legacy.SGD(0.1))
    model.compile(optimizer=opt, loss="mse")
    x, y = _data(hvd.rank())
    model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
    for got, want in zip(model.get_weights(), _fit_union()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_backward_passes_per_step_aggregates_then_reduces():
    steps = 4
    model = _model()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=2,
                                   average_aggregated_gradients=True)
    model.compile(optimizer=opt, loss="mse")
    x, y = _data(hvd.rank(), steps)
    model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
    assert _same_everywhere(model.get_weights())
    for got, want in zip(model.get_weights(), _fit_union(steps, per_step=2)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert int(opt.iterations.numpy()) == steps  # every pass counts


def test_op_sum_and_argument_checks():
    with pytest.raises(ValueError, match="only supports Average and Sum"):
        hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), op=hvd_tf.Max)
    with pytest.raises(ValueError, match="not a Keras optimizer"):
        hvd.DistributedOptimizer(object())
    model = _model()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1 / hvd.size()),
                                                     op=hvd.Sum), loss="mse")
    x, y = _data(hvd.rank())
    model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
    for got, want in zip(model.get_weights(), _fit_union()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class _Recorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.logs = []
        self.lrs = []

    def on_batch_begin(self, batch, logs=None):
        self.lrs.append(float(keras.backend.get_value(self.model.optimizer.learning_rate)))

    def on_epoch_end(self, epoch, logs=None):
        self.logs.append(dict(logs))


def test_callbacks_broadcast_average_and_warm_up():
    n = hvd.size()
    model = _model(seed=hvd.rank())  # different initial weights on every rank
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
    model.compile(optimizer=opt, loss="mse")
    record = _Recorder()
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                 hvd.callbacks.MetricAverageCallback(),
                 hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.1, warmup_epochs=2,
                                                          steps_per_epoch=STEPS), record]
    x, y = _data(hvd.rank())
    model.fit(x, y, batch_size=B, epochs=2, shuffle=False, verbose=0, callbacks=callbacks)
    assert _same_everywhere(model.get_weights())
    losses = hvd_tf.allgather(tf.constant([record.logs[-1]["loss"]])).numpy()
    assert np.all(losses == losses[0])  # averaged: the same on every rank
    # Warmup: lr = initial / n * (epoch' * (n - 1) / warmup + 1), epoch' = epoch + (batch + 1) / steps.
    want = [0.1 / n * ((e + (b + 1) / STEPS) * (n - 1) / 2 + 1)
            for e in range(2) for b in range(STEPS)]
    np.testing.assert_allclose(record.lrs, want, rtol=1e-5)
    np.testing.assert_allclose(record.logs[-1]["lr"], 0.1, rtol=1e-5)


def test_schedule_callback_staircase():
    model = _model()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    record = _Recorder()
    schedule = hvd.callbacks.LearningRateScheduleCallback(initial_lr=0.1, multiplier=0.5,
                                                          start_epoch=1)
    x, y = _data(hvd.rank())
    model.fit(x, y, batch_size=B, epochs=3, shuffle=False, verbose=0,
              callbacks=[schedule, record])
    np.testing.assert_allclose(record.lrs, [0.1] * STEPS + [0.1] * STEPS + [0.05] * STEPS,
                               rtol=1e-6)


def test_sync_batch_normalization_uses_every_ranks_batch():
    n, r = hvd.size(), hvd.rank()
    x = np.stack([np.array([[q, q + 1], [q * 2, q * 2 + 1], [q * 3, q * 3 + 1]],
                           dtype=np.float32) for q in range(n)])  # (n, 3, 2)
    union = x.reshape(n * 3, 2)
    bn = keras.layers.BatchNormalization(axis=1)
    sync = hvd_tf.SyncBatchNormalization(axis=1)
    want = bn(tf.constant(union), training=True).numpy()[r * 3:(r + 1) * 3]
    got = sync(tf.constant(x[r]), training=True).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sync.moving_mean.numpy(), bn.moving_mean.numpy(), rtol=1e-5)
    np.testing.assert_allclose(sync.moving_variance.numpy(), bn.moving_variance.numpy(),
                               rtol=1e-4)
    with pytest.raises(ValueError, match="fused"):
        hvd_tf.SyncBatchNormalization(fused=True)


def test_elastic_keras_state_sync_restore_commit():
    model = _model(seed=hvd.rank())
    opt = keras.optimizers.SGD(0.1, momentum=0.9)
    model.compile(optimizer=opt, loss="mse")
    x, y = _data(hvd.rank())
    model.fit(x, y, batch_size=B, epochs=1, verbose=0)  # builds the optimizer's variables
    state = hvd.elastic.KerasState(model, batch=20 + hvd.rank(), epoch=10 + hvd.rank())
    state.sync()
    assert _same_everywhere(model.get_weights())
    assert _same_everywhere([v.numpy() for v in optimizer_variables(opt)])
    assert (state.batch, state.epoch) == (20, 10)
    synced = [w.copy() for w in model.get_weights()]
    model.set_weights([w + 1 for w in synced])
    state.batch = 21
    state.restore()
    for got, want in zip(model.get_weights(), synced):
        np.testing.assert_array_equal(got, want)
    assert state.batch == 20
    model.set_weights([w + 1 for w in synced])
    state.batch = 22
    state.commit()
    state.restore()
    for got, want in zip(model.get_weights(), synced):
        np.testing.assert_array_equal(got, want + 1)
    assert state.batch == 22


def test_elastic_keras_callbacks_track_batch_epoch_and_commit():
    model = _model()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    commits = []
    original = state.commit
    state.commit = lambda: (commits.append((state.epoch, state.batch)), original())[1]
    callbacks = [hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.UpdateEpochStateCallback(state),
                 hvd.elastic.CommitStateCallback(state, batches_per_commit=2)]
    x, y = _data(hvd.rank())
    model.fit(x, y, batch_size=B, epochs=2, shuffle=False, verbose=0, callbacks=callbacks)
    assert (state.epoch, state.batch) == (2, 0)
    # Every second batch, the count carrying over epochs (epoch 0's batch 1, epoch 1's
    # batches 0 and 2), and at each epoch's end, after the epoch was counted.
    assert commits == [(0, 1), (1, 0), (1, 0), (1, 2), (2, 0)], commits
