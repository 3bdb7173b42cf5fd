// The autotuner's search over a synthetic throughput surface, with injected time.
#include "controller/autotuner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace hvd {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// Bytes per second for a setting: peaks at 32 MiB and 1 ms, with multiplicative noise.
double Surface(const Autotuner::Setting& s) {
  const double t = std::log2(static_cast<double>(s.fusion_threshold) / (32 << 20));
  const double c = std::log2(s.cycle_time.count() / 1000.0);
  return 1e9 / (1.0 + 0.3 * t * t + 0.5 * c * c);
}

// Drives the tuner: each cycle moves bytes at the surface's rate for 5 ms.
Autotuner::Setting Drive(Autotuner& tuner, double noise, int max_cycles, int* changes) {
  std::mt19937 gen(7);
  std::normal_distribution<double> n(1.0, noise);
  auto now = Autotuner::Clock::time_point{};
  *changes = 0;
  for (int i = 0; i < max_cycles && !tuner.done(); ++i) {
    now += milliseconds(5);
    const double rate = Surface(tuner.current()) * std::max(0.1, n(gen));
    if (tuner.Observe(static_cast<int64_t>(rate * 0.005), now)) ++*changes;
  }
  return tuner.current();
}

Autotuner::Options FastOptions() {
  Autotuner::Options o;
  o.window = milliseconds(100);
  o.min_cycles = 5;
  return o;
}

TEST(Autotuner, FindsTheBestSettingWithoutNoise) {
  Autotuner tuner({128 << 20, microseconds(5000)}, FastOptions());
  int changes = 0;
  const auto s = Drive(tuner, 0.0, 100000, &changes);
  EXPECT_TRUE(tuner.done());
  EXPECT_EQ(s.fusion_threshold, 32 << 20);
  EXPECT_EQ(s.cycle_time, microseconds(1000));
  EXPECT_GT(changes, 5);
}

TEST(Autotuner, EndsWithinTenPercentOfTheBestUnderNoise) {
  const Autotuner::Setting best{32 << 20, microseconds(1000)};
  for (double noise : {0.05, 0.15}) {
    Autotuner tuner({128 << 20, microseconds(5000)}, FastOptions());
    int changes = 0;
    const auto s = Drive(tuner, noise, 100000, &changes);
    EXPECT_TRUE(tuner.done());
    EXPECT_GE(Surface(s), 0.9 * Surface(best)) << "noise " << noise << ": threshold "
                                               << s.fusion_threshold << " cycle " << s.cycle_time.count();
  }
}

TEST(Autotuner, IdleCyclesDoNotEndAWindow) {
  Autotuner::Options o = FastOptions();
  int logged = 0;
  o.log = [&](const Autotuner::Setting&, double) { ++logged; };
  Autotuner tuner({128 << 20, microseconds(1000)}, o);
  auto now = Autotuner::Clock::time_point{};
  for (int i = 0; i < 1000; ++i) tuner.Observe(0, now += milliseconds(5));
  EXPECT_EQ(logged, 0);
  EXPECT_FALSE(tuner.done());
}

TEST(Autotuner, LogsEveryScoredSetting) {
  Autotuner::Options o = FastOptions();
  o.thresholds = {1 << 20, 2 << 20};
  o.cycle_times = {microseconds(1000)};
  std::vector<int64_t> seen;
  o.log = [&](const Autotuner::Setting& s, double score) {
    seen.push_back(s.fusion_threshold);
    EXPECT_GT(score, 0);
  };
  Autotuner tuner({1 << 20, microseconds(1000)}, o);
  int changes = 0;
  Drive(tuner, 0.0, 100000, &changes);
  // Thresholds, cycle times, thresholds again.
  EXPECT_EQ(seen, (std::vector<int64_t>{1 << 20, 2 << 20, 2 << 20, 1 << 20, 2 << 20}));
}

}  // namespace
}  // namespace hvd
