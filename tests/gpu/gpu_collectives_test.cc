// GPU allgather, broadcast, alltoall and reducescatter, single and fused, through
// NCCL (one rank) and host staging (three ranks sharing device 0). Results of
// unknown size come back as device memory owned by the Work.
#include <gtest/gtest.h>

#include <numeric>

#include "tests/gpu/gpu_test_util.h"

namespace hvd {
namespace testing {
namespace {

using std::chrono::milliseconds;

TensorEntry DeviceEntry(const std::string& name, OpType type, DataType dtype, const void* input,
                        std::vector<int64_t> shape) {
  TensorEntry e;
  e.name = name;
  e.type = type;
  e.dtype = dtype;
  e.input = input;
  e.shape = std::move(shape);
  e.device = 0;
  return e;
}

// Waits and returns the Work's device result as host bytes.
std::vector<uint8_t> DeviceResult(const std::shared_ptr<Work>& work, const std::string& what) {
  Status s = work->Wait(milliseconds(60000));
  EXPECT_TRUE(s.ok()) << what << ": " << s.ToString();
  if (!s.ok()) return {};
  const auto& d = work->device_result();
  EXPECT_EQ(d.device, 0) << what;
  EXPECT_TRUE(work->result().empty()) << what << ": a device result must not be on the host";
  return DeviceMemory::Download(d.data.get(), d.bytes);
}

std::vector<double> Iota(int64_t n, double start) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

class GpuCollectives : public ::testing::TestWithParam<GpuMode> {};

// Rank r contributes r + 1 rows of 3 columns.
TEST_P(GpuCollectives, Allgather) {
  HVD_SKIP_WITHOUT_GPU();
  const int size = GetParam().size;
  RunRanks(size, [&](int rank, Runtime& rt) {
    const DataType dtype = DataType::kFloat32;
    DeviceMemory in((rank + 1) * 3 * 4);
    in.Upload(Encode(Iota((rank + 1) * 3, rank * 100), dtype));
    std::shared_ptr<Work> work;
    ASSERT_TRUE(rt.EnqueueOne(DeviceEntry("gather", OpType::kAllgather, dtype, in.get(), {rank + 1, 3}),
                              0, &work)
                    .ok());
    std::vector<double> want;
    for (int r = 0; r < size; ++r) {
      auto part = Iota((r + 1) * 3, r * 100);
      want.insert(want.end(), part.begin(), part.end());
    }
    ExpectValues(dtype, DeviceResult(work, "gather"), want, "gather");
    EXPECT_EQ(work->result_shape(), (std::vector<int64_t>{size * (size + 1) / 2, 3}));
  }, WithGpuOps(GetParam().ops));
}

// Three tensors in one fused response; rank 0 has no rows of the second.
TEST_P(GpuCollectives, GroupedAllgather) {
  HVD_SKIP_WITHOUT_GPU();
  const int size = GetParam().size;
  RunRanks(size, [&](int rank, Runtime& rt) {
    const DataType dtype = DataType::kInt32;
    const std::vector<std::vector<int64_t>> shapes = {{rank + 1, 2}, {2 * rank, 1}, {1, 5}};
    std::vector<std::unique_ptr<DeviceMemory>> ins;
    std::vector<TensorEntry> entries;
    for (int i = 0; i < 3; ++i) {
      const int64_t n = shapes[i][0] * shapes[i][1];
      ins.push_back(std::make_unique<DeviceMemory>(n * 4));
      ins.back()->Upload(Encode(Iota(n, rank * 1000 + i * 100), dtype));
      TensorEntry e = DeviceEntry("ggather." + std::to_string(i), OpType::kAllgather, dtype,
                                  ins.back()->get(), shapes[i]);
      e.group_id = 11;
      e.group_size = 3;
      entries.push_back(std::move(e));
    }
    std::vector<std::shared_ptr<Work>> works;
    ASSERT_TRUE(rt.Enqueue(std::move(entries), 0, &works).ok());
    for (int i = 0; i < 3; ++i) {
      std::vector<double> want;
      int64_t rows = 0;
      for (int r = 0; r < size; ++r) {
        const int64_t r_rows = i == 0 ? r + 1 : i == 1 ? 2 * r : 1;
        const int64_t cols = i == 0 ? 2 : i == 1 ? 1 : 5;
        auto part = Iota(r_rows * cols, r * 1000 + i * 100);
        want.insert(want.end(), part.begin(), part.end());
        rows += r_rows;
      }
      ExpectValues(dtype, DeviceResult(works[i], "ggather"), want, "ggather." + std::to_string(i));
      EXPECT_EQ(works[i]->result_shape()[0], rows);
    }
  }, WithGpuOps(GetParam().ops));
}

TEST_P(GpuCollectives, Broadcast) {
  HVD_SKIP_WITHOUT_GPU();
  const int size = GetParam().size;
  RunRanks(size, [&](int rank, Runtime& rt) {
    const DataType dtype = DataType::kInt64;
    for (int root : {0, size - 1}) {
      const int64_t count = 1000;
      DeviceMemory buf(count * 8);
      buf.Upload(Encode(Iota(count, rank == root ? 5000 : -1), dtype));
      TensorEntry e = DeviceEntry("bcast." + std::to_string(root), OpType::kBroadcast, dtype,
                                  buf.get(), {count});
      e.output = buf.get();
      e.root_rank = root;
      std::shared_ptr<Work> work;
      ASSERT_TRUE(rt.EnqueueOne(std::move(e), 0, &work).ok());
      Status s = work->Wait(milliseconds(60000));
      ASSERT_TRUE(s.ok()) << s.ToString();
      ExpectValues(dtype, buf.Download(), Iota(count, 5000), "bcast");
    }
  }, WithGpuOps(GetParam().ops));
}

// Rank r sends peer + 1 rows of 2 columns to each peer.
TEST_P(GpuCollectives, Alltoall) {
  HVD_SKIP_WITHOUT_GPU();
  const int size = GetParam().size;
  RunRanks(size, [&](int rank, Runtime& rt) {
    const DataType dtype = DataType::kInt32;
    std::vector<double> mine;
    std::vector<int64_t> splits;
    for (int peer = 0; peer < size; ++peer) {
      splits.push_back(peer + 1);
      for (int j = 0; j < (peer + 1) * 2; ++j) mine.push_back(rank * 1000 + peer * 10 + j);
    }
    const int64_t rows = size * (size + 1) / 2;
    DeviceMemory in(rows * 2 * 4);
    in.Upload(Encode(mine, dtype));
    TensorEntry e = DeviceEntry("a2a", OpType::kAlltoall, dtype, in.get(), {rows, 2});
    e.splits = splits;
    std::shared_ptr<Work> work;
    ASSERT_TRUE(rt.EnqueueOne(std::move(e), 0, &work).ok());
    std::vector<double> want;
    for (int peer = 0; peer < size; ++peer)
      for (int j = 0; j < (rank + 1) * 2; ++j) want.push_back(peer * 1000 + rank * 10 + j);
    ExpectValues(dtype, DeviceResult(work, "a2a"), want, "a2a");
    EXPECT_EQ(work->received_splits(), std::vector<int64_t>(size, rank + 1));
    EXPECT_EQ(work->result_shape(), (std::vector<int64_t>{size * (rank + 1), 2}));
  }, WithGpuOps(GetParam().ops));
}

// Uneven (2 * size + 1 rows) and even (2 * size rows), sum and average, with and
// without a prescale factor; then two tensors in one fused response.
TEST_P(GpuCollectives, Reducescatter) {
  HVD_SKIP_WITHOUT_GPU();
  const int size = GetParam().size;
  RunRanks(size, [&](int rank, Runtime& rt) {
    const DataType dtype = DataType::kFloat32;
    const int64_t cols = 3;
    auto rows_of = [&](int64_t dim0, int r) { return dim0 / size + (r < dim0 % size ? 1 : 0); };
    auto value = [&](int r, int64_t i) { return static_cast<double>((r + 1) * (i % 7)); };
    int variant = 0;
    for (int64_t dim0 : {2 * int64_t{size} + 1, 2 * int64_t{size}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        for (double pre : {1.0, 0.5}) {
          const std::string name = "rs." + std::to_string(variant++);
          std::vector<double> mine(dim0 * cols);
          for (int64_t i = 0; i < dim0 * cols; ++i) mine[i] = value(rank, i);
          DeviceMemory in(dim0 * cols * 4);
          in.Upload(Encode(mine, dtype));
          TensorEntry e = DeviceEntry(name, OpType::kReducescatter, dtype, in.get(), {dim0, cols});
          e.reduce_op = op;
          e.prescale_factor = pre;
          e.postscale_factor = 2.0;
          std::shared_ptr<Work> work;
          ASSERT_TRUE(rt.EnqueueOne(std::move(e), 0, &work).ok());
          int64_t first = 0;
          for (int r = 0; r < rank; ++r) first += rows_of(dim0, r);
          std::vector<double> want;
          for (int64_t i = first * cols; i < (first + rows_of(dim0, rank)) * cols; ++i) {
            double sum = 0;
            for (int r = 0; r < size; ++r) sum += value(r, i) * pre;
            want.push_back((op == ReduceOp::kAverage ? sum / size : sum) * 2.0);
          }
          ExpectValues(dtype, DeviceResult(work, name), want, name);
          EXPECT_EQ(work->result_shape(), (std::vector<int64_t>{rows_of(dim0, rank), cols}));
        }
      }
    }

    const std::vector<int64_t> dims = {size + 1, 3};
    std::vector<std::unique_ptr<DeviceMemory>> ins;
    std::vector<TensorEntry> entries;
    for (int t = 0; t < 2; ++t) {
      std::vector<double> mine(dims[t] * 2);
      for (int64_t i = 0; i < dims[t] * 2; ++i) mine[i] = value(rank, i + t);
      ins.push_back(std::make_unique<DeviceMemory>(mine.size() * 4));
      ins.back()->Upload(Encode(mine, dtype));
      TensorEntry e = DeviceEntry("grs." + std::to_string(t), OpType::kReducescatter, dtype,
                                  ins.back()->get(), {dims[t], 2});
      e.group_id = 12;
      e.group_size = 2;
      entries.push_back(std::move(e));
    }
    std::vector<std::shared_ptr<Work>> works;
    ASSERT_TRUE(rt.Enqueue(std::move(entries), 0, &works).ok());
    for (int t = 0; t < 2; ++t) {
      int64_t first = 0;
      for (int r = 0; r < rank; ++r) first += rows_of(dims[t], r);
      std::vector<double> want;
      for (int64_t i = first * 2; i < (first + rows_of(dims[t], rank)) * 2; ++i) {
        double sum = 0;
        for (int r = 0; r < size; ++r) sum += value(r, i + t);
        want.push_back(sum);
      }
      ExpectValues(dtype, DeviceResult(works[t], "grs"), want, "grs." + std::to_string(t));
    }
  }, WithGpuOps(GetParam().ops));
}

INSTANTIATE_TEST_SUITE_P(Modes, GpuCollectives, ::testing::ValuesIn(GpuModes()), ModeName);

}  // namespace
}  // namespace testing
}  // namespace hvd
