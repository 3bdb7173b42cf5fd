// The asynchronous kernels of the collectives (ops.cc defines them): each reads
// its attributes once, enqueues its collectives through the C API in
// ComputeAsync and hands the handles to Completion (kernel_support.h), which calls
// TensorFlow's done when the runtime completes them. CPU tensors go to the host
// path; GPU tensors to the device forms of the C calls with TensorFlow's stream
// (kernel_support.h, Placement).
#include <tensorflow/core/framework/op_kernel.h>

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
using Done = tf::AsyncOpKernel::DoneCallback;

// Fails the kernel with `status` (if not OK) and returns true.
bool Failed(OpKernelContext* ctx, const Done& done, const tf::Status& status) {
  if (status.ok()) return false;
  ctx->SetStatus(status);
  done();
  return true;
}

// What every collective kernel reads from its attributes.
class CollectiveKernel : public tf::AsyncOpKernel {
 public:
  explicit CollectiveKernel(OpKernelConstruction* c) : AsyncOpKernel(c) {
    bool ignore_name_scope = false;
    OP_REQUIRES_OK(c, c->GetAttr("ignore_name_scope", &ignore_name_scope));
    process_set_ = ProcessSetAttr(c);
    name_ = CollectiveName(*this, ignore_name_scope);
  }

 protected:
  // Tensor i of a grouped kernel.
  std::string MemberName(int i) const { return name_ + "." + std::to_string(i); }

  std::string name_;
  int32_t process_set_ = 0;
};

// The reduce op and scale factors of a reducing kernel.
struct Reduction {
  explicit Reduction(OpKernelConstruction* c) {
    int64_t op_attr = 0;
    OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &op_attr));
    OP_REQUIRES_OK(c, c->GetAttr("prescale_factor", &prescale));
    OP_REQUIRES_OK(c, c->GetAttr("postscale_factor", &postscale));
    op = static_cast<hvd_reduce_op_t>(op_attr);
  }
  hvd_reduce_op_t op = HVD_SUM;
  float prescale = 1;
  float postscale = 1;
};

// ---- allreduce ----------------------------------------------------------------------

// One tensor's allreduce arguments: in place when TensorFlow forwards the input.
struct AllreduceTensor {
  std::vector<int64_t> dims;
  hvd_allreduce_args_t args;
};

tf::Status PrepareAllreduce(OpKernelContext* ctx, int i, const std::string& name,
                            const Reduction& red, int32_t process_set, const Placement& place,
                            AllreduceTensor* t) {
  const Tensor& input = ctx->input(i);
  hvd_dtype_t dtype;
  TF_RETURN_IF_ERROR(HvdDtype(input.dtype(), /*movement=*/false, name, &dtype));
  Tensor* output = nullptr;
  TF_RETURN_IF_ERROR(ctx->forward_input_or_allocate_output({i}, i, input.shape(), &output));
  t->dims = Dims(input.shape());
  hvd_allreduce_args_init(&t->args);
  t->args.name = name.c_str();
  t->args.sendbuf = input.data();
  t->args.recvbuf = output->data();
  t->args.count = input.NumElements();
  t->args.dtype = dtype;
  t->args.op = red.op;
  t->args.prescale_factor = red.prescale;
  t->args.postscale_factor = red.postscale;
  t->args.process_set = process_set;
  t->args.device = place.device;
  t->args.stream = place.stream;
  t->args.shape = t->dims.empty() ? nullptr : t->dims.data();
  t->args.ndim = static_cast<int32_t>(t->dims.size());
  return tf::Status();
}

class AllreduceKernel : public CollectiveKernel {
 public:
  explicit AllreduceKernel(OpKernelConstruction* c) : CollectiveKernel(c), red_(c) {}

  void ComputeAsync(OpKernelContext* ctx, Done done) override {
    AllreduceTensor t;
    if (Failed(ctx, done,
               PrepareAllreduce(ctx, 0, name_, red_, process_set_, PlacementOf(ctx), &t)))
      return;
    hvd_handle_t* h = nullptr;
    const hvd_status_t rc = hvd_allreduce_ex(&t.args, &h);
    if (Failed(ctx, done, LastError(rc))) return;
    Completion::Start(ctx, std::move(done), {h}, nullptr);
  }

