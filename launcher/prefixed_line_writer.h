// PrefixedLineWriter: turns one child output stream into whole, prefixed lines.
//
// dprun reads each rank's stdout and stderr through pipes and feeds the bytes here;
// every complete line is written to the destination fd as "<prefix>text\n" (for
// example "[1]<stderr>:text"). A line is written only once it is complete, and all
// writers run on dprun's one supervising thread, so lines from different ranks never
// interleave mid-line. A line longer than max_line is cut into max_line pieces so one
// rank cannot make dprun buffer without bound.
//
// Not thread-safe; owned by the supervising loop.
#ifndef HVD_LAUNCHER_PREFIXED_LINE_WRITER_H_
#define HVD_LAUNCHER_PREFIXED_LINE_WRITER_H_

#include <cstddef>
#include <string>

namespace hvd {
namespace launcher {

// Writes all of `data` to `fd`, retrying short writes and EINTR. Gives up silently if
// the reader has gone (EPIPE) or the fd stays unwritable for 10 s, since a launcher
// must keep supervising its ranks even when nobody reads its output.
void WriteFully(int fd, const std::string& data);

class PrefixedLineWriter {
 public:
  PrefixedLineWriter(std::string prefix, int out_fd, size_t max_line = 64 * 1024);
  ~PrefixedLineWriter();
  PrefixedLineWriter(const PrefixedLineWriter&) = delete;
  PrefixedLineWriter& operator=(const PrefixedLineWriter&) = delete;

  // Also writes every line to `fd` (a file: dprun --output-filename), which the writer
  // now owns and closes at Finish().
  void CopyTo(int fd);

  // Puts the local time, as asctime() writes it, before each line's prefix
  // (horovodrun's --prefix-output-with-timestamp): "Sat Dec  5 09:31:02 2026[1]<stdout>:".
  void StampLines() { stamp_ = true; }

  // Buffers `data` and writes every line it completes, in one write.
  void Append(const char* data, size_t n);

  // Writes a final partial line, if any, with a newline added, and closes the copy.
  // Call at end of stream.
  void Finish();

  // The text of the last line written, without prefix or newline ("" before any).
  const std::string& last_line() const { return last_line_; }

 private:
  // Writes whole lines to the destination and the copy.
  void Emit(const std::string& lines);

  std::string prefix_;
  int out_fd_;
  int copy_fd_ = -1;
  bool stamp_ = false;
  size_t max_line_;
  std::string partial_;  // Bytes after the last newline.
  std::string last_line_;
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_PREFIXED_LINE_WRITER_H_
