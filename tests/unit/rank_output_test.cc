// RankOutput relays a rank's pipe as prefixed lines and strips the remote start marker;
// here over local pipes, with no rank.
#include "launcher/rank_output.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>
#include <string>

#include "launcher/remote_spawner.h"

namespace hvd {
namespace launcher {
namespace {

// A RankOutput reading a pipe the test writes to, relaying into a pipe it reads.
class Relay {
 public:
  explicit Relay(bool strip_start_marker) {
    int src[2];
    HVD_CHECK(::pipe2(src, O_CLOEXEC | O_NONBLOCK) == 0);
    HVD_CHECK(::pipe2(dest_, O_CLOEXEC | O_NONBLOCK) == 0);
    write_fd_ = src[1];
    output.Open(src[0], "[1]<stdout>:", dest_[1], strip_start_marker);
  }
  ~Relay() {
    if (write_fd_ >= 0) ::close(write_fd_);
    ::close(dest_[0]);
    ::close(dest_[1]);
  }
  void Write(const std::string& s) {
    HVD_CHECK(::write(write_fd_, s.data(), s.size()) == static_cast<ssize_t>(s.size()));
    output.ReadAvailable();
  }
  void CloseWriteEnd() {
    ::close(write_fd_);
    write_fd_ = -1;
    output.ReadAvailable();
  }
  std::string Relayed() {
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(dest_[0], buf, sizeof(buf))) > 0;) text.append(buf, n);
    return text;
  }

  RankOutput output;

 private:
  int write_fd_ = -1;
  int dest_[2];
};

const std::string kMarker = kRemoteStartedMarker;

TEST(RankOutput, RelaysWholeLinesAndClosesAtEndOfStream) {
  Relay r(false);
  r.Write("one\ntw");
  EXPECT_EQ(r.Relayed(), "[1]<stdout>:one\n");
  EXPECT_EQ(r.output.last_line(), "one");
  EXPECT_TRUE(r.output.is_open());
  r.CloseWriteEnd();
  EXPECT_FALSE(r.output.is_open());
  EXPECT_EQ(r.Relayed(), "[1]<stdout>:tw\n");
  EXPECT_EQ(r.output.remote_pid(), -1);
}

// --output-filename: the same prefixed lines (not the remote start marker) go to the
// rank's file too, the last partial line included; the file is closed at the end.
TEST(RankOutput, CopiesTheLinesToAFile) {
  char path[] = "/tmp/dprun-rank-output-XXXXXX";
  const int file = ::mkstemp(path);
  ASSERT_GE(file, 0);
  {
    int src[2], dest[2];
    ASSERT_EQ(::pipe2(src, O_CLOEXEC | O_NONBLOCK), 0);
    ASSERT_EQ(::pipe2(dest, O_CLOEXEC | O_NONBLOCK), 0);
    RankOutput output;
    output.Open(src[0], "[3]<stderr>:", dest[1], true, file);
    const std::string text = kMarker + " 42\none\ntwo";
    ASSERT_EQ(::write(src[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(src[1]);
    output.ReadAvailable();
    EXPECT_FALSE(output.is_open());
    EXPECT_EQ(::fcntl(file, F_GETFD), -1);  // closed with the stream
    ::close(dest[0]);
    ::close(dest[1]);
  }
  std::string copied;
  char buf[256];
  const int in = ::open(path, O_RDONLY);
  for (ssize_t n; (n = ::read(in, buf, sizeof(buf))) > 0;) copied.append(buf, n);
  ::close(in);
  ::unlink(path);
  EXPECT_EQ(copied, "[3]<stderr>:one\n[3]<stderr>:two\n");
}

// --prefix-output-with-timestamp: asctime()'s local time before the prefix, on every
// line, the last partial one included.
TEST(RankOutput, StampsEachLineWithTheLocalTime) {
  int src[2], dest[2];
  ASSERT_EQ(::pipe2(src, O_CLOEXEC | O_NONBLOCK), 0);
  ASSERT_EQ(::pipe2(dest, O_CLOEXEC | O_NONBLOCK), 0);
  RankOutput output;
  output.Open(src[0], "[1]<stdout>:", dest[1], false, -1, true);
  ASSERT_EQ(::write(src[1], "one\ntwo", 7), 7);
  ::close(src[1]);
  output.ReadAvailable();
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(dest[0], buf, sizeof(buf))) > 0;) text.append(buf, n);
  ::close(dest[0]);
  ::close(dest[1]);
  const std::string stamp = "[A-Z][a-z][a-z] [A-Z][a-z][a-z] [ 1-3][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] [0-9]+";
  EXPECT_TRUE(std::regex_match(
      text, std::regex(stamp + "\\[1\\]<stdout>:one\n" + stamp + "\\[1\\]<stdout>:two\n")))
      << text;
}

TEST(RankOutput, StripsTheStartMarkerAndKeepsItsPid) {
  Relay r(true);
  r.Write(kMarker + " 4");
  EXPECT_EQ(r.Relayed(), "");
  r.Write("21\nhello\n");
  EXPECT_EQ(r.output.remote_pid(), 421);
  EXPECT_EQ(r.Relayed(), "[1]<stdout>:hello\n");
}

TEST(RankOutput, AFirstLineThatIsNotTheMarkerIsRelayed) {
  Relay r(true);
  r.Write("not a marker\n");
  EXPECT_EQ(r.Relayed(), "[1]<stdout>:not a marker\n");
  EXPECT_EQ(r.output.remote_pid(), -1);
  // Only the first line can be the marker.
  r.Write(kMarker + " 5\n");
  EXPECT_EQ(r.Relayed(), "[1]<stdout>:" + kMarker + " 5\n");
}

TEST(RankOutput, AnUnfinishedFirstLineIsRelayedWhenTheStreamCloses) {
  Relay r(true);
  r.Write("partial");
  EXPECT_EQ(r.Relayed(), "");
  r.output.Close();
  EXPECT_EQ(r.Relayed(), "[1]<stdout>:partial\n");
}

TEST(RankOutput, ALongFirstLineIsNotHeldForever) {
  Relay r(true);
  r.Write(std::string(300, 'x'));
  EXPECT_EQ(r.Relayed(), "");  // Not a whole line yet: the line writer holds it.
  r.Write("\n");
  EXPECT_EQ(r.Relayed(), "[1]<stdout>:" + std::string(300, 'x') + "\n");
}

TEST(RankOutput, MovingKeepsTheStream) {
  Relay r(false);
  RankOutput moved = std::move(r.output);
  EXPECT_FALSE(r.output.is_open());
  EXPECT_TRUE(moved.is_open());
  EXPECT_EQ(r.output.last_line(), "");
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
