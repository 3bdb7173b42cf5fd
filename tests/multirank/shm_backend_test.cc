// ShmBackend across N ranks as N threads over one in-memory store (and, where a
// real second process matters, a forked child over a TcpStore): every collective
// against a local reference for several dtypes and ops, element counts 0, 1, odd
// and larger than a staging slot (so rounds pipeline), in place; identical bytes on
// every rank; several communicators at once; a peer that never arrives or stops
// answering; a peer process that dies mid-collective.
//
// Timings: ShmTiming.DISABLED_TwoProcessesVersusGloo (run with
// --gtest_also_run_disabled_tests --gtest_filter='ShmTiming.*').
#include "runtime/transport/shm/shm_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <dirent.h>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include "runtime/kernels/reduce_kernels.h"
#include "runtime/store/store.h"
#include "runtime/transport/gloo/gloo_backend.h"
#include "tests/multirank/fork_rank.h"
#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;

const DataType kTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                           DataType::kBFloat16, DataType::kInt8,   DataType::kUInt8,
                           DataType::kInt32,   DataType::kInt64,  DataType::kInt16};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                         ReduceOp::kProduct};
// 4 KiB of staging per rank: two 2 KiB slots, so most buffers below take several rounds.
constexpr size_t kSmallSegment = 4096;
constexpr size_t kSmallSlot = kSmallSegment / 2;

std::string Prefix(const std::string& name) {
  return "hvdtest-" + std::to_string(getpid()) + "-" + name;
}

ShmOptions Options(std::shared_ptr<Store> store, const std::string& prefix, int rank, int size,
                   size_t segment_bytes = kSmallSegment, milliseconds timeout = milliseconds(10000)) {
  ShmOptions o;
  o.store = std::move(store);
  o.name_prefix = prefix;
  o.rank = rank;
  o.size = size;
  o.timeout = timeout;
  o.segment_bytes = segment_bytes;
  return o;
}

// Runs fn(rank, backend) on `size` threads, each with its own ShmBackend.
void RunShm(int size, const std::function<void(int, Backend&)>& fn,
            size_t segment_bytes = kSmallSegment) {
  auto store = NewInMemoryStore();
  const std::string prefix = Prefix("run");
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Backend> b;
      const Status s = CreateShmBackend(Options(store, prefix, r, size, segment_bytes), &b);
      if (!s.ok()) {
        ADD_FAILURE() << "rank " << r << ": " << s.ToString();
        return;
      }
      EXPECT_STREQ(b->Name(), "shm");
      EXPECT_EQ(b->rank(), r);
      EXPECT_EQ(b->size(), size);
      fn(r, *b);
    });
  }
  for (auto& t : threads) t.join();
}

uint8_t Pattern(int a, int b, int64_t i, uint32_t seed) {
  return static_cast<uint8_t>(a * 131 + b * 29 + i * 7 + seed * 13 + (i >> 8));
}

std::vector<uint8_t> Input(int rank, int64_t count, DataType t, uint32_t seed) {
  return RankInput(rank, count, t, seed);
}

std::vector<uint8_t> ReduceReference(int size, int64_t count, DataType t, ReduceOp op,
                                     uint32_t seed) {
  return RankOrderReduction(size, count, t, op, seed);
}

// Each Check* runs one collective on every rank and returns "" or what went wrong.
std::string Describe(const char* what, DataType t, ReduceOp op, int64_t n) {
  std::ostringstream s;
  s << what << " " << DataTypeName(t) << " " << ReduceOpName(op) << " n=" << n;
  return s.str();
}

std::string CheckAllreduce(Backend& b, DataType t, ReduceOp op, int64_t count, uint32_t seed) {
  auto buf = Input(b.rank(), count, t, seed);
  const Status s = b.Allreduce(buf.data(), count, t, op);
  if (!s.ok()) return Describe("allreduce", t, op, count) + ": " + s.ToString();
  if (buf != ReduceReference(b.size(), count, t, op, seed))
    return Describe("allreduce", t, op, count) + ": wrong result";
  return "";
}