 private:
  const Reduction red_;
};

class GroupedAllreduceKernel : public CollectiveKernel {
 public:
  explicit GroupedAllreduceKernel(OpKernelConstruction* c) : CollectiveKernel(c), red_(c) {}

  void ComputeAsync(OpKernelContext* ctx, Done done) override {
    const int n = ctx->num_inputs();
    const Placement place = PlacementOf(ctx);
    std::vector<std::string> names(n);
    std::vector<AllreduceTensor> tensors(n);
    std::vector<const hvd_allreduce_args_t*> args(n);
    for (int i = 0; i < n; ++i) {
      names[i] = MemberName(i);
      if (Failed(ctx, done,
                 PrepareAllreduce(ctx, i, names[i], red_, process_set_, place, &tensors[i])))
        return;
      tensors[i].args.name = names[i].c_str();
      args[i] = &tensors[i].args;
    }
    std::vector<hvd_handle_t*> handles(n, nullptr);
    const hvd_status_t rc = hvd_grouped_allreduce_ex(n, args.data(), handles.data());
    if (Failed(ctx, done, LastError(rc))) return;
    Completion::Start(ctx, std::move(done), std::move(handles), nullptr);
  }

 private:
  const Reduction red_;
};

// ---- collectives whose results the runtime sizes ----------------------------------

// Input i's buffer, dtype and shape as the C API takes them.
struct Shaped {
  const void* data = nullptr;
  hvd_dtype_t dtype = HVD_FLOAT32;
  std::vector<int64_t> dims;
};

tf::Status ReadShaped(OpKernelContext* ctx, int i, const std::string& name, bool movement,
                      Shaped* s) {
  const Tensor& input = ctx->input(i);
  TF_RETURN_IF_ERROR(HvdDtype(input.dtype(), movement, name, &s->dtype));
  s->data = input.data();
  s->dims = Dims(input.shape());
  return tf::Status();
}

// Sets output i to handle i's result for every handle, in order.
Completion::Finish ResultOutputs(OpKernelContext* ctx) {
  return [ctx](std::vector<hvd_handle_t*>& handles) {
    for (size_t i = 0; i < handles.size(); ++i)
      TF_RETURN_IF_ERROR(SetResultOutput(ctx, static_cast<int>(i),
                                         ctx->input_dtype(static_cast<int>(i)), &handles[i]));
    return tf::Status();
  };
}

// Enqueues one call per tensor with `enqueue(i, shaped, handle)` (the device
// forms), stopping at the first refusal; the kernel then fails with it once the
// ones already enqueued have completed.
template <typename Enqueue>
void EnqueueEach(OpKernelContext* ctx, Done done, const std::vector<Shaped>& tensors,
                 Enqueue enqueue, Completion::Finish finish) {
  std::vector<hvd_handle_t*> handles;
  tf::Status failure;
  for (size_t i = 0; i < tensors.size() && failure.ok(); ++i) {
    hvd_handle_t* h = nullptr;
    const hvd_status_t rc = enqueue(static_cast<int>(i), tensors[i], &h);
    if (rc != HVD_SUCCESS) {
      failure = LastError(rc);
    } else {
      handles.push_back(h);
    }
  }
  Completion::Start(ctx, std::move(done), std::move(handles), std::move(finish), failure);
}

