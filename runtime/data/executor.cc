#include "runtime/data/executor.h"

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <numeric>

#include "runtime/kernels/adasum.h"
#include "runtime/kernels/reduce_kernels.h"

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
  CompletionBatch batch;
  for (TensorEntry* e : entries)
    if (e != nullptr) batch.Complete(e->work.get(), status);
}

Status Executor::Execute(const Response& r, const std::vector<TensorEntry*>& entries) {
  if (r.device >= 0 && r.type != ResponseType::kError && r.type != ResponseType::kBarrier &&
      r.type != ResponseType::kJoin)
    return ExecuteOnDevice(r, entries);
  switch (r.type) {
    case ResponseType::kError:
      CompleteAll(entries, Status(r.error_code, r.error_message));
      return Status::OK();
    case ResponseType::kAllreduce: return Allreduce(r, entries);
    case ResponseType::kAllgather: return Allgather(r, entries);
    case ResponseType::kBroadcast: return Broadcast(r, entries);
    case ResponseType::kAlltoall: return Alltoall(r, entries);
    case ResponseType::kReducescatter: return Reducescatter(r, entries);
    case ResponseType::kBarrier: return Barrier(r, entries);
    case ResponseType::kJoin: return Join(r, entries);
    default: break;
  }
  Status s = Status::Internal("unknown response type " + std::to_string(static_cast<int>(r.type)));
  CompleteAll(entries, s);
  return s;
}

Status Executor::ExecuteOnDevice(const Response& r, const std::vector<TensorEntry*>& entries) {
  if (!device_ops_) {
    int device = r.device;  // a joined rank has no entry: the coordinator's device
    for (const TensorEntry* e : entries) {
      if (e != nullptr) {
        device = e->device;
        break;
      }
    }
    Status s = device_factory_
                   ? device_factory_(device, &device_ops_)
                   : Status::InvalidUsage("no device backend is configured for device tensors");
    if (!s.ok()) {
      device_ops_.reset();
      return s.Prepend("tensor '" + r.names[0] + "' on cuda:" + std::to_string(device));
    }
  }
  return device_ops_->Execute(r, entries);
}

namespace {

std::string AllreduceWhat(const Response& r) {
  const int n = static_cast<int>(r.names.size());
  return "allreduce of '" + r.names[0] + "'" + (n > 1 ? " and " + std::to_string(n - 1) + " more" : "");
}

}  // namespace

Status Executor::Allreduce(const Response& r, const std::vector<TensorEntry*>& entries) {
  const DataType dtype = r.dtype;
  const ReduceOp op = r.reduce_op;
  const size_t elem = DataTypeSize(dtype);
  const int n = static_cast<int>(r.names.size());
  if (op == ReduceOp::kAdasum) return AllreduceAdasum(r, entries);
  const int64_t total = std::accumulate(r.counts.begin(), r.counts.end(), int64_t{0});
  // AVERAGE divides by the set's size, joined ranks included (they contribute
  // zeros), as Horovod and torch's Join do.
  const int64_t divisor = backend_->size();
  // The choice depends only on the backend, never on this rank's entries: a
  // backend's piecewise and one-buffer all-reduces may differ on the wire.
  if (backend_->SupportsPieces()) return AllreducePieces(r, entries, divisor);
  // A lone tensor present on this rank is reduced in its own output buffer.
  const bool direct = n == 1 && entries[0] != nullptr;

  Mark(r, Phase::kCopyIn, true);
  uint8_t* buf = direct ? static_cast<uint8_t*>(entries[0]->output) : fusion_.Get(total * elem);
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t count = r.counts[i];
    uint8_t* dst = direct ? buf : buf + offset * elem;
    if (entries[i] != nullptr) {
      ScaledCopy(dtype, dst, entries[i]->input, count, r.prescale_factor);
    } else {
      FillIdentity(dtype, op, dst, count);
    }
    offset += count;
  }
  Mark(r, Phase::kCopyIn, false);

  Mark(r, Phase::kCollective, true);
  Status s = backend_->Allreduce(buf, total, dtype, op);
  Mark(r, Phase::kCollective, false);
  if (!s.ok()) return s.Prepend(AllreduceWhat(r));

  Mark(r, Phase::kCopyOut, true);
  offset = 0;
  CompletionBatch batch;  // each tensor done once copied out; sleepers woken together
  for (int i = 0; i < n; ++i) {
    const int64_t count = r.counts[i];
    uint8_t* src = direct ? buf : buf + offset * elem;
    offset += count;
    if (entries[i] == nullptr) continue;
    if (op == ReduceOp::kAverage) DivideBuffer(dtype, src, count, divisor);
    ScaledCopy(dtype, entries[i]->output, src, count, r.postscale_factor);
    batch.Complete(entries[i]->work.get(), Status::OK());
  }
  batch.Wake();
  Mark(r, Phase::kCopyOut, false);
  return Status::OK();
}

