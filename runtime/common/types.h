// Element types, reduction operators and collective kinds shared by every layer.
//
// The numeric values equal the C API's hvd_dtype_t and hvd_reduce_op_t and the
// protobuf enums in controller/messages.proto, so conversions are casts.
#ifndef HVD_RUNTIME_COMMON_TYPES_H_
#define HVD_RUNTIME_COMMON_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace hvd {

enum class DataType : int {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,
  kBFloat16 = 3,
  kInt8 = 4,
  kUInt8 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kInt16 = 8,
};
constexpr int kNumDataTypes = 9;

enum class ReduceOp : int {
  kSum = 0,
  kAverage = 1,
  kMin = 2,
  kMax = 3,
  kProduct = 4,
  // Horovod's adaptive summation (runtime/kernels/adasum.h): float dtypes on host memory only.
  kAdasum = 5,
};
constexpr int kNumReduceOps = 6;

// The collective a request asks for. Values equal messages.proto's RequestType.
enum class OpType : int {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,
};

bool IsValidDataType(int value);
bool IsValidReduceOp(int value);

// Bytes per element; 0 for an invalid type.
size_t DataTypeSize(DataType dtype);
// "float32", "bfloat16", ...
const char* DataTypeName(DataType dtype);
// "sum", "average", ...
const char* ReduceOpName(ReduceOp op);
// "allreduce", "allgather", ...
const char* OpTypeName(OpType op);

// The longest tensor name the runtime accepts, in bytes (excluding the NUL).
constexpr size_t kMaxTensorNameLength = 1024;

}  // namespace hvd

#endif  // HVD_RUNTIME_COMMON_TYPES_H_
