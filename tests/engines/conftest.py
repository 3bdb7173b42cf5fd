"""The engines' tests (tests/engines/run_tests.sh runs them): each starts its engine
for real (a local Ray cluster, a local Spark, slurmctld + slurmd + munge, mpiexec) and
skips itself with one line when that engine is not installed. Marked `slow` where a
test starts a whole cluster; `pytest -m "not slow"` leaves those out."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
sys.path.insert(0, HERE)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: starts a whole engine (a cluster) for real")
