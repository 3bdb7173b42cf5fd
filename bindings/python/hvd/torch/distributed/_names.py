"""The names under which torch.distributed calls are negotiated.

torch.distributed's calls carry no names, and dprun negotiates by name. Every
rank of a group makes the group's calls in the same order (torch.distributed
requires it), so the k-th call of a group gets the same name on every rank:
"dist.<g>.<k mod window>", g the group's dprun process set id. Names recur every
`window` calls, so the runtime's response cache holds a bounded set of them, and
a name is enqueued again only once its earlier call has completed
(CallNames.take waits for that, bounded by the group's timeout). A rank that
makes a different call at the same position meets the others' under the same
name, and the negotiation fails every rank's call with a mismatch that names
both; the description kept for each slot lets the error also say, in
torch.distributed's words, which call this rank made.
"""
import threading
import time

WINDOW = 64


class CallNames:
    """The names of one group's calls, in call order. Thread-safe."""

    def __init__(self, group_id, timeout_s, window=WINDOW):
        self._group = group_id
        self._timeout_s = timeout_s
        self._window = window
        self._count = 0
        # Per slot: the event set once the slot's last call completed (None: unused).
        self._busy = [None] * window
        self._lock = threading.Lock()

    @property
    def calls(self):
        """How many calls have taken a name."""
        return self._count

    def take(self, description):
        """(name, index, done) for the next call: `done`, a threading.Event, must
        be set once the call has completed (or failed to enqueue), freeing its name
        for the call `window` later. Waits, up to the group's timeout, for the
        name's previous call; TimeoutError naming both calls if it never ends."""
        with self._lock:
            index = self._count
            self._count += 1
            slot = index % self._window
            previous = self._busy[slot]
            done = threading.Event()
            self._busy[slot] = done
        if previous is not None and not previous.is_set():
            deadline = time.monotonic() + self._timeout_s
            while not previous.wait(min(1.0, max(0.0, deadline - time.monotonic()))):
                if time.monotonic() >= deadline:
                    done.set()
                    raise TimeoutError(
                        "dprun: %s (call %d of process group %d) waits for call %d, whose name "
                        "it reuses, and that call has not completed in %.0f s"
                        % (description, index, self._group, index - self._window,
                           self._timeout_s))
        return "dist.%d.%d" % (self._group, slot), index, done