// A grouped allgather or reducescatter: one grouped host call, or per tensor on a
// device (the C API's grouped calls take host tensors).
template <typename Grouped, typename Each>
void EnqueueShapedGroup(OpKernelContext* ctx, Done done, bool movement, Grouped grouped, Each each,
                        const std::vector<std::string>& names) {
  const int n = ctx->num_inputs();
  std::vector<Shaped> tensors(n);
  for (int i = 0; i < n; ++i)
    if (Failed(ctx, done, ReadShaped(ctx, i, names[i], movement, &tensors[i]))) return;
  const Placement place = PlacementOf(ctx);
  if (place.device >= 0) {
    EnqueueEach(
        ctx, std::move(done), tensors,
        [&](int i, const Shaped& s, hvd_handle_t** h) {
          return each(names[i].c_str(), s, place, h);
        },
        ResultOutputs(ctx));
    return;
  }
  std::vector<const char*> c_names(n);
  std::vector<const void*> bufs(n);
  std::vector<const int64_t*> shapes(n);
  std::vector<int> ndims(n);
  std::vector<hvd_dtype_t> dtypes(n);
  for (int i = 0; i < n; ++i) {
    c_names[i] = names[i].c_str();
    bufs[i] = tensors[i].data;
    shapes[i] = tensors[i].dims.data();
    ndims[i] = static_cast<int>(tensors[i].dims.size());
    dtypes[i] = tensors[i].dtype;
  }
  std::vector<hvd_handle_t*> handles(n, nullptr);
  const hvd_status_t rc = grouped(n, c_names.data(), bufs.data(), shapes.data(), ndims.data(),
                                  dtypes.data(), handles.data());
  if (Failed(ctx, done, LastError(rc))) return;
  Completion::Start(ctx, std::move(done), std::move(handles), ResultOutputs(ctx));
}

class AllgatherKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

  void ComputeAsync(OpKernelContext* ctx, Done done) override {
    Shaped s;
    if (Failed(ctx, done, ReadShaped(ctx, 0, name_, /*movement=*/true, &s))) return;
    const Placement place = PlacementOf(ctx);
    hvd_handle_t* h = nullptr;
    const hvd_status_t rc =
        hvd_allgather_ex(name_.c_str(), s.data, s.dims.data(), static_cast<int>(s.dims.size()),
                         s.dtype, process_set_, place.device, place.stream, &h);
    if (Failed(ctx, done, LastError(rc))) return;
    Completion::Start(ctx, std::move(done), {h}, ResultOutputs(ctx));
  }
};

class GroupedAllgatherKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

  void ComputeAsync(OpKernelContext* ctx, Done done) override {
    std::vector<std::string> names(ctx->num_inputs());
    for (size_t i = 0; i < names.size(); ++i) names[i] = MemberName(static_cast<int>(i));
    const int32_t ps = process_set_;
    EnqueueShapedGroup(
        ctx, std::move(done), /*movement=*/true,
        [ps](int n, const char* const* nm, const void* const* bufs, const int64_t* const* shapes,
             const int* ndims, const hvd_dtype_t* dtypes, hvd_handle_t** handles) {
          return hvd_grouped_allgather_async(n, nm, bufs, shapes, ndims, dtypes, ps, handles);
        },
        [ps](const char* nm, const Shaped& s, const Placement& place, hvd_handle_t** h) {
          return hvd_allgather_ex(nm, s.data, s.dims.data(), static_cast<int>(s.dims.size()),
                                  s.dtype, ps, place.device, place.stream, h);
        },
        names);
  }
};

class ReducescatterKernel : public CollectiveKernel {
 public:
  explicit ReducescatterKernel(OpKernelConstruction* c) : CollectiveKernel(c), red_(c) {}

  void ComputeAsync(OpKernelContext* ctx, Done done) override {
    Shaped s;
    if (Failed(ctx, done, ReadShaped(ctx, 0, name_, /*movement=*/false, &s))) return;
    const Placement place = PlacementOf(ctx);
    hvd_handle_t* h = nullptr;
    const hvd_status_t rc = hvd_reducescatter_ex(
        name_.c_str(), s.data, s.dims.data(), static_cast<int>(s.dims.size()), s.dtype, red_.op,
        red_.prescale, red_.postscale, process_set_, place.device, place.stream, &h);
    if (Failed(ctx, done, LastError(rc))) return;
    Completion::Start(ctx, std::move(done), {h}, ResultOutputs(ctx));
  }

 private:
  const Reduction red_;
};

class GroupedReducescatterKernel : public CollectiveKernel {
 public:
  explicit GroupedReducescatterKernel(OpKernelConstruction* c) : CollectiveKernel(c), red_(c) {}

