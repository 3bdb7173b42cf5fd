"""hvd.run (horovod.run's API): each call starts a dprun job of its own, so these run
in the single-process pass of the suite only (at every size the decision is the same
on every rank)."""
import os

import pytest
import torch

import hvd
from hvd import runner

# From the environment, not hvdt.size(): the ranks of hvd.run import this module too
# (to find the functions below) before they call init.
pytestmark = pytest.mark.skipif(int(os.environ.get("HVD_SIZE", "1")) > 1,
                                reason="hvd.run starts its own job: tested from the "
                                "single-process run")


def _sum_of_ranks(scale, offset=0):
    import hvd.torch as h
    h.init()
    total = h.allreduce(torch.tensor([float(h.rank() + 1)]), op=h.Sum)
    result = (h.rank(), h.size(), total.item() * scale + offset, os.environ.get("HOROVOD_RANK"))
    h.shutdown()
    return result


def test_each_ranks_return_value_in_rank_order():
    got = hvd.run(_sum_of_ranks, args=(2,), kwargs={"offset": 1}, num_proc=3)
    # 1 + 2 + 3 = 6, times 2, plus 1.
    assert got == [(0, 3, 13.0, "0"), (1, 3, 13.0, "1"), (2, 3, 13.0, "2")]


def test_lambdas_and_large_arguments_travel():
    # A lambda needs cloudpickle; 300 kB of arguments go in a file, not the environment.
    big = bytes(range(256)) * 1200
    assert len(runner.dumps(big)) > runner._ENV_LIMIT
    got = hvd.run(lambda b, k=0: (len(b), b[:3], k), args=(big,), kwargs={"k": 5}, np=2)
    assert got == [(len(big), bytes([0, 1, 2]), 5)] * 2


def _raise_on_one():
    import hvd.torch as h
    h.init()
    rank = h.rank()
    if rank == 1:
        raise ValueError("rank one cannot go on")
    h.barrier()  # fails once rank 1 is gone
    return rank


def test_an_exception_names_the_rank_and_carries_its_traceback(capsys):
    with pytest.raises(RuntimeError) as e:
        hvd.run(_raise_on_one, num_proc=2)
    # dprun's and the ranks' stderr come through sys.stderr (a notebook shows them).
    err = capsys.readouterr().err
    assert "[1]<stderr>:ValueError: rank one cannot go on" in err
    assert "dprun: " in err and "rank 1 (pid " in err
    text = str(e.value)
    # Rank 1's exception is the cause; rank 0's barrier failed because of it.
    assert "hvd.run: rank 1 raised ValueError: rank one cannot go on (rank(s) 0 failed" in text
    assert "in _raise_on_one" in text  # the rank's traceback


def _exit_with(code):
    import sys
    sys.exit(code)


def test_sys_exit_and_unpicklable_results():
    # sys.exit(0) in the function is a return of None; another code is the rank's error.
    assert hvd.run(_exit_with, args=(0,), num_proc=2) == [None, None]
    with pytest.raises(RuntimeError, match=r"rank \d raised SystemExit: the function called "
                       r"sys.exit\(4\)"):
        hvd.run(_exit_with, args=(4,), num_proc=2)
    with pytest.raises(RuntimeError, match=r"rank \d raised \w+: its return value cannot be "
                       r"pickled"):
        hvd.run(lambda: __import__("threading").Lock(), num_proc=2)


def test_a_rank_that_dies_fails_the_call_with_dprun_s_exit_code():
    with pytest.raises(RuntimeError, match=r"dprun exited with code 3"):
        hvd.run(os._exit, args=(3,), num_proc=2)


