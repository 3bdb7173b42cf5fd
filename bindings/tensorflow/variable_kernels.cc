// In-place broadcast of variables (Horovod's broadcast_): the root rank's values
// are written into each variable's own buffer on every rank, with no output tensor.
//
// The kernels are synchronous, as Horovod's: they hold every variable's lock
// (taken in address order, as TensorFlow's training ops do, so two such kernels
// cannot deadlock) from before the broadcasts are enqueued until they complete,
// and a lock must be released by the thread that took it. They always count as
// expensive, so TensorFlow never runs them inline on the thread that completed a
// collective before them (the runtime's, which they would then wait for). A variable whose buffer
// is shared with a tensor read from it earlier (or one in copy-on-read mode) first
// gets a buffer of its own (copy on write), so that tensor keeps its value.
// Collective names: the kernel's name, "_", the variable's position, "_", and its
// name with every character TensorFlow would not allow in a node name replaced by
// "_" (Keras 3 variables' names repeat: "kernel" in every Dense layer).
#include <tensorflow/core/framework/op_kernel.h>
#include <tensorflow/core/framework/resource_mgr.h>
#include <tensorflow/core/framework/resource_var.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings/tensorflow/kernel_support.h"

namespace hvd {
namespace tensorflow_ops {
namespace {

using tf::OpKernelConstruction;
using tf::OpKernelContext;
using tf::Tensor;

std::string Normalized(const std::string& name) {
  std::string out = name;
  for (char& ch : out)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')))
      ch = '_';
  return out;
}

// Broadcasts each of `tensors` in place (their buffers), waiting for all.
class InplaceBroadcast : public tf::OpKernel {
 public:
  explicit InplaceBroadcast(OpKernelConstruction* c) : OpKernel(c) {
    int64_t root = 0;
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root));
    OP_REQUIRES_OK(c, c->GetAttr("variable_names", &variable_names_));
    OP_REQUIRES(c, static_cast<int>(variable_names_.size()) == c->num_inputs(),
                absl::InvalidArgumentError("variable_names must name each variable"));
    root_ = static_cast<int>(root);
    process_set_ = ProcessSetAttr(c);
  }

  bool IsExpensive() override { return true; }

 protected:
  tf::Status BroadcastAll(OpKernelContext* ctx, const std::vector<Tensor*>& tensors,
                          const std::vector<std::string>& var_names) {
    const Placement place = PlacementOf(ctx);
    std::vector<std::string> names(tensors.size());
    std::vector<hvd_handle_t*> handles;
    tf::Status failure;
    for (size_t i = 0; i < tensors.size() && failure.ok(); ++i) {
      hvd_dtype_t dtype;
      names[i] = name() + "_" + std::to_string(i) + "_" + Normalized(var_names[i]);
      failure = HvdDtype(tensors[i]->dtype(), /*movement=*/true, names[i], &dtype);
      if (!failure.ok()) break;
      hvd_handle_t* h = nullptr;
      const hvd_status_t rc =
          hvd_broadcast_ex(names[i].c_str(), tensors[i]->data(), tensors[i]->NumElements(), dtype,
                           root_, process_set_, place.device, place.stream, &h);
      if (rc != HVD_SUCCESS) {
        failure = LastError(rc);
      } else {
        handles.push_back(h);
      }
    }
    // Every enqueued one is waited for, even after a refusal: the runtime writes
    // into the variables' buffers until it completes.
    for (hvd_handle_t* h : handles) {
      const hvd_status_t rc = hvd_wait(h, -1);
      if (rc != HVD_SUCCESS && failure.ok()) failure = LastError(rc);
      hvd_handle_release(h);
    }
    return failure;
  }

  // A buffer of its own for `*t` (copy on write), holding its current value.
  tf::Status Unshare(OpKernelContext* ctx, Tensor* t) {
    Tensor copy;
    tf::AllocatorAttributes attr;
    TF_RETURN_IF_ERROR(ctx->allocate_temp(t->dtype(), t->shape(), &copy, attr));
    TF_RETURN_IF_ERROR(CopyOnDevice(ctx, PlacementOf(ctx), copy.data(), t->data(),
                                    static_cast<int64_t>(t->TotalBytes())));
    *t = copy;
    return tf::Status();
  }

