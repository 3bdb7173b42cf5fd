"""The torch.distributed backend's suite. Every rank of a job runs it in the same
order: the session starts torch.distributed once over "dprun" (the default group)
and makes a Gloo group of the same ranks, whose results the tests compare with.
Run by bindings/python/run_dist_tests.sh, alone and under dprun -np 2, 3 and 4,
with Debian's torch 1.13 and the torch 2.x of the torch2 environment; tests that
need more ranks or a newer torch skip themselves on every rank alike.
test_jobs.py starts jobs of its own and runs only in a process started alone."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import hvd.torch  # noqa: E402,F401  (registers "dprun")

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def pytest_configure(config):
    torch.set_num_threads(1)  # Ranks share the host's cores.
    if os.environ.get("HVD_DIST_TESTS_NO_INIT"):
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29577")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    dist.init_process_group("dprun")
    config.gloo = dist.new_group(backend="gloo")


def pytest_report_header(config):
    if not dist.is_initialized():
        return "torch %s, no process group" % torch.__version__
    return "torch %s, rank %d of %d over %s" % (torch.__version__, dist.get_rank(),
                                                 dist.get_world_size(), dist.get_backend())


@pytest.fixture(scope="session")
def gloo(pytestconfig):
    return pytestconfig.gloo


@pytest.fixture
def multi_rank():
    if dist.get_world_size() < 2:
        pytest.skip("needs at least 2 ranks")


@pytest.fixture
def torch2():
    if not TORCH2:
        pytest.skip("needs torch 2.x (this is %s)" % torch.__version__)
