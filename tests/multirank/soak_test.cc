// Soak: three ranks run thousands of steps of mixed collectives through the C++ API,
// and the process's resident memory must stay flat once warmed up.
//
// Each step enqueues, asynchronously and in one go, an allreduce (eight names, each
// with its own dtype, size and op) and one of allgather, broadcast, reducescatter or
// alltoall with uneven splits; every 50th step adds an allreduce under a name never
// used before, and every 100th ends with a barrier. Names repeat with the same
// parameters, so the steady state runs from the response cache, while the fresh
// names keep inserting into it. Every result is checked against a reference.
//
// Memory: resident pages (/proc/self/statm) after the warm-up steps and at the end;
// the growth must stay under kMaxGrowthBytes. Under ASan or TSan the check is skipped
// (their allocators keep freed memory in quarantine on purpose) and fewer steps run.
// HVD_SOAK_STEPS overrides the number of steps.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "tests/test_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HVD_SOAK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HVD_SOAK_SANITIZED 1
#endif
#endif

namespace hvd {
namespace testing {
namespace {

constexpr int kRanks = 3;
#ifdef HVD_SOAK_SANITIZED
constexpr int kDefaultSteps = 5000;
constexpr bool kCheckMemory = false;
#else
constexpr int kDefaultSteps = 20000;
constexpr bool kCheckMemory = true;
#endif
constexpr int kWarmupSteps = 2000;
constexpr int64_t kMaxGrowthBytes = 16 << 20;
constexpr auto kWait = std::chrono::milliseconds(60000);

int Steps() {
  const char* env = std::getenv("HVD_SOAK_STEPS");
  if (env == nullptr || *env == '\0') return kDefaultSteps;
  return std::max(kWarmupSteps + 100, std::atoi(env));
}

int64_t ResidentBytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE) : -1;
}

// Element j of rank r's input at step s: a small integer, exact in every dtype, whose
// sum over three ranks still fits int8.
double Value(int rank, int64_t j, int step) {
  return static_cast<double>((rank + 1) * (j % 5 + 1) + step % 3);
}

std::vector<double> Values(int rank, int64_t n, int step) {
  std::vector<double> v(n);
  for (int64_t j = 0; j < n; ++j) v[j] = Value(rank, j, step);
  return v;
}

struct AllreduceSpec {
  DataType dtype;
  int64_t count;
  ReduceOp op;
};
const AllreduceSpec kAllreduces[] = {
    {DataType::kFloat32, 1, ReduceOp::kSum},     {DataType::kFloat64, 33, ReduceOp::kAverage},
    {DataType::kInt32, 1000, ReduceOp::kMax},    {DataType::kBFloat16, 7, ReduceOp::kSum},
    {DataType::kFloat16, 64, ReduceOp::kMin},    {DataType::kInt64, 4097, ReduceOp::kSum},
    {DataType::kUInt8, 3, ReduceOp::kMax},       {DataType::kInt8, 129, ReduceOp::kMin},
};

double Reduce(ReduceOp op, int64_t j, int step) {
  double acc = Value(0, j, step);
  for (int r = 1; r < kRanks; ++r) {
    const double v = Value(r, j, step);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage: acc += v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      default: ADD_FAILURE() << "op not used by the soak";
    }
  }
  return op == ReduceOp::kAverage ? acc / kRanks : acc;
}

TensorEntry Entry(std::string name, OpType type, DataType dtype, const void* in,
                  std::vector<int64_t> shape) {
  TensorEntry e;
  e.name = std::move(name);
  e.type = type;
  e.dtype = dtype;
  e.input = in;
  e.shape = std::move(shape);
  return e;
}

// One collective of a step: its buffers and how to check its result.
struct Pending {
  std::shared_ptr<Work> work;
  std::vector<uint8_t> in, out;
  std::function<void(Work&, const std::vector<uint8_t>& out)> check;
};