std::string CheckAllgather(Backend& b, const std::vector<int64_t>& bytes, uint32_t seed,
                           bool in_place) {
  const int me = b.rank();
  std::vector<uint8_t> expect;
  int64_t my_offset = 0;
  for (int r = 0; r < b.size(); ++r) {
    if (r == me) my_offset = static_cast<int64_t>(expect.size());
    for (int64_t i = 0; i < bytes[r]; ++i) expect.push_back(Pattern(r, 0, i, seed));
  }
  std::vector<uint8_t> in(expect.begin() + my_offset, expect.begin() + my_offset + bytes[me]);
  std::vector<uint8_t> out(expect.size(), 0xee);
  const void* src = in.data();
  if (in_place) {
    std::copy(in.begin(), in.end(), out.begin() + my_offset);
    src = out.data() + my_offset;
  }
  const Status s = b.Allgatherv(src, out.data(), bytes);
  if (!s.ok()) return "allgather: " + s.ToString();
  if (out != expect) return "allgather: wrong result (seed " + std::to_string(seed) + ")";
  return "";
}

std::string CheckBroadcast(Backend& b, int64_t bytes, int root, uint32_t seed) {
  std::vector<uint8_t> buf(bytes), expect(bytes);
  for (int64_t i = 0; i < bytes; ++i) {
    expect[i] = Pattern(root, 1, i, seed);
    buf[i] = b.rank() == root ? expect[i] : 0xee;
  }
  const Status s = b.Broadcast(buf.data(), bytes, root);
  if (!s.ok()) return "broadcast: " + s.ToString();
  if (buf != expect) return "broadcast of " + std::to_string(bytes) + " bytes from " +
                            std::to_string(root) + ": wrong result";
  return "";
}

// Rank s sends Block(s, d, seed) bytes to rank d.
int64_t Block(int s, int d, uint32_t seed, int64_t big) {
  const int64_t v = ((s * 5 + d * 3 + static_cast<int>(seed)) % 7) * 173;
  return (s + d + seed) % 5 == 0 ? v + big : v;
}

std::string CheckAlltoall(Backend& b, uint32_t seed, int64_t big) {
  const int n = b.size(), me = b.rank();
  std::vector<int64_t> send(n), recv(n);
  std::vector<uint8_t> in, expect;
  for (int d = 0; d < n; ++d) {
    send[d] = Block(me, d, seed, big);
    for (int64_t i = 0; i < send[d]; ++i) in.push_back(Pattern(me, d, i, seed));
  }
  for (int s = 0; s < n; ++s) {
    recv[s] = Block(s, me, seed, big);
    for (int64_t i = 0; i < recv[s]; ++i) expect.push_back(Pattern(s, me, i, seed));
  }
  std::vector<uint8_t> out(expect.size(), 0xee);
  const Status s = b.Alltoallv(in.data(), send, out.data(), recv);
  if (!s.ok()) return "alltoall: " + s.ToString();
  if (out != expect) return "alltoall: wrong result (seed " + std::to_string(seed) + ")";
  return "";
}

std::string CheckReduceScatter(Backend& b, DataType t, ReduceOp op,
                               const std::vector<int64_t>& counts, uint32_t seed, bool in_place) {
  const int me = b.rank();
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  const int64_t before = std::accumulate(counts.begin(), counts.begin() + me, int64_t{0});
  const size_t elem = DataTypeSize(t);
  auto buf = Input(me, total, t, seed);
  const auto full = ReduceReference(b.size(), total, t, op, seed);
  const std::vector<uint8_t> expect(full.begin() + before * elem,
                                    full.begin() + (before + counts[me]) * elem);
  std::vector<uint8_t> out(counts[me] * elem, 0xee);
  void* dst = in_place ? buf.data() : out.data();
  const Status s = b.ReduceScatter(buf.data(), dst, counts, t, op);
  if (!s.ok()) return Describe("reducescatter", t, op, total) + ": " + s.ToString();
  const std::vector<uint8_t> got(static_cast<uint8_t*>(dst),
                                 static_cast<uint8_t*>(dst) + counts[me] * elem);
  if (got != expect) return Describe("reducescatter", t, op, total) + ": wrong result";
  return "";
}

