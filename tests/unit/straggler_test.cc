// StragglerTracker: who was last for each tensor, by how much, and the report.
#include "controller/straggler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace hvd {
namespace {

using Clock = StragglerTracker::Clock;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

const Clock::time_point kT0 = Clock::now();
Clock::time_point At(int ms) { return kT0 + milliseconds(ms); }

TEST(StragglerTracker, TensorsEveryRankSentTogetherCountButHaveNoStraggler) {
  StragglerTracker t(3);
  for (int i = 0; i < 5; ++i) t.Record({At(i), At(i), At(i)});
  EXPECT_EQ(t.tensors(), 5);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(t.Stats(r).times_last, 0) << "rank " << r;
  EXPECT_THAT(t.Report(), HasSubstr("5 tensors negotiated, 0 waited on a last rank"));
}

TEST(StragglerTracker, TheLastRankIsChargedWithTheLagFromTheFirst) {
  StragglerTracker t(3);
  t.Record({At(0), At(30), At(10)});  // rank 1, 30 ms after rank 0
  t.Record({At(0), At(10), At(0)});   // rank 1, 10 ms
  t.Record({At(5), At(0), At(0)});    // rank 0, 5 ms
  t.Record({At(0), At(0), At(0)});    // nobody
  EXPECT_EQ(t.tensors(), 4);
  const auto one = t.Stats(1);
  EXPECT_EQ(one.times_last, 2);
  EXPECT_DOUBLE_EQ(one.mean_lag_ms, 20.0);
  EXPECT_EQ(t.Stats(0).times_last, 1);
  EXPECT_EQ(t.Stats(2).times_last, 0);
  EXPECT_THAT(t.Report(), HasSubstr("4 tensors negotiated, 3 waited on a last rank"));
}

TEST(StragglerTracker, ARankThatDidNotSubmitIsSkipped) {
  StragglerTracker t(3);
  t.Record({At(0), Clock::time_point{}, At(7)});  // rank 1 had joined
  EXPECT_EQ(t.Stats(2).times_last, 1);
  EXPECT_DOUBLE_EQ(t.Stats(2).mean_lag_ms, 7.0);
  EXPECT_EQ(t.Stats(1).times_last, 0);
}

// Records from one thread while another reports: the report never counts more
// straggled tensors than tensors.
TEST(StragglerTracker, ReportWhileRecordingStaysConsistent) {
  StragglerTracker t(2);
  constexpr int kRecords = 20000;
  std::thread writer([&] {
    for (int i = 0; i < kRecords; ++i) t.Record({At(0), At(i % 2)});
  });
  for (int i = 0; i < 200; ++i) {
    const std::string report = t.Report();
    long long total = -1, straggled = -1;
    ASSERT_EQ(std::sscanf(report.c_str(), "straggler report: %lld tensors negotiated, %lld waited",
                          &total, &straggled),
              2)
        << report;
    EXPECT_LE(straggled, total) << report;
  }
  writer.join();
  EXPECT_EQ(t.tensors(), kRecords);
  EXPECT_EQ(t.Stats(1).times_last, kRecords / 2);
}

}  // namespace
}  // namespace hvd
