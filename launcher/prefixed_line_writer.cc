#include "launcher/prefixed_line_writer.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <utility>

namespace hvd {
namespace launcher {

void WriteFully(int fd, const std::string& data) {
  size_t done = 0;
  int stalls = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      stalls = 0;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN && stalls < 100) {
      // A non-blocking destination (a terminal shared with another program): wait.
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
      ++stalls;
    } else {
      return;  // EPIPE, a closed fd, or stalled for 10 s: drop the output.
    }
  }
}

namespace {

// asctime()'s form of the local time now, without its newline.
std::string LocalTimeNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  char buf[64];
  if (::localtime_r(&now, &tm) == nullptr ||
      std::strftime(buf, sizeof(buf), "%a %b %e %H:%M:%S %Y", &tm) == 0)
    return "";
  return buf;
}

}  // namespace

PrefixedLineWriter::PrefixedLineWriter(std::string prefix, int out_fd, size_t max_line)
    : prefix_(std::move(prefix)), out_fd_(out_fd), max_line_(max_line) {}

PrefixedLineWriter::~PrefixedLineWriter() {
  if (copy_fd_ >= 0) ::close(copy_fd_);
}

void PrefixedLineWriter::CopyTo(int fd) {
  if (copy_fd_ >= 0) ::close(copy_fd_);
  copy_fd_ = fd;
}

void PrefixedLineWriter::Append(const char* data, size_t n) {
  std::string out;
  const std::string stamp = stamp_ ? LocalTimeNow() : std::string();
  const char* end = data + n;
  while (data < end) {
    const size_t room = max_line_ - std::min(partial_.size(), max_line_);
    const size_t span = std::min(static_cast<size_t>(end - data), room);
    const char* newline = static_cast<const char*>(std::memchr(data, '\n', span));
    if (newline == nullptr && partial_.size() + span < max_line_) {
      partial_.append(data, span);  // No complete line yet.
      break;
    }
    // A newline, or a full max_line_ of text, ends the current line.
    const char* stop = newline != nullptr ? newline : data + span;
    last_line_ = partial_;
    last_line_.append(data, stop);
    out += stamp;
    out += prefix_;
    out += last_line_;
    out += '\n';
    partial_.clear();
    data = newline != nullptr ? newline + 1 : stop;
  }
  Emit(out);
}

void PrefixedLineWriter::Emit(const std::string& lines) {
  if (lines.empty()) return;
  WriteFully(out_fd_, lines);
  if (copy_fd_ >= 0) WriteFully(copy_fd_, lines);
}

void PrefixedLineWriter::Finish() {
  if (!partial_.empty()) {
    last_line_ = partial_;
    Emit((stamp_ ? LocalTimeNow() : std::string()) + prefix_ + partial_ + "\n");
    partial_.clear();
  }
  if (copy_fd_ >= 0) ::close(std::exchange(copy_fd_, -1));
}

}  // namespace launcher
}  // namespace hvd
