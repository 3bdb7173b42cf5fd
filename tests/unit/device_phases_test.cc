// DevicePhaseSpans: the timeline spans of a response's device work, from the
// distances its CUDA events measured to the end of that work.
#include <gtest/gtest.h>

#include "runtime/data/device_phases.h"

namespace hvd {
namespace {

using Clock = DevicePhases::Clock;
using std::chrono::microseconds;

TEST(DevicePhases, AFusedResponseHasCopyInCollectiveAndCopyOutBackToBack) {
  DevicePhases p;
  p.end = Clock::time_point(std::chrono::seconds(100));
  p.copy_in_ms = 3.0f;     // copy-in from end-3 ms
  p.collective_ms = 2.5f;  // collective from end-2.5 ms
  p.copy_out_ms = 0.5f;    // copy-out from end-0.5 ms
  const auto spans = DevicePhaseSpans({"a", "b"}, "ALLREDUCE", p);
  ASSERT_EQ(spans.size(), 6u);
  for (int t = 0; t < 2; ++t) {
    const PhaseSpan* s = &spans[3 * t];
    EXPECT_EQ(s[0].name, t == 0 ? "a" : "b");
    EXPECT_STREQ(s[0].label, "COPY_IN");
    EXPECT_STREQ(s[1].label, "ALLREDUCE");
    EXPECT_STREQ(s[2].label, "COPY_OUT");
    EXPECT_EQ(s[0].begin, p.end - microseconds(3000));
    EXPECT_EQ(s[0].end, s[1].begin);
    EXPECT_EQ(s[1].begin, p.end - microseconds(2500));
    EXPECT_EQ(s[1].end, s[2].begin);
    EXPECT_EQ(s[2].begin, p.end - microseconds(500));
    EXPECT_EQ(s[2].end, p.end);
  }
}

TEST(DevicePhases, ALoneTensorHasOnlyItsCollective) {
  DevicePhases p;
  p.end = Clock::time_point(std::chrono::seconds(5));
  p.collective_ms = 0.25f;
  const auto spans = DevicePhaseSpans({"w"}, "BROADCAST", p);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_STREQ(spans[0].label, "BROADCAST");
  EXPECT_EQ(spans[0].begin, p.end - microseconds(250));
  EXPECT_EQ(spans[0].end, p.end);
}

}  // namespace
}  // namespace hvd
