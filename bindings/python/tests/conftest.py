"""Every rank of a dprun job runs this same suite, in the same order: the runtime is
initialised once for the session, and each test makes the same collectives on
every rank. Tests that assert on results do all their collectives first and assert
afterwards where they can, so a failing rank does not leave the others waiting.
Tests that need several ranks skip themselves on every rank alike (the decision
depends only on hvd.size())."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pytest  # noqa: E402
import torch  # noqa: E402

import hvd.torch as hvd  # noqa: E402


def pytest_configure(config):
    torch.set_num_threads(1)  # Ranks share the host's cores.
    hvd.init()


def pytest_report_header(config):
    return "hvd: rank %d of %d, library %s" % (hvd.rank(), hvd.size(), hvd_library())


def hvd_library():
    from hvd import _lib
    return _lib.lib().path


@pytest.fixture
def multi_rank():
    if hvd.size() < 2:
        pytest.skip("needs at least 2 ranks")


@pytest.fixture
def hooked(monkeypatch):
    """DistributedOptimizer hooks at every size: a job of one rank registers none
    (as Horovod) unless it is elastic, so tests of the hooks run as one there."""
    if hvd.size() == 1:
        monkeypatch.setenv("HOROVOD_ELASTIC", "1")
