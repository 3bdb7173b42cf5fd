// Completion callbacks (hvd_handle_on_done) across real ranks under dprun: the
// checks of tests/programs/on_done_job.cc at 2, 3 and 4 ranks, and a rank lost
// while the others' callbacks are pending.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/job_runner.h"

namespace hvd {
namespace testing {
namespace {

using ::testing::HasSubstr;

const std::string kDprun = HVD_DPRUN_PATH;
const std::string kJob = std::string(HVD_BUILD_DIR) + "/tests/programs/on_done_job";

int CountOf(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + 1))
    ++n;
  return n;
}

TEST(OnDone, CallbacksAtTwoThreeAndFourRanks) {
  for (int np : {2, 3, 4}) {
    CommandResult r =
        RunCommand(kDprun + " -np " + std::to_string(np) + " " + kJob, std::chrono::seconds(90));
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(CountOf(r.output, " callback checks passed"), np) << r.output;
    EXPECT_EQ(CountOf(r.output, "mismatch callback: HVD_MISMATCH: tensor 'od.mismatch'"), np)
        << r.output;
  }
}

TEST(OnDone, RegisteringStartsTheCycleAsAWaitDoes) {
  // With a 10 s cycle, enqueues alone start a cycle after a quiet second
  // (HVD_CYCLE_TIME / 10); a registered callback is a waiter and starts it at once.
  CommandResult r = RunCommand(kDprun + " -np 2 " + kJob + " flush", std::chrono::seconds(90),
                               {"HVD_CYCLE_TIME=10000"});
  ASSERT_FALSE(r.timed_out) << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  std::string rest = r.output;
  int seen = 0;
  while (std::regex_search(rest, m, std::regex("callback after ([0-9]+) ms"))) {
    EXPECT_LT(std::stoi(m[1].str()), 500) << r.output;
    ++seen;
    rest = m.suffix();
  }
  EXPECT_EQ(seen, 2) << r.output;
}

TEST(OnDone, ALostRankReachesThePendingCallbacksNamed) {
  CommandResult r =
      RunCommand(kDprun + " -np 3 " + kJob + " kill", std::chrono::seconds(90), {"HVD_TIMEOUT=10"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(CountOf(r.output, "callback saw the lost rank"), 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("dprun: rank 2 (pid")) << r.output;
}

}  // namespace
}  // namespace testing
}  // namespace hvd
