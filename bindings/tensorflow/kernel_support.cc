#include "bindings/tensorflow/kernel_support.h"

#include <absl/status/status.h>
#include <tensorflow/core/framework/allocation_description.pb.h>
#include <tensorflow/core/framework/device_base.h>
#include <xla/stream_executor/device_address.h>
#include <xla/stream_executor/stream.h>

#include <cstring>
#include <utility>

namespace hvd {
namespace tensorflow_ops {

tf::Status HvdDtype(tf::DataType dtype, bool movement, const std::string& tensor,
                    hvd_dtype_t* out) {
  switch (dtype) {
    case tf::DT_FLOAT:
      *out = HVD_FLOAT32;
      return tf::Status();
    case tf::DT_DOUBLE:
      *out = HVD_FLOAT64;
      return tf::Status();
    case tf::DT_HALF:
      *out = HVD_FLOAT16;
      return tf::Status();
    case tf::DT_BFLOAT16:
      *out = HVD_BFLOAT16;
      return tf::Status();
    case tf::DT_INT8:
      *out = HVD_INT8;
      return tf::Status();
    case tf::DT_UINT8:
      *out = HVD_UINT8;
      return tf::Status();
    case tf::DT_INT16:
      *out = HVD_INT16;
      return tf::Status();
    case tf::DT_INT32:
      *out = HVD_INT32;
      return tf::Status();
    case tf::DT_INT64:
      *out = HVD_INT64;
      return tf::Status();
    case tf::DT_BOOL:
      if (movement) {
        *out = HVD_UINT8;
        return tf::Status();
      }
      break;
    case tf::DT_UINT16:
      if (movement) {
        *out = HVD_INT16;
        return tf::Status();
      }
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      "HVD_INVALID_ARGUMENT: tensor '" + tensor + "' has dtype " + tf::DataTypeString(dtype) +
      ", which dprun cannot " + (movement ? "send" : "reduce") +
      " (float16, bfloat16, float32, float64, int8, uint8, int16, int32, int64" +
      (movement ? ", uint16, bool)" : ")"));
}

std::string CollectiveName(const tf::OpKernel& kernel, bool ignore_name_scope) {
  std::string name = kernel.name();
  if (ignore_name_scope) {
    const size_t slash = name.find_last_of('/');
    if (slash != std::string::npos) name = name.substr(slash + 1);
  }
  return name;
}

tf::Status HvdError(hvd_status_t code, const std::string& detail) {
  const std::string message = std::string(hvd_status_string(code)) + ": " + detail;
  switch (code) {
    case HVD_SUCCESS:
      return tf::Status();
    case HVD_INVALID_ARGUMENT:
      return absl::InvalidArgumentError(message);
    case HVD_INVALID_USAGE:
    case HVD_NOT_INITIALIZED:
    case HVD_MISMATCH:
      return absl::FailedPreconditionError(message);
    case HVD_TIMEOUT:
      return absl::DeadlineExceededError(message);
    case HVD_REMOTE_ERROR:
      return absl::UnavailableError(message);
    case HVD_SHUT_DOWN:
      return absl::AbortedError(message);
    default:
      return absl::InternalError(message);
  }
}

tf::Status LastError(hvd_status_t code) { return HvdError(code, hvd_last_error()); }

Placement PlacementOf(tf::OpKernelContext* ctx) {
  Placement place;
  const tf::DeviceBase* device = ctx->device();
  const auto* info = device ? device->tensorflow_accelerator_device_info() : nullptr;
  if (info == nullptr || info->gpu_id < 0) return place;  // the CPU
  place.device = info->gpu_id;
  tf::DeviceContext* dc = ctx->op_device_context();
  if (dc != nullptr && dc->stream() != nullptr)
    place.stream = dc->stream()->platform_specific_handle().stream;
  return place;
}

std::vector<int64_t> Dims(const tf::TensorShape& shape) {
  std::vector<int64_t> dims(shape.dims());
  for (int i = 0; i < shape.dims(); ++i) dims[i] = shape.dim_size(i);
  return dims;
}

tf::Status CopyOnDevice(tf::OpKernelContext* ctx, const Placement& place, void* dst,
                        const void* src, int64_t bytes) {
  if (bytes == 0 || dst == src) return tf::Status();
  if (place.device < 0) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return tf::Status();
  }
  stream_executor::DeviceAddressBase to(dst, static_cast<uint64_t>(bytes));
  stream_executor::DeviceAddressBase from(const_cast<void*>(src), static_cast<uint64_t>(bytes));
  return ctx->op_device_context()->stream()->Memcpy(&to, from, static_cast<uint64_t>(bytes));
}

namespace {

// A tensor's memory that is a handle's result (see the header's comment).
class HandleResultBuffer : public tf::TensorBuffer {
 public:
  HandleResultBuffer(hvd_handle_t* handle, void* data, size_t bytes)
      : tf::TensorBuffer(data), handle_(handle), bytes_(bytes) {}
  ~HandleResultBuffer() override { hvd_handle_release(handle_); }
  size_t size() const override { return bytes_; }
  tf::TensorBuffer* root_buffer() override { return this; }
  void FillAllocationDescription(tf::AllocationDescription* proto) const override {
    proto->set_requested_bytes(static_cast<int64_t>(bytes_));
    proto->set_allocator_name("dprun");
  }

