// bench/tf_step.py overhead --async-floor: TensorFlow's own cost of an
// asynchronous op, the floor under any AsyncOpKernel (HvdAllreduce is one): a
// kernel that forwards its input and calls done at once. Built on the fly by
// tf_step.py with tf.sysconfig's flags; not part of dprun.
#include <tensorflow/core/framework/op.h>
#include <tensorflow/core/framework/op_kernel.h>
#include <tensorflow/core/framework/shape_inference.h>

namespace {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelContext;

class AsyncNoop : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    tensorflow::Tensor* out = nullptr;
    OP_REQUIRES_OK_ASYNC(
        ctx, ctx->forward_input_or_allocate_output({0}, 0, ctx->input(0).shape(), &out), done);
    done();
  }
};

}  // namespace

REGISTER_OP("BenchAsyncNoop")
    .Input("x: float")
    .Output("y: float")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });
REGISTER_KERNEL_BUILDER(Name("BenchAsyncNoop").Device(tensorflow::DEVICE_CPU), AsyncNoop);
