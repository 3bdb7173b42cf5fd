#include "runtime/cuda/nccl_ops.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "runtime/cuda/copy_kernels.h"
#include "runtime/data/executor.h"
#include "runtime/kernels/reduce_kernels.h"

namespace hvd {
namespace cuda {
namespace {

std::string Describe(const Response& r) {
  const char* op = "collective";
  switch (r.type) {
    case ResponseType::kAllreduce: op = "allreduce"; break;
    case ResponseType::kAllgather: op = "allgather"; break;
    case ResponseType::kBroadcast: op = "broadcast"; break;
    case ResponseType::kAlltoall: op = "alltoall"; break;
    case ResponseType::kReducescatter: op = "reducescatter"; break;
    default: break;
  }
  std::string s = std::string("NCCL ") + op + " of '" + (static_cast<int>(r.names.size()) ? r.names[0] : "") + "'";
  if (static_cast<int>(r.names.size()) > 1) s += " and " + std::to_string(static_cast<int>(r.names.size()) - 1) + " more";
  return s;
}

uint8_t* At(void* base, int64_t byte_offset) { return static_cast<uint8_t*>(base) + byte_offset; }
const uint8_t* At(const void* base, int64_t byte_offset) {
  return static_cast<const uint8_t*>(base) + byte_offset;
}

cudaStream_t CallerStream(const TensorEntry* e) { return static_cast<cudaStream_t>(e->stream); }

}  // namespace

Status NcclOps::Create(const DeviceOpsOptions& options, std::unique_ptr<DeviceOps>* out) {
  std::unique_ptr<NcclOps> ops(new NcclOps(options));
  DeviceGuard guard(options.device);
  const std::string dev = "cuda:" + std::to_string(options.device);
  HVD_CUDA_RETURN(cudaSetDevice(options.device), "selecting " + dev);
  HVD_CUDA_RETURN(cudaStreamCreateWithFlags(&ops->stream_, cudaStreamNonBlocking),
                  "creating the NCCL stream on " + dev);
  HVD_CUDA_RETURN(cudaEventCreateWithFlags(&ops->ready_, cudaEventDisableTiming),
                  "creating an event on " + dev);
  HVD_RETURN_IF_ERROR(ResultAllocator::Create(options.device, &ops->results_));
  HVD_RETURN_IF_ERROR(
      NcclComm::Create(options.store.get(), options.rank, options.size, options.timeout, &ops->comm_));
  NcclComm* comm = ops->comm_.get();
  ops->events_ = std::make_shared<EventPool>(options.device, cudaEventDisableTiming);
  ops->timing_events_ = std::make_shared<EventPool>(options.device, cudaEventDefault);
  HVD_RETURN_IF_ERROR(Finalizer::Create(
      options.device, options.timeout, [comm] { return comm->CheckAsyncError(); },
      [comm](const Status& why) { comm->Abort(why); }, &ops->finalizer_));
  *out = std::move(ops);
  return Status::OK();
}

NcclOps::~NcclOps() {
  DeviceGuard guard(options_.device);
  finalizer_.reset();  // every queued Work completes (or fails past the timeout)
  comm_.reset();       // aborts the communicator; its kernels exit
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status NcclOps::Execute(const Response& r, const std::vector<TensorEntry*>& entries) {
  DeviceGuard guard(options_.device);
  HVD_RETURN_IF_ERROR(comm_->status());
  HVD_RETURN_IF_ERROR(finalizer_->status());
  for (const TensorEntry* e : entries) {
    if (e != nullptr && e->device != options_.device)
      return Status::InvalidUsage("tensor '" + e->name + "' is on cuda:" + std::to_string(e->device) +
                                  ", but this rank's NCCL communicator for the process set uses cuda:" +
                                  std::to_string(options_.device) +
                                  " (one device per rank and process set)");
  }
  if ((r.type == ResponseType::kAllreduce || r.type == ResponseType::kReducescatter) &&
      !NcclHasType(r.dtype)) {
    // Every rank runs this same response, so every rank fails it alike and the
    // communicator stays usable.
    CompleteAll(entries, Status::InvalidArgument(
                             Describe(r) + ": NCCL cannot reduce " +
                             DataTypeName(r.dtype) +
                             " tensors; use a wider integer type, or HVD_GPU_OPERATIONS=gloo"));
    return Status::OK();
  }
  HVD_RETURN_IF_ERROR(OrderAfterCallers(entries));
  timed_ = options_.on_phases && options_.phases_wanted && options_.phases_wanted();
  marks_ = Marks();
  HVD_RETURN_IF_ERROR(Mark(&marks_.start));
  Status s;
  switch (r.type) {
    case ResponseType::kAllreduce: s = Allreduce(r, entries); break;
    case ResponseType::kAllgather: s = Allgather(r, entries); break;
    case ResponseType::kBroadcast: s = Broadcast(r, entries); break;
    case ResponseType::kAlltoall: s = Alltoall(r, entries); break;
    case ResponseType::kReducescatter: s = Reducescatter(r, entries); break;
    default:
      s = Status::Internal("the NCCL backend cannot run response type " + std::to_string(static_cast<int>(r.type)));
  }
  const std::string what = Describe(r);
  if (!s.ok()) return s.Prepend(what);
  return Finish(r, what, entries);
}

Status NcclOps::OrderAfterCallers(const std::vector<TensorEntry*>& entries) {
  std::vector<void*> seen;
  for (const TensorEntry* e : entries) {
    if (e == nullptr || std::find(seen.begin(), seen.end(), e->stream) != seen.end()) continue;
    seen.push_back(e->stream);
    const std::string what = "ordering after the caller's stream of tensor '" + e->name + "'";
    HVD_CUDA_RETURN(cudaEventRecord(ready_, CallerStream(e)), what);
    HVD_CUDA_RETURN(cudaStreamWaitEvent(stream_, ready_, 0), what);
  }
  return Status::OK();
}

Status NcclOps::Mark(cudaEvent_t* mark) {
  if (!timed_) return Status::OK();
  HVD_RETURN_IF_ERROR(timing_events_->Get(mark));
  HVD_CUDA_RETURN(cudaEventRecord(*mark, stream_), "recording a timeline mark");
  return Status::OK();
}

Status NcclOps::Finish(const Response& r, const std::string& what,
                       const std::vector<TensorEntry*>& entries) {
  cudaEvent_t done = nullptr;
  HVD_RETURN_IF_ERROR(events_->Get(&done));
  // Owns `done` from here: back to the pool once no Work holds it.
  auto fence = std::make_shared<EventFence>(events_, done);
  HVD_CUDA_RETURN(cudaEventRecord(done, stream_), what + ": recording its completion");
  cudaEvent_t end = nullptr;
  HVD_RETURN_IF_ERROR(Mark(&end));
  std::vector<std::shared_ptr<Work>> works;
  for (const TensorEntry* entry : entries) {
    if (entry == nullptr) continue;
    entry->work->MarkEnqueued(fence);
    works.push_back(entry->work);
  }
  std::function<void(const Status&)> phases;  // runs after the Works completed
  if (end != nullptr) {
    phases = [marks = marks_, end, pool = timing_events_, hook = options_.on_phases,
              names = r.names, type = r.type](const Status& s) {
      DevicePhases p;
      p.end = DevicePhases::Clock::now();
      auto before_end = [&](cudaEvent_t from) {
        float ms = -1;
        if (from != nullptr && cudaEventElapsedTime(&ms, from, end) != cudaSuccess) ms = -1;
        return ms;
      };
      if (marks.collective_begin != nullptr) {
        p.copy_in_ms = before_end(marks.start);
        p.collective_ms = before_end(marks.collective_begin);
        p.copy_out_ms = before_end(marks.collective_end);
      } else {
        p.collective_ms = before_end(marks.start);
      }
      if (s.ok() && p.collective_ms >= 0) hook(names, type, p);
      for (cudaEvent_t e : {marks.start, marks.collective_begin, marks.collective_end, end})
        if (e != nullptr) pool->Put(e);
    };
  }
  marks_ = Marks();
  finalizer_->Push(done, what, [works, phases](const Status& s) {
    {
      CompletionBatch batch;
      for (const auto& w : works) batch.Complete(w.get(), s);
    }
    if (phases) phases(s);
  });
  return Status::OK();
}

Status NcclOps::FillIdentity(DataType dtype, ReduceOp op, void* buf, int64_t count) {
  if (count <= 0) return Status::OK();
  uint64_t pattern = 0;
  ::hvd::FillIdentity(dtype, op, &pattern, 1);
  const size_t elem = DataTypeSize(dtype);
  if (pattern == 0) {
    HVD_CUDA_RETURN(cudaMemsetAsync(buf, 0, count * elem, stream_), "filling the identity");
  } else {
    HVD_CUDA_RETURN(LaunchFill(buf, count, elem, pattern, stream_), "filling the identity");
  }
  return Status::OK();
}

Status NcclOps::AllocateResult(TensorEntry* e, size_t bytes, std::shared_ptr<void>* out) {
  HVD_RETURN_IF_ERROR(results_->Allocate(bytes, stream_, CallerStream(e), out));
  auto& d = e->work->device_result();
  d.data = *out;
  d.bytes = static_cast<int64_t>(bytes);
  d.device = options_.device;
  return Status::OK();
}

Status NcclOps::Fusion(size_t bytes, void** out) {
  return fusion_.Get(bytes, static_cast<size_t>(options_.fusion_threshold), stream_, out);
}

Status NcclOps::Allreduce(const Response& r, const std::vector<TensorEntry*>& entries) {
  const DataType dtype = r.dtype;
  const ReduceOp op = r.reduce_op;
  const size_t elem = DataTypeSize(dtype);
  const int n = static_cast<int>(r.names.size());
  const int64_t total = std::accumulate(r.counts.begin(), r.counts.end(), int64_t{0});
  const double pre = r.prescale_factor;
  const double post = r.postscale_factor;
  // ncclAvg divides by the communicator's size, joined ranks (which contribute
  // zeros) included, as AVERAGE is defined.
  auto reduce = [&](const void* src, void* dst) {
    if (total == 0) return Status::OK();
    return comm_->Run("ncclAllReduce", [&](ncclComm_t c) {
      return ncclAllReduce(src, dst, static_cast<size_t>(total), NcclType(dtype), NcclOp(op), c,
                           stream_);
    });
  };

  if (n == 1 && entries[0] != nullptr) {
    TensorEntry* e = entries[0];
    const void* src = e->input;
    if (pre != 1.0 && total > 0) {
      HVD_CUDA_RETURN(LaunchScaledCopies(dtype, {{e->input, e->output, total}}, 1, pre, stream_),
                      "prescaling");
      src = e->output;
    }
    HVD_RETURN_IF_ERROR(reduce(src, e->output));
    if (post != 1.0 && total > 0)
      HVD_CUDA_RETURN(LaunchScaledCopies(dtype, {{e->output, e->output, total}}, 1, post, stream_),
                      "postscaling");
    return Status::OK();
  }

  void* buf = nullptr;
  HVD_RETURN_IF_ERROR(Fusion(total * elem, &buf));
  std::vector<CopyDesc> in, out;
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t count = r.counts[i];
    uint8_t* slot = At(buf, offset * static_cast<int64_t>(elem));
    if (entries[i] != nullptr) {
      if (count > 0) {
        in.push_back({entries[i]->input, slot, count});
        out.push_back({slot, entries[i]->output, count});
      }
    } else {
      HVD_RETURN_IF_ERROR(FillIdentity(dtype, op, slot, count));
    }
    offset += count;
  }
  HVD_CUDA_RETURN(LaunchScaledCopies(dtype, in, 1, pre, stream_), "copying into the fusion buffer");
  HVD_RETURN_IF_ERROR(Mark(&marks_.collective_begin));
  HVD_RETURN_IF_ERROR(reduce(buf, buf));
  HVD_RETURN_IF_ERROR(Mark(&marks_.collective_end));
  HVD_CUDA_RETURN(LaunchScaledCopies(dtype, out, 1, post, stream_),
                  "copying out of the fusion buffer");
  return Status::OK();
}

// Fused allgather: every rank's inputs travel as one contiguous segment per rank
// (its tensors back to back); each tensor's result is then the concatenation of
// its block from every rank's segment.
Status NcclOps::Allgather(const Response& r, const std::vector<TensorEntry*>& entries) {
  const int size = comm_->size();
  const int me = comm_->rank();
  const int n = static_cast<int>(r.names.size());
  const DataType dtype = r.dtype;
  const int64_t elem = static_cast<int64_t>(DataTypeSize(dtype));
  auto rows_of = [&](int i, int rank) { return r.rank_dims[i * size + rank]; };
  auto block = [&](int i, int rank) { return rows_of(i, rank) * r.counts[i] * elem; };
  std::vector<int64_t> bytes_per_rank(size, 0), seg_start(size, 0);
  for (int rank = 0; rank < size; ++rank)
    for (int i = 0; i < n; ++i) bytes_per_rank[rank] += block(i, rank);
  for (int rank = 1; rank < size; ++rank) seg_start[rank] = seg_start[rank - 1] + bytes_per_rank[rank - 1];
  const int64_t total = seg_start[size - 1] + bytes_per_rank[size - 1];

  const void* send = nullptr;
  if (n == 1) {
    send = entries[0] != nullptr ? entries[0]->input : nullptr;
  } else if (bytes_per_rank[me] > 0) {
    void* packed = nullptr;
    HVD_RETURN_IF_ERROR(scratch_.Get(bytes_per_rank[me], 0, stream_, &packed));
    std::vector<CopyDesc> pack;
    int64_t off = 0;
    for (int i = 0; i < n; ++i) {
      if (entries[i] != nullptr && block(i, me) > 0)
        pack.push_back({entries[i]->input, At(packed, off), rows_of(i, me) * r.counts[i]});
      off += block(i, me);
    }
    HVD_CUDA_RETURN(LaunchScaledCopies(dtype, pack, 1, 1.0, stream_), "packing the allgather input");
    send = packed;
  }
  void* gathered = nullptr;
  if (n == 1 && entries[0] != nullptr) {
    std::shared_ptr<void> result;
    HVD_RETURN_IF_ERROR(AllocateResult(entries[0], total, &result));
    gathered = result.get();
  } else {
    HVD_RETURN_IF_ERROR(Fusion(total, &gathered));
  }

  const bool even = std::all_of(bytes_per_rank.begin(), bytes_per_rank.end(),
                                [&](int64_t b) { return b == bytes_per_rank[0]; });
  if (total > 0) {
    HVD_RETURN_IF_ERROR(comm_->Run(even ? "ncclAllGather" : "ncclBroadcast (allgatherv)", [&](ncclComm_t c) {
      if (even)
        return ncclAllGather(send, gathered, static_cast<size_t>(bytes_per_rank[0]), ncclUint8, c, stream_);
      ncclResult_t res = ncclGroupStart();
      if (res != ncclSuccess) return res;
      for (int rank = 0; rank < size; ++rank) {
        if (bytes_per_rank[rank] == 0) continue;
        uint8_t* dst = At(gathered, seg_start[rank]);
        res = ncclBroadcast(rank == me ? send : dst, dst, static_cast<size_t>(bytes_per_rank[rank]),
                            ncclUint8, rank, c, stream_);
        if (res != ncclSuccess && res != ncclInProgress) {
          ncclGroupEnd();
          return res;
        }
      }
      return ncclGroupEnd();
    }));
  }

  std::vector<CopyDesc> unpack;
  std::vector<int64_t> within(size, 0);  // offset of tensor i inside each rank's segment
  for (int i = 0; i < n; ++i) {
    TensorEntry* e = entries[i];
    int64_t rows = 0;
    for (int rank = 0; rank < size; ++rank) rows += rows_of(i, rank);
    if (e != nullptr) {
      if (n > 1) {
        std::shared_ptr<void> result;
        HVD_RETURN_IF_ERROR(AllocateResult(e, rows * r.counts[i] * elem, &result));
        int64_t off = 0;
        for (int rank = 0; rank < size; ++rank) {
          if (block(i, rank) > 0)
            unpack.push_back({At(gathered, seg_start[rank] + within[rank]), At(result.get(), off),
                              rows_of(i, rank) * r.counts[i]});
          off += block(i, rank);
        }
      }
      e->work->result_shape() = WithFirstDim(e->shape, rows);
    }
    for (int rank = 0; rank < size; ++rank) within[rank] += block(i, rank);
  }
  HVD_CUDA_RETURN(LaunchScaledCopies(dtype, unpack, 1, 1.0, stream_), "unpacking the allgather result");
  return Status::OK();
}

Status NcclOps::Broadcast(const Response& r, const std::vector<TensorEntry*>& entries) {
  TensorEntry* e = entries[0];
  if (e == nullptr) return Status::OK();
  const int64_t bytes = r.counts[0] * static_cast<int64_t>(DataTypeSize(r.dtype));
  if (bytes == 0) return Status::OK();
  return comm_->Run("ncclBroadcast", [&](ncclComm_t c) {
    return ncclBroadcast(e->input, e->output, static_cast<size_t>(bytes), ncclUint8, r.root_rank, c,
                         stream_);
  });
}

Status NcclOps::Alltoall(const Response& r, const std::vector<TensorEntry*>& entries) {
  TensorEntry* e = entries[0];
  if (e == nullptr) return Status::OK();
  const int size = comm_->size();
  const int me = comm_->rank();
  const int64_t row_bytes =
      r.counts[0] * static_cast<int64_t>(DataTypeSize(r.dtype));
  std::vector<int64_t> send(size), recv(size), send_off(size, 0), recv_off(size, 0);
  auto& splits = e->work->received_splits();
  splits.assign(size, 0);
  int64_t recv_rows = 0;
  for (int peer = 0; peer < size; ++peer) {
    send[peer] = r.split_matrix[me * size + peer] * row_bytes;
    recv[peer] = r.split_matrix[peer * size + me] * row_bytes;
    splits[peer] = r.split_matrix[peer * size + me];
    recv_rows += splits[peer];
    if (peer > 0) {
      send_off[peer] = send_off[peer - 1] + send[peer - 1];
      recv_off[peer] = recv_off[peer - 1] + recv[peer - 1];
    }
  }
  std::shared_ptr<void> result;
  HVD_RETURN_IF_ERROR(AllocateResult(e, recv_rows * row_bytes, &result));
  void* out = result.get();
  e->work->result_shape() = WithFirstDim(e->shape, recv_rows);
  if (recv[me] > 0)
    HVD_CUDA_RETURN(cudaMemcpyAsync(At(out, recv_off[me]), At(e->input, send_off[me]), recv[me],
                                    cudaMemcpyDeviceToDevice, stream_),
                    "copying this rank's own alltoall rows");
  bool traffic = false;
  for (int peer = 0; peer < size; ++peer)
    if (peer != me && (send[peer] > 0 || recv[peer] > 0)) traffic = true;
  if (!traffic) return Status::OK();
  return comm_->Run("ncclSend/ncclRecv (alltoall)", [&](ncclComm_t c) {
    ncclResult_t res = ncclGroupStart();
    if (res != ncclSuccess) return res;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == me) continue;
      if (send[peer] > 0) {
        res = ncclSend(At(e->input, send_off[peer]), static_cast<size_t>(send[peer]), ncclUint8, peer, c,
                       stream_);
        if (res != ncclSuccess && res != ncclInProgress) break;
      }
      if (recv[peer] > 0) {
        res = ncclRecv(At(out, recv_off[peer]), static_cast<size_t>(recv[peer]), ncclUint8, peer, c, stream_);
        if (res != ncclSuccess && res != ncclInProgress) break;
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    return res != ncclSuccess && res != ncclInProgress ? res : end;
  });
}

// Fused reduce-scatter: block k of the buffer holds rank k's rows of every tensor,
// padded to the largest block, so that ncclReduceScatter's equal counts apply.
Status NcclOps::Reducescatter(const Response& r, const std::vector<TensorEntry*>& entries) {
  const DataType dtype = r.dtype;
  const ReduceOp op = r.reduce_op;
  const int64_t elem = static_cast<int64_t>(DataTypeSize(dtype));
  const int size = comm_->size();
  const int me = comm_->rank();
  const int n = static_cast<int>(r.names.size());
  const ScatterLayout layout(r, size);
  const std::vector<int64_t>& recv_counts = layout.counts;
  const int64_t block = *std::max_element(recv_counts.begin(), recv_counts.end());
  const bool even = std::all_of(recv_counts.begin(), recv_counts.end(),
                                [&](int64_t c) { return c == block; });
  const double pre = r.prescale_factor;
  const double post = r.postscale_factor;

  std::vector<void*> results(n, nullptr);
  for (int i = 0; i < n; ++i) {
    TensorEntry* e = entries[i];
    if (e == nullptr) continue;
    std::shared_ptr<void> result;
    HVD_RETURN_IF_ERROR(AllocateResult(e, layout.elements(i, me) * elem, &result));
    results[i] = result.get();
    e->work->result_shape() = WithFirstDim(e->shape, layout.rows(i, me));
  }
  auto scatter = [&](const void* src, void* dst) {
    if (block == 0) return Status::OK();
    return comm_->Run("ncclReduceScatter", [&](ncclComm_t c) {
      return ncclReduceScatter(src, dst, static_cast<size_t>(block), NcclType(dtype), NcclOp(op), c,
                               stream_);
    });
  };

  if (n == 1 && entries[0] != nullptr && pre == 1.0 && even) {
    // The input is already `size` equal blocks in rank order.
    HVD_RETURN_IF_ERROR(scatter(entries[0]->input, results[0]));
    if (post != 1.0 && block > 0)
      HVD_CUDA_RETURN(LaunchScaledCopies(dtype, {{results[0], results[0], block}}, 1, post, stream_),
                      "postscaling");
    return Status::OK();
  }

  void* buf = nullptr;
  void* mine = nullptr;
  HVD_RETURN_IF_ERROR(Fusion(size * block * elem, &buf));
  HVD_RETURN_IF_ERROR(scratch_.Get(block * elem, 0, stream_, &mine));
  if (std::find(entries.begin(), entries.end(), nullptr) != entries.end())
    HVD_RETURN_IF_ERROR(FillIdentity(dtype, op, buf, size * block));
  std::vector<CopyDesc> in;
  for (int rank = 0; rank < size; ++rank) {
    int64_t off = rank * block;
    for (int i = 0; i < n; ++i) {
      const int64_t first_row = layout.first_row(i, rank);
      const int64_t count = layout.elements(i, rank);
      if (entries[i] != nullptr && count > 0)
        in.push_back({At(entries[i]->input, first_row * layout.row(i) * elem), At(buf, off * elem), count});
      off += count;
    }
  }
  HVD_CUDA_RETURN(LaunchScaledCopies(dtype, in, 1, pre, stream_), "copying into the fusion buffer");
  HVD_RETURN_IF_ERROR(scatter(buf, mine));
  std::vector<CopyDesc> out;
  int64_t off = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t count = layout.elements(i, me);
    if (entries[i] != nullptr && count > 0) out.push_back({At(mine, off * elem), results[i], count});
    off += count;
  }
  HVD_CUDA_RETURN(LaunchScaledCopies(dtype, out, 1, post, stream_), "copying out of the fusion buffer");
  return Status::OK();
}

}  // namespace cuda
}  // namespace hvd
