// The topology at execution time (ops.cc: HvdSize, HvdRank, ...; Horovod's
// size_op, rank_op, ...), and the TensorFlow version this library was built
// against, which the Python package checks before loading it.
#include <tensorflow/core/framework/op_kernel.h>

#include <string>

#include "bindings/tensorflow/kernel_support.h"

namespace hvd {
namespace tensorflow_ops {
namespace {

using tf::OpKernelConstruction;
using tf::OpKernelContext;

// Outputs one int32 scalar from `query(process_set, &value)`.
template <hvd_status_t (*Query)(int32_t, int*)>
class TopologyKernel : public tf::OpKernel {
 public:
  explicit TopologyKernel(OpKernelConstruction* c) : OpKernel(c), process_set_(ProcessSetAttr(c)) {}

  void Compute(OpKernelContext* ctx) override {
    int value = 0;
    const hvd_status_t rc = Query(process_set_, &value);
    OP_REQUIRES_OK(ctx, LastError(rc));
    tf::Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tf::TensorShape({}), &out));
    out->scalar<int32_t>()() = value;
  }

 private:
  const int32_t process_set_;
};

hvd_status_t SetSize(int32_t ps, int* v) { return hvd_process_set_size(ps, v); }
hvd_status_t LocalSize(int32_t, int* v) { return hvd_local_size(v); }
hvd_status_t Rank(int32_t, int* v) { return hvd_rank(v); }
hvd_status_t LocalRank(int32_t, int* v) { return hvd_local_rank(v); }
// 1 if this rank is a member of the set, else 0.
hvd_status_t Included(int32_t ps, int* v) {
  int rank = -1;
  const hvd_status_t rc = hvd_process_set_rank(ps, &rank);
  *v = rank >= 0 ? 1 : 0;
  return rc;
}

}  // namespace

REGISTER_KERNEL_BUILDER(Name("HvdSize").Device(tf::DEVICE_CPU), TopologyKernel<SetSize>);
REGISTER_KERNEL_BUILDER(Name("HvdLocalSize").Device(tf::DEVICE_CPU), TopologyKernel<LocalSize>);
REGISTER_KERNEL_BUILDER(Name("HvdRank").Device(tf::DEVICE_CPU), TopologyKernel<Rank>);
REGISTER_KERNEL_BUILDER(Name("HvdLocalRank").Device(tf::DEVICE_CPU), TopologyKernel<LocalRank>);
REGISTER_KERNEL_BUILDER(Name("HvdProcessSetIncluded").Device(tf::DEVICE_CPU),
                        TopologyKernel<Included>);

}  // namespace tensorflow_ops
}  // namespace hvd

// The TensorFlow release this library was compiled against ("2.21.0", the
// tf.__version__ CMake read: HVD_TF_BUILT_AGAINST); a kernel library runs only in
// that release (TensorFlow's C++ ABI changes between them). The Python package
// reads it from the file, after the marker, before loading the library: loading
// registers the ops, which must happen inside tf.load_op_library.
extern "C" __attribute__((visibility("default"), used)) const char hvd_tensorflow_built_against[] =
    "hvd-tensorflow-built-against:" HVD_TF_BUILT_AGAINST;
