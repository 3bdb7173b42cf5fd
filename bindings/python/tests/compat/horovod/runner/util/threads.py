"""horovod.runner.util.threads.in_thread, which Horovod's test/utils/common.py imports."""
import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Runs target(*args) in a new (daemon) thread and returns the thread."""
    def run():
        try:
            target(*args)
        except BaseException:  # noqa: BLE001
            if not silent:
                raise
    thread = threading.Thread(target=run, name=name, daemon=daemon)
    thread.start()
    return thread
