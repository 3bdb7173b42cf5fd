// RankOutput: one output stream (stdout or stderr) of one rank, relayed to dprun's own.
//
// It owns the read end of the rank's pipe (non-blocking) from Open() to Close(). Each
// ReadAvailable() reads what the pipe holds, at most kReadsPerRound reads so that one
// chatty rank cannot starve the others, and hands the bytes to a PrefixedLineWriter,
// which writes whole "[2]<stdout>:text" lines to dprun's fd. The stream closes itself
// at end of file or on a read error; Close() ends it early. Closing writes a final
// partial line with a newline added.
//
// A remote rank's stdout starts with the remote script's start marker line,
// "dprun-remote-started <pid>" (remote_spawner.h). With `strip_start_marker`, the first
// line is held until it is complete (or 256 bytes long): if it is the marker, it is
// dropped and its pid kept as remote_pid(); anything else is relayed unchanged.
//
// Not thread-safe: owned by the supervising loop. Movable, not copyable; destroying an
// open stream closes its fd without writing what it holds.
#ifndef HVD_LAUNCHER_RANK_OUTPUT_H_
#define HVD_LAUNCHER_RANK_OUTPUT_H_

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>

#include "launcher/prefixed_line_writer.h"

namespace hvd {
namespace launcher {

// Reads of one pipe per ReadAvailable(), of up to 64 KiB each.
constexpr int kReadsPerRound = 16;

class RankOutput {
 public:
  RankOutput() = default;
  ~RankOutput();
  RankOutput(RankOutput&& other) noexcept;
  RankOutput& operator=(RankOutput&& other) noexcept;
  RankOutput(const RankOutput&) = delete;
  RankOutput& operator=(const RankOutput&) = delete;

  // Starts relaying `fd` (a non-blocking read end, now owned here) to `dest_fd`, each
  // line prefixed with `prefix` (and the local time first, with `stamp`), and the
  // same lines to `copy_fd` when it is a file (owned here from now; --output-filename).
  // Call once.
  void Open(int fd, std::string prefix, int dest_fd, bool strip_start_marker, int copy_fd = -1,
            bool stamp = false);

  // Relays what the pipe holds now; closes the stream at its end.
  void ReadAvailable();

  // Relays `n` bytes as if read from the pipe. Requires Open().
  void Relay(const char* data, size_t n);

  // Writes what is held (a partial line, an unfinished first line) and closes the fd.
  // Does nothing if the stream is not open.
  void Close();

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // The remote script's pid from the start marker; -1 until it has been seen.
  pid_t remote_pid() const { return remote_pid_; }
  // The text of the last line relayed ("" before any).
  const std::string& last_line() const;

 private:
  int fd_ = -1;
  std::unique_ptr<PrefixedLineWriter> writer_;
  bool await_marker_ = false;
  std::string head_;  // The first line, held while await_marker_.
  pid_t remote_pid_ = -1;
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_RANK_OUTPUT_H_
