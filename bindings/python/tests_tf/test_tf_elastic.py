"""hvd.tensorflow.elastic in a real elastic job (dprun --min-np): a rank is SIGKILLed
mid-epoch; the survivors' collective fails with the lost rank (a TensorFlow
UnavailableError), hvd.elastic.run restores their last commit, joins dprun's next
generation and carries on from there with a Keras model and optimizer kept by
TensorFlowKerasState, ending with identical weights."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

JOB = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, %r)
    import tensorflow as tf
    import keras
    import hvd.tensorflow as hvd

    hvd.init()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.set_weights([w * 0 + 0.5 for w in model.get_weights()])
    opt = keras.optimizers.SGD(0.1, momentum=0.5)
    opt.build(model.trainable_variables)
    state = hvd.elastic.TensorFlowKerasState(model, opt, epoch=0, batch=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @hvd.elastic.run
    def train(state):
        while state.epoch < 3:
            for state.batch in range(state.batch, 3):
                if (state.epoch, state.batch) == (1, 1) and hvd.rank() == 2 and \\
                        hvd.elastic.generation() == 0:
                    os.kill(os.getpid(), signal.SIGKILL)
                seed = [state.epoch, 10 * state.batch + hvd.rank()]
                x = tf.random.stateless_normal([8, 4], seed=seed)
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(model(x)))
                tape = hvd.DistributedGradientTape(tape)
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                state.commit()
            state.batch = 0
            state.epoch += 1
        return hvd.size()

    size = train(state)
    flat = tf.concat([tf.reshape(v, [-1]) for v in model.variables], 0)
    gathered = hvd.allgather(tf.reshape(flat, [1, -1])).numpy()
    same = all((g == gathered[0]).all() for g in gathered)
    print("done rank %%d size %%d resets %%s identical %%s" %% (hvd.rank(), size, resets, same),
          flush=True)
""")


@pytest.mark.single
@pytest.mark.slow
def test_a_killed_rank_resets_the_others_which_train_on(tmp_path):
    from hvd import _lib
    script = tmp_path / "elastic_job.py"
    script.write_text(JOB % os.path.join(HERE, ".."))
    dprun = os.path.join(os.path.dirname(_lib.lib().path), "dprun")
    out = subprocess.run([dprun, "-np", "3", "--min-np", "2", sys.executable, str(script)],
                         capture_output=True, text=True, timeout=240,
                         env=dict(os.environ, HVD_TIMEOUT="10", TF_CPP_MIN_LOG_LEVEL="3"))
    done = re.findall(r"done rank (\d) size (\d) resets \[(.*?)\] identical (\w+)", out.stdout)
    assert len(done) == 2, out.stdout + out.stderr
    for rank, size, resets, same in done:
        assert size == "2" and resets == "2" and same == "True", out.stdout
    assert sorted(r for r, _, _, _ in done) == ["0", "1"]
    assert "was killed by signal 9" in out.stderr
    assert out.returncode == 0, out.stderr
