// Process sets over the C API: adding and removing one (each a collective over every
// rank, blocking until done) and asking about one. The C layer checks its pointers
// and counts; the runtime checks the ranks (at least one, ascending, no repeats, each
// in the job) and the ids (unknown, removed, the global set), with the messages
// docs/c_api_errors.md quotes.
#include <memory>
#include <string>
#include <vector>

#include "bindings/c/c_api_internal.h"

namespace hvd {
namespace capi {
namespace {

Status ProcessSetInfo(int32_t id, int* rank, std::vector<int>* ranks) {
  std::shared_ptr<Runtime> rt;
  HVD_RETURN_IF_ERROR(Current(&rt));
  return rt->ProcessSetInfo(id, rank, ranks);
}

}  // namespace
}  // namespace capi
}  // namespace hvd

using hvd::Status;
using hvd::capi::Current;
using hvd::capi::ProcessSetInfo;
using hvd::capi::Report;

extern "C" {

hvd_status_t hvd_add_process_set(const int* ranks, int nranks, int32_t* id) {
  HVD_C_GUARD({
    if (id == nullptr) return Report(Status::InvalidArgument("id is NULL"));
    if (ranks == nullptr && nranks > 0) return Report(Status::InvalidArgument("ranks is NULL"));
    if (nranks < 0) return Report(Status::InvalidArgument("negative nranks"));
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (!s.ok()) return Report(s);
    int out = 0;
    s = rt->AddProcessSet(std::vector<int>(ranks, ranks + nranks), &out);
    if (s.ok()) *id = out;
    return Report(s);
  })
}

hvd_status_t hvd_remove_process_set(int32_t id) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (!s.ok()) return Report(s);
    return Report(rt->RemoveProcessSet(id));
  })
}

hvd_status_t hvd_process_set_rank(int32_t id, int* rank) {
  HVD_C_GUARD({
    if (rank == nullptr) return Report(Status::InvalidArgument("rank is NULL"));
    return Report(ProcessSetInfo(id, rank, nullptr));
  })
}

hvd_status_t hvd_process_set_size(int32_t id, int* size) {
  HVD_C_GUARD({
    if (size == nullptr) return Report(Status::InvalidArgument("size is NULL"));
    std::vector<int> ranks;
    Status s = ProcessSetInfo(id, nullptr, &ranks);
    if (s.ok()) *size = static_cast<int>(ranks.size());
    return Report(s);
  })
}

hvd_status_t hvd_process_set_ranks(int32_t id, int* ranks, int capacity, int* n) {
  HVD_C_GUARD({
    if (n == nullptr) return Report(Status::InvalidArgument("n is NULL"));
    if (capacity < 0)
      return Report(Status::InvalidArgument("capacity " + std::to_string(capacity) + " is negative"));
    if (ranks == nullptr && capacity > 0) return Report(Status::InvalidArgument("ranks is NULL"));
    std::vector<int> all;
    Status s = ProcessSetInfo(id, nullptr, &all);
    if (!s.ok()) return Report(s);
    *n = static_cast<int>(all.size());
    for (int i = 0; i < capacity && i < *n; ++i) ranks[i] = all[i];
    return HVD_SUCCESS;
  })
}

}  // extern "C"