class ShmBackendTest : public ::testing::TestWithParam<int> {};

TEST_P(ShmBackendTest, AllreduceEveryDtypeOpAndSize) {
  const int size = GetParam();
  RunShm(size, [&](int rank, Backend& b) {
    uint32_t seed = 1;
    for (DataType t : kTypes) {
      const int64_t big = 3 * kSmallSlot / DataTypeSize(t) + 5;
      for (ReduceOp op : kOps)
        for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1001}, big})
          EXPECT_EQ(CheckAllreduce(b, t, op, count, seed++), "") << "rank " << rank;
    }
  });
}

// Sums of small integers are exact, so a plain double reference must agree too (the
// other tests compare against the kernels themselves).
TEST_P(ShmBackendTest, AllreduceSumMatchesAnIndependentReference) {
  const int size = GetParam();
  RunShm(size, [&](int rank, Backend& b) {
    for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                       DataType::kInt64, DataType::kFloat16}) {
      const int64_t count = 2500;
      auto buf = Input(rank, count, t, 77);
      ASSERT_TRUE(b.Allreduce(buf.data(), count, t, ReduceOp::kSum).ok());
      std::vector<double> want(count, 0.0);
      for (int r = 0; r < size; ++r) {
        const auto v = RankData(r, count, 77);
        for (int64_t i = 0; i < count; ++i) want[i] += v[i];
      }
      EXPECT_EQ(Decode(buf, t), want) << DataTypeName(t);
    }
  });
}

TEST_P(ShmBackendTest, AllgathervUnevenAndInPlace) {
  const int size = GetParam();
  RunShm(size, [&](int rank, Backend& b) {
    for (uint32_t seed = 0; seed < 6; ++seed) {
      std::vector<int64_t> bytes(size);
      for (int r = 0; r < size; ++r)
        bytes[r] = r == 1 ? 0 : (r * 1237 + seed * 31) % 5000 + (seed == 3 ? 3 * kSmallSlot : 0);
      EXPECT_EQ(CheckAllgather(b, bytes, seed, /*in_place=*/seed % 2 == 1), "") << "rank " << rank;
    }
    EXPECT_EQ(CheckAllgather(b, std::vector<int64_t>(size, 0), 9, false), "");
    EXPECT_EQ(CheckAllgather(b, std::vector<int64_t>(size, 1), 10, false), "");
  });
}

TEST_P(ShmBackendTest, BroadcastFromEveryRoot) {
  const int size = GetParam();
  RunShm(size, [&](int rank, Backend& b) {
    uint32_t seed = 0;
    for (int root = 0; root < size; ++root)
      for (int64_t bytes : {int64_t{0}, int64_t{1}, int64_t{999}, int64_t(3 * kSmallSlot + 17)})
        EXPECT_EQ(CheckBroadcast(b, bytes, root, seed++), "") << "rank " << rank;
  });
}

TEST_P(ShmBackendTest, AlltoallvUnevenWithEmptyBlocks) {
  const int size = GetParam();
  RunShm(size, [&](int rank, Backend& b) {
    for (uint32_t seed = 0; seed < 6; ++seed)
      EXPECT_EQ(CheckAlltoall(b, seed, seed % 3 == 0 ? 3 * kSmallSlot : 0), "") << "rank " << rank;
  });
}

TEST_P(ShmBackendTest, ReduceScatterUnevenBlocks) {
  const int size = GetParam();
  RunShm(size, [&](int rank, Backend& b) {
    uint32_t seed = 0;
    for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt32, DataType::kInt64,
                       DataType::kUInt8}) {
      for (ReduceOp op : kOps) {
        ++seed;
        std::vector<int64_t> counts(size);
        for (int r = 0; r < size; ++r)
          counts[r] = (r * 13 + 5 * seed) % 40 + (r == static_cast<int>(seed % size) ? 3 * kSmallSlot / DataTypeSize(t) : 0);
        if (size > 1) counts[1] = 0;
        EXPECT_EQ(CheckReduceScatter(b, t, op, counts, seed, /*in_place=*/seed % 2 == 0), "")
            << "rank " << rank;
      }
    }
    EXPECT_EQ(CheckReduceScatter(b, DataType::kFloat32, ReduceOp::kSum,
                                 std::vector<int64_t>(size, 0), 99, false), "");
  });
}

