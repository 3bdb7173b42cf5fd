// Regression tests for bugs found by fuzzing and by the table of bad calls
// (docs/c_api_errors.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <thread>

#include "controller/negotiation.h"
#include "runtime/data/work.h"

namespace hvd {
namespace {

// A huge timeout waited not at all (the conversion to nanoseconds overflowed).
TEST(Regressions, HugeWaitTimeoutWaitsForCompletion) {
  Work w("x");
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    w.Complete(Status::OK());
  });
  Status s = w.Wait(std::chrono::milliseconds(std::numeric_limits<int64_t>::max()));
  t.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// With ranks joined, a tensor that several live ranks submit was listed ready
// once per submission, and BuildResponse aborted on the second.
TEST(Regressions, JoinedTensorIsReadyOnce) {
  MessageTable table(3);
  table.SetJoined({1, 2});
  proto::Request r;
  r.set_name("x");
  r.set_type(proto::ALLREDUCE);
  r.add_shape(4);
  const auto now = Clock::now();
  table.Add(0, r, now);
  table.Add(1, r, now);
  const auto ready = table.TakeReady();
  EXPECT_EQ(ready, std::vector<std::string>{"x"});
  for (const auto& name : ready) table.BuildResponse(name);
}

// A subnormal scale factor made the coordinator's message formatting throw.
TEST(Regressions, SubnormalScaleFactorsAreComparedWithoutThrowing) {
  proto::Request a, b;
  for (auto* r : {&a, &b}) {
    r->set_name("tiny");
    r->set_type(proto::ALLREDUCE);
    r->add_shape(4);
  }
  a.set_prescale_factor(1e-310);
  b.set_prescale_factor(1.0);
  a.set_request_rank(0);
  b.set_request_rank(1);
  const std::string error = CheckAgreement("tiny", {a, b});
  EXPECT_THAT(error, ::testing::HasSubstr("prescale factor differs"));
  b.set_prescale_factor(1e-310);
  EXPECT_EQ(CheckAgreement("tiny", {a, b}), "");
}

}  // namespace
}  // namespace hvd