 private:
  hvd_handle_t* const handle_;
  const size_t bytes_;
};

}  // namespace

tf::Status SetResultOutput(tf::OpKernelContext* ctx, int index, tf::DataType dtype,
                           hvd_handle_t** handle) {
  const void* data = nullptr;
  int64_t nbytes = 0;
  int ndim = 0;
  const int64_t* dims = nullptr;
  const hvd_status_t rc = hvd_handle_result(*handle, &data, &nbytes, &ndim, &dims);
  if (rc != HVD_SUCCESS) return LastError(rc);
  tf::TensorShape shape;
  for (int i = 0; i < ndim; ++i) TF_RETURN_IF_ERROR(shape.AddDimWithStatus(dims[i]));
  if (shape.num_elements() * static_cast<int64_t>(tf::DataTypeSize(dtype)) != nbytes)
    return absl::InternalError("HVD_INTERNAL: result of " + std::to_string(nbytes) +
                               " bytes does not fill shape " + shape.DebugString());
  if (nbytes == 0 || data == nullptr) {
    tf::Tensor* out = nullptr;
    return ctx->allocate_output(index, shape, &out);
  }
  tf::core::RefCountPtr<tf::TensorBuffer> buffer(
      new HandleResultBuffer(*handle, const_cast<void*>(data), static_cast<size_t>(nbytes)));
  *handle = nullptr;  // the buffer owns it now
  ctx->set_output(index, tf::Tensor(dtype, shape, std::move(buffer)));
  return tf::Status();
}

int32_t ProcessSetAttr(tf::OpKernelConstruction* c) {
  int64_t ps = 0;
  const tf::Status s = c->GetAttr("process_set_id", &ps);
  if (!s.ok()) {
    c->CtxFailure(__FILE__, __LINE__, s);
    return 0;
  }
  return static_cast<int32_t>(ps);
}

tf::Status GlobalRank(int32_t process_set, int set_rank, int* global_rank) {
  if (process_set == HVD_GLOBAL_PROCESS_SET || set_rank < 0) {
    *global_rank = set_rank;
    return tf::Status();
  }
  int n = 0;
  hvd_status_t rc = hvd_process_set_ranks(process_set, nullptr, 0, &n);
  if (rc != HVD_SUCCESS) return LastError(rc);
  std::vector<int> ranks(n);
  rc = hvd_process_set_ranks(process_set, ranks.data(), n, &n);
  if (rc != HVD_SUCCESS) return LastError(rc);
  if (set_rank >= n) return absl::InternalError("HVD_INTERNAL: set rank out of range");
  *global_rank = ranks[set_rank];
  return tf::Status();
}

// ---- Completion ------------------------------------------------------------------

void Completion::Start(tf::OpKernelContext* ctx, tf::AsyncOpKernel::DoneCallback done,
                       std::vector<hvd_handle_t*> handles, Finish finish, tf::Status failure) {
  auto* c = new Completion(ctx, std::move(done), std::move(handles), std::move(finish),
                           std::move(failure));
  // remaining_ counts each handle plus this registration's own hold, released last,
  // so a callback that runs at once (its collective done already) cannot end the
  // Completion while the loop still reads it.
  for (hvd_handle_t* h : c->handles_) {
    if (h == nullptr) {
      c->Arrive();
      continue;
    }
    const hvd_status_t rc = hvd_handle_on_done(h, &Completion::OnDone, c);
    if (rc != HVD_SUCCESS) {  // not registered: it will not call back
      c->Fail(LastError(rc));
      hvd_wait(h, -1);  // its buffers may be in use until it completes
      c->Arrive();
    }
  }
  c->Arrive();
}

Completion::Completion(tf::OpKernelContext* ctx, tf::AsyncOpKernel::DoneCallback done,
                       std::vector<hvd_handle_t*> handles, Finish finish, tf::Status failure)
    : ctx_(ctx),
      done_(std::move(done)),
      handles_(std::move(handles)),
      finish_(std::move(finish)),
      remaining_(static_cast<int>(handles_.size()) + 1),
      failure_(std::move(failure)) {}

void Completion::OnDone(void* arg, hvd_status_t status, const char* detail) {
  auto* c = static_cast<Completion*>(arg);
  if (status != HVD_SUCCESS) c->Fail(HvdError(status, detail));
  c->Arrive();
}

void Completion::Fail(tf::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.ok()) failure_ = std::move(status);
}

void Completion::Arrive() {
  if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) End();
}

void Completion::End() {
  tf::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = failure_;
  }
  if (status.ok() && finish_) status = finish_(handles_);
  for (hvd_handle_t* h : handles_)
    if (h != nullptr) hvd_handle_release(h);
  if (!status.ok()) ctx_->SetStatus(status);
  tf::AsyncOpKernel::DoneCallback done = std::move(done_);
  delete this;
  done();
}

}  // namespace tensorflow_ops
}  // namespace hvd