// Every tensor is read from its input and written to its output by the backend
// itself, which finishes (averages, post-scales) each stretch as it writes it.
Status Executor::AllreducePieces(const Response& r, const std::vector<TensorEntry*>& entries,
                                 int64_t divisor) {
  const DataType dtype = r.dtype;
  const ReduceOp op = r.reduce_op;
  const double post = r.postscale_factor;
  const int n = static_cast<int>(r.names.size());
  // A rank that has joined has no tensor: it contributes the op's identity from the
  // fusion buffer and drops the result. The counts are every rank's, so the
  // backend lays out and cuts the pieces alike everywhere.
  int64_t missing = 0;
  for (int i = 0; i < n; ++i)
    if (entries[i] == nullptr) missing += r.counts[i];
  const size_t elem = DataTypeSize(dtype);
  uint8_t* spare = missing > 0 ? fusion_.Get(missing * elem) : nullptr;
  // A prescale factor goes into the outputs first, which then are the inputs.
  const bool prescale = r.prescale_factor != 1.0;
  if (prescale) {
    Mark(r, Phase::kCopyIn, true);
    for (int i = 0; i < n; ++i)
      if (entries[i] != nullptr)
        ScaledCopy(dtype, entries[i]->output, entries[i]->input, r.counts[i], r.prescale_factor);
    Mark(r, Phase::kCopyIn, false);
  }
  std::vector<AllreducePiece> pieces;
  pieces.reserve(entries.size());
  for (int i = 0; i < n; ++i) {
    if (entries[i] != nullptr) {
      pieces.push_back({prescale ? entries[i]->output : entries[i]->input, entries[i]->output,
                        r.counts[i]});
    } else {
      FillIdentity(dtype, op, spare, r.counts[i]);
      pieces.push_back({spare, spare, r.counts[i]});
      spare += r.counts[i] * elem;
    }
  }
  Backend::FinishFn finish;
  if (op == ReduceOp::kAverage || post != 1.0) {
    finish = [&](void* out, int64_t count) {
      if (op == ReduceOp::kAverage) DivideBuffer(dtype, out, count, divisor);
      if (post != 1.0) ScaledCopy(dtype, out, out, count, post);
    };
  }
  Mark(r, Phase::kCollective, true);
  Status s = backend_->AllreducePieces(pieces, dtype, op, finish);
  Mark(r, Phase::kCollective, false);
  if (!s.ok()) return s.Prepend(AllreduceWhat(r));
  CompleteAll(entries, Status::OK());
  return Status::OK();
}

// Adasum: every rank gathers every rank's fused buffer (its tensors back to back,
// prescaled; zeros from a joined rank, which combine(a, 0) = a passes over) and
// runs the same deterministic tree combination on the same bytes, so every rank
// ends with bitwise-identical results without a second exchange. Simple rather
// than frugal: the gathered buffer is size times the fused one, and each rank does
// the whole computation.
Status Executor::AllreduceAdasum(const Response& r, const std::vector<TensorEntry*>& entries) {
  const DataType dtype = r.dtype;
  const size_t elem = DataTypeSize(dtype);
  const int size = backend_->size();
  const int n = static_cast<int>(r.names.size());
  const std::vector<int64_t> counts(r.counts.begin(), r.counts.end());
  const int64_t bytes = std::accumulate(counts.begin(), counts.end(), int64_t{0}) * int64_t(elem);

  Mark(r, Phase::kCopyIn, true);
  const void* send = nullptr;
  if (n == 1 && entries[0] != nullptr && r.prescale_factor == 1.0) {
    send = entries[0]->input;
  } else {
    uint8_t* packed = fusion_.Get(bytes);
    int64_t offset = 0;
    for (int i = 0; i < n; ++i) {
      if (entries[i] != nullptr) {
        ScaledCopy(dtype, packed + offset * elem, entries[i]->input, counts[i], r.prescale_factor);
      } else {
        FillIdentity(dtype, ReduceOp::kAdasum, packed + offset * elem, counts[i]);
      }
      offset += counts[i];
    }
    send = packed;
  }
  uint8_t* gathered = scratch_.Get(bytes * size);
  Mark(r, Phase::kCopyIn, false);

  Mark(r, Phase::kCollective, true);
  Status s = backend_->Allgatherv(send, gathered, std::vector<int64_t>(size, bytes));
  if (s.ok()) {
    std::vector<void*> buffers(size);
    for (int rank = 0; rank < size; ++rank) buffers[rank] = gathered + rank * bytes;
    AdasumFused(dtype, buffers, counts);
  }
  Mark(r, Phase::kCollective, false);
  if (!s.ok()) return s.Prepend(AllreduceWhat(r));

  Mark(r, Phase::kCopyOut, true);
  int64_t offset = 0;
  CompletionBatch batch;
  for (int i = 0; i < n; ++i) {
    const uint8_t* src = gathered + offset * elem;
    offset += counts[i];
    if (entries[i] == nullptr) continue;
    ScaledCopy(dtype, entries[i]->output, src, counts[i], r.postscale_factor);
    batch.Complete(entries[i]->work.get(), Status::OK());
  }
  batch.Wake();
  Mark(r, Phase::kCopyOut, false);
  return Status::OK();
}

