// Submit: the path from every collective entry point to the runtime, but one
// (a single all-reduce, allreduce.cc's AllreduceOne, which enqueues its entry
// itself with the same checks).
//
// An entry point fills the TensorEntry of each tensor from its C arguments,
// checking only what must be checked before a pointer is read (c_api_internal.h);
// an all-reduce's or broadcast's count becomes its shape through SetCountShape,
// which checks them against each other. A grouped call's entries share a fresh
// group id. Runtime::Enqueue then validates every entry (ValidateEntry: names,
// dtypes, ops, dimensions, buffers, scale factors, device) and the ones that need
// the set (a broadcast's root, an alltoall's splits), and enqueues all of them or
// none. A barrier or a join has no tensor: the runtime makes its entry.
#include <memory>
#include <utility>
#include <vector>

#include "bindings/c/c_api_internal.h"

namespace hvd {
namespace capi {
namespace {

// One tensor (not a group), a barrier or a join: its Work, without the vectors of a
// group.
Status SubmitOne(CollectiveArgs& call, std::shared_ptr<Work>* work) {
  std::shared_ptr<Runtime> rt;
  HVD_RETURN_IF_ERROR(Current(&rt));
  if (call.type == OpType::kBarrier) return rt->Barrier(call.process_set, work);
  if (call.type == OpType::kJoin) return rt->Join(call.process_set, work);
  return rt->EnqueueOne(std::move(call.tensors[0]), call.process_set, work);
}

bool IsOne(const CollectiveArgs& call) {
  return call.type == OpType::kBarrier || call.type == OpType::kJoin ||
         (call.tensors.size() == 1 && !call.grouped);
}

}  // namespace

Status Submit(CollectiveArgs&& call, std::vector<std::shared_ptr<Work>>* works) {
  works->clear();
  if (IsOne(call)) {
    std::shared_ptr<Work> work;
    HVD_RETURN_IF_ERROR(SubmitOne(call, &work));
    works->push_back(std::move(work));
    return Status::OK();
  }
  std::shared_ptr<Runtime> rt;
  HVD_RETURN_IF_ERROR(Current(&rt));
  const int n = static_cast<int>(call.tensors.size());
  const int64_t group = call.grouped ? Default().next_group++ : 0;
  for (TensorEntry& e : call.tensors) {
    e.group_id = group;
    e.group_size = call.grouped ? n : 0;
  }
  return rt->Enqueue(std::move(call.tensors), call.process_set, works);
}

Status SubmitAsync(CollectiveArgs&& call, hvd_handle_t** handles) {
  const OpType type = call.type;
  if (IsOne(call)) {  // the common case: no vector of Works
    std::shared_ptr<Work> work;
    HVD_RETURN_IF_ERROR(SubmitOne(call, &work));
    handles[0] = Register(std::move(work), type);
    return Status::OK();
  }
  std::vector<std::shared_ptr<Work>> works;
  HVD_RETURN_IF_ERROR(Submit(std::move(call), &works));
  for (size_t i = 0; i < works.size(); ++i) handles[i] = Register(std::move(works[i]), type);
  return Status::OK();
}

Status SubmitAndWait(CollectiveArgs&& call, int64_t* scalar) {
  std::vector<std::shared_ptr<Work>> works;
  HVD_RETURN_IF_ERROR(Submit(std::move(call), &works));
  Status first;
  for (const auto& work : works) {
    Status s = WaitFor(work, std::chrono::milliseconds(-1));
    if (!s.ok() && first.ok()) first = s;
  }
  if (first.ok() && scalar != nullptr && !works.empty()) *scalar = works[0]->scalar_result();
  return first;
}

}  // namespace capi
}  // namespace hvd
