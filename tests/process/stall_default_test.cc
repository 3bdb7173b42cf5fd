// No wait is unbounded by default: a tensor one rank never submits fails on every
// rank after HVD_STALL_SHUTDOWN_TIME (30 minutes by default, shortened here through
// that variable alone), naming the tensor and the ranks that did not submit it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

TEST(StallDefault, ANameOneRankNeverSubmitsFailsWithinTheBound) {
  const std::string dprun = std::string(HVD_BUILD_DIR) + "/dprun";
  const CommandResult r =
      RunCommand("env -u HVD_STALL_CHECK_TIME " + dprun + " -np 2 " + HVD_BUILD_DIR +
                     "/tests/programs/stall_job",
                 seconds(60), {"HVD_STALL_SHUTDOWN_TIME=2"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_LT(r.seconds, 30) << r.output;
  EXPECT_THAT(r.output, HasSubstr("rank 0: HVD_TIMEOUT"));
  EXPECT_THAT(r.output, HasSubstr("rank 1: HVD_TIMEOUT"));
  EXPECT_THAT(r.output, HasSubstr("tensor 'only.0'"));
  EXPECT_THAT(r.output, HasSubstr("missing ranks [1]"));
  EXPECT_THAT(r.output, HasSubstr("HVD_STALL_SHUTDOWN_TIME"));
}

}  // namespace
}  // namespace testing
}  // namespace hvd
