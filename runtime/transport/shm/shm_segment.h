// ShmSegment: one POSIX shared-memory segment that the ranks of a communicator on
// one host map, with the counters they synchronise through. ShmBackend
// (runtime/transport/shm/shm_backend.h) and the shared-memory control channel
// (runtime/transport/shm/shm_control_channel.h) are built on it.
//
// Rendezvous. Rank 0 creates the segment (shm_open + ftruncate + mmap), initialises
// the header and publishes the segment's name under "shm/<kind>/segment" in the
// store. Every other rank reads the name, maps the segment and claims its rank's
// slot in the header by writing its pid. Every rank then waits until all `size`
// ranks have arrived, and rank 0 unlinks the name: from then on the memory lives
// exactly as long as some process maps it, so nothing is left in /dev/shm when a
// process dies. Create() is bounded by `timeout`; kTimeout names the ranks that
// never arrived.
//
// Layout (every counter on its own 64-byte line, so a rank spinning on one never
// steals the line another rank is writing):
//
//   [Header: magic, size, data bytes, abort record, the arrival counter]
//   [RankBlock 0: pid, start time, counters_per_rank Counters]
//   ...
//   [RankBlock size-1]
//   [data: data_bytes, 4 KiB aligned, for the caller]
//
// Counters. A Counter is a 32-bit value that only its owner writes, always
// increasing (compared modulo 2^32, so it may wrap), plus a count of waiters. Post()
// stores the new value and issues FUTEX_WAKE only when someone sleeps on it;
// WaitAtLeast() spins for a few microseconds, then sleeps in FUTEX_WAIT (the shared,
// non-private form: ranks are separate processes) in slices of at most 100 ms.
// After each wake it looks whether some rank aborted; once it has waited 100 ms, it
// checks every 100 ms that the peer it waits for is alive (its /proc/<pid>/stat
// exists, is not a zombie and shows the start time recorded at rendezvous; kill(pid,
// 0) where /proc is absent), and every second every peer. Every wait is bounded by the
// timeout: kTimeout names the rank waited for, a dead peer gives kRemoteError
// "lost rank N (pid P exited)".
//
// Abort. A rank whose operation fails calls Abort(status): the first status is
// recorded in the header and every sleeper is woken, so the other ranks fail at
// once with that status (naming the rank) instead of waiting out their timeouts.
//
// Thread safety: one ShmSegment object is used by one thread at a time. Different
// objects (one per rank, even in one process) run concurrently.
#ifndef HVD_RUNTIME_TRANSPORT_SHM_SHM_SEGMENT_H_
#define HVD_RUNTIME_TRANSPORT_SHM_SHM_SEGMENT_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <sys/types.h>

#include "runtime/common/status.h"
#include "runtime/store/store.h"

namespace hvd {

struct alignas(64) ShmCounter {
  std::atomic<uint32_t> value;
  std::atomic<uint32_t> waiters;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "counters must be lock-free");
static_assert(sizeof(ShmCounter) == 64, "one counter per cache line");

// True when `value` has reached `target`, modulo 2^32.
inline bool CounterReached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

// Which ranks share a segment and how long they wait for each other: the options
// ShmSegment, ShmBackend (shm_backend.h) and the shm control channel
// (shm_control_channel.h) have in common, the latter two passing them on.
struct ShmMembership {
  // Scoped to the communicator, used only while connecting: the segment's name goes
  // under "shm/<kind>/segment".
  std::shared_ptr<Store> store;
  // Unique per job and communicator, e.g. "hvd-<job>-<comm>" (a backend and a
  // control channel may share it: their segments are told apart). Characters other
  // than [A-Za-z0-9._-] are replaced by '_'.
  std::string name_prefix;
  int rank = 0;
  int size = 1;
  // Bounds connecting and every wait.
  std::chrono::milliseconds timeout{30000};
  // Polled while connecting waits for the other ranks to map the segment (a rank that
  // has not mapped it yet has no pid here to check): a non-OK status ends the wait
  // with it. The runtime passes the launcher's record of a dead rank. May be empty.
  std::function<Status()> interrupt;
};

struct ShmSegmentOptions : ShmMembership {
  // Tells the users of one communicator apart: "backend", "control".
  std::string kind;
  // Bytes after the header for the caller (rounded up to 4 KiB).
  size_t data_bytes = 0;
  // Counters in each rank's block (at most kMaxCounters).
  int counters_per_rank = 1;
  // How long a wait spins before it sleeps. Default (negative): 50 us when the ranks
  // fit the machine's cores, 2 us when they oversubscribe them.
  std::chrono::microseconds spin{-1};
};

class ShmSegment {
 public:
  static constexpr int kMaxCounters = 8;

  // Creates (rank 0) or attaches to (others) the communicator's segment and waits
  // until every rank has mapped it. Errors: kInvalidArgument for bad options,
  // kTimeout naming the missing ranks, kInternal for a failed system call.
  static Status Create(const ShmSegmentOptions& opts, std::unique_ptr<ShmSegment>* out);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  uint8_t* data() const { return data_; }
  size_t data_bytes() const { return data_bytes_; }

  // Counter `index` of rank `r`.
  ShmCounter& counter(int r, int index) const;

  // Sets counter `index` of rank `r` (this rank's by default) to `value` (release)
  // and wakes its sleepers. Each counter must have a single writer, usually its
  // owner.
  void Post(int index, uint32_t value) { PostTo(rank_, index, value); }
  void PostTo(int r, int index, uint32_t value);
  // Adds `delta` to counter `index` of rank `r` atomically and wakes its sleepers: a
  // counter several ranks advance together (each rank's add counts once).
  void AddTo(int r, int index, uint32_t delta);

  // Waits until rank `peer`'s counter `index` reaches `target`. `what` completes
  // "waiting for rank N to ..." in error messages, e.g. "stage allreduce data".
  Status WaitAtLeast(int peer, int index, uint32_t target, const char* what) {
    return Wait(counter(peer, index), target, peer, what);
  }

  // Waits until `c` (any counter of this segment) reaches `target`, naming `peer`,
  // the rank expected to advance it, on failure.
  Status Wait(ShmCounter& c, uint32_t target, int peer, const char* what);

  // WaitAtLeast for every rank but this one.
  Status WaitAllAtLeast(int index, uint32_t target, const char* what);

  // Records `failure` as this rank's reason for giving up (if no rank did before)
  // and wakes every sleeper. Peers' waits then return it.
  void Abort(const Status& failure);

 private:
  struct Header;
  struct RankBlock;

  ShmSegment() = default;
  Status Map(int fd, size_t total, bool create);
  Status Arrive(const ShmSegmentOptions& opts);
  RankBlock* block(int r) const;
  // OK, or the abort record / a dead peer as a Status: `waited_for` (if >= 0), and
  // with `all` every other peer too.
  Status CheckPeers(int waited_for, const char* what, bool all);
  Status AbortStatus() const;
  void Unlink();

  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  int counters_ = 1;
  std::chrono::milliseconds timeout_{0};
  std::chrono::nanoseconds spin_{0};
  void* base_ = nullptr;
  size_t total_bytes_ = 0;
  Header* header_ = nullptr;
  size_t block_bytes_ = 0;
  uint8_t* data_ = nullptr;
  size_t data_bytes_ = 0;
  bool unlinked_ = true;
};

// The start time of process `pid` in clock ticks since boot (field 22 of
// /proc/<pid>/stat), 0 when unknown; `*zombie` says whether it has exited unreaped.
uint64_t ProcessStartTime(pid_t pid, bool* zombie);

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_SHM_SHM_SEGMENT_H_