TEST_P(ShmBackendTest, BarrierSeparatesPhases) {
  const int size = GetParam();
  std::atomic<int> arrived{0};
  RunShm(size, [&](int rank, Backend& b) {
    for (int iter = 1; iter <= 30; ++iter) {
      arrived.fetch_add(1);
      ASSERT_TRUE(b.Barrier().ok());
      EXPECT_EQ(arrived.load(), size * iter) << "rank " << rank << " iteration " << iter;
      ASSERT_TRUE(b.Barrier().ok());
    }
  });
}

// A long random sequence of every collective (the same on every rank), so rounds of
// different kinds follow each other through the same slots.
TEST_P(ShmBackendTest, MixedSequenceOfEveryCollective) {
  const int size = GetParam();
  RunShm(size, [&](int rank, Backend& b) {
    std::mt19937 gen(1234);
    for (uint32_t i = 0; i < 150; ++i) {
      const DataType t = kTypes[gen() % 8];
      const ReduceOp op = kOps[gen() % 5];
      const int64_t count = gen() % 3 == 0 ? gen() % 3000 : gen() % 20;
      std::vector<int64_t> parts(size);
      for (auto& p : parts) p = gen() % 2 == 0 ? gen() % 1500 : 0;
      const int root = gen() % size;
      std::string err;
      switch (gen() % 6) {
        case 0: err = CheckAllreduce(b, t, op, count, i); break;
        case 1: err = CheckAllgather(b, parts, i, false); break;
        case 2: err = CheckBroadcast(b, count, root, i); break;
        case 3: err = CheckAlltoall(b, i, gen() % 2 ? 700 : 0); break;
        case 4: err = CheckReduceScatter(b, t, op, parts, i, false); break;
        case 5: err = b.Barrier().ok() ? "" : "barrier failed"; break;
      }
      ASSERT_EQ(err, "") << "rank " << rank << " step " << i;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmBackendTest, ::testing::Range(1, 9),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// Random floats: the order of additions matters, yet every rank must end with the
// same bytes (and those of the rank-order reference).
// Tensors reduced piecewise (straight from inputs to outputs, no fusion buffer):
// the same bytes as one fused buffer, each output stretch finished exactly once
// (the finish below doubles, so a stretch finished twice or never shows), empty
// pieces, in-place pieces and pieces spanning rounds.
TEST_P(ShmBackendTest, AllreducePiecesEqualOneFusedBuffer) {
  const int size = GetParam();
  RunShm(size, [&](int rank, Backend& b) {
    ASSERT_TRUE(b.SupportsPieces());
    uint32_t seed = 500;
    for (DataType t : {DataType::kFloat32, DataType::kInt32, DataType::kFloat16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        const size_t elem = DataTypeSize(t);
        const int64_t slot = kSmallSlot / elem;
        const std::vector<int64_t> counts = {0, 5, 0, 3 * slot + 7, 1, slot, 64, 0, 2};
        std::vector<std::vector<uint8_t>> ins, outs;
        std::vector<uint8_t> fused;
        for (size_t i = 0; i < counts.size(); ++i) {
          ins.push_back(Input(rank, counts[i], t, seed++));
          outs.emplace_back(ins.back().size(), 0xee);
          fused.insert(fused.end(), ins.back().begin(), ins.back().end());
        }
        std::vector<AllreducePiece> pieces;
        for (size_t i = 0; i < counts.size(); ++i)  // every other piece in place
          pieces.push_back({ins[i].data(), i % 2 ? ins[i].data() : outs[i].data(), counts[i]});
        int64_t finished = 0;
        Status s = b.AllreducePieces(pieces, t, op, [&](void* out, int64_t n) {
          ScaledCopy(t, out, out, n, 2.0);
          finished += n;
        });
        ASSERT_TRUE(s.ok()) << s.ToString();
        ASSERT_TRUE(b.Allreduce(fused.data(), static_cast<int64_t>(fused.size() / elem), t, op).ok());
        ScaledCopy(t, fused.data(), fused.data(), fused.size() / elem, 2.0);
        EXPECT_EQ(finished, static_cast<int64_t>(fused.size() / elem));
        size_t at = 0;
        for (size_t i = 0; i < counts.size(); ++i) {
          const auto& got = i % 2 ? ins[i] : outs[i];
          EXPECT_TRUE(std::equal(got.begin(), got.end(), fused.begin() + at))
              << "rank " << rank << " " << DataTypeName(t) << " " << ReduceOpName(op) << " piece "
              << i;
          at += got.size();
        }
      }
    }
  });
}

TEST(ShmBackend, ResultsAreBitwiseIdenticalOnEveryRank) {
  for (int size : {3, 5, 8}) {
    const int64_t count = 20000;
    std::vector<std::vector<float>> results(size);
    RunShm(size, [&](int rank, Backend& b) {
      std::mt19937 gen(rank + 1);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      std::vector<float> buf(count);
      for (auto& x : buf) x = dist(gen);
      ASSERT_TRUE(b.Allreduce(buf.data(), count, DataType::kFloat32, ReduceOp::kSum).ok());
      results[rank] = buf;
    });
    std::vector<float> ref(count, 0.0f);
    for (int r = 0; r < size; ++r) {
      std::mt19937 gen(r + 1);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (int64_t i = 0; i < count; ++i) {
        const float x = dist(gen);
        ref[i] = r == 0 ? x : ref[i] + x;
      }
    }
    for (int r = 0; r < size; ++r) {
      ASSERT_EQ(results[r].size(), size_t(count));
      EXPECT_EQ(std::memcmp(results[r].data(), results[0].data(), count * 4), 0) << "rank " << r;
      EXPECT_EQ(std::memcmp(results[r].data(), ref.data(), count * 4), 0) << "rank " << r;
    }
  }
}

// The default 4 MiB staging (four 1 MiB slots) with buffers of several MiB.
TEST(ShmBackend, DefaultSegmentPipelinesLargeBuffers) {
  for (int size : {2, 4}) {
    RunShm(size, [&](int rank, Backend& b) {
      EXPECT_EQ(CheckAllreduce(b, DataType::kFloat32, ReduceOp::kSum, (1 << 20) + 7, 5), "");
      EXPECT_EQ(CheckAllreduce(b, DataType::kFloat16, ReduceOp::kMax, (1 << 19) + 3, 6), "");
      std::vector<int64_t> bytes(size, (2 << 20) + 5);
      bytes[0] = 1;
      EXPECT_EQ(CheckAllgather(b, bytes, 7, false), "");
      EXPECT_EQ(CheckBroadcast(b, (5 << 20) + 3, size - 1, 8), "");
      EXPECT_EQ(CheckAlltoall(b, 0, (1 << 20) + 100), "");
      EXPECT_EQ(CheckReduceScatter(b, DataType::kInt32, ReduceOp::kSum,
                                   std::vector<int64_t>(size, (1 << 18) + 1), 9, false), "");
    }, ShmOptions().segment_bytes);
  }
}

// Each rank in two communicators at once (all four ranks; and its pair), plus a
// second, independent job of three ranks running at the same time.
TEST(ShmBackend, SeveralCommunicatorsConcurrently) {
  auto world_store = NewInMemoryStore();
  auto pair_store = NewInMemoryStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Backend> world, pair;
      ASSERT_TRUE(CreateShmBackend(Options(world_store, Prefix("world"), r, 4), &world).ok());
      auto scoped = NewPrefixStore(pair_store, "pair" + std::to_string(r / 2) + "/");
      ASSERT_TRUE(CreateShmBackend(
          Options(scoped, Prefix("pair" + std::to_string(r / 2)), r % 2, 2), &pair).ok());
      for (uint32_t i = 0; i < 20; ++i) {
        EXPECT_EQ(CheckAllreduce(*world, DataType::kFloat32, ReduceOp::kSum, 3000, i), "");
        EXPECT_EQ(CheckAllreduce(*pair, DataType::kInt64, ReduceOp::kMax, 1500, i + 100), "");
        EXPECT_EQ(CheckBroadcast(*pair, 5000, static_cast<int>(i % 2), i), "");
        EXPECT_EQ(CheckAlltoall(*world, i, 0), "");
      }
    });
  }
  threads.emplace_back([] {
    RunShm(3, [](int, Backend& b) {
      for (uint32_t i = 0; i < 20; ++i)
        EXPECT_EQ(CheckAllreduce(b, DataType::kFloat64, ReduceOp::kSum, 2000, i), "");
    });
  });
  for (auto& t : threads) t.join();
}

bool SegmentsLeft(const std::string& prefix) {
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return false;
  bool found = false;
  while (dirent* e = readdir(d))
    if (std::string(e->d_name).find(prefix) != std::string::npos) found = true;
  closedir(d);
  return found;
}

TEST(ShmBackend, NothingLeftInDevShmOnceEveryRankMapped) {
  const std::string prefix = Prefix("leak");
  auto store = NewInMemoryStore();
  std::vector<std::unique_ptr<Backend>> backends(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      ASSERT_TRUE(CreateShmBackend(Options(store, prefix, r, 3), &backends[r]).ok());
    });
  for (auto& t : threads) t.join();
  EXPECT_FALSE(SegmentsLeft(prefix));
}