  void ComputeAsync(OpKernelContext* ctx, Done done) override {
    std::vector<std::string> names(ctx->num_inputs());
    for (size_t i = 0; i < names.size(); ++i) names[i] = MemberName(static_cast<int>(i));
    const int32_t ps = process_set_;
    const Reduction red = red_;
    EnqueueShapedGroup(
        ctx, std::move(done), /*movement=*/false,
        [ps, red](int n, const char* const* nm, const void* const* bufs,
                  const int64_t* const* shapes, const int* ndims, const hvd_dtype_t* dtypes,
                  hvd_handle_t** handles) {
          return hvd_grouped_reducescatter_async(n, nm, bufs, shapes, ndims, dtypes, red.op,
                                                 red.prescale, red.postscale, ps, handles);
        },
        [ps, red](const char* nm, const Shaped& s, const Placement& place, hvd_handle_t** h) {
          return hvd_reducescatter_ex(nm, s.data, s.dims.data(), static_cast<int>(s.dims.size()),
                                      s.dtype, red.op, red.prescale, red.postscale, ps,
                                      place.device, place.stream, h);
        },
        names);
  }

 private:
  const Reduction red_;
};

// ---- broadcast, alltoall ------------------------------------------------------------

class BroadcastKernel : public CollectiveKernel {
 public:
  explicit BroadcastKernel(OpKernelConstruction* c) : CollectiveKernel(c) {
    int64_t root = 0;
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root));
    root_ = static_cast<int>(root);
  }

  void ComputeAsync(OpKernelContext* ctx, Done done) override {
    const Tensor& input = ctx->input(0);
    hvd_dtype_t dtype;
    if (Failed(ctx, done, HvdDtype(input.dtype(), /*movement=*/true, name_, &dtype))) return;
    Tensor* output = nullptr;
    int forwarded = -1;
    if (Failed(ctx, done,
               ctx->forward_input_or_allocate_output({0}, 0, input.shape(), &output, &forwarded)))
      return;
    const Placement place = PlacementOf(ctx);
    int set_rank = -1;
    if (Failed(ctx, done, LastError(hvd_process_set_rank(process_set_, &set_rank)))) return;
    // The root sends its input: a new output must hold it first. Elsewhere the
    // output only receives.
    if (forwarded < 0 && set_rank == root_ &&
        Failed(ctx, done,
               CopyOnDevice(ctx, place, output->data(), input.data(),
                            static_cast<int64_t>(input.TotalBytes()))))
      return;
    hvd_handle_t* h = nullptr;
    const hvd_status_t rc =
        hvd_broadcast_ex(name_.c_str(), output->data(), output->NumElements(), dtype, root_,
                         process_set_, place.device, place.stream, &h);
    if (Failed(ctx, done, LastError(rc))) return;
    Completion::Start(ctx, std::move(done), {h}, nullptr);
  }

 private:
  int root_ = 0;
};

class AlltoallKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

  void ComputeAsync(OpKernelContext* ctx, Done done) override {
    Shaped s;
    if (Failed(ctx, done, ReadShaped(ctx, 0, name_, /*movement=*/true, &s))) return;
    const Tensor& splits_in = ctx->input(1);
    std::vector<int64_t> splits(splits_in.NumElements());
    for (int64_t i = 0; i < splits_in.NumElements(); ++i)
      splits[i] = splits_in.dtype() == tf::DT_INT32 ? splits_in.flat<int32_t>()(i)
                                                    : splits_in.flat<int64_t>()(i);
    const Placement place = PlacementOf(ctx);
    hvd_handle_t* h = nullptr;
    const hvd_status_t rc = hvd_alltoall_ex(
        name_.c_str(), s.data, s.dims.data(), static_cast<int>(s.dims.size()), s.dtype,
        splits.empty() ? nullptr : splits.data(), static_cast<int>(splits.size()), process_set_,
        place.device, place.stream, &h);
    if (Failed(ctx, done, LastError(rc))) return;
    Completion::Start(ctx, std::move(done), {h}, [ctx](std::vector<hvd_handle_t*>& handles) {
      const int64_t* received = nullptr;
      int n = 0;
      const hvd_status_t code = hvd_handle_received_splits(handles[0], &received, &n);
      if (code != HVD_SUCCESS) return LastError(code);
      Tensor* out = nullptr;
      tf::AllocatorAttributes host;
      host.set_on_host(true);
      TF_RETURN_IF_ERROR(ctx->allocate_output(1, tf::TensorShape({n}), &out, host));
      for (int i = 0; i < n; ++i) out->flat<int32_t>()(i) = static_cast<int32_t>(received[i]);
      return SetResultOutput(ctx, 0, ctx->input_dtype(0), &handles[0]);
    });
  }
};

