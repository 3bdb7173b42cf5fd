// Which all-reduce a Gloo backend runs for a message of a given size among a given
// number of ranks: the ring (PieceRing, ring_schedule.h) or recursive
// halving-doubling (ButterflyAllreduce, butterfly_schedule.h). A pure function of
// the size, the ranks and the options, so every rank makes the same choice for the
// same agreed all-reduce, as HierarchyChoice settles hierarchical or flat per size.
//
// The model behind the choice (docs/scaling.md fits it). A ring all-reduce of S
// bytes over n ranks takes 2(n - 1) steps, each a message of S / n: 2(n - 1) step
// latencies, and 2 S (n - 1) / n bytes through each rank's link, its segments
// streaming so that the wire and the reduction overlap. Halving-doubling takes
// 2 log2(p) steps (p the largest power of two <= n, two more steps when n is not a
// power of two, each moving the whole vector), the same bytes through each link,
// but no overlap between steps. It wins while the step latencies it saves outweigh
// what it loses: bytes * (2 when n is not a power of two, else 1) <= saved steps *
// bytes_per_saved_step, where bytes_per_saved_step is what one step's latency is
// worth in bytes (latency x bandwidth; 64 KiB is 50 us at 10 Gbit/s, and about what
// a step costs here on loopback, docs/scaling.md). At 2 ranks both take 2 steps:
// always the ring. At 128 ranks 1000 x 4 KiB (4 MB) runs halving-doubling and
// ResNet-50's 100 MB the ring.
#ifndef HVD_RUNTIME_TRANSPORT_ALLREDUCE_ALGORITHM_H_
#define HVD_RUNTIME_TRANSPORT_ALLREDUCE_ALGORITHM_H_

#include <cstdint>
#include <string>

#include "runtime/common/status.h"

namespace hvd {

enum class AllreduceAlgorithm { kRing, kHalvingDoubling };

struct AllreduceAlgorithmOptions {
  // HVD_ALLREDUCE_ALGORITHM: auto (by the rule above), ring, halving_doubling.
  enum class Mode { kAuto, kRing, kHalvingDoubling };
  Mode mode = Mode::kAuto;
  int64_t bytes_per_saved_step = 64 << 10;
};

// The algorithm for an all-reduce of `bytes` among `size` ranks (size >= 1).
AllreduceAlgorithm ChooseAllreduceAlgorithm(int64_t bytes, int size,
                                            const AllreduceAlgorithmOptions& options);

// "auto", "ring" or "halving_doubling" into *mode; kInvalidArgument naming the
// value otherwise.
Status ParseAllreduceAlgorithmMode(const std::string& text, AllreduceAlgorithmOptions::Mode* mode);

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_ALLREDUCE_ALGORITHM_H_
