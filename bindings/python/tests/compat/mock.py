"""The `mock` package Horovod's test utilities import: the standard library's."""
from unittest.mock import *  # noqa: F401,F403
