// Autotune in a real run: results stay right while the setting changes under
// them, and every scored setting is logged.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

TEST(Autotune, SearchesWhileResultsStayCorrect) {
  const std::string log = ::testing::TempDir() + "hvd_autotune_test.csv";
  std::remove(log.c_str());
  RunRanks(2, [&](int rank, Runtime& rt) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(8);
    for (int step = 0;; ++step) {
      // The ranks agree on when to stop, so none starts a step the other skips.
      int32_t stop = std::chrono::steady_clock::now() >= deadline ? 1 : 0;
      ASSERT_TRUE(AllreduceSync(rt, "stop", &stop, &stop, 1, DataType::kInt32, ReduceOp::kMax).ok());
      if (stop) break;
      std::vector<std::vector<int32_t>> bufs(8, std::vector<int32_t>(4096, rank + step));
      std::vector<std::shared_ptr<Work>> works(8);
      for (int i = 0; i < 8; ++i) {
        TensorEntry a;
        a.name = "t" + std::to_string(i);
        a.input = a.output = bufs[i].data();
        a.shape = {4096};
        a.dtype = DataType::kInt32;
        ASSERT_TRUE(rt.EnqueueOne(TensorEntry(a), 0, &works[i]).ok());
      }
      for (int i = 0; i < 8; ++i) {
        Status s = works[i]->Wait(std::chrono::milliseconds(20000));
        ASSERT_TRUE(s.ok()) << "rank " << rank << " step " << step << ": " << s.ToString();
        ASSERT_EQ(bufs[i][4095], 2 * step + 1) << "step " << step;
      }
    }
  }, [&](RuntimeOptions& o) {
    o.autotune = true;
    o.autotune_log = log;
    o.autotune_window = std::chrono::milliseconds(60);
  });
  std::ifstream f(log);
  std::string header, line;
  std::getline(f, header);
  EXPECT_EQ(header, "fusion_threshold_bytes,cycle_time_ms,bytes_per_second");
  int lines = 0;
  while (std::getline(f, line)) ++lines;
  EXPECT_GE(lines, 5);
}

}  // namespace
}  // namespace testing
}  // namespace hvd
