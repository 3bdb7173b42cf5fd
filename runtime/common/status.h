// Status: the result of every operation that can fail in an expected way.
//
// A Status is a code plus a human-readable message. The codes mirror the C API's
// hvd_status_t one to one, so bindings/c converts without a table. Messages name
// what failed: the tensor, the ranks and the values that differed.
//
// Broken invariants are not Statuses: they use HVD_CHECK, which aborts with file:line.
#ifndef HVD_RUNTIME_COMMON_STATUS_H_
#define HVD_RUNTIME_COMMON_STATUS_H_

#include <string>
#include <utility>

namespace hvd {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kInvalidUsage = 2,
  kNotInitialized = 3,
  kMismatch = 4,
  kTimeout = 5,
  kRemoteError = 6,
  kShutDown = 7,
  kInternal = 8,
  kInProgress = 9,
};

// The stable name of a code, e.g. "HVD_MISMATCH".
const char* StatusCodeName(StatusCode code);

// The text of an errno value ("Connection refused"); thread-safe, unlike strerror.
std::string ErrnoText(int err);

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status InvalidUsage(std::string m) { return {StatusCode::kInvalidUsage, std::move(m)}; }
  static Status NotInitialized(std::string m) { return {StatusCode::kNotInitialized, std::move(m)}; }
  static Status Mismatch(std::string m) { return {StatusCode::kMismatch, std::move(m)}; }
  static Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
  static Status RemoteError(std::string m) { return {StatusCode::kRemoteError, std::move(m)}; }
  static Status ShutDown(std::string m) { return {StatusCode::kShutDown, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status InProgress(std::string m) { return {StatusCode::kInProgress, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "HVD_MISMATCH: tensor 'w' ..." or "OK".
  std::string ToString() const;

  // The same code with `context` put in front of the message.
  Status Prepend(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Aborts the process with file:line and the condition. For broken invariants only.
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              const std::string& detail);

}  // namespace hvd

#define HVD_CHECK(cond)                                       \
  do {                                                        \
    if (!(cond)) ::hvd::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define HVD_CHECK_MSG(cond, detail)                                    \
  do {                                                                 \
    if (!(cond)) ::hvd::CheckFailed(__FILE__, __LINE__, #cond, (detail)); \
  } while (0)

// Returns from the calling function if `expr` is not OK.
#define HVD_RETURN_IF_ERROR(expr)           \
  do {                                      \
    ::hvd::Status _hvd_status = (expr);     \
    if (!_hvd_status.ok()) return _hvd_status; \
  } while (0)

#endif  // HVD_RUNTIME_COMMON_STATUS_H_
