#include "runtime/transport/shm/shm_segment.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>
#include <thread>

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/common/cpu_relax.h"

namespace hvd {

constexpr uint64_t kMagic = 0x68766473686d3031ull;  // "hvdshm01"
constexpr size_t kLine = 64;
constexpr size_t kPage = 4096;
constexpr auto kLivenessPeriod = std::chrono::milliseconds(100);
constexpr auto kAllPeersPeriod = std::chrono::milliseconds(1000);
// How often Arrive polls ShmMembership::interrupt (a store round trip).
constexpr auto kInterruptPeriod = std::chrono::milliseconds(250);

struct ShmSegment::Header {
  std::atomic<uint64_t> magic;  // written last by rank 0
  uint32_t size;
  uint32_t counters;
  uint64_t data_bytes;
  uint64_t total_bytes;
  alignas(kLine) ShmCounter arrived;  // ranks that have mapped the segment
  alignas(kLine) std::atomic<int32_t> abort_claim;  // rank + 1 of the first to abort
  std::atomic<int32_t> abort_ready;  // rank + 1 once the record below is complete
  int32_t abort_code;
  char abort_message[512];
};

// Followed by counters_per_rank ShmCounters, one per line.
struct alignas(kLine) ShmSegment::RankBlock {
  std::atomic<int64_t> pid;  // 0 until the rank arrives
  uint64_t start_time;       // written before pid
};

namespace {

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

uint32_t* Word(std::atomic<uint32_t>* a) { return reinterpret_cast<uint32_t*>(a); }

// FUTEX_WAIT without FUTEX_PRIVATE_FLAG: the word is shared between processes.
void FutexWait(std::atomic<uint32_t>* addr, uint32_t expected, std::chrono::nanoseconds timeout) {
  if (timeout.count() <= 0) return;
  timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  syscall(SYS_futex, Word(addr), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* addr) {
  syscall(SYS_futex, Word(addr), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::string Sanitize(const std::string& s) {
  std::string out = s.substr(0, 160);
  for (char& c : out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return out;
}

std::string SysError(const std::string& what) { return what + ": " + ErrnoText(errno); }

// Alive unless we can tell that it exited: gone from /proc, a zombie, or a new
// process under a recycled pid.
bool ProcessAlive(pid_t pid, uint64_t recorded_start) {
  bool zombie = false;
  const uint64_t start = ProcessStartTime(pid, &zombie);
  if (start == 0) return kill(pid, 0) == 0 || errno == EPERM;
  if (zombie) return false;
  return recorded_start == 0 || start == recorded_start;
}

}  // namespace

uint64_t ProcessStartTime(pid_t pid, bool* zombie) {
  *zombie = false;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // "pid (comm) state ppid ..." where comm may hold spaces and parentheses.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  ++p;
  char state = 0;
  if (std::sscanf(p, " %c", &state) != 1) return 0;
  *zombie = state == 'Z' || state == 'X';
  // Field 22 is the 20th after the state (field 3).
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p + 1, ' ');
    if (p == nullptr) return 0;
  }
  unsigned long long start = 0;
  if (std::sscanf(p, " %llu", &start) != 1) return 0;
  return start;
}

ShmSegment::~ShmSegment() {
  Unlink();
  if (base_ != nullptr) munmap(base_, total_bytes_);
}

void ShmSegment::Unlink() {
  if (!unlinked_) shm_unlink(name_.c_str());
  unlinked_ = true;
}

ShmSegment::RankBlock* ShmSegment::block(int r) const {
  return reinterpret_cast<RankBlock*>(reinterpret_cast<uint8_t*>(header_) +
                                      RoundUp(sizeof(Header), kLine) + r * block_bytes_);
}

ShmCounter& ShmSegment::counter(int r, int index) const {
  HVD_CHECK(r >= 0 && r < size_ && index >= 0 && index < counters_);
  return reinterpret_cast<ShmCounter*>(reinterpret_cast<uint8_t*>(block(r)) + kLine)[index];
}

Status ShmSegment::Map(int fd, size_t total, bool create) {
  if (create) {
    if (ftruncate(fd, static_cast<off_t>(total)) != 0)
      return Status::Internal(SysError("ftruncate of shared-memory segment " + name_ + " to " +
                                       std::to_string(total) + " bytes"));
    // Reserve the pages now: on a full /dev/shm, touching them later would be SIGBUS.
    const int err = posix_fallocate(fd, 0, static_cast<off_t>(total));
    if (err != 0 && err != EOPNOTSUPP && err != EINVAL) {
      errno = err;
      return Status::Internal(SysError("cannot reserve " + std::to_string(total) +
                                       " bytes for shared-memory segment " + name_ +
                                       " (is /dev/shm large enough?)"));
    }
  }
  void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::Internal(SysError("mmap of shared-memory segment " + name_));
  base_ = p;
  total_bytes_ = total;
  header_ = static_cast<Header*>(p);
  return Status::OK();
}

Status ShmSegment::Create(const ShmSegmentOptions& opts, std::unique_ptr<ShmSegment>* out) {
  if (opts.size < 1 || opts.rank < 0 || opts.rank >= opts.size)
    return Status::InvalidArgument("shm segment: rank " + std::to_string(opts.rank) +
                                   " out of range for size " + std::to_string(opts.size));
  if (opts.counters_per_rank < 1 || opts.counters_per_rank > kMaxCounters)
    return Status::InvalidArgument("shm segment: counters_per_rank must be 1.." +
                                   std::to_string(kMaxCounters));
  if (!opts.store) return Status::InvalidArgument("shm segment: no store");
  std::unique_ptr<ShmSegment> seg(new ShmSegment());
  seg->rank_ = opts.rank;
  seg->size_ = opts.size;
  seg->counters_ = opts.counters_per_rank;
  seg->timeout_ = opts.timeout;
  seg->block_bytes_ = kLine * (1 + opts.counters_per_rank);
  if (opts.spin.count() >= 0) {
    seg->spin_ = opts.spin;
  } else {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    seg->spin_ = static_cast<unsigned>(opts.size) <= cores ? std::chrono::microseconds(50)
                                                            : std::chrono::microseconds(2);
  }
  const size_t data_offset =
      RoundUp(RoundUp(sizeof(Header), kLine) + opts.size * seg->block_bytes_, kPage);
  seg->data_bytes_ = RoundUp(opts.data_bytes, kPage);
  const size_t total = data_offset + seg->data_bytes_;
  const std::string key = "shm/" + opts.kind + "/segment";
  const auto deadline = std::chrono::steady_clock::now() + opts.timeout;

  if (opts.rank == 0) {
    std::random_device rd;
    char suffix[32];
    std::snprintf(suffix, sizeof(suffix), "%d.%08x%08x", static_cast<int>(getpid()), rd(), rd());
    seg->name_ = "/" + Sanitize(opts.name_prefix) + "." + Sanitize(opts.kind) + "." + suffix;
    const int fd = shm_open(seg->name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return Status::Internal(SysError("shm_open(" + seg->name_ + ")"));
    seg->unlinked_ = false;
    Status s = seg->Map(fd, total, /*create=*/true);
    close(fd);
    HVD_RETURN_IF_ERROR(s);
    Header* h = new (seg->header_) Header();
    h->size = opts.size;
    h->counters = opts.counters_per_rank;
    h->data_bytes = seg->data_bytes_;
    h->total_bytes = total;
    for (int r = 0; r < opts.size; ++r) {
      new (seg->block(r)) RankBlock();
      for (int i = 0; i < opts.counters_per_rank; ++i) new (&seg->counter(r, i)) ShmCounter();
    }
    h->magic.store(kMagic, std::memory_order_release);
    HVD_RETURN_IF_ERROR(opts.store->Set(key, seg->name_));
  } else {
    // A name left by an earlier incarnation no longer opens; keep reading until
    // rank 0 publishes one that does.
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      Status s = opts.store->Get(key, std::max(left, std::chrono::milliseconds(0)), &seg->name_);
      if (!s.ok())
        return Status::Timeout("shm " + opts.kind + ": rank " + std::to_string(opts.rank) +
                               " timed out after " + std::to_string(opts.timeout.count()) +
                               " ms waiting for rank 0 to publish its segment: " + s.message());
      const int fd = shm_open(seg->name_.c_str(), O_RDWR, 0600);
      if (fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != total) {
          close(fd);
          return Status::InvalidArgument(
              "shm " + opts.kind + ": segment " + seg->name_ + " has " +
              std::to_string(st.st_size) + " bytes, rank " + std::to_string(opts.rank) +
              " expects " + std::to_string(total) + " (do all ranks pass the same options?)");
        }
        s = seg->Map(fd, total, /*create=*/false);
        close(fd);
        HVD_RETURN_IF_ERROR(s);
        break;
      }
      if (errno != ENOENT) return Status::Internal(SysError("shm_open(" + seg->name_ + ")"));
      if (std::chrono::steady_clock::now() >= deadline)
        return Status::Timeout("shm " + opts.kind + ": segment " + seg->name_ +
                               " published by rank 0 no longer exists");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    Header* h = seg->header_;
    if (h->magic.load(std::memory_order_acquire) != kMagic || h->size != uint32_t(opts.size) ||
        h->counters != uint32_t(opts.counters_per_rank) || h->data_bytes != seg->data_bytes_)
      return Status::InvalidArgument("shm " + opts.kind + ": segment " + seg->name_ +
                                     " does not match rank " + std::to_string(opts.rank) +
                                     "'s options (size " + std::to_string(opts.size) + ")");
  }
  seg->data_ = static_cast<uint8_t*>(seg->base_) + data_offset;
  Status s = seg->Arrive(opts);
  if (opts.rank == 0) {
    seg->Unlink();
    opts.store->Delete(key);
  }
  HVD_RETURN_IF_ERROR(s);
  *out = std::move(seg);
  return Status::OK();
}

Status ShmSegment::Arrive(const ShmSegmentOptions& opts) {
  RankBlock* mine = block(rank_);
  bool zombie = false;
  mine->start_time = ProcessStartTime(getpid(), &zombie);
  int64_t expected = 0;
  if (!mine->pid.compare_exchange_strong(expected, getpid()))
    return Status::InvalidArgument("shm " + opts.kind + ": rank " + std::to_string(rank_) +
                                   " of segment " + name_ + " is already taken by pid " +
                                   std::to_string(expected));
  header_->arrived.value.fetch_add(1);
  if (header_->arrived.waiters.load() != 0) FutexWakeAll(&header_->arrived.value);

  ShmCounter& c = header_->arrived;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout_;
  auto next_interrupt_check = start + kInterruptPeriod;
  // Every arrival wakes every waiting rank: reading /proc for each peer at each wake
  // would cost O(size^2) reads per rank; once per liveness period suffices.
  auto next_peer_check = start;
  for (;;) {
    const uint32_t v = c.value.load();
    if (v >= static_cast<uint32_t>(size_)) return Status::OK();
    const auto now = std::chrono::steady_clock::now();
    HVD_RETURN_IF_ERROR(AbortStatus());
    if (now >= next_peer_check) {
      HVD_RETURN_IF_ERROR(CheckPeers(-1, "map the segment", /*all=*/true));
      next_peer_check = now + kLivenessPeriod;
    }
    if (opts.interrupt && now >= next_interrupt_check) {
      Status interrupted = opts.interrupt();
      if (!interrupted.ok())
        return interrupted.Prepend("shm " + opts.kind + ": rank " + std::to_string(rank_) +
                                   " waiting for the others to map segment " + name_);
      next_interrupt_check = now + kInterruptPeriod;
    }
    if (now >= deadline) {
      std::string missing;
      for (int r = 0; r < size_; ++r) {
        if (block(r)->pid.load() != 0) continue;
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      return Status::Timeout("shm " + opts.kind + ": rank " + std::to_string(rank_) +
                             " timed out after " + std::to_string(timeout_.count()) +
                             " ms waiting for rank(s) " + missing + " to map segment " + name_);
    }
    c.waiters.fetch_add(1);
    if (c.value.load() == v)
      FutexWait(&c.value, v, std::min<std::chrono::nanoseconds>(deadline - now, kLivenessPeriod));
    c.waiters.fetch_sub(1);
  }
}

void ShmSegment::PostTo(int r, int index, uint32_t value) {
  ShmCounter& c = counter(r, index);
  c.value.store(value, std::memory_order_seq_cst);
  if (c.waiters.load(std::memory_order_seq_cst) != 0) FutexWakeAll(&c.value);
}

void ShmSegment::AddTo(int r, int index, uint32_t delta) {
  ShmCounter& c = counter(r, index);
  c.value.fetch_add(delta, std::memory_order_seq_cst);
  if (c.waiters.load(std::memory_order_seq_cst) != 0) FutexWakeAll(&c.value);
}

Status ShmSegment::AbortStatus() const {
  const int32_t who = header_->abort_ready.load(std::memory_order_acquire);
  if (who == 0 || who == rank_ + 1) return Status::OK();
  return Status(static_cast<StatusCode>(header_->abort_code),
                "rank " + std::to_string(who - 1) + " failed first: " + header_->abort_message);
}

void ShmSegment::Abort(const Status& failure) {
  int32_t expected = 0;
  if (header_->abort_claim.compare_exchange_strong(expected, rank_ + 1)) {
    header_->abort_code = static_cast<int32_t>(failure.code());
    std::snprintf(header_->abort_message, sizeof(header_->abort_message), "%s",
                  failure.message().c_str());
    header_->abort_ready.store(rank_ + 1, std::memory_order_release);
  }
  for (int r = 0; r < size_; ++r)
    for (int i = 0; i < counters_; ++i) FutexWakeAll(&counter(r, i).value);
}

Status ShmSegment::CheckPeers(int waited_for, const char* what, bool all) {
  HVD_RETURN_IF_ERROR(AbortStatus());
  const pid_t me = getpid();
  // The rank waited for first, so that its loss is the one reported.
  for (int i = -1; i < (all ? size_ : 0); ++i) {
    const int r = i < 0 ? waited_for : i;
    if (r < 0 || r == rank_ || (i >= 0 && r == waited_for)) continue;
    const int64_t pid = block(r)->pid.load(std::memory_order_acquire);
    if (pid == 0 || pid == me) continue;
    if (ProcessAlive(static_cast<pid_t>(pid), block(r)->start_time)) continue;
    std::string text = "lost rank " + std::to_string(r) + " (pid " + std::to_string(pid) +
                       " exited) while rank " + std::to_string(rank_) + " waited for ";
    text += r == waited_for ? "it" : waited_for < 0 ? "the ranks" : "rank " + std::to_string(waited_for);
    return Status::RemoteError(text + " to " + what);
  }
  return Status::OK();
}

Status ShmSegment::Wait(ShmCounter& c, uint32_t target, int peer, const char* what) {
  if (CounterReached(c.value.load(std::memory_order_acquire), target)) return Status::OK();
  const auto start = std::chrono::steady_clock::now();
  const auto spin_end = start + spin_;
  for (unsigned i = 1;; ++i) {
    CpuRelax();
    if (CounterReached(c.value.load(std::memory_order_acquire), target)) return Status::OK();
    if ((i & 63) == 0 && std::chrono::steady_clock::now() >= spin_end) break;
  }
  // A peer's death is looked for only once the wait has lasted a liveness period,
  // and then only the peer waited for, every period, and all of them every
  // kAllPeersPeriod: reading /proc for every peer whenever a wait outlasted its
  // spin cost O(size) system calls per wait, O(size^2) per collective at each
  // rank, most of a step at 32+ ranks on a few cores (docs/scaling.md). The abort
  // record, one load, is read on every wake, so a peer's Abort still ends the wait
  // at once.
  const auto deadline = start + timeout_;
  auto next_check = start + kLivenessPeriod;
  auto next_full_check = start + kAllPeersPeriod;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    HVD_RETURN_IF_ERROR(AbortStatus());
    if (now >= next_check) {
      const bool all = now >= next_full_check;
      HVD_RETURN_IF_ERROR(CheckPeers(peer, what, all));
      next_check = now + kLivenessPeriod;
      if (all) next_full_check = now + kAllPeersPeriod;
    }
    if (now >= deadline) {
      return Status::Timeout("rank " + std::to_string(rank_) + " timed out after " +
                             std::to_string(timeout_.count()) + " ms waiting for rank " +
                             std::to_string(peer) + " (pid " +
                             std::to_string(block(peer)->pid.load()) + ") to " + what);
    }
    c.waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t v = c.value.load(std::memory_order_seq_cst);
    if (!CounterReached(v, target))
      FutexWait(&c.value, v, std::min(deadline, next_check) - now);
    c.waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (CounterReached(c.value.load(std::memory_order_acquire), target)) return Status::OK();
  }
}

Status ShmSegment::WaitAllAtLeast(int index, uint32_t target, const char* what) {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    HVD_RETURN_IF_ERROR(WaitAtLeast(r, index, target, what));
  }
  return Status::OK();
}

}  // namespace hvd
