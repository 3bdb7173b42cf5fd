#include "runtime/executor.h"

#include <cstdlib>
#include <cstring>
#include <numeric>

#include "runtime/reduce_kernels.h"

namespace hvd {

void FusionBuffer::Free::operator()(uint8_t* p) const { std::free(p); }

uint8_t* FusionBuffer::Get(size_t bytes) {
  if (bytes > capacity_ || !data_) {
    const size_t cap = std::max<size_t>((bytes + 63) / 64 * 64, 64);
    data_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, cap)));
    HVD_CHECK_MSG(data_ != nullptr, "cannot allocate a fusion buffer of " + std::to_string(cap) + " bytes");
    capacity_ = cap;
  }
  return data_.get();
}

void CompleteAll(const std::vector<TensorEntry*>& entries, const Status& status) {
  for (TensorEntry* e : entries)
    if (e != nullptr) e->work->Complete(status);
}

Status Executor::Execute(const proto::Response& r, const std::vector<TensorEntry*>& entries) {
  switch (r.type()) {
    case proto::RESPONSE_ERROR:
      CompleteAll(entries, Status(static_cast<StatusCode>(r.error_code()), r.error_message()));
      return Status::OK();
    case proto::RESPONSE_ALLREDUCE: return Allreduce(r, entries);
    case proto::RESPONSE_ALLGATHER: return Allgather(r, entries);
    case proto::RESPONSE_BROADCAST: return Broadcast(r, entries);
    case proto::RESPONSE_ALLTOALL: return Alltoall(r, entries);
    case proto::RESPONSE_REDUCESCATTER: return Reducescatter(r, entries);
    case proto::RESPONSE_BARRIER: return Barrier(r, entries);
    case proto::RESPONSE_JOIN: return Join(r, entries);
    default: break;
  }
  Status s = Status::Internal("unknown response type " + std::to_string(r.type()));
  CompleteAll(entries, s);
  return s;
}

Status Executor::Allreduce(const proto::Response& r, const std::vector<TensorEntry*>& entries) {
  const DataType dtype = static_cast<DataType>(r.dtype());
  const ReduceOp op = static_cast<ReduceOp>(r.reduce_op());
  const size_t elem = DataTypeSize(dtype);
  const int n = r.names_size();
  const int64_t total = std::accumulate(r.counts().begin(), r.counts().end(), int64_t{0});
  // A lone tensor present on this rank is reduced in its own output buffer.
  const bool direct = n == 1 && entries[0] != nullptr;

  Mark(r, Phase::kCopyIn, true);
  uint8_t* buf = direct ? static_cast<uint8_t*>(entries[0]->output) : fusion_.Get(total * elem);
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t count = r.counts(i);
    uint8_t* dst = direct ? buf : buf + offset * elem;
    if (entries[i] != nullptr) {
      ScaledCopy(dtype, dst, entries[i]->input, count, r.prescale_factor());
    } else {
      FillIdentity(dtype, op, dst, count);
    }
    offset += count;
  }
  Mark(r, Phase::kCopyIn, false);

  Mark(r, Phase::kCollective, true);
  Status s = backend_->Allreduce(buf, total, dtype, op);
  Mark(r, Phase::kCollective, false);
  if (!s.ok()) {
    CompleteAll(entries, s.Prepend("allreduce of " + std::to_string(n) + " tensor(s) starting with '" +
                                   r.names(0) + "'"));
    return s;
  }

  Mark(r, Phase::kCopyOut, true);
  const int64_t contributors = backend_->size() - r.joined_ranks_size();
  offset = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t count = r.counts(i);
    uint8_t* src = direct ? buf : buf + offset * elem;
    offset += count;
    if (entries[i] == nullptr) continue;
    if (op == ReduceOp::kAverage) DivideBuffer(dtype, src, count, contributors);
    ScaledCopy(dtype, entries[i]->output, src, count, r.postscale_factor());
    entries[i]->work->Complete(Status::OK());
  }
  Mark(r, Phase::kCopyOut, false);
  return Status::OK();
}

Status Executor::Allgather(const proto::Response& r, const std::vector<TensorEntry*>& entries) {
  Status s = Status::Internal("allgather is not available in this build");
  CompleteAll(entries, s);
  return Status::OK();
}

Status Executor::Broadcast(const proto::Response& r, const std::vector<TensorEntry*>& entries) {
  Status s = Status::Internal("broadcast is not available in this build");
  CompleteAll(entries, s);
  return Status::OK();
}

Status Executor::Alltoall(const proto::Response& r, const std::vector<TensorEntry*>& entries) {
  Status s = Status::Internal("alltoall is not available in this build");
  CompleteAll(entries, s);
  return Status::OK();
}

Status Executor::Reducescatter(const proto::Response& r, const std::vector<TensorEntry*>& entries) {
  Status s = Status::Internal("reducescatter is not available in this build");
  CompleteAll(entries, s);
  return Status::OK();
}

Status Executor::Barrier(const proto::Response& r, const std::vector<TensorEntry*>& entries) {
  Status s = backend_->Barrier();
  CompleteAll(entries, s);
  return s;
}

Status Executor::Join(const proto::Response& r, const std::vector<TensorEntry*>& entries) {
  Status s = Status::Internal("join is not available in this build");
  CompleteAll(entries, s);
  return Status::OK();
}

}  // namespace hvd
