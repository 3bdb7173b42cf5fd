// Reporter, the start timeout's verdict and the straggler report, over a pipe and an
// in-memory store.
#include "launcher/job_report.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "runtime/common/job_keys.h"

namespace hvd {
namespace launcher {
namespace {

// A pipe whose read end collects what the reporter wrote.
class Captured {
 public:
  Captured() { HVD_CHECK(::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) == 0); }
  ~Captured() {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int fd() const { return fds_[1]; }
  std::string Text() {
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds_[0], buf, sizeof(buf))) > 0;) text.append(buf, n);
    return text;
  }

 private:
  int fds_[2];
};

TEST(JobReport, MessagesArePrefixedAndVerboseOnesOptional) {
  Captured quiet_fd, verbose_fd;
  const Reporter quiet(quiet_fd.fd(), false), verbose(verbose_fd.fd(), true);
  for (const Reporter* r : {&quiet, &verbose}) {
    r->Message("rank 1 (pid 7) exited with code 3");
    r->Verbose("all ranks started");
  }
  EXPECT_EQ(quiet_fd.Text(), "dprun: rank 1 (pid 7) exited with code 3\n");
  EXPECT_EQ(verbose_fd.Text(),
            "dprun: rank 1 (pid 7) exited with code 3\ndprun: all ranks started\n");
}

TEST(JobReport, NotStartedNamesEveryRank) {
  EXPECT_EQ(NotStartedMessage({2}, 1), "rank 2 did not start within 1 s");
  EXPECT_EQ(NotStartedMessage({0, 1, 5}, 1.5), "ranks 0, 1, 5 did not start within 1.5 s");
  EXPECT_EQ(NotStartedMessage({0}, 120), "rank 0 did not start within 120 s");
}

TEST(JobReport, ReportLines) {
  EXPECT_TRUE(ReportLines("").empty());
  EXPECT_EQ(ReportLines("a\n  b\n"), (std::vector<std::string>{"a", "  b"}));
  EXPECT_EQ(ReportLines("a\nb"), (std::vector<std::string>{"a", "b"}));
}

TEST(JobReport, PrintsTheStragglerReportLineByLine) {
  auto store = NewInMemoryStore();
  ASSERT_TRUE(store->Set(keys::kStragglerReport, "straggler report: 2 ranks\n  rank  last\n").ok());
  Captured out;
  PrintStragglerReport(*store, Reporter(out.fd(), false));
  EXPECT_EQ(out.Text(), "dprun: straggler report: 2 ranks\ndprun:   rank  last\n");
}

TEST(JobReport, SaysWhenThereIsNoStragglerReport) {
  auto store = NewInMemoryStore();
  Captured out;
  PrintStragglerReport(*store, Reporter(out.fd(), false));
  EXPECT_EQ(out.Text(),
            "dprun: no straggler report: rank 0 leaves it in hvd_shutdown, and did not\n");
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
