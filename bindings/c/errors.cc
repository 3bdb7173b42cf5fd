// Errors across the C boundary: a status code from every call, a name for every
// code (hvd_status_string) and the detail of the calling thread's last failure
// (hvd_last_error), which stays valid until the thread's next failing call. The
// codes are hvd::StatusCode's, value for value, and so are hvd_dtype_t's and
// hvd_reduce_op_t's the runtime's enums (the static_asserts below tie them).
#include <string>

#include "bindings/c/c_api_internal.h"

static_assert(HVD_SUCCESS == static_cast<int>(hvd::StatusCode::kOk) &&
                  HVD_INVALID_ARGUMENT == static_cast<int>(hvd::StatusCode::kInvalidArgument) &&
                  HVD_INVALID_USAGE == static_cast<int>(hvd::StatusCode::kInvalidUsage) &&
                  HVD_NOT_INITIALIZED == static_cast<int>(hvd::StatusCode::kNotInitialized) &&
                  HVD_MISMATCH == static_cast<int>(hvd::StatusCode::kMismatch) &&
                  HVD_TIMEOUT == static_cast<int>(hvd::StatusCode::kTimeout) &&
                  HVD_REMOTE_ERROR == static_cast<int>(hvd::StatusCode::kRemoteError) &&
                  HVD_SHUT_DOWN == static_cast<int>(hvd::StatusCode::kShutDown) &&
                  HVD_INTERNAL == static_cast<int>(hvd::StatusCode::kInternal) &&
                  HVD_IN_PROGRESS == static_cast<int>(hvd::StatusCode::kInProgress),
              "hvd_status_t and hvd::StatusCode must agree");
static_assert(HVD_FLOAT32 == static_cast<int>(hvd::DataType::kFloat32) &&
                  HVD_FLOAT64 == static_cast<int>(hvd::DataType::kFloat64) &&
                  HVD_FLOAT16 == static_cast<int>(hvd::DataType::kFloat16) &&
                  HVD_BFLOAT16 == static_cast<int>(hvd::DataType::kBFloat16) &&
                  HVD_INT8 == static_cast<int>(hvd::DataType::kInt8) &&
                  HVD_UINT8 == static_cast<int>(hvd::DataType::kUInt8) &&
                  HVD_INT32 == static_cast<int>(hvd::DataType::kInt32) &&
                  HVD_INT64 == static_cast<int>(hvd::DataType::kInt64) &&
                  HVD_INT16 == static_cast<int>(hvd::DataType::kInt16) &&
                  HVD_INT16 + 1 == hvd::kNumDataTypes,
              "hvd_dtype_t and hvd::DataType must agree");
static_assert(HVD_SUM == static_cast<int>(hvd::ReduceOp::kSum) &&
                  HVD_AVERAGE == static_cast<int>(hvd::ReduceOp::kAverage) &&
                  HVD_MIN == static_cast<int>(hvd::ReduceOp::kMin) &&
                  HVD_MAX == static_cast<int>(hvd::ReduceOp::kMax) &&
                  HVD_PRODUCT == static_cast<int>(hvd::ReduceOp::kProduct) &&
                  HVD_ADASUM == static_cast<int>(hvd::ReduceOp::kAdasum) &&
                  HVD_ADASUM + 1 == hvd::kNumReduceOps,
              "hvd_reduce_op_t and hvd::ReduceOp must agree");

namespace hvd {
namespace capi {
namespace {

thread_local std::string t_last_error;

}  // namespace

hvd_status_t Report(const Status& s) {
  if (!s.ok()) t_last_error = s.message();
  return static_cast<hvd_status_t>(s.code());
}

}  // namespace capi
}  // namespace hvd

extern "C" {

const char* hvd_status_string(hvd_status_t status) {
  return hvd::StatusCodeName(static_cast<hvd::StatusCode>(status));
}

const char* hvd_last_error(void) { return hvd::capi::t_last_error.c_str(); }

}  // extern "C"
