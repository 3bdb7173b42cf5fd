"""A test-only `horovod` package: Horovod's own test suites import `horovod.X`; here
each horovod.<name> module is hvd.<name> (horovod.tensorflow is hvd.tensorflow,
horovod.tensorflow.keras is hvd.tensorflow.keras, ...), so they run, unchanged,
against dprun's front-ends. Only for running those suites (run_horovod_tf_tests.sh);
not installed, not part of the hvd package."""
import importlib
import importlib.abc
import importlib.util
import sys

from hvd import run  # noqa: F401  (horovod.run)

# horovod.<name> -> hvd.<name> for these front-ends and everything under them.
_ALIASED = ("tensorflow", "keras", "torch", "elastic")


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        parts = fullname.split(".")
        if len(parts) < 2 or parts[0] != "horovod" or parts[1] not in _ALIASED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module("hvd." + spec.name.split(".", 1)[1])
        sys.modules[spec.name] = module
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _AliasFinder())