// Enqueues step `s`'s collectives on `rt`.
void EnqueueStep(Runtime& rt, int rank, int s, std::vector<Pending>* step) {
  step->clear();
  step->reserve(4);
  // Entries point into the Pending's vectors; moving a vector keeps its buffer.
  auto enqueue = [&](TensorEntry e, Pending p) {
    Status st = rt.EnqueueOne(std::move(e), 0, &p.work);
    ASSERT_TRUE(st.ok()) << "step " << s << ": " << st.ToString();
    step->push_back(std::move(p));
  };
  auto allreduce = [&](const std::string& name, const AllreduceSpec& spec) {
    Pending p;
    p.in = Encode(Values(rank, spec.count, s), spec.dtype);
    p.out.assign(p.in.size(), 0);
    TensorEntry e = Entry(name, OpType::kAllreduce, spec.dtype, nullptr, {spec.count});
    e.reduce_op = spec.op;
    p.check = [spec, s, name](Work&, const std::vector<uint8_t>& out) {
      const std::vector<double> got = Decode(out, spec.dtype);
      for (int64_t j = 0; j < spec.count; ++j) {
        const double want = Reduce(spec.op, j, s);
        if (std::abs(got[j] - want) > 1e-9 * std::max(1.0, std::abs(want))) {
          ADD_FAILURE() << name << " step " << s << " element " << j << ": got " << got[j]
                        << ", want " << want;
          return;
        }
      }
    };
    e.input = p.in.data();
    e.output = p.out.data();
    enqueue(std::move(e), std::move(p));
  };

  const int k = s % 8;
  allreduce("soak.ar." + std::to_string(k), kAllreduces[k]);
  if (s % 50 == 7) allreduce("soak.fresh." + std::to_string(s), {DataType::kFloat32, 5, ReduceOp::kSum});

  const int kind = s % 4, variant = (s / 4) % 3;
  if (kind == 0) {  // allgather: rank r contributes r + 1 + variant rows of 3
    Pending p;
    const int64_t rows = rank + 1 + variant;
    p.in = Encode(Values(rank, rows * 3, s), DataType::kFloat32);
    TensorEntry e = Entry("soak.ag." + std::to_string(variant), OpType::kAllgather,
                          DataType::kFloat32, p.in.data(), {rows, 3});
    p.check = [s, variant](Work& w, const std::vector<uint8_t>&) {
      std::vector<double> want;
      for (int r = 0; r < kRanks; ++r) {
        auto part = Values(r, (r + 1 + variant) * 3, s);
        want.insert(want.end(), part.begin(), part.end());
      }
      EXPECT_EQ(Decode(w.result(), DataType::kFloat32), want) << "allgather step " << s;
    };
    enqueue(std::move(e), std::move(p));
  } else if (kind == 1) {  // broadcast from a root that rotates with the name
    Pending p;
    const int root = variant % kRanks;
    p.in = Encode(Values(rank, 17, s), DataType::kInt32);
    TensorEntry e = Entry("soak.bc." + std::to_string(root), OpType::kBroadcast,
                          DataType::kInt32, p.in.data(), {17});
    e.output = p.in.data();  // in place
    e.root_rank = root;
    p.check = [s, root](Work&, const std::vector<uint8_t>& buf) {
      EXPECT_EQ(Decode(buf, DataType::kInt32), Values(root, 17, s)) << "broadcast step " << s;
    };
    enqueue(std::move(e), std::move(p));
  } else if (kind == 2) {  // reducescatter of 6 or 7 rows of 2: uneven blocks
    Pending p;
    const int64_t rows = 6 + variant % 2;
    p.in = Encode(Values(rank, rows * 2, s), DataType::kFloat32);
    TensorEntry e = Entry("soak.rs." + std::to_string(variant % 2), OpType::kReducescatter,
                          DataType::kFloat32, p.in.data(), {rows, 2});
    p.check = [s, rows, rank](Work& w, const std::vector<uint8_t>&) {
      int64_t begin = 0;
      for (int r = 0; r < rank; ++r) begin += rows / kRanks + (r < rows % kRanks ? 1 : 0);
      const int64_t mine = rows / kRanks + (rank < rows % kRanks ? 1 : 0);
      std::vector<double> want;
      for (int64_t j = begin * 2; j < (begin + mine) * 2; ++j) want.push_back(Reduce(ReduceOp::kSum, j, s));
      EXPECT_EQ(Decode(w.result(), DataType::kFloat32), want) << "reducescatter step " << s;
    };
    enqueue(std::move(e), std::move(p));
  } else {  // alltoall: rank r sends (r + d + variant) % 3 rows of 2 to rank d
    Pending p;
    auto splits_of = [variant](int src) {
      std::vector<int64_t> sp(kRanks);
      for (int d = 0; d < kRanks; ++d) sp[d] = (src + d + variant) % 3;
      return sp;
    };
    const std::vector<int64_t> splits = splits_of(rank);
    const int64_t rows = std::accumulate(splits.begin(), splits.end(), int64_t{0});
    p.in = Encode(Values(rank, rows * 2, s), DataType::kFloat64);
    TensorEntry e = Entry("soak.a2a." + std::to_string(variant), OpType::kAlltoall,
                          DataType::kFloat64, p.in.data(), {rows, 2});
    e.splits = splits;
    p.check = [s, rank, splits_of](Work& w, const std::vector<uint8_t>&) {
      std::vector<double> want;
      for (int src = 0; src < kRanks; ++src) {
        const auto sp = splits_of(src);
        const int64_t offset = std::accumulate(sp.begin(), sp.begin() + rank, int64_t{0});
        const auto all = Values(src, std::accumulate(sp.begin(), sp.end(), int64_t{0}) * 2, s);
        want.insert(want.end(), all.begin() + offset * 2, all.begin() + (offset + sp[rank]) * 2);
      }
      EXPECT_EQ(Decode(w.result(), DataType::kFloat64), want) << "alltoall step " << s;
    };
    enqueue(std::move(e), std::move(p));
  }
}