// ---- join, barrier --------------------------------------------------------------------

class JoinKernel : public tf::AsyncOpKernel {
 public:
  explicit JoinKernel(OpKernelConstruction* c)
      : AsyncOpKernel(c), process_set_(ProcessSetAttr(c)) {}

  void ComputeAsync(OpKernelContext* ctx, Done done) override {
    hvd_handle_t* h = nullptr;
    if (Failed(ctx, done, LastError(hvd_join_async(process_set_, &h)))) return;
    const int32_t ps = process_set_;
    Completion::Start(ctx, std::move(done), {h}, [ctx, ps](std::vector<hvd_handle_t*>& handles) {
      int last = -1;
      const hvd_status_t code = hvd_handle_join_rank(handles[0], &last);
      if (code != HVD_SUCCESS) return LastError(code);
      int global = -1;
      TF_RETURN_IF_ERROR(GlobalRank(ps, last, &global));
      Tensor* out = nullptr;
      TF_RETURN_IF_ERROR(ctx->allocate_output(0, tf::TensorShape({}), &out));
      out->scalar<int32_t>()() = global;
      return tf::Status();
    });
  }

 private:
  const int32_t process_set_;
};

class BarrierKernel : public tf::AsyncOpKernel {
 public:
  explicit BarrierKernel(OpKernelConstruction* c)
      : AsyncOpKernel(c), process_set_(ProcessSetAttr(c)) {}

  void ComputeAsync(OpKernelContext* ctx, Done done) override {
    hvd_handle_t* h = nullptr;
    if (Failed(ctx, done, LastError(hvd_barrier_async(process_set_, &h)))) return;
    Completion::Start(ctx, std::move(done), {h}, nullptr);
  }

 private:
  const int32_t process_set_;
};

}  // namespace

// CPU kernels, and GPU ones (the device path of the C API: verified only where a
// GPU and a CUDA libhvd are present; tensorflow-cpu never places them).
#define HVD_REGISTER_BOTH(NAME, KERNEL)                               \
  REGISTER_KERNEL_BUILDER(Name(NAME).Device(tf::DEVICE_CPU), KERNEL); \
  REGISTER_KERNEL_BUILDER(Name(NAME).Device(tf::DEVICE_GPU), KERNEL)

HVD_REGISTER_BOTH("HvdAllreduce", AllreduceKernel);
HVD_REGISTER_BOTH("HvdGroupedAllreduce", GroupedAllreduceKernel);
HVD_REGISTER_BOTH("HvdAllgather", AllgatherKernel);
HVD_REGISTER_BOTH("HvdGroupedAllgather", GroupedAllgatherKernel);
HVD_REGISTER_BOTH("HvdBroadcast", BroadcastKernel);
HVD_REGISTER_BOTH("HvdReducescatter", ReducescatterKernel);
HVD_REGISTER_BOTH("HvdGroupedReducescatter", GroupedReducescatterKernel);
REGISTER_KERNEL_BUILDER(Name("HvdAlltoall").Device(tf::DEVICE_CPU), AlltoallKernel);
REGISTER_KERNEL_BUILDER(
    Name("HvdAlltoall").Device(tf::DEVICE_GPU).HostMemory("splits").HostMemory("received_splits"),
    AlltoallKernel);
REGISTER_KERNEL_BUILDER(Name("HvdJoin").Device(tf::DEVICE_CPU), JoinKernel);
REGISTER_KERNEL_BUILDER(Name("HvdBarrier").Device(tf::DEVICE_CPU), BarrierKernel);

}  // namespace tensorflow_ops
}  // namespace hvd