  std::vector<std::string> variable_names_;
  int root_ = 0;
  int32_t process_set_ = 0;
};

// TF1 reference variables (RefVariable), all of dtype T.
class InplaceBroadcastRefKernel : public InplaceBroadcast {
 public:
  using InplaceBroadcast::InplaceBroadcast;

  void Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs();
    std::vector<tf::mutex*> mutexes;
    for (int i = 0; i < n; ++i) mutexes.push_back(ctx->input_ref_mutex(i));
    std::sort(mutexes.begin(), mutexes.end());
    mutexes.erase(std::unique(mutexes.begin(), mutexes.end()), mutexes.end());
    std::vector<std::unique_ptr<tf::mutex_lock>> locks;
    for (tf::mutex* mu : mutexes) locks.push_back(std::make_unique<tf::mutex_lock>(*mu));
    std::vector<Tensor> refs(n);
    std::vector<Tensor*> tensors(n);
    for (int i = 0; i < n; ++i) {
      refs[i] = ctx->mutable_input(i, /*lock_held=*/true);
      tensors[i] = &refs[i];
    }
    OP_REQUIRES_OK(ctx, BroadcastAll(ctx, tensors, variable_names_));
    for (int i = 0; i < n; ++i) ctx->forward_ref_input_to_ref_output(i, i);
  }
};

// Resource variables (tf.Variable in TensorFlow 2).
class InplaceBroadcastResourceKernel : public InplaceBroadcast {
 public:
  using InplaceBroadcast::InplaceBroadcast;

  void Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs();
    std::vector<tf::core::RefCountPtr<tf::Var>> vars(n);
    std::vector<std::string> var_names = variable_names_;
    for (int i = 0; i < n; ++i) {
      const tf::ResourceHandle& handle = tf::HandleFromInput(ctx, i);
      OP_REQUIRES_OK(ctx, tf::LookupResource(ctx, handle, &vars[i]));
      // The Python name is not passed through automatically; the handle's name
      // (often "_AnonymousVar<n>") is the fallback.
      if (var_names[i].empty()) var_names[i] = handle.name();
    }
    std::vector<tf::mutex*> mutexes;
    for (auto& v : vars) mutexes.push_back(v->mu());
    std::sort(mutexes.begin(), mutexes.end());
    mutexes.erase(std::unique(mutexes.begin(), mutexes.end()), mutexes.end());
    std::vector<std::unique_ptr<tf::mutex_lock>> locks;
    for (tf::mutex* mu : mutexes) locks.push_back(std::make_unique<tf::mutex_lock>(*mu));
    std::vector<Tensor*> tensors(n);
    for (int i = 0; i < n; ++i) {
      tf::Var* var = vars[i].get();
      OP_REQUIRES(ctx, var->is_initialized,
                  absl::FailedPreconditionError("variable '" + var_names[i] +
                                                "' is not initialized: nothing to broadcast"));
      if (var->copy_on_read_mode.load() || !var->tensor()->RefCountIsOne())
        OP_REQUIRES_OK(ctx, Unshare(ctx, var->tensor()));
      tensors[i] = var->tensor();
    }
    OP_REQUIRES_OK(ctx, BroadcastAll(ctx, tensors, var_names));
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("HvdBroadcastInplace").Device(tf::DEVICE_CPU),
                        InplaceBroadcastRefKernel);
REGISTER_KERNEL_BUILDER(Name("HvdBroadcastInplace").Device(tf::DEVICE_GPU),
                        InplaceBroadcastRefKernel);
REGISTER_KERNEL_BUILDER(Name("HvdBroadcastInplaceResource").Device(tf::DEVICE_CPU),
                        InplaceBroadcastResourceKernel);
REGISTER_KERNEL_BUILDER(Name("HvdBroadcastInplaceResource").Device(tf::DEVICE_GPU),
                        InplaceBroadcastResourceKernel);

}  // namespace tensorflow_ops
}  // namespace hvd