// Fused allgather: every rank's inputs travel as one contiguous segment per rank
// (its tensors back to back); each tensor's result is then the concatenation of its
// block from every rank's segment.
Status Executor::Allgather(const Response& r, const std::vector<TensorEntry*>& entries) {
  const int size = backend_->size();
  const int me = backend_->rank();
  const int n = static_cast<int>(r.names.size());
  const size_t elem = DataTypeSize(r.dtype);
  auto block = [&](int i, int rank) { return r.rank_dims[i * size + rank] * r.counts[i] * int64_t(elem); };
  std::vector<int64_t> bytes_per_rank(size, 0);
  for (int rank = 0; rank < size; ++rank)
    for (int i = 0; i < n; ++i) bytes_per_rank[rank] += block(i, rank);
  const int64_t total = std::accumulate(bytes_per_rank.begin(), bytes_per_rank.end(), int64_t{0});

  Mark(r, Phase::kCopyIn, true);
  const void* send = nullptr;
  if (n == 1) {
    send = entries[0] ? entries[0]->input : nullptr;
  } else {
    uint8_t* packed = scratch_.Get(bytes_per_rank[me]);
    int64_t off = 0;
    for (int i = 0; i < n; ++i) {
      if (entries[i] != nullptr && block(i, me) > 0) std::memcpy(packed + off, entries[i]->input, block(i, me));
      off += block(i, me);
    }
    send = packed;
  }
  // A lone tensor gathers straight into its result.
  uint8_t* gathered = nullptr;
  if (n == 1 && entries[0] != nullptr) {
    entries[0]->work->result().resize(total);
    gathered = entries[0]->work->result().data();
  } else {
    gathered = fusion_.Get(total);
  }
  Mark(r, Phase::kCopyIn, false);

  Mark(r, Phase::kCollective, true);
  Status s = backend_->Allgatherv(send, gathered, bytes_per_rank);
  Mark(r, Phase::kCollective, false);
  if (!s.ok()) return s.Prepend("allgather of '" + r.names[0] + "'");

  Mark(r, Phase::kCopyOut, true);
  CompletionBatch batch;
  std::vector<int64_t> seg_start(size, 0);
  for (int rank = 1; rank < size; ++rank) seg_start[rank] = seg_start[rank - 1] + bytes_per_rank[rank - 1];
  std::vector<int64_t> within(size, 0);  // offset of tensor i inside each rank's segment
  for (int i = 0; i < n; ++i) {
    TensorEntry* e = entries[i];
    int64_t rows = 0;
    for (int rank = 0; rank < size; ++rank) rows += r.rank_dims[i * size + rank];
    if (e != nullptr) {
      if (n > 1) {
        auto& out = e->work->result();
        out.resize(rows * r.counts[i] * elem);
        int64_t off = 0;
        for (int rank = 0; rank < size; ++rank) {
          if (block(i, rank) > 0)
            std::memcpy(out.data() + off, gathered + seg_start[rank] + within[rank], block(i, rank));
          off += block(i, rank);
        }
      }
      e->work->result_shape() = WithFirstDim(e->shape, rows);
      batch.Complete(e->work.get(), Status::OK());
    }
    for (int rank = 0; rank < size; ++rank) within[rank] += block(i, rank);
  }
  batch.Wake();
  Mark(r, Phase::kCopyOut, false);
  return Status::OK();
}

Status Executor::Broadcast(const Response& r, const std::vector<TensorEntry*>& entries) {
  TensorEntry* e = entries[0];
  if (e == nullptr) return Status::OK();
  const int64_t bytes = r.counts[0] * static_cast<int64_t>(DataTypeSize(r.dtype));
  if (backend_->rank() == r.root_rank && e->output != e->input && bytes > 0)
    std::memcpy(e->output, e->input, bytes);
  Mark(r, Phase::kCollective, true);
  Status s = backend_->Broadcast(e->output, bytes, r.root_rank);
  Mark(r, Phase::kCollective, false);
  if (!s.ok()) return s.Prepend("broadcast of '" + r.names[0] + "'");
  e->work->Complete(s);
  return s;
}

