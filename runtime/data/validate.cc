#include "runtime/data/validate.h"

#include <cmath>
#include <string>

#include "runtime/data/device_ops.h"
#include "runtime/kernels/adasum.h"

namespace hvd {

Status ValidateEntry(const TensorEntry& e) {
  if (e.name.empty()) return Status::InvalidArgument("tensor name must not be empty");
  if (e.name.size() > kMaxTensorNameLength)
    return Status::InvalidArgument("tensor name of " + std::to_string(e.name.size()) +
                                   " bytes is longer than the limit of " +
                                   std::to_string(kMaxTensorNameLength));
  // The message names the tensor; built only on failure (an enqueue per tensor
  // must not pay for a string).
  auto bad = [&e](const std::string& what) {
    return Status::InvalidArgument("tensor '" + e.name + "': " + what);
  };
  if (!IsValidDataType(static_cast<int>(e.dtype)))
    return bad("unknown dtype " + std::to_string(static_cast<int>(e.dtype)));
  if (!IsValidReduceOp(static_cast<int>(e.reduce_op)))
    return bad("unknown reduce op " + std::to_string(static_cast<int>(e.reduce_op)));
  for (int64_t d : e.shape)
    if (d < 0) return bad("negative dimension " + std::to_string(d));
  // Elements and bytes must fit int64 (with room for a whole job's worth of ranks).
  int64_t elements = 1;
  for (int64_t d : e.shape)
    if (__builtin_mul_overflow(elements, d, &elements) || elements > (int64_t{1} << 48))
      return bad("shape has more than 2^48 elements");
  int64_t split_sum = 0;
  for (int64_t v : e.splits)
    if (v > 0 && __builtin_add_overflow(split_sum, v, &split_sum))
      return bad("split sizes add up past int64");
  // Barriers and joins move no data (a barrier's shape may carry a rank list).
  const bool has_data =
      e.type != OpType::kBarrier && e.type != OpType::kJoin && e.NumElements() > 0;
  if (has_data && e.input == nullptr) return bad("input buffer is null");
  const bool needs_output = e.type == OpType::kAllreduce || e.type == OpType::kBroadcast;
  if (has_data && needs_output && e.output == nullptr) return bad("output buffer is null");
  if (!std::isfinite(e.prescale_factor) || !std::isfinite(e.postscale_factor))
    return bad("scale factors must be finite");
  if ((e.type == OpType::kAllgather || e.type == OpType::kAlltoall ||
       e.type == OpType::kReducescatter) && e.shape.empty())
    return bad(std::string(OpTypeName(e.type)) + " needs at least one dimension");
  if (e.type == OpType::kReducescatter && e.reduce_op != ReduceOp::kSum &&
      e.reduce_op != ReduceOp::kAverage)
    return bad("reducescatter supports only sum and average");
  for (int64_t v : e.splits)
    if (v < 0) return bad("negative split size " + std::to_string(v));
  if (e.type == OpType::kAllreduce && e.reduce_op == ReduceOp::kAdasum) {
    if (!AdasumSupports(e.dtype))
      return bad(std::string("Adasum takes float16, bfloat16, float32 or float64, not ") +
                 DataTypeName(e.dtype));
    if (e.device >= 0)
      return bad("Adasum takes host tensors only, and this one is on cuda:" +
                 std::to_string(e.device) + "; copy it to host memory first");
  }
  if (e.device < -1)
    return bad("device " + std::to_string(e.device) + " is neither -1 (host) nor a CUDA device id");
  if (e.device >= 0 && e.type != OpType::kBarrier && e.type != OpType::kJoin)
    HVD_RETURN_IF_ERROR(CheckDeviceTensor(e));
  return Status::OK();
}

Status SetCountShape(int64_t count, const int64_t* dims, int ndim, TensorEntry* e) {
  if (count < 0)
    return Status::InvalidArgument("tensor '" + e->name + "': negative count " +
                                   std::to_string(count));
  if (ndim == 0) {
    e->shape = {count};
    return Status::OK();
  }
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i)
    if (dims[i] < 0 || __builtin_mul_overflow(n, dims[i], &n)) n = -1;
  if (n != count) {
    std::string text;
    for (int i = 0; i < ndim; ++i) text += (i == 0 ? "" : ", ") + std::to_string(dims[i]);
    return Status::InvalidArgument("tensor '" + e->name + "': shape [" + text +
                                   "] does not hold count " + std::to_string(count) +
                                   " elements");
  }
  e->shape.assign(dims, dims + ndim);
  return Status::OK();
}

}  // namespace hvd
