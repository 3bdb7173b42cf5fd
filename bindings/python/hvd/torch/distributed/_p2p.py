"""send and recv between two ranks of a group, through the group's torch store.

dprun's collectives involve every rank of a process set, and a set is made by
all ranks together, so a pair of ranks that exchanges tensors (a pipeline's
stages) goes through the rendezvous store torch.distributed gave the group
instead: the k-th message from rank s to rank d under tag t is the store key
"dprun/p2p/<s>/<d>/<t>/<k>", each side counting its own messages, so both agree
on k. The value is a header ("<dtype> <dims>\\n") and the tensor's bytes; recv
checks the header against its tensor and fails naming both when they differ.
Slower than the collectives (every byte crosses the store's server), never out
of order. recv waits on a thread of a small pool, so recv's Work is asynchronous
as torch's; a send completes once the store holds the message. Waits are bounded
by the group's timeout (the store's own for get(), and recv_any's polling).
"""
import collections
import concurrent.futures
import datetime
import threading
import time

import torch

from hvd import errors
from hvd.torch.distributed import _completion


class AnySourceWork(_completion.DprunWork):
    """recv_anysource's Work: torch.distributed.recv(src=None) asks it, from Python,
    which rank the message came from."""

    def __init__(self):
        super().__init__(None)
        self.source = -1

    def _source_rank(self):
        return self.source

    def source_rank(self):
        return self.source


class PointToPoint:
    """One group's send and recv: `store` the group's torch store, `rank` this
    rank's rank in the group."""
    POLL_S = 0.01

    def __init__(self, store, rank, timeout_s):
        self._store = store
        self._rank = rank
        self._timeout_s = timeout_s
        self._sent = collections.Counter()
        self._received = collections.Counter()
        self._lock = threading.Lock()
        self._pool = None

    def _next(self, counter, peer, tag):
        with self._lock:
            k = counter[(peer, tag)]
            counter[(peer, tag)] = k + 1
        return k

    @staticmethod
    def _key(src, dst, tag, k):
        return "dprun/p2p/%d/%d/%d/%d" % (src, dst, tag, k)

    def send(self, t, dst, tag):
        k = self._next(self._sent, dst, tag)
        data = t.detach().reshape(-1).contiguous().cpu()
        header = ("%s %s\n" % (str(t.dtype).replace("torch.", ""),
                               ",".join(str(d) for d in t.shape))).encode()
        body = data.view(torch.uint8).numpy().tobytes() if data.numel() else b""
        self._store.set(self._key(self._rank, dst, tag, k), header + body)

    def _take(self, t, src, tag, k):
        """Reads message k from `src` into t (waits in the store's get)."""
        key = self._key(src, self._rank, tag, k)
        payload = self._store.get(key)
        self._store.delete_key(key)
        header, _, body = bytes(payload).partition(b"\n")
        mine = "%s %s" % (str(t.dtype).replace("torch.", ""), ",".join(str(d) for d in t.shape))
        if header.decode() != mine:
            raise errors.MismatchError(
                "dprun: recv from rank %d (tag %d, message %d): rank %d sent a %s tensor, this "
                "rank receives into a %s one" % (src, tag, k, src, header.decode(), mine),
                status="HVD_MISMATCH")
        if body:
            received = torch.frombuffer(bytearray(body), dtype=torch.uint8)
            t.copy_(received.view(t.dtype).view(t.shape))

    def _spawn(self, job):
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=4, thread_name_prefix="hvd-dist-p2p")
        raw, future = _completion.new_future()

        def run():
            try:
                raw.set_result(job())
            except BaseException as e:  # noqa: BLE001 (the future carries it)
                raw.set_result(_completion.Failure(
                    e if isinstance(e, Exception) else RuntimeError(str(e))))
        self._pool.submit(run)
        return raw, future

    def recv(self, t, src, tag):
        """(raw, future) (_completion.new_future): the future completes with [t] once
        message k from `src` is in t."""
        k = self._next(self._received, src, tag)

        def job():
            self._take(t, src, tag, k)
            return [t]
        return self._spawn(job)

    def _has(self, key):
        """Whether the store holds `key` now (torch 1.13's stores have no check())."""
        if hasattr(self._store, "check"):
            return self._store.check([key])
        try:
            self._store.wait([key], datetime.timedelta(milliseconds=1))
            return True
        except RuntimeError:  # torch's store timeout
            return False

    def recv_any(self, t, size, tag):
        """recv from whichever rank's next message (under `tag`) arrives first."""
        work = None

        def job():
            deadline = time.monotonic() + self._timeout_s
            while True:
                for src in range(size):
                    if src == self._rank:
                        continue
                    with self._lock:
                        k = self._received[(src, tag)]
                    if self._has(self._key(src, self._rank, tag, k)):
                        self._next(self._received, src, tag)
                        self._take(t, src, tag, k)
                        work.source = src
                        return [t]
                if time.monotonic() >= deadline:
                    raise errors.HvdTimeoutError(
                        "dprun: recv from any rank (tag %d): no message in %.0f s"
                        % (tag, self._timeout_s), status="HVD_TIMEOUT")
                time.sleep(self.POLL_S)
        work = AnySourceWork()
        work._raw, work._future = self._spawn(job)
        return work
