// The Gloo backend's multi-rank tests' common ground: `size` ranks as threads over
// Gloo on 127.0.0.1, each with its own context and GlooBackend, and every dtype and
// op the backends reduce.
#ifndef HVD_TESTS_MULTIRANK_GLOO_BACKENDS_H_
#define HVD_TESTS_MULTIRANK_GLOO_BACKENDS_H_

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/store/store.h"
#include "runtime/transport/gloo/gloo_backend.h"

namespace hvd {
namespace testing {

// Runs fn(rank, backend) on `size` threads, each rank's backend made with `ring`
// and `algorithm` over a full mesh connected through one in-memory store.
inline void RunGlooBackends(int size, const PieceRingOptions& ring,
                            const AllreduceAlgorithmOptions& algorithm,
                            const std::function<void(int, GlooBackend&)>& fn,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
  auto store = NewInMemoryStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      std::shared_ptr<gloo::transport::Device> device;
      std::shared_ptr<gloo::Context> context;
      Status s = CreateGlooDevice("127.0.0.1", "", &device);
      if (s.ok()) s = ConnectGlooContext(store, device, r, size, timeout, &context);
      ASSERT_TRUE(s.ok()) << s.ToString();
      GlooBackend b(context, ring, algorithm);
      fn(r, b);
    });
  }
  for (auto& t : threads) t.join();
}

inline constexpr DataType kEveryType[] = {
    DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
    DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,   DataType::kInt64,
    DataType::kInt16};
inline constexpr ReduceOp kEveryOp[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                        ReduceOp::kMax, ReduceOp::kProduct};

}  // namespace testing
}  // namespace hvd

#endif  // HVD_TESTS_MULTIRANK_GLOO_BACKENDS_H_
