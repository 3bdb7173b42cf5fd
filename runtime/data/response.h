// Response: one agreed operation, as the data plane executes it.
//
// The coordinator agrees on responses in the control plane's wire type
// (proto::Response, controller/messages.proto); the runtime turns each into this
// plain struct (runtime/response_conversion.h) before the executor runs it, so the
// data plane, its backends and its devices never see protobuf. The field meanings
// are the wire type's:
//   names        one or more tensors (more than one: fused), in execution order;
//   counts       element count of each tensor (allgather, alltoall: per first-
//                dimension row);
//   rank_dims    allgather: each tensor's first dimension on each rank, tensor-major;
//                reducescatter: each tensor's first dimension;
//   split_matrix alltoall: rows rank s sends to rank d at index s * size + d;
//   joined_ranks ranks that have joined and contribute the op's identity;
//   error_code, error_message   kError: the status every rank completes with.
#ifndef HVD_RUNTIME_DATA_RESPONSE_H_
#define HVD_RUNTIME_DATA_RESPONSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/types.h"

namespace hvd {

// Values equal messages.proto's ResponseType (checked where they are converted).
enum class ResponseType : int {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,
  kError = 100,
};

struct Response {
  ResponseType type = ResponseType::kAllreduce;
  std::vector<std::string> names;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  int root_rank = 0;
  int device = -1;  // -1: host memory; else the CUDA device
  std::vector<int64_t> counts;
  std::vector<int64_t> rank_dims;
  StatusCode error_code = StatusCode::kOk;
  std::string error_message;
  std::vector<int> joined_ranks;
  int64_t group_id = 0;
  std::vector<int64_t> split_matrix;

  int size() const { return static_cast<int>(names.size()); }
};

}  // namespace hvd

#endif  // HVD_RUNTIME_DATA_RESPONSE_H_