TEST(ShmBackend, RejectsBadOptions) {
  std::unique_ptr<Backend> b;
  auto store = NewInMemoryStore();
  EXPECT_EQ(CreateShmBackend(Options(store, Prefix("bad"), 2, 2), &b).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateShmBackend(Options(store, Prefix("bad"), 0, 2, 100), &b).code(),
            StatusCode::kInvalidArgument);
}

TEST(ShmBackend, PeerThatNeverArrivesTimesOut) {
  const std::string prefix = Prefix("absent");
  std::unique_ptr<Backend> b;
  const auto start = std::chrono::steady_clock::now();
  const Status s = CreateShmBackend(
      Options(NewInMemoryStore(), prefix, 0, 3, kSmallSegment, milliseconds(300)), &b);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("rank(s) 1, 2"));
  EXPECT_GE(took, milliseconds(280));
  EXPECT_LT(took, milliseconds(2000));
  EXPECT_FALSE(SegmentsLeft(prefix));
  // A rank other than 0 waits for rank 0 to publish the segment.
  const Status s1 = CreateShmBackend(
      Options(NewInMemoryStore(), prefix, 1, 2, kSmallSegment, milliseconds(200)), &b);
  EXPECT_EQ(s1.code(), StatusCode::kTimeout) << s1.ToString();
  EXPECT_THAT(s1.message(), HasSubstr("rank 0"));
}

