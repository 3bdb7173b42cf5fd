// HierarchyChoice and HierarchicalBackend's use of it: each size class
// alternates both paths for its first calls, then settles on the one whose median,
// summed over the ranks by the flat backend, is smaller; forced modes never measure.
#include "runtime/transport/hierarchy_choice.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/transport/hierarchical_backend.h"

namespace hvd {
namespace {

using Path = HierarchyChoice::Path;
using Mode = HierarchyChoice::Mode;

TEST(HierarchyChoice, SizeClassesAreFactorsOfFour) {
  EXPECT_EQ(HierarchyChoice::SizeClass(0), 0);
  EXPECT_EQ(HierarchyChoice::SizeClass(3), 0);
  EXPECT_EQ(HierarchyChoice::SizeClass(4), 1);
  EXPECT_EQ(HierarchyChoice::SizeClass(15), 1);
  EXPECT_EQ(HierarchyChoice::SizeClass(16), 2);
  EXPECT_EQ(HierarchyChoice::SizeClass(4 << 20), 11);
  EXPECT_EQ(HierarchyChoice::SizeClass((16 << 20) - 1), 11);
}

TEST(HierarchyChoice, AlternatesThenSettlesOnTheSmallerSum) {
  HierarchyChoice c;
  const int64_t bytes = 1 << 20;
  double local[2] = {0, 0};
  std::vector<Path> seen;
  for (int i = 0; i < 2 * HierarchyChoice::kSamples; ++i) {
    Path p = c.Next(bytes);
    seen.push_back(p);
    // Hierarchical takes 3 ms, flat 1 ms, except one slow flat outlier.
    const double t = p == Path::kHierarchical ? 3e-3 : (i == 1 ? 50e-3 : 1e-3);
    const bool last = c.Record(bytes, p, t, local);
    EXPECT_EQ(last, i == 2 * HierarchyChoice::kSamples - 1) << i;
  }
  for (size_t i = 0; i < seen.size(); ++i)
    EXPECT_EQ(seen[i], i % 2 ? Path::kFlat : Path::kHierarchical) << i;
  EXPECT_DOUBLE_EQ(local[0], 3e-3);  // medians: the outlier does not count
  EXPECT_DOUBLE_EQ(local[1], 1e-3);
  Path settled;
  EXPECT_FALSE(c.Settled(bytes, &settled));
  // The other ranks found hierarchical faster: the sums decide, not this rank.
  const double summed[2] = {local[0] + 1e-3, local[1] + 9e-3};
  EXPECT_EQ(c.Decide(bytes, summed), Path::kHierarchical);
  ASSERT_TRUE(c.Settled(bytes, &settled));
  EXPECT_EQ(settled, Path::kHierarchical);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(c.Next(bytes + i), Path::kHierarchical);
    EXPECT_FALSE(c.Record(bytes, Path::kHierarchical, 1.0, local));
  }
  // Another size class starts its own measurement.
  EXPECT_FALSE(c.Settled(64, &settled));
  EXPECT_EQ(c.Next(64), Path::kHierarchical);
  c.Record(64, Path::kHierarchical, 1e-6, local);
  EXPECT_EQ(c.Next(64), Path::kFlat);
}

TEST(HierarchyChoice, ANearTieStaysHierarchical) {
  double local[2];
  for (double flat_share : {0.97, 0.90}) {
    HierarchyChoice c;
    for (int i = 0; i < 2 * HierarchyChoice::kSamples; ++i) {
      const Path p = c.Next(4096);
      c.Record(4096, p, p == Path::kFlat ? flat_share : 1.0, local);
    }
    const Path want = flat_share > 1 - HierarchyChoice::kFlatMargin ? Path::kHierarchical
                                                                   : Path::kFlat;
    EXPECT_EQ(c.Decide(4096, local), want) << flat_share;
  }
}

TEST(HierarchyChoice, ForcedModesNeverMeasure) {
  for (Mode m : {Mode::kHierarchical, Mode::kFlat}) {
    HierarchyChoice c(m);
    const Path want = m == Mode::kFlat ? Path::kFlat : Path::kHierarchical;
    double local[2];
    for (int i = 0; i < 3 * HierarchyChoice::kSamples; ++i) {
      EXPECT_EQ(c.Next(4096), want);
      EXPECT_FALSE(c.Record(4096, want, 1e-3, local));
    }
    Path settled;
    ASSERT_TRUE(c.Settled(4096, &settled));
    EXPECT_EQ(settled, want);
  }
}

// A one-rank stand-in for each of the hierarchy's three backends: it counts its
// all-reduces, can sleep in them, and lets a test change what the sums come back as
// (as if other ranks had added their medians).
class FakeBackend : public Backend {
 public:
  const char* Name() const override { return "fake"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status Allreduce(void* buf, int64_t count, DataType dtype, ReduceOp) override {
    if (dtype == DataType::kFloat64 && count == 2) {
      ++agreements;
      if (others) others(static_cast<double*>(buf));
      return Status::OK();
    }
    ++allreduces;
    std::this_thread::sleep_for(delay);
    return Status::OK();
  }
  Status Allgatherv(const void* in, void* out, const std::vector<int64_t>& bytes) override {
    std::memmove(out, in, static_cast<size_t>(bytes[0]));
    return Status::OK();
  }
  Status Broadcast(void*, int64_t, int) override { return Status::OK(); }
  Status Alltoallv(const void*, const std::vector<int64_t>&, void*,
                   const std::vector<int64_t>&) override {
    return Status::OK();
  }
  Status ReduceScatter(void* buf, void* out, const std::vector<int64_t>& counts, DataType dtype,
                       ReduceOp) override {
    std::memmove(out, buf, static_cast<size_t>(counts[0]) * DataTypeSize(dtype));
    std::this_thread::sleep_for(delay);
    return Status::OK();
  }
  Status Barrier() override { return Status::OK(); }
  void Abort(const Status&) override {}
  bool SupportsPieces() const override { return pieces_supported; }
  Status AllreducePieces(const std::vector<AllreducePiece>& pieces, DataType dtype, ReduceOp,
                         const FinishFn& finish) override {
    ++piece_calls;
    for (const auto& p : pieces) {
      std::memmove(p.out, p.in, static_cast<size_t>(p.count) * DataTypeSize(dtype));
      if (finish) finish(p.out, p.count);
    }
    return Status::OK();
  }

  bool pieces_supported = false;
  int piece_calls = 0;
  int allreduces = 0, agreements = 0;
  std::chrono::milliseconds delay{0};
  std::function<void(double*)> others;
};

struct Hierarchy {
  explicit Hierarchy(Mode mode = Mode::kAuto) {
    auto l = std::make_unique<FakeBackend>();
    auto c = std::make_unique<FakeBackend>();
    auto f = std::make_unique<FakeBackend>();
    local = l.get(), cross = c.get(), flat = f.get();
    backend = std::make_unique<HierarchicalBackend>(std::move(l), std::move(c), std::move(f), mode);
  }
  Status Run(int64_t count) {
    std::vector<float> buf(static_cast<size_t>(count), 1.0f);
    return backend->Allreduce(buf.data(), count, DataType::kFloat32, ReduceOp::kSum);
  }
  FakeBackend *local, *cross, *flat;
  std::unique_ptr<HierarchicalBackend> backend;
};

TEST(HierarchicalBackendChoice, MeasuresBothThenRunsTheFasterOne) {
  Hierarchy h;
  h.local->delay = std::chrono::milliseconds(3);  // the hierarchical path is slower here
  const int n = HierarchyChoice::kSamples;
  for (int i = 0; i < 2 * n; ++i) ASSERT_TRUE(h.Run(1000).ok());
  EXPECT_EQ(h.cross->allreduces, n);
  EXPECT_EQ(h.flat->allreduces, n);
  EXPECT_EQ(h.flat->agreements, 1);
  Path p;
  ASSERT_TRUE(h.backend->choice().Settled(4000, &p));
  EXPECT_EQ(p, Path::kFlat);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(h.Run(1000).ok());
  EXPECT_EQ(h.cross->allreduces, n);  // no more hierarchical runs
  EXPECT_EQ(h.flat->allreduces, n + 4);
  EXPECT_EQ(h.flat->agreements, 1);
}

TEST(HierarchicalBackendChoice, TheRanksSumsDecide) {
  Hierarchy h;
  h.local->delay = std::chrono::milliseconds(2);  // locally, flat is faster...
  h.flat->others = [](double* sums) { sums[1] += 1.0; };  // ...but not on another rank
  for (int i = 0; i < 2 * HierarchyChoice::kSamples; ++i) ASSERT_TRUE(h.Run(1000).ok());
  Path p;
  ASSERT_TRUE(h.backend->choice().Settled(4000, &p));
  EXPECT_EQ(p, Path::kHierarchical);
}

TEST(HierarchicalBackendChoice, ForcedFlatNeverRunsTheHierarchy) {
  Hierarchy h(Mode::kFlat);
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(h.Run(1000).ok());
  EXPECT_EQ(h.cross->allreduces, 0);
  EXPECT_EQ(h.flat->allreduces, 12);
  EXPECT_EQ(h.flat->agreements, 0);
  Hierarchy forced(Mode::kHierarchical);
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(forced.Run(1000).ok());
  EXPECT_EQ(forced.cross->allreduces, 12);
  EXPECT_EQ(forced.flat->allreduces, 0);
}

// Pieces: on the flat path the flat backend's own piecewise all-reduce (no copies);
// on the hierarchical path packed into one buffer, and every piece written back and
// finished; a flat backend without pieces gets the packed buffer too.
TEST(HierarchicalBackendChoice, PiecesRunOnTheChosenPath) {
  for (Mode mode : {Mode::kFlat, Mode::kHierarchical}) {
    for (bool flat_has_pieces : {true, false}) {
      Hierarchy h(mode);
      h.flat->pieces_supported = flat_has_pieces;
      std::vector<float> a = {1, 2, 3}, b = {4, 5}, out(3, 0.0f);
      std::vector<AllreducePiece> pieces = {{a.data(), out.data(), 3}, {b.data(), b.data(), 2}};
      int64_t finished = 0;
      ASSERT_TRUE(h.backend
                      ->AllreducePieces(pieces, DataType::kFloat32, ReduceOp::kSum,
                                        [&](void*, int64_t n) { finished += n; })
                      .ok());
      EXPECT_EQ(out, (std::vector<float>{1, 2, 3}));
      EXPECT_EQ(b, (std::vector<float>{4, 5}));
      EXPECT_EQ(finished, 5);
      const bool flat = mode == Mode::kFlat;
      EXPECT_EQ(h.flat->piece_calls, flat && flat_has_pieces ? 1 : 0);
      EXPECT_EQ(h.flat->allreduces, flat && !flat_has_pieces ? 1 : 0);
      EXPECT_EQ(h.cross->allreduces, flat ? 0 : 1);
    }
  }
}

// Past two chunks the hierarchical path packs and unpacks chunk by chunk on the
// pipeline's thread: pieces that span chunks come back whole and finished once.
TEST(HierarchicalBackendChoice, ChunkedPiecesComeBackWhole) {
  Hierarchy h(Mode::kHierarchical);
  const int64_t chunk = HierarchicalBackend::kPipelineChunk / 4;
  const std::vector<int64_t> counts = {5, chunk - 3, 2 * chunk + 7, 0, 11, chunk / 2};
  std::vector<std::vector<float>> ins, outs;
  std::vector<AllreducePiece> pieces;
  float v = 0;
  for (int64_t n : counts) {
    ins.emplace_back(n);
    for (auto& x : ins.back()) x = v++;
    outs.emplace_back(n, -1.0f);
  }
  for (size_t i = 0; i < counts.size(); ++i)
    pieces.push_back({ins[i].data(), outs[i].data(), counts[i]});
  int64_t finished = 0, total = 0;
  for (int64_t n : counts) total += n;
  ASSERT_TRUE(h.backend
                  ->AllreducePieces(pieces, DataType::kFloat32, ReduceOp::kSum,
                                    [&](void*, int64_t n) { finished += n; })
                  .ok());
  EXPECT_EQ(finished, total);
  EXPECT_GT(h.cross->allreduces, 2);  // chunk by chunk
  for (size_t i = 0; i < counts.size(); ++i) EXPECT_EQ(outs[i], ins[i]) << "piece " << i;
}

}  // namespace
}  // namespace hvd
