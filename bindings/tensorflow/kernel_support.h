// What dprun's TensorFlow kernels share: TensorFlow's dtypes, shapes and placement
// as the C API takes them (bindings/c/hvd.h; nothing below it), a collective's
// name, hvd statuses as TensorFlow errors, and Completion, which ends an
// AsyncOpKernel once its collectives complete.
//
// Completion and threads. A kernel enqueues its collectives with the C API's async
// forms and hands the handles to Completion::Start, which registers a callback on
// each (hvd_handle_on_done) and returns: no thread blocks per op. When the last
// collective completes, on the runtime's background thread (or at once, if all had
// completed already), Completion runs the kernel's finish function (which sets the
// outputs the runtime produced), releases the handles still held, records the first
// failure in the kernel's context and calls TensorFlow's done. TensorFlow may run
// the ops that were waiting on the result inline in done, on that thread; that is
// allowed: they may enqueue collectives (hvd.h, "What fn may do"), and none of
// dprun's kernels blocks on a collective from an async kernel.
//
// Memory. Inputs are read in place (TensorFlow keeps them alive until done).
// Outputs the caller sizes (allreduce, broadcast) are the forwarded input where
// TensorFlow allows, else a new tensor the runtime writes into. Results the runtime
// sizes (allgather, alltoall, reducescatter) become the output tensor without a
// copy: a TensorBuffer over the handle's result memory (64-byte aligned, hvd.h)
// that owns the handle and releases it with the last tensor using it.
#ifndef HVD_BINDINGS_TENSORFLOW_KERNEL_SUPPORT_H_
#define HVD_BINDINGS_TENSORFLOW_KERNEL_SUPPORT_H_

#include <hvd.h>
#include <tensorflow/core/framework/op_kernel.h>
#include <tensorflow/core/framework/tensor.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace hvd {
namespace tensorflow_ops {

namespace tf = ::tensorflow;

// The hvd dtype of a TensorFlow dtype. `movement`: the op only moves bytes
// (broadcast, allgather, alltoall), so bool travels as uint8 and uint16 as int16
// too. An unsupported
// dtype is InvalidArgument naming the tensor.
tf::Status HvdDtype(tf::DataType dtype, bool movement, const std::string& tensor, hvd_dtype_t* out);

// The collective's name, the same on every rank that runs the same program: the
// node's name (in a graph or tf.function: its scopes and name; eagerly, TensorFlow
// gives every op of one type the same name), without the scopes when
// `ignore_name_scope`.
std::string CollectiveName(const tf::OpKernel& kernel, bool ignore_name_scope);

// A failed collective as a TensorFlow error: "<HVD_STATUS>: <detail>", of the
// class TensorFlow users expect (HVD_MISMATCH, HVD_INVALID_USAGE and
// HVD_NOT_INITIALIZED: FailedPrecondition, as Horovod; HVD_INVALID_ARGUMENT:
// InvalidArgument; HVD_TIMEOUT: DeadlineExceeded; HVD_REMOTE_ERROR: Unavailable;
// HVD_SHUT_DOWN: Aborted; others: Internal).
tf::Status HvdError(hvd_status_t code, const std::string& detail);
// The calling thread's last C API failure (hvd_last_error) as HvdError.
tf::Status LastError(hvd_status_t code);

// Where a kernel's tensors live, as the C API's device and stream: -1 and null on
// the CPU; on a GPU, its device id and TensorFlow's compute stream (a
// cudaStream_t), so the collective starts after the kernels that produced the
// inputs.
struct Placement {
  int32_t device = -1;
  void* stream = nullptr;
};
Placement PlacementOf(tf::OpKernelContext* ctx);

// A tensor's shape as the C API takes it.
std::vector<int64_t> Dims(const tf::TensorShape& shape);

// Copies `bytes` from `src` to `dst`, both on the kernel's device (the CPU, or the
// GPU through TensorFlow's stream, ordered after the inputs' producers).
tf::Status CopyOnDevice(tf::OpKernelContext* ctx, const Placement& place, void* dst,
                        const void* src, int64_t bytes);

// Sets output `index` to the result owned by `*handle` (hvd_handle_result) of
// dtype `dtype`, with the runtime's shape. The output is made over the result's
// memory and takes the handle (*handle becomes null; it is released with the
// tensor); an empty result gets an ordinary empty tensor and leaves the handle.
tf::Status SetResultOutput(tf::OpKernelContext* ctx, int index, tf::DataType dtype,
                           hvd_handle_t** handle);

// The kernel's process_set_id attribute (0 if it fails, with the failure recorded
// in `c`, which fails the kernel's construction).
int32_t ProcessSetAttr(tf::OpKernelConstruction* c);

// The global rank of rank `set_rank` of process set `process_set`.
tf::Status GlobalRank(int32_t process_set, int set_rank, int* global_rank);

// Ends an AsyncOpKernel once every one of its collectives has completed (see the
// file's comment). One per ComputeAsync call; it deletes itself.
class Completion {
 public:
  // Sets the kernel's outputs once every collective succeeded; may null handles it
  // takes (SetResultOutput). Runs on the thread of the last completion.
  using Finish = std::function<tf::Status(std::vector<hvd_handle_t*>& handles)>;

  // Takes the handles (nulls allowed: none to wait for) and calls `done` once
  // they all completed: at once if `handles` is empty or all are done. With a
  // non-OK `failure` (a later tensor of the kernel could not be enqueued), the
  // enqueued ones are still waited for (the runtime may be using their buffers),
  // then the kernel fails with `failure` and `finish` is not run.
  static void Start(tf::OpKernelContext* ctx, tf::AsyncOpKernel::DoneCallback done,
                    std::vector<hvd_handle_t*> handles, Finish finish,
                    tf::Status failure = tf::Status());

 private:
  Completion(tf::OpKernelContext* ctx, tf::AsyncOpKernel::DoneCallback done,
             std::vector<hvd_handle_t*> handles, Finish finish, tf::Status failure);
  static void OnDone(void* arg, hvd_status_t status, const char* detail);
  // Counts one completion (or the registration's own hold); the last one ends it.
  void Arrive();
  void Fail(tf::Status status);
  void End();

  tf::OpKernelContext* const ctx_;
  tf::AsyncOpKernel::DoneCallback done_;
  std::vector<hvd_handle_t*> handles_;
  Finish finish_;
  std::atomic<int> remaining_;
  std::mutex mu_;
  tf::Status failure_;  // the first; guarded by mu_
};

}  // namespace tensorflow_ops
}  // namespace hvd

#endif  // HVD_BINDINGS_TENSORFLOW_KERNEL_SUPPORT_H_
