#include "runtime/common/status.h"

#include <cstdio>
#include <cstdlib>
#include <system_error>

namespace hvd {

std::string ErrnoText(int err) { return std::system_category().message(err); }

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "HVD_SUCCESS";
    case StatusCode::kInvalidArgument: return "HVD_INVALID_ARGUMENT";
    case StatusCode::kInvalidUsage: return "HVD_INVALID_USAGE";
    case StatusCode::kNotInitialized: return "HVD_NOT_INITIALIZED";
    case StatusCode::kMismatch: return "HVD_MISMATCH";
    case StatusCode::kTimeout: return "HVD_TIMEOUT";
    case StatusCode::kRemoteError: return "HVD_REMOTE_ERROR";
    case StatusCode::kShutDown: return "HVD_SHUT_DOWN";
    case StatusCode::kInternal: return "HVD_INTERNAL";
    case StatusCode::kInProgress: return "HVD_IN_PROGRESS";
  }
  return "HVD_UNKNOWN_STATUS";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status Status::Prepend(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

void CheckFailed(const char* file, int line, const char* condition, const std::string& detail) {
  std::fprintf(stderr, "dprun: internal check failed at %s:%d: %s %s\n", file, line, condition,
               detail.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace hvd
