#include "runtime/transport/allreduce_algorithm.h"

#include "runtime/transport/butterfly_schedule.h"

namespace hvd {

AllreduceAlgorithm ChooseAllreduceAlgorithm(int64_t bytes, int size,
                                            const AllreduceAlgorithmOptions& options) {
  using Mode = AllreduceAlgorithmOptions::Mode;
  if (options.mode == Mode::kRing || size < 2) return AllreduceAlgorithm::kRing;
  if (options.mode == Mode::kHalvingDoubling) return AllreduceAlgorithm::kHalvingDoubling;
  const int64_t saved = 2 * static_cast<int64_t>(size - 1) - ButterflySteps(size, true);
  if (saved <= 0) return AllreduceAlgorithm::kRing;
  const int64_t weight = ButterflyCore(size) < size ? 2 : 1;
  return bytes <= saved * options.bytes_per_saved_step / weight ? AllreduceAlgorithm::kHalvingDoubling
                                                                 : AllreduceAlgorithm::kRing;
}

Status ParseAllreduceAlgorithmMode(const std::string& text, AllreduceAlgorithmOptions::Mode* mode) {
  using Mode = AllreduceAlgorithmOptions::Mode;
  if (text == "auto") {
    *mode = Mode::kAuto;
  } else if (text == "ring") {
    *mode = Mode::kRing;
  } else if (text == "halving_doubling") {
    *mode = Mode::kHalvingDoubling;
  } else {
    return Status::InvalidArgument("HVD_ALLREDUCE_ALGORITHM='" + text +
                                   "': expected auto, ring or halving_doubling");
  }
  return Status::OK();
}

}  // namespace hvd
