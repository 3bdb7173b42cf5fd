// Submit: the path from every collective entry point to the runtime, but one
// (a single all-reduce, allreduce.cc's AllreduceOne, which makes its entry
// directly with the same checks).
//
// An entry point reads its C arguments into a CollectiveArgs, checking only what
// must be checked before a pointer is read (c_api_internal.h). Submit turns each
// TensorArgs into a TensorEntry: an all-reduce's or broadcast's count through the
// runtime's MakeAllreduceEntry (which checks the count, and an all-reduce's shape,
// against each other), a shaped collective's shape as given. A grouped call's
// entries share a fresh group id. Runtime::Enqueue then validates every entry
// (ValidateEntry: names, dtypes, ops, dimensions, buffers, scale factors, device)
// and the ones that need the set (a broadcast's root, an alltoall's splits), and
// enqueues all of them or none. A barrier or a join has no tensor: the runtime
// makes its entry.
#include <memory>
#include <utility>
#include <vector>

#include "bindings/c/c_api_internal.h"

namespace hvd {
namespace capi {
namespace {

// The entry for tensor `t` of `call`.
Status MakeEntry(const CollectiveArgs& call, TensorArgs t, TensorEntry* e) {
  if (call.type == OpType::kAllreduce || call.type == OpType::kBroadcast) {
    AllreduceArgs a;
    a.name = t.name;
    a.input = t.input;
    a.output = t.output;
    a.count = t.count;
    a.shape = std::move(t.shape);
    HVD_RETURN_IF_ERROR(MakeAllreduceEntry(std::move(a), e));
  } else {
    e->name = t.name;
    e->input = t.input;
    e->output = t.output;
    e->shape = std::move(t.shape);
  }
  e->type = call.type;
  e->dtype = static_cast<DataType>(t.dtype);
  e->reduce_op = static_cast<ReduceOp>(call.reduce_op);
  e->prescale_factor = call.prescale_factor;
  e->postscale_factor = call.postscale_factor;
  e->root_rank = call.root_rank;
  e->device = call.device;
  e->stream = t.stream;
  e->splits = std::move(t.splits);
  return Status::OK();
}

// One tensor (not a group), a barrier or a join: its Work, without the vectors of a
// group.
Status SubmitOne(CollectiveArgs& call, std::shared_ptr<Work>* work) {
  std::shared_ptr<Runtime> rt;
  HVD_RETURN_IF_ERROR(Current(&rt));
  if (call.type == OpType::kBarrier || call.type == OpType::kJoin)
    return call.type == OpType::kBarrier ? rt->Barrier(call.process_set, work)
                                         : rt->Join(call.process_set, work);
  TensorEntry e;
  HVD_RETURN_IF_ERROR(MakeEntry(call, std::move(call.tensors[0]), &e));
  return rt->EnqueueOne(std::move(e), call.process_set, work);
}

bool IsOne(const CollectiveArgs& call) {
  return call.type == OpType::kBarrier || call.type == OpType::kJoin ||
         (call.tensors.size() == 1 && !call.grouped);
}

}  // namespace

CollectiveArgs& ReuseArgs() {
  thread_local CollectiveArgs args;
  std::vector<TensorArgs> tensors = std::move(args.tensors);
  tensors.clear();
  args = CollectiveArgs();
  args.tensors = std::move(tensors);
  return args;
}

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
  std::vector<TensorEntry> entries(n);
  for (int i = 0; i < n; ++i) {
    HVD_RETURN_IF_ERROR(MakeEntry(call, std::move(call.tensors[i]), &entries[i]));
    entries[i].group_id = group;
    entries[i].group_size = call.grouped ? n : 0;
  }
  return rt->Enqueue(std::move(entries), call.process_set, works);
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
