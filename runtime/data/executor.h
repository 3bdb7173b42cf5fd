// Executor: runs one agreed response on this rank (thin execution; the plan was
// made by the coordinator).
//
// A fused all-reduce goes to the backend as pieces (Backend::AllreducePieces: the
// CPU backends read each input and write each output themselves, finishing each
// stretch, dividing for AVERAGE and applying the postscale factor); a prescale
// factor is applied first, into the outputs, which then serve as inputs. On a
// backend without pieces it copies each input into the persistent fusion buffer
// (prescaling on the way in), all-reduces the buffer once and copies each tensor
// out; a single tensor is reduced in its output buffer directly. Ranks that have
// joined have no entry and contribute the op's identity.
//
// An Adasum all-reduce instead gathers every rank's (prescaled) fused buffer and
// runs the Adasum tree (runtime/kernels/adasum.h) over it per tensor on every rank, then
// post-scales on the way out; its gathered buffer holds size times the fused bytes.
//
// Execute completes every present entry's Work, except when the backend failed:
// it then returns that failure, which ends the job, and leaves the entries to the
// caller, which completes them with the job's first failure. Per-tensor errors
// agreed by the coordinator complete the entries and return OK.
// Not thread-safe: only the background thread uses it.
#ifndef HVD_RUNTIME_DATA_EXECUTOR_H_
#define HVD_RUNTIME_DATA_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/common/backend.h"
#include "runtime/data/device_ops.h"
#include "runtime/data/response.h"
#include "runtime/data/tensor_queue.h"

namespace hvd {

// Rows of a first dimension of `dim0` that rank r of `size` receives in a
// reduce-scatter: the first dim0 % size ranks get one extra row (Horovod's rule).
// Host and device executors share it, so both split alike.
inline int64_t ScatterRows(int64_t dim0, int size, int r) {
  return dim0 / size + (r < dim0 % size ? 1 : 0);
}

// The rows of a (fused) reduce-scatter response `r` among `size` ranks, as the host
// and device executors lay their fusion buffers out: tensor i's first dimension
// (r.rank_dims[i]) splits by ScatterRows, each row of r.counts[i] / rank_dims[i]
// elements.
struct ScatterLayout {
  ScatterLayout(const Response& r, int size) : response(r), ranks(size), counts(size, 0) {
    for (int rank = 0; rank < size; ++rank)
      for (size_t i = 0; i < r.names.size(); ++i) counts[rank] += elements(static_cast<int>(i), rank);
  }
  // Elements in one row of tensor i.
  int64_t row(int i) const {
    return response.rank_dims[i] > 0 ? response.counts[i] / response.rank_dims[i] : 0;
  }
  // Rows of tensor i that `rank` receives, and the first of them.
  int64_t rows(int i, int rank) const { return ScatterRows(response.rank_dims[i], ranks, rank); }
  // Elements of tensor i that `rank` receives.
  int64_t elements(int i, int rank) const { return rows(i, rank) * row(i); }
  int64_t first_row(int i, int rank) const {
    int64_t first = 0;
    for (int k = 0; k < rank; ++k) first += rows(i, k);
    return first;
  }

  const Response& response;
  const int ranks;
  std::vector<int64_t> counts;  // elements each rank receives, over every tensor
};

// `shape` with its first dimension replaced by d0 (a scalar becomes {d0}).
inline std::vector<int64_t> WithFirstDim(const Dims& shape, int64_t d0) {
  std::vector<int64_t> out = shape.empty() ? std::vector<int64_t>{0} : std::vector<int64_t>(shape);
  out[0] = d0;
  return out;
}

// A growable buffer that is allocated once and kept: no large allocation per
// collective (glibc would unmap and remap blocks over its mmap threshold each time).
class FusionBuffer {
 public:
  // At least `bytes` bytes, 64-byte aligned; contents are unspecified.
  uint8_t* Get(size_t bytes);
  size_t capacity() const { return capacity_; }

 private:
  struct Free { void operator()(uint8_t* p) const; };
  std::unique_ptr<uint8_t, Free> data_;
  size_t capacity_ = 0;
};

// Phases a response goes through, for the timeline.
enum class Phase { kCopyIn, kCollective, kCopyOut };

class Executor {
 public:
  // `on_phase(names, phase, begin)` is called around each phase when set.
  using PhaseHook = std::function<void(const Response&, Phase, bool begin)>;

  explicit Executor(Backend* backend, PhaseHook on_phase = nullptr)
      : backend_(backend), on_phase_(std::move(on_phase)) {}

  // `entries[i]` is this rank's entry for response.names[i], or null if it has none.
  Status Execute(const Response& response, const std::vector<TensorEntry*>& entries);

  // Responses on a device (response.device >= 0) go to a DeviceOps, which the
  // factory creates on the first one, for the device of this rank's tensors: a job
  // that never enqueues a device tensor never touches CUDA. Failing to create it
  // breaks the communicator (peers may be waiting in the creation).
  using DeviceOpsFactory = std::function<Status(int device, std::unique_ptr<DeviceOps>* out)>;
  void SetDeviceOpsFactory(DeviceOpsFactory factory) { device_factory_ = std::move(factory); }

 private:
  Status ExecuteOnDevice(const Response& r, const std::vector<TensorEntry*>& entries);
  Status Allreduce(const Response& r, const std::vector<TensorEntry*>& entries);
  Status AllreducePieces(const Response& r, const std::vector<TensorEntry*>& entries,
                         int64_t contributors);
  Status AllreduceAdasum(const Response& r, const std::vector<TensorEntry*>& entries);
  Status Allgather(const Response& r, const std::vector<TensorEntry*>& entries);
  Status Broadcast(const Response& r, const std::vector<TensorEntry*>& entries);
  Status Alltoall(const Response& r, const std::vector<TensorEntry*>& entries);
  Status Reducescatter(const Response& r, const std::vector<TensorEntry*>& entries);
  Status Barrier(const Response& r, const std::vector<TensorEntry*>& entries);
  Status Join(const Response& r, const std::vector<TensorEntry*>& entries);

  void Mark(const Response& r, Phase p, bool begin) {
    if (on_phase_) on_phase_(r, p, begin);
  }

  Backend* backend_;
  PhaseHook on_phase_;
  FusionBuffer fusion_;
  // Packed allgather inputs, this rank's reduce-scatter block, Adasum's gathered
  // buffers. Like fusion_, it keeps its largest size.
  FusionBuffer scratch_;
  DeviceOpsFactory device_factory_;
  std::unique_ptr<DeviceOps> device_ops_;
};

// Completes every present entry with `status`.
void CompleteAll(const std::vector<TensorEntry*>& entries, const Status& status);

}  // namespace hvd

#endif  // HVD_RUNTIME_DATA_EXECUTOR_H_
