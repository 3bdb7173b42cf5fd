#include "launcher/rank_output.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "launcher/remote_spawner.h"

namespace hvd {
namespace launcher {
namespace {

// A first line this long without a newline is not the marker.
constexpr size_t kMaxMarkerLine = 256;

}  // namespace

RankOutput::~RankOutput() {
  if (fd_ >= 0) ::close(fd_);
}

RankOutput::RankOutput(RankOutput&& other) noexcept { *this = std::move(other); }

RankOutput& RankOutput::operator=(RankOutput&& other) noexcept {
  if (this == &other) return *this;
  if (fd_ >= 0) ::close(fd_);
  fd_ = std::exchange(other.fd_, -1);
  writer_ = std::move(other.writer_);
  await_marker_ = std::exchange(other.await_marker_, false);
  head_ = std::move(other.head_);
  remote_pid_ = std::exchange(other.remote_pid_, -1);
  return *this;
}

void RankOutput::Open(int fd, std::string prefix, int dest_fd, bool strip_start_marker,
                      int copy_fd, bool stamp) {
  fd_ = fd;
  writer_ = std::make_unique<PrefixedLineWriter>(std::move(prefix), dest_fd);
  if (copy_fd >= 0) writer_->CopyTo(copy_fd);
  if (stamp) writer_->StampLines();
  await_marker_ = strip_start_marker;
}

void RankOutput::ReadAvailable() {
  char buf[64 * 1024];
  for (int i = 0; i < kReadsPerRound && fd_ >= 0; ++i) {
    const ssize_t n = ::read(fd_, buf, sizeof(buf));
    if (n > 0) {
      Relay(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      Close();  // End of stream, or an error that ends it.
    }
  }
}

void RankOutput::Relay(const char* data, size_t n) {
  if (!await_marker_) return writer_->Append(data, n);
  head_.append(data, n);
  const size_t newline = head_.find('\n');
  if (newline == std::string::npos && head_.size() < kMaxMarkerLine) return;
  await_marker_ = false;
  std::string rest = std::move(head_);
  head_.clear();
  const std::string marker = std::string(kRemoteStartedMarker) + " ";
  if (newline != std::string::npos && rest.compare(0, marker.size(), marker) == 0) {
    remote_pid_ = std::atoi(rest.substr(marker.size(), newline - marker.size()).c_str());
    rest.erase(0, newline + 1);
  }
  if (!rest.empty()) writer_->Append(rest.data(), rest.size());
}

void RankOutput::Close() {
  if (fd_ < 0) return;
  if (await_marker_ && !head_.empty()) {
    writer_->Append(head_.data(), head_.size());
    head_.clear();
  }
  writer_->Finish();
  ::close(fd_);
  fd_ = -1;
}

const std::string& RankOutput::last_line() const {
  static const std::string kNone;
  return writer_ != nullptr ? writer_->last_line() : kNone;
}

}  // namespace launcher
}  // namespace hvd