// Rank 1 arrives but never joins the all-reduce: rank 0 times out naming it, and
// stays broken with the same status.
TEST(ShmBackend, SilentPeerTimesOutAndBreaksTheBackend) {
  auto store = NewInMemoryStore();
  std::atomic<bool> done{false};
  std::thread peer([&] {
    std::unique_ptr<Backend> b;
    ASSERT_TRUE(CreateShmBackend(Options(store, Prefix("silent"), 1, 2), &b).ok());
    while (!done.load()) std::this_thread::sleep_for(milliseconds(5));
  });
  std::unique_ptr<Backend> b;
  ASSERT_TRUE(CreateShmBackend(
      Options(store, Prefix("silent"), 0, 2, kSmallSegment, milliseconds(300)), &b).ok());
  std::vector<float> buf(100, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  const Status s = b->Allreduce(buf.data(), 100, DataType::kFloat32, ReduceOp::kSum);
  const auto took = std::chrono::steady_clock::now() - start;
  done = true;
  peer.join();
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("waiting for rank 1"));
  EXPECT_THAT(s.message(), HasSubstr("shm allreduce"));
  EXPECT_GE(took, milliseconds(280));
  EXPECT_LT(took, milliseconds(2000));
  const Status again = b->Barrier();
  EXPECT_EQ(again.code(), s.code());
  EXPECT_EQ(again.message(), s.message());
}