def test_refusals_and_horovod_arguments():
    with pytest.raises(ValueError, match="does not run MPI"):
        hvd.run(len, args=("x",), use_mpi=True)
    with pytest.raises(ValueError, match="hosts or hostfile"):
        hvd.run(len, args=("x",), hosts="a:1", hostfile="/h")
    with pytest.raises(ValueError, match="one network interface"):
        hvd.run(len, args=("x",), network_interfaces=["eth0", "eth1"])
    cmd = runner._command(4, None, 8, 2, 3, (1, 5), "a:2,b:2", None, None, 30, 2222, "/k",
                          "/out", True, ["eth1"])
    assert cmd[1:] == ["-np", "4", "--slots-per-host", "2", "--reset-limit", "3",
                       "--blacklist-cooldown-range", "1", "5", "-H", "a:2,b:2",
                       "--start-timeout", "30", "-p", "2222", "--ssh-identity-file", "/k",
                       "--output-filename", "/out", "--verbose", "--network-interface", "eth1"]
    assert os.path.basename(cmd[0]) == "dprun"
    # Elastic as horovodrun: with a minimum or a discovery script.
    cmd = runner._command(2, None, 4, None, None, None, None, None, "./hosts.sh", None, None,
                          None, None, None, None)
    assert cmd[1:] == ["-np", "2", "--min-np", "2", "--max-np", "4",
                       "--host-discovery-script", "./hosts.sh"]


def _marked(start_rank, rank, kind, obj, pieces=1):
    import base64
    text = base64.b64encode(runner.dumps(obj)).decode()
    step = -(-len(text) // pieces)
    return ["[%d]<stdout>:%s%d %s %d %d %s" % (start_rank, runner.MARK, rank, kind, i, pieces,
                                                text[i * step:(i + 1) * step])
            for i in range(pieces)]


def _fake_job(lines, code=0):
    """A command printing `lines` as dprun would, then exiting with `code`."""
    import shlex
    script = "".join("printf '%%s\\n' %s; " % shlex.quote(line) for line in lines)
    return ["sh", "-c", script + "exit %d" % code]


def test_the_cause_is_the_first_error_that_is_not_a_lost_peer(capsys):
    lines = (["[0]<stdout>:a line of the rank's own"]
             + _marked(0, 0, "E", ("RemoteError", "rank 1 is gone", "tb0"))
             + _marked(2, 2, "E", ("ShutDownError", "shut down", "tb2"))
             + _marked(1, 1, "E", ("KeyError", "'lr'", "tb1"), pieces=3))
    with pytest.raises(RuntimeError) as e:
        runner._collect(_fake_job(lines, code=1))
    assert str(e.value).startswith(
        "hvd.run: rank 1 raised KeyError: 'lr' (rank(s) 0, 2 failed too)\n\nThe rank's "
        "traceback:\ntb1")
    assert capsys.readouterr().out == "[0]<stdout>:a line of the rank's own\n"


def test_results_in_pieces_and_out_of_order_ranks_are_put_together():
    big = list(range(5000))
    lines = _marked(1, 1, "R", "one") + _marked(0, 0, "R", big, pieces=4)
    assert runner._collect(_fake_job(lines)) == [big, "one"]
    with pytest.raises(RuntimeError, match=r"rank 0's result arrived in 3 of 4 pieces"):
        runner._collect(_fake_job(_marked(0, 0, "R", big, pieces=4)[:3]))
    with pytest.raises(RuntimeError, match=r"results came from ranks \[1\], not 0..0"):
        runner._collect(_fake_job(_marked(1, 1, "R", "one")))


def test_further_dprun_flags_go_on_the_command_line(monkeypatch):
    monkeypatch.setattr(runner, "_collect", lambda cmd: cmd)  # the command, not the job
    cmd = hvd.run(len, args=("x",), num_proc=2, dprun_args=["--ssh-option", "Port=2222"])
    at = cmd.index("--ssh-option")
    assert cmd[at:at + 3] == ["--ssh-option", "Port=2222", "-x"]
    assert cmd[at + 3].startswith("HVD_RUN_FUNC=")
    assert cmd[-3:] == [runner.sys.executable, "-m", "hvd._run_task"]
