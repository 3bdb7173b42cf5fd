// Harness: times several all-reduce implementations ("peers") on the same buffers
// in one run, checks their results, and reports medians as CSV and a table.
//
// One workload at a time:
//   1. Warm-up: each peer runs `warmup` steps (one, if that one alone took the
//      whole budget); the receive buffers are poisoned before the first and
//      checked on every rank after it.
//   2. Iterations: --iters, or as many as fit `budget_s` per peer judged by the
//      slowest rank's last warm-up step, clamped to [min_iters, max_iters]. All
//      ranks derive the same count from the same (max-reduced) warm-up time.
//   3. Timed rounds: each round runs `run` consecutive steps of every peer in
//      turn (interleaved, so a slow spell of the machine hits every peer alike;
//      in runs, so each peer's steps follow its own, as a training loop's do).
//      Each step starts after a barrier and is timed on each rank; a step's time
//      is its slowest rank's.
//      Before each peer's final step the receive buffers are poisoned again, and
//      that step's result is checked.
//   4. The median over a peer's steps is its time per step.
// A failed check on any rank fails the workload on every rank (the flag is
// reduced), so no rank reports a time for a wrong answer.
//
// Terms: algbw = bytes of the workload / time per step; busbw = algbw * 2(n-1)/n,
// the bytes each rank's link carries in a ring all-reduce (NCCL's definition), so
// busbw is comparable across rank counts. GB/s are 1e9 bytes per second.
#ifndef HVD_BENCH_HARNESS_H_
#define HVD_BENCH_HARNESS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/workloads.h"

namespace hvd {
namespace bench {

// The few collectives the harness itself needs, over whatever the binary has (a
// Gloo context, MPI_COMM_WORLD). Never used while a peer is being timed.
class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void Barrier() = 0;
  // Element-wise maximum across ranks, in place; every rank gets the result.
  virtual void AllreduceMax(std::vector<double>* v) = 0;
};

// One implementation under test. `step` reduces every tensor of the workload from
// Buffers::send into Buffers::recv (summed over ranks), and returns once this
// rank's results are in place. A step that fails prints why and exits.
struct Peer {
  std::string name;  // "dprun", "gloo_fused", "gloo_per_tensor", "mpi_fused", ...
  std::function<void()> step;
};

struct HarnessOptions {
  int iters = 0;          // fixed timed steps per peer; 0 chooses from the warm-up
  double budget_s = 1.5;  // timed seconds per peer and workload when iters == 0
  int min_iters = 3;
  int max_iters = 200;
  int warmup = 2;
  // Untimed rounds of every peer for at least this long before the warm-up
  // (for example while HVD_AUTOTUNE searches); 0: none.
  double settle_s = 0;
  // Consecutive timed steps of one peer before the next peer's (at least 1).
  // With 1, every step follows another peer's: a peer that waits in the kernel
  // (Gloo over TCP) leaves idle cores, and on a VM the next peer's first
  // microseconds of CPU work run up to 2x slower after that.
  int run = 10;
};

// One peer on one workload.
struct Result {
  int ranks = 0;
  std::string ops;  // what the run used for CPU operations: HVD_CPU_OPERATIONS, or "mpi"
  std::string workload;
  int tensors = 0;
  int64_t bytes = 0;
  std::string peer;
  int iters = 0;
  double median_s = 0, min_s = 0, max_s = 0;

  double algbw_gbps() const { return median_s > 0 ? bytes / median_s / 1e9 : 0; }
  double busbw_gbps() const { return ranks > 1 ? algbw_gbps() * 2 * (ranks - 1) / ranks : 0; }
};

// Runs `peers` on `w` as described above and appends one Result per peer. Returns
// false, with *error, when a peer's result was wrong on any rank.
bool RunWorkload(const Workload& w, Buffers* b, const std::vector<Peer>& peers, Comm* comm,
                 const HarnessOptions& opts, const std::string& ops, std::vector<Result>* out,
                 std::string* error);

// CSV with a header line; ReadCsv returns false for a missing or malformed file.
bool WriteCsv(const std::string& path, const std::vector<Result>& results, std::string* error);
bool ReadCsv(const std::string& path, std::vector<Result>* out, std::string* error);

// The table, one row per workload: time per step and busbw for each peer in
// `results`, and the ratios dprun/gloo_fused, dprun/gloo_per_tensor and, where
// `mpi` has rows for the same workload and rank count, dprun/mpi (against MPI's
// faster variant; ratios > 1 mean dprun is slower). A single buffer has one Gloo
// peer, used for both Gloo ratios.
std::string FormatTable(const std::vector<Result>& results, const std::vector<Result>& mpi);

// A plain table, one row per workload and a time and busbw column per peer.
std::string FormatPeerTable(const std::vector<Result>& results);

}  // namespace bench
}  // namespace hvd

#endif  // HVD_BENCH_HARNESS_H_