// Rank 2 never joins. Rank 0 (short timeout) gives up first; rank 1 (long timeout)
// learns it from rank 0 at once instead of waiting out its own 20 s.
TEST(ShmBackend, FirstFailureReachesThePeersAtOnce) {
  auto store = NewInMemoryStore();
  std::atomic<bool> done{false};
  Status s0, s1;
  milliseconds took1{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      const milliseconds timeout(r == 0 ? 300 : 20000);
      std::unique_ptr<Backend> b;
      ASSERT_TRUE(CreateShmBackend(
          Options(store, Prefix("first"), r, 3, kSmallSegment, timeout), &b).ok());
      if (r == 2) {
        while (!done.load()) std::this_thread::sleep_for(milliseconds(5));
        return;
      }
      std::vector<int32_t> buf(5000, r);
      const auto start = std::chrono::steady_clock::now();
      const Status s = b->Allreduce(buf.data(), 5000, DataType::kInt32, ReduceOp::kSum);
      (r == 0 ? s0 : s1) = s;
      if (r == 1)
        took1 = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    });
  }
  threads[0].join();
  threads[1].join();
  done = true;
  threads[2].join();
  EXPECT_EQ(s0.code(), StatusCode::kTimeout) << s0.ToString();
  EXPECT_THAT(s0.message(), HasSubstr("waiting for rank 2"));
  EXPECT_EQ(s1.code(), StatusCode::kTimeout) << s1.ToString();
  EXPECT_THAT(s1.message(), HasSubstr("rank 0 failed first"));
  EXPECT_THAT(s1.message(), HasSubstr("waiting for rank 2"));
  EXPECT_LT(took1, milliseconds(2000));
}

// ------------------------------------------------------------ two processes

// Both ranks run the same checks; the child reports failures through its exit code.
TEST(ShmBackendProcesses, TwoProcessesAgree) {
  const std::string prefix = Prefix("procs");
  auto body = [prefix](const std::shared_ptr<Store>& store, int rank) -> std::string {
    std::unique_ptr<Backend> b;
    Status s = CreateShmBackend(Options(store, prefix, rank, 2), &b);
    if (!s.ok()) return s.ToString();
    for (uint32_t i = 0; i < 10; ++i) {
      for (const std::string& err :
           {CheckAllreduce(*b, DataType::kFloat32, ReduceOp::kSum, 5000 + i, i),
            CheckAllreduce(*b, DataType::kBFloat16, ReduceOp::kMin, 3001, i),
            CheckAllgather(*b, {1000 + i, 4000}, i, i % 2 == 0), CheckBroadcast(*b, 7000, i % 2, i),
            CheckAlltoall(*b, i, 3000),
            CheckReduceScatter(*b, DataType::kInt64, ReduceOp::kProduct, {900, 1300}, i, false)})
        if (!err.empty()) return err;
    }
    return "";
  };
  ExpectTwoRanksPass(body, milliseconds(20000));
  EXPECT_FALSE(SegmentsLeft(prefix));
}

