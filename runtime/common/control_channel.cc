#include "runtime/common/control_channel.h"

#include <algorithm>
#include <cstring>

namespace hvd {

void CombineWords(const uint64_t* in, size_t n, size_t or_words, uint64_t* acc) {
  const size_t ors = std::min(or_words, n);
  for (size_t i = 0; i < ors; ++i) acc[i] |= in[i];
  for (size_t i = ors; i < n; ++i) acc[i] = std::max(acc[i], in[i]);
}

Status ControlChannel::AllreduceWords(std::vector<uint64_t>* words, size_t or_words) {
  HVD_CHECK(or_words <= words->size());
  const size_t bytes = words->size() * sizeof(uint64_t);
  std::string mine(reinterpret_cast<const char*>(words->data()), bytes);
  std::vector<std::string> all;
  HVD_RETURN_IF_ERROR(Gather(mine, &all));
  std::string result;
  if (rank() == 0) {
    std::vector<uint64_t> theirs(words->size());
    for (int r = 1; r < size(); ++r) {
      if (all[r].size() != bytes)
        return Status::Internal("rank " + std::to_string(r) + " sent " +
                                std::to_string(all[r].size()) + " bytes of words, rank 0 " +
                                std::to_string(bytes));
      if (bytes > 0) std::memcpy(theirs.data(), all[r].data(), bytes);
      CombineWords(theirs.data(), words->size(), or_words, words->data());
    }
    result.assign(reinterpret_cast<const char*>(words->data()), bytes);
  }
  HVD_RETURN_IF_ERROR(Broadcast(&result));
  if (result.size() != bytes)
    return Status::Internal("rank " + std::to_string(rank()) + " received " +
                            std::to_string(result.size()) + " bytes of words, expected " +
                            std::to_string(bytes));
  if (bytes > 0) std::memcpy(words->data(), result.data(), bytes);
  return Status::OK();
}

}  // namespace hvd
