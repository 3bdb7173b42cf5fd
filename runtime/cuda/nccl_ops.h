// NcclOps: device collectives over one NCCL communicator (HVD_GPU_OPERATIONS=nccl).
//
// Every response runs on one dedicated non-blocking stream per rank, which first
// waits (by an event) for the work each caller queued on its own stream. The
// terms below follow the host executor (runtime/data/executor.h):
//   - allreduce: a lone tensor is reduced from its input into its output; fused
//     tensors are copied into the persistent device fusion buffer by one batched
//     kernel (prescale on the way in), reduced in place, and copied out by another
//     (postscale on the way out). AVERAGE is ncclAvg, except with joined ranks,
//     where the sum is divided by the contributing ranks in the copy out. A joined
//     rank contributes the op's identity.
//   - allgather: ncclAllGather when every rank sends as many bytes, else one
//     grouped ncclBroadcast per rank (an allgatherv). Fused tensors travel as one
//     segment per rank and are reassembled by one batched copy.
//   - broadcast: ncclBroadcast from the input into the output.
//   - alltoall: grouped ncclSend/ncclRecv per peer; a local copy to itself.
//   - reducescatter: ncclReduceScatter over blocks padded to the largest rank's
//     share (the first dim0 % size ranks get one extra row).
// Results of unknown size (allgather, alltoall, reducescatter) are device memory
// from a stream-ordered pool, owned by the Work.
//
// Execute only queues work. Each response's Works are then marked enqueued with a
// fence on an event recorded after it (stream-ordered completion: a caller's
// stream may wait on that event instead of the host waiting), and complete from
// the finalizer thread once the event has fired (see finalizer.h for how, without
// polling, and for the timeout and the asynchronous error checks). Events come
// from a pool. The stream orders responses, so the fusion buffer is reused
// without waiting. While the timeline wants them (DeviceOpsOptions::on_phases),
// timing events mark each response's start, the collective's start and end
// around fusion copies, and its end; the finalizer turns their distances into
// COPY_IN, collective and COPY_OUT spans (runtime/data/device_phases.h).
#ifndef HVD_RUNTIME_CUDA_NCCL_OPS_H_
#define HVD_RUNTIME_CUDA_NCCL_OPS_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_util.h"
#include "runtime/cuda/event_pool.h"
#include "runtime/cuda/finalizer.h"
#include "runtime/cuda/nccl_comm.h"
#include "runtime/data/device_ops.h"

namespace hvd {
namespace cuda {

class NcclOps : public DeviceOps {
 public:
  // Collective over the communicator: creates the NCCL communicator on
  // options.device, bounded by options.timeout.
  static Status Create(const DeviceOpsOptions& options, std::unique_ptr<DeviceOps>* out);
  // Waits for queued work (bounded by the timeout), then aborts the communicator.
  ~NcclOps() override;

  Status Execute(const Response& r, const std::vector<TensorEntry*>& entries) override;

 private:
  explicit NcclOps(const DeviceOpsOptions& options) : options_(options) {}

  Status Allreduce(const Response& r, const std::vector<TensorEntry*>& entries);
  Status Allgather(const Response& r, const std::vector<TensorEntry*>& entries);
  Status Broadcast(const Response& r, const std::vector<TensorEntry*>& entries);
  Status Alltoall(const Response& r, const std::vector<TensorEntry*>& entries);
  Status Reducescatter(const Response& r, const std::vector<TensorEntry*>& entries);

  // Makes stream_ wait for the work queued so far on each entry's caller stream.
  Status OrderAfterCallers(const std::vector<TensorEntry*>& entries);
  // Records the completion event, marks the entries' Works enqueued with it and
  // hands them to the finalizer (with the phase marks, for the timeline).
  Status Finish(const Response& r, const std::string& what,
                const std::vector<TensorEntry*>& entries);
  // With the timeline wanting device phases: records a timing event at this point
  // of the stream into *mark. Otherwise nothing.
  Status Mark(cudaEvent_t* mark);
  // Fills `count` elements at `buf` with the identity of `op`.
  Status FillIdentity(DataType dtype, ReduceOp op, void* buf, int64_t count);
  // A device result of `bytes` for entry `e`, freed in the order of e's stream.
  Status AllocateResult(TensorEntry* e, size_t bytes, std::shared_ptr<void>* out);
  Status Fusion(size_t bytes, void** out);

  DeviceOpsOptions options_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // recorded on callers' streams; stream_ waits on it
  std::unique_ptr<NcclComm> comm_;
  std::unique_ptr<ResultAllocator> results_;
  PersistentBuffer fusion_;
  PersistentBuffer scratch_;
  std::shared_ptr<EventPool> events_;  // completion events, shared with the fences
  // Timeline marks of the response being queued (null: not recorded), from a pool
  // of timing events: its start on the stream, the collective's start and end
  // when there are fusion copies around it. `timed_` while the timeline wants them.
  struct Marks {
    cudaEvent_t start = nullptr, collective_begin = nullptr, collective_end = nullptr;
  };
  std::shared_ptr<EventPool> timing_events_;
  bool timed_ = false;
  Marks marks_;
  std::unique_ptr<Finalizer> finalizer_;
};

}  // namespace cuda
}  // namespace hvd

#endif  // HVD_RUNTIME_CUDA_NCCL_OPS_H_