// The child all-reduces in a loop on a second thread and _exits while a collective is
// in flight; the parent must fail within a couple of seconds, naming rank 1 and its pid
// (the child is an unreaped zombie meanwhile: that must count as dead).
void ExpectLostPeer(bool kill_from_parent) {
  const std::string prefix = Prefix(kill_from_parent ? "killed" : "exits");
  ForkedRank child = ForkRank([&](std::shared_ptr<Store> store) {
    std::unique_ptr<Backend> b;
    if (!CreateShmBackend(Options(store, prefix, 1, 2), &b).ok()) return 3;
    std::thread loop([&] {
      std::vector<float> buf(1 << 18, 1.0f);
      while (b->Allreduce(buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum).ok()) {
      }
    });
    std::this_thread::sleep_for(milliseconds(kill_from_parent ? 60000 : 100));
    _exit(7);
  });
  ASSERT_GT(child.pid, 0);
  ASSERT_TRUE(child.store);
  std::unique_ptr<Backend> b;
  ASSERT_TRUE(CreateShmBackend(Options(child.store, prefix, 0, 2), &b).ok());
  std::thread killer;
  std::atomic<int64_t> killed_at{0};
  if (kill_from_parent) {
    killer = std::thread([&] {
      std::this_thread::sleep_for(milliseconds(100));
      killed_at = std::chrono::steady_clock::now().time_since_epoch().count();
      kill(child.pid, SIGKILL);
    });
  }
  std::vector<float> buf(1 << 18, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  Status s;
  while (s.ok() && std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
    s = b->Allreduce(buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
  const auto failed = std::chrono::steady_clock::now();
  if (killer.joinable()) killer.join();
  EXPECT_EQ(s.code(), StatusCode::kRemoteError) << s.ToString();
  EXPECT_THAT(s.message(),
              HasSubstr("lost rank 1 (pid " + std::to_string(child.pid) + " exited)"));
  EXPECT_LT(failed - start, std::chrono::seconds(3));
  if (kill_from_parent) {
    EXPECT_LT(failed.time_since_epoch().count() - killed_at.load(),
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::seconds(2)).count());
  }
  EXPECT_EQ(WaitChild(child.pid, milliseconds(5000)), kill_from_parent ? 128 + SIGKILL : 7);
}

TEST(ShmBackendProcesses, PeerThatExitsMidCollectiveIsNamed) { ExpectLostPeer(false); }
TEST(ShmBackendProcesses, PeerKilledMidCollectiveIsNamed) { ExpectLostPeer(true); }

// ------------------------------------------------------------ timings (by hand)

double MedianMs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Two processes all-reduce float32 buffers through ShmBackend and through
// GlooBackend (loopback TCP, the same buffers, the same run); rank 0 prints medians.
TEST(ShmTiming, DISABLED_TwoProcessesVersusGloo) {
  const std::string prefix = Prefix("timing");
  const std::vector<std::pair<const char*, int64_t>> sizes = {
      {"4 KiB", 4 << 10}, {"1 MiB", 1 << 20}, {"97.5 MiB", int64_t(97.5 * (1 << 20))},
      {"256 MiB", int64_t(256) << 20}};
  auto body = [&](const std::shared_ptr<Store>& store, int rank) -> std::string {
    std::unique_ptr<Backend> shm;
    Status s = CreateShmBackend(Options(NewPrefixStore(store, "shm/"), prefix, rank, 2,
                                        ShmOptions().segment_bytes, milliseconds(60000)), &shm);
    if (!s.ok()) return s.ToString();
    std::shared_ptr<gloo::transport::Device> dev;
    std::shared_ptr<gloo::Context> ctx;
    if (!(s = CreateGlooDevice("127.0.0.1", "", &dev)).ok()) return s.ToString();
    if (!(s = ConnectGlooContext(NewPrefixStore(store, "gloo/"), dev, rank, 2,
                                 milliseconds(60000), &ctx)).ok())
      return s.ToString();
    GlooBackend gloo(ctx);
    for (const auto& [label, bytes] : sizes) {
      const int64_t count = bytes / 4;
      std::vector<float> buf(count, 1.0f);
      const int iters = bytes <= (1 << 20) ? 2000 : bytes < (200 << 20) ? 20 : 8;
      for (Backend* be : {static_cast<Backend*>(shm.get()), static_cast<Backend*>(&gloo)}) {
        std::vector<double> ms;
        for (int i = 0; i < iters + 2; ++i) {
          if (!(s = be->Barrier()).ok()) return s.ToString();
          const auto t0 = std::chrono::steady_clock::now();
          s = be->Allreduce(buf.data(), count, DataType::kFloat32, ReduceOp::kSum);
          const auto t1 = std::chrono::steady_clock::now();
          if (!s.ok()) return s.ToString();
          if (i >= 2) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
        if (rank == 0)
          std::printf("allreduce %-9s %-5s median %9.3f ms  min %9.3f ms  (%d iters)\n", label,
                      be->Name(), MedianMs(ms), *std::min_element(ms.begin(), ms.end()), iters);
      }
    }
    return "";
  };
  ExpectTwoRanksPass(body, milliseconds(600000));
}

}  // namespace
}  // namespace testing
}  // namespace hvd
