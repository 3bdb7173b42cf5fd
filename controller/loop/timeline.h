// Timeline: a Chrome/Perfetto trace (JSON) of every tensor's life on this rank.
//
// Each tensor gets its own row (a "thread" named after it) with:
//   NEGOTIATE_<OP>  (NEGOTIATE_ALLREDUCE, ..., as Horovod names it) first submission
//              anywhere -> ready on every rank (coordinator only), with an instant
//              mark per rank when that rank submitted it;
//   WAIT       ready -> this rank starts executing it;
//   COPY_IN, <COLLECTIVE>, COPY_OUT   the executor's phases (fused tensors share them).
// Events are appended to an in-memory buffer (one short lock per event; nothing
// when the timeline is off: the runtime does not create one) and a writer thread
// writes and flushes it every 100 ms, so a killed job leaves every event up to
// the last flush. The file is a JSON array; a clean Close() terminates it with
// "]". A file cut short lacks the "]": Chrome's and Perfetto's loaders accept that
// (the trace-event format allows it); to parse it strictly, append "{}]" after a
// trailing comma. Thread-safe.
#ifndef HVD_CONTROLLER_LOOP_TIMELINE_H_
#define HVD_CONTROLLER_LOOP_TIMELINE_H_

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "controller/straggler.h"
#include "runtime/common/status.h"
#include "runtime/common/types.h"

namespace hvd {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  // Creates (truncates) `path`. `rank` labels the trace. kInvalidArgument naming
  // the path if it cannot be opened.
  static Status Open(const std::string& path, int rank, std::unique_ptr<Timeline>* out);
  ~Timeline();

  // NEGOTIATE_<OP> (Horovod's name, e.g. NEGOTIATE_ALLREDUCE) from the first
  // arrival to `ready`, and a "rank <r> ready" mark per arrival (with only the
  // summary of the arrivals, the last rank's mark).
  void Negotiated(const std::string& name, OpType op, const Arrivals& arrivals,
                  Clock::time_point ready, bool cached);
  // A span [begin, end) named `phase` on `name`'s row.
  void Span(const std::string& name, const char* phase, Clock::time_point begin,
            Clock::time_point end);
  // An instant event `what` (e.g. "CYCLE_START") on the process's row 0.
  void Instant(const char* what, Clock::time_point t);

  const std::string& path() const { return path_; }

  // Writes what is buffered, terminates the array and closes the file. Idempotent.
  void Close();

 private:
  Timeline(std::FILE* file, const std::string& path, int rank);
  void WriterLoop();
  // The row of `name`, announcing it with a metadata event the first time.
  int Row(const std::string& name);
  int64_t Micros(Clock::time_point t) const;
  static std::string Escape(const std::string& s);

  std::FILE* file_;
  const std::string path_;
  const int rank_;
  const Clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string buffer_;
  std::unordered_map<std::string, int> rows_;
  bool closing_ = false;
  bool closed_ = false;
  std::thread writer_;
};

}  // namespace hvd

#endif  // HVD_CONTROLLER_LOOP_TIMELINE_H_