Status Executor::Alltoall(const Response& r, const std::vector<TensorEntry*>& entries) {
  TensorEntry* e = entries[0];
  if (e == nullptr) return Status::OK();
  const int size = backend_->size();
  const int me = backend_->rank();
  const int64_t row_bytes =
      r.counts[0] * static_cast<int64_t>(DataTypeSize(r.dtype));
  std::vector<int64_t> send(size), recv(size);
  int64_t recv_rows = 0;
  auto& splits = e->work->received_splits();
  splits.assign(size, 0);
  for (int peer = 0; peer < size; ++peer) {
    send[peer] = r.split_matrix[me * size + peer] * row_bytes;
    recv[peer] = r.split_matrix[peer * size + me] * row_bytes;
    splits[peer] = r.split_matrix[peer * size + me];
    recv_rows += splits[peer];
  }
  auto& out = e->work->result();
  out.resize(recv_rows * row_bytes);
  Mark(r, Phase::kCollective, true);
  Status s = backend_->Alltoallv(e->input, send, out.data(), recv);
  Mark(r, Phase::kCollective, false);
  if (!s.ok()) return s.Prepend("alltoall of '" + r.names[0] + "'");
  e->work->result_shape() = WithFirstDim(e->shape, recv_rows);
  e->work->Complete(s);
  return s;
}

// Fused reduce-scatter: the buffer holds rank 0's blocks of every tensor, then
// rank 1's, and so on, so each rank's share is one contiguous range.
Status Executor::Reducescatter(const Response& r, const std::vector<TensorEntry*>& entries) {
  const DataType dtype = r.dtype;
  const ReduceOp op = r.reduce_op;
  const size_t elem = DataTypeSize(dtype);
  const int size = backend_->size();
  const int me = backend_->rank();
  const int n = static_cast<int>(r.names.size());
  const ScatterLayout layout(r, size);
  const std::vector<int64_t>& recv_counts = layout.counts;
  const int64_t total = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});

  Mark(r, Phase::kCopyIn, true);
  uint8_t* buf = fusion_.Get(total * elem);
  int64_t off = 0;
  for (int rank = 0; rank < size; ++rank) {
    for (int i = 0; i < n; ++i) {
      const int64_t first_row = layout.first_row(i, rank);
      const int64_t count = layout.elements(i, rank);
      if (entries[i] != nullptr) {
        ScaledCopy(dtype, buf + off * elem,
                   static_cast<const uint8_t*>(entries[i]->input) + first_row * layout.row(i) * elem, count,
                   r.prescale_factor);
      } else {
        FillIdentity(dtype, op, buf + off * elem, count);
      }
      off += count;
    }
  }
  Mark(r, Phase::kCopyIn, false);

  // A lone tensor's share lands straight in its result; fused ones are split out
  // of the scratch buffer.
  const bool direct = n == 1 && entries[0] != nullptr;
  if (direct) entries[0]->work->result().resize(recv_counts[me] * elem);
  uint8_t* mine =
      direct ? entries[0]->work->result().data() : scratch_.Get(recv_counts[me] * elem);
  Mark(r, Phase::kCollective, true);
  Status s = backend_->ReduceScatter(buf, mine, recv_counts, dtype, op);
  Mark(r, Phase::kCollective, false);
  if (!s.ok()) return s.Prepend("reducescatter of '" + r.names[0] + "'");

  Mark(r, Phase::kCopyOut, true);
  off = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t count = layout.elements(i, me);
    uint8_t* src = mine + off * elem;
    off += count;
    TensorEntry* e = entries[i];
    if (e == nullptr) continue;
    if (op == ReduceOp::kAverage) DivideBuffer(dtype, src, count, size);
    auto& out = e->work->result();
    if (!direct) out.resize(count * elem);
    ScaledCopy(dtype, out.data(), src, count, r.postscale_factor);  // in place if direct
    e->work->result_shape() = WithFirstDim(e->shape, layout.rows(i, me));
    e->work->Complete(Status::OK());
  }
  Mark(r, Phase::kCopyOut, false);
  return Status::OK();
}

// Negotiation already proved every rank reached the barrier; nothing moves.
Status Executor::Barrier(const Response& r, const std::vector<TensorEntry*>& entries) {
  for (TensorEntry* e : entries) {
    if (e == nullptr) continue;
    Status s = e->loop_action ? e->loop_action() : Status::OK();
    e->work->Complete(s);
  }
  return Status::OK();
}

Status Executor::Join(const Response& r, const std::vector<TensorEntry*>& entries) {
  for (TensorEntry* e : entries) {
    if (e == nullptr) continue;
    e->work->scalar_result() = r.root_rank;
    e->work->Complete(Status::OK());
  }
  return Status::OK();
}

}  // namespace hvd