TEST(Soak, MixedCollectivesKeepMemoryFlat) {
  const int steps = Steps();
  std::atomic<int64_t> rss_warm{-1}, rss_end{-1};
  std::atomic<int64_t> cache_hits{0};
  const auto start = std::chrono::steady_clock::now();
  RunRanks(kRanks, [&](int rank, Runtime& rt) {
    std::vector<Pending> step;
    for (int s = 0; s < steps; ++s) {
      EnqueueStep(rt, rank, s, &step);
      if (::testing::Test::HasFatalFailure()) return;
      for (auto& p : step) {
        Status st = p.work->Wait(kWait);
        ASSERT_TRUE(st.ok()) << "step " << s << " tensor " << p.work->name() << ": " << st.ToString();
        p.check(*p.work, p.out.empty() ? p.in : p.out);
      }
      if (::testing::Test::HasFailure()) return;
      if (s % 100 == 99) {
        std::shared_ptr<Work> barrier;
        ASSERT_TRUE(rt.Barrier(0, &barrier).ok());
        ASSERT_TRUE(barrier->Wait(kWait).ok()) << "barrier at step " << s;
        if (rank == 0 && s + 1 == kWarmupSteps) rss_warm = ResidentBytes();
      }
    }
    std::shared_ptr<Work> barrier;
    ASSERT_TRUE(rt.Barrier(0, &barrier).ok());
    ASSERT_TRUE(barrier->Wait(kWait).ok());
    if (rank == 0) {
      rss_end = ResidentBytes();
      cache_hits = rt.NegotiationStats(0).cache_hits;
    }
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t growth = rss_end - rss_warm;
  std::printf("soak: %d steps in %.1f s; RSS after %d steps %.1f MiB, at the end %.1f MiB "
              "(growth %+.2f MiB); %lld cache hits on rank 0\n",
              steps, seconds, kWarmupSteps, rss_warm / 1048576.0, rss_end / 1048576.0,
              growth / 1048576.0, static_cast<long long>(cache_hits.load()));
  ::testing::Test::RecordProperty("seconds", std::to_string(seconds));
  ::testing::Test::RecordProperty("rss_growth_bytes", std::to_string(growth));
  EXPECT_GT(cache_hits.load(), steps) << "the response cache was not exercised";
  ASSERT_GT(rss_warm.load(), 0);
  ASSERT_GT(rss_end.load(), 0);
  if (kCheckMemory) {
    EXPECT_LT(growth, kMaxGrowthBytes) << "resident memory grew by " << growth << " bytes over "
                                       << steps - kWarmupSteps << " steps";
  }
}

}  // namespace
}  // namespace testing
}  // namespace hvd
