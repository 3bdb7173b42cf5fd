// Test helpers: N ranks as N threads, each with its own Runtime over one
// in-memory store and real Gloo on 127.0.0.1. Processes start through JobRunner
// (tests/job_runner.h; RunCommand runs one command to its end).
#ifndef HVD_TESTS_TEST_UTIL_H_
#define HVD_TESTS_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "controller/loop/runtime.h"
#include "runtime/common/control_channel.h"
#include "runtime/common/options.h"
#include "runtime/data/work.h"
#include "tests/job_runner.h"  // RunCommand, for the tests that run a command.

namespace hvd {
namespace testing {

// Options for rank `rank` of `size` with short timeouts suited to tests.
RuntimeOptions TestOptions(int rank, int size);

// Starts `size` runtimes on threads (optionally adjusting each rank's options),
// runs fn(rank, runtime) on each, then shuts every runtime down. Failures inside
// fn are reported through gtest's EXPECT/ADD_FAILURE (thread-safe).
void RunRanks(int size, const std::function<void(int rank, Runtime& rt)>& fn,
              const std::function<void(RuntimeOptions&)>& adjust = nullptr);

// Blocking allreduce through the C++ API; returns the final status.
Status AllreduceSync(Runtime& rt, const std::string& name, const void* in, void* out,
                     int64_t count, DataType dtype, ReduceOp op, double prescale = 1.0,
                     double postscale = 1.0);

// Deterministic per-rank test data as doubles, small integers so every op and
// dtype has an exact (or near-exact) reference.
std::vector<double> RankData(int rank, int64_t count, uint32_t seed);
// RankData as `dtype` elements, and the reduction of every rank's of them in rank
// order with the shared kernels (the reference for a backend's all-reduce).
std::vector<uint8_t> RankInput(int rank, int64_t count, DataType dtype, uint32_t seed);
std::vector<uint8_t> RankOrderReduction(int size, int64_t count, DataType dtype, ReduceOp op,
                                        uint32_t seed);

// One ControlChannel::AllreduceWords of `n` words on `ch` in round `round` (the
// first `or_words` OR-ed, the rest max-ed), each rank's words from its rank, the
// round and the index; returns "" or what differs from the reference.
std::string WordAllreduceRound(ControlChannel& ch, int round, size_t n, size_t or_words);

// Encodes doubles as `dtype` elements, and back.
std::vector<uint8_t> Encode(const std::vector<double>& v, DataType dtype);
std::vector<double> Decode(const std::vector<uint8_t>& bytes, DataType dtype);
// The same over a Work's result bytes.
std::vector<double> Decode(const ResultBytes& bytes, DataType dtype);

}  // namespace testing
}  // namespace hvd

#endif  // HVD_TESTS_TEST_UTIL_H_
