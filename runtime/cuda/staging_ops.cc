#include "runtime/cuda/staging_ops.h"

#include <algorithm>

namespace hvd {
namespace cuda {
namespace {

int64_t Align64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

cudaStream_t CallerStream(const TensorEntry* e) { return static_cast<cudaStream_t>(e->stream); }

}  // namespace

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

Status PinnedBuffer::Get(size_t bytes, uint8_t** out) {
  if (bytes == 0) bytes = 1;
  if (bytes > capacity_) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = nullptr;
    capacity_ = 0;
    HVD_CUDA_RETURN(cudaMallocHost(&data_, bytes),
                    "allocating " + std::to_string(bytes) + " bytes of pinned host memory");
    capacity_ = bytes;
  }
  *out = static_cast<uint8_t*>(data_);
  return Status::OK();
}

Status StagingOps::Create(const DeviceOpsOptions& options, std::unique_ptr<DeviceOps>* out) {
  if (options.host_backend == nullptr)
    return Status::Internal("host staging (HVD_GPU_OPERATIONS=gloo) needs the host backend");
  std::unique_ptr<StagingOps> ops(new StagingOps(options));
  DeviceGuard guard(options.device);
  const std::string dev = "cuda:" + std::to_string(options.device);
  HVD_CUDA_RETURN(cudaSetDevice(options.device), "selecting " + dev);
  HVD_CUDA_RETURN(cudaStreamCreateWithFlags(&ops->stream_, cudaStreamNonBlocking),
                  "creating the staging stream on " + dev);
  HVD_CUDA_RETURN(cudaEventCreateWithFlags(&ops->ready_, cudaEventDisableTiming),
                  "creating an event on " + dev);
  HVD_RETURN_IF_ERROR(ResultAllocator::Create(options.device, &ops->results_));
  *out = std::move(ops);
  return Status::OK();
}

StagingOps::~StagingOps() {
  DeviceGuard guard(options_.device);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status StagingOps::Execute(const Response& r, const std::vector<TensorEntry*>& entries) {
  DeviceGuard guard(options_.device);
  const size_t elem = DataTypeSize(r.dtype);
  const bool writes_output =
      r.type == ResponseType::kAllreduce || r.type == ResponseType::kBroadcast;
  // A broadcast reads the input on the root only.
  const bool reads_input = r.type != ResponseType::kBroadcast || options_.rank == r.root_rank;
  const int n = static_cast<int>(r.names.size());
  std::vector<int64_t> bytes(n, 0), in_off(n, 0), out_off(n, 0);
  int64_t in_total = 0, out_total = 0;
  for (int i = 0; i < n; ++i) {
    const TensorEntry* e = entries[i];
    if (e == nullptr) continue;
    bytes[i] = e->NumElements() * static_cast<int64_t>(elem);
    in_off[i] = in_total;
    if (reads_input) in_total += Align64(bytes[i]);
    out_off[i] = out_total;
    if (writes_output) out_total += Align64(bytes[i]);
  }
  uint8_t* in = nullptr;
  uint8_t* out = nullptr;
  HVD_RETURN_IF_ERROR(in_.Get(in_total, &in));
  HVD_RETURN_IF_ERROR(out_.Get(out_total, &out));

  // 1. Device to host, after the work the callers queued on their streams.
  std::vector<void*> seen;
  for (int i = 0; i < n; ++i) {
    const TensorEntry* e = entries[i];
    if (e == nullptr) continue;
    if (e->device != options_.device)
      return Status::InvalidUsage("tensor '" + e->name + "' is on cuda:" + std::to_string(e->device) +
                                  ", but this rank stages the process set's tensors through cuda:" +
                                  std::to_string(options_.device) +
                                  " (one device per rank and process set)");
    if (std::find(seen.begin(), seen.end(), e->stream) == seen.end()) {
      seen.push_back(e->stream);
      const std::string what = "ordering after the caller's stream of tensor '" + e->name + "'";
      HVD_CUDA_RETURN(cudaEventRecord(ready_, CallerStream(e)), what);
      HVD_CUDA_RETURN(cudaStreamWaitEvent(stream_, ready_, 0), what);
    }
    if (reads_input && bytes[i] > 0)
      HVD_CUDA_RETURN(cudaMemcpyAsync(in + in_off[i], e->input, bytes[i], cudaMemcpyDeviceToHost, stream_),
                      "copying tensor '" + e->name + "' to the host");
  }
  HVD_CUDA_RETURN(cudaStreamSynchronize(stream_), "copying device tensors to the host");

  // 2. The host executor runs the response on the staged copies.
  std::vector<TensorEntry> host(n);
  std::vector<TensorEntry*> host_entries(n, nullptr);
  for (int i = 0; i < n; ++i) {
    const TensorEntry* e = entries[i];
    if (e == nullptr) continue;
    host[i] = *e;
    host[i].device = -1;
    host[i].stream = nullptr;
    host[i].output = writes_output ? out + out_off[i] : nullptr;
    host[i].input = reads_input ? in + in_off[i] : host[i].output;
    host[i].work = Work::Make(e->name);
    host_entries[i] = &host[i];
  }
  Response host_response = r;
  host_response.device = -1;
  HVD_RETURN_IF_ERROR(host_.Execute(host_response, host_entries));

  // 3. Host to device.
  return CopyBack(r, entries, host);
}

Status StagingOps::CopyBack(const Response& r, const std::vector<TensorEntry*>& entries,
                            const std::vector<TensorEntry>& host) {
  const bool writes_output =
      r.type == ResponseType::kAllreduce || r.type == ResponseType::kBroadcast;
  const int n = static_cast<int>(r.names.size());
  std::vector<Status> statuses(n);
  for (int i = 0; i < n; ++i) {
    TensorEntry* e = entries[i];
    if (e == nullptr) continue;
    Work& staged = *host[i].work;
    statuses[i] = staged.Wait(std::chrono::milliseconds(0));
    if (!statuses[i].ok()) continue;
    const std::string what = "copying the result of tensor '" + e->name + "' to the device";
    if (writes_output) {
      const int64_t bytes = e->NumElements() * static_cast<int64_t>(DataTypeSize(e->dtype));
      if (bytes > 0)
        HVD_CUDA_RETURN(cudaMemcpyAsync(e->output, static_cast<const uint8_t*>(host[i].output), bytes,
                                        cudaMemcpyHostToDevice, stream_),
                        what);
      continue;
    }
    const ResultBytes& result = staged.result();
    std::shared_ptr<void> device_result;
    HVD_RETURN_IF_ERROR(results_->Allocate(result.size(), stream_, CallerStream(e), &device_result));
    if (!result.empty())
      HVD_CUDA_RETURN(cudaMemcpyAsync(device_result.get(), result.data(), result.size(),
                                      cudaMemcpyHostToDevice, stream_),
                      what);
    auto& d = e->work->device_result();
    d.data = std::move(device_result);
    d.bytes = static_cast<int64_t>(result.size());
    d.device = options_.device;
    e->work->result_shape() = staged.result_shape();
    e->work->received_splits() = staged.received_splits();
  }
  // The staged results (host memory) must outlive the copies.
  HVD_CUDA_RETURN(cudaStreamSynchronize(stream_), "copying results to the device");
  CompletionBatch batch;
  for (int i = 0; i < n; ++i)
    if (entries[i] != nullptr) batch.Complete(entries[i]->work.get(), statuses[i]);
  return Status::OK();
}

}  // namespace cuda
}  // namespace hvd
