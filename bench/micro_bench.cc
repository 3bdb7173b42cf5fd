// micro_bench: Google Benchmark timings of the pure parts of dprun, no network.
//
//   BM_Negotiate/T/R        the coordinator's bookkeeping for one cycle in which
//                           each of R ranks submits the same T allreduce requests:
//                           MessageTable::Add for every (rank, request), TakeReady,
//                           BuildResponse per ready tensor, PlanFusion.
//   BM_NegotiateCached/T/R  the same cycle on the response cache's fast path, as
//                           ResponseCache's API allows it to be modelled: Lookup of
//                           every request on every rank into a bit vector, the AND
//                           of the R vectors, each hit's cached response, PlanFusion.
//   BM_ControllerCycle/T/R/C  one full Controller::Cycle on rank 0 (serialize,
//                           gather, coordinate, broadcast, parse, apply) over an
//                           in-process ControlChannel; R = 1 is a loopback, R = 2
//                           has a second thread running rank 1's Controller in
//                           lockstep (so thread hand-off is in the time). C = 1
//                           enables the response cache (capacity 1024); three
//                           untimed cycles first put it in its steady state.
//                           Rank 0 records arrivals in a StragglerTracker, as
//                           the runtime's coordinator always does.
//   BM_PlanFusion/W         the fusion planner alone over W's single-tensor
//                           responses: 0 = ResNet-50's 161 tensors, 1 = 1000 x 4 KiB.
//   BM_Reduce/D/O           one reduction kernel, dst = op(a, b), on 1 MiB of each
//                           operand; bytes/s counts the 1 MiB of output per call.
// Items/s for the negotiation benchmarks counts tensors.
#include <benchmark/benchmark.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/workloads.h"
#include "controller/controller.h"
#include "controller/fusion_planner.h"
#include "controller/messages.pb.h"
#include "controller/negotiation.h"
#include "controller/response_cache.h"
#include "controller/straggler.h"
#include "runtime/common/control_channel.h"
#include "runtime/common/types.h"
#include "runtime/kernels/reduce_kernels.h"

namespace hvd {
namespace {

constexpr int64_t kThreshold = 128 << 20;

proto::Request MakeRequest(int rank, const std::string& name, int64_t count) {
  proto::Request r;
  r.set_request_rank(rank);
  r.set_type(proto::ALLREDUCE);
  r.set_name(name);
  r.set_dtype(static_cast<int>(DataType::kFloat32));
  r.set_reduce_op(static_cast<int>(ReduceOp::kSum));
  r.add_shape(count);
  r.set_prescale_factor(1.0);
  r.set_postscale_factor(1.0);
  r.set_device(-1);
  return r;
}

// T tensors of 1024 floats (4 KiB) for rank `rank`.
std::vector<proto::Request> Requests(int rank, int tensors) {
  std::vector<proto::Request> out;
  for (int i = 0; i < tensors; ++i) out.push_back(MakeRequest(rank, "t" + std::to_string(i), 1024));
  return out;
}

void BM_Negotiate(benchmark::State& state) {
  const int tensors = static_cast<int>(state.range(0));
  const int ranks = static_cast<int>(state.range(1));
  std::vector<std::vector<proto::Request>> reqs;
  for (int r = 0; r < ranks; ++r) reqs.push_back(Requests(r, tensors));
  MessageTable table(ranks);
  const Clock::time_point now = Clock::now();
  for (auto _ : state) {
    for (int r = 0; r < ranks; ++r)
      for (const auto& q : reqs[r]) table.Add(r, q, now);
    std::vector<proto::Response> responses;
    for (const auto& name : table.TakeReady()) responses.push_back(table.BuildResponse(name));
    auto planned = PlanFusion(responses, kThreshold, ranks);
    benchmark::DoNotOptimize(planned.data());
  }
  state.SetItemsProcessed(state.iterations() * tensors);
}
BENCHMARK(BM_Negotiate)->ArgsProduct({{1, 100, 1000}, {2, 4}})->ArgNames({"tensors", "ranks"});

void BM_NegotiateCached(benchmark::State& state) {
  const int tensors = static_cast<int>(state.range(0));
  const int ranks = static_cast<int>(state.range(1));
  std::vector<std::vector<proto::Request>> reqs;
  for (int r = 0; r < ranks; ++r) reqs.push_back(Requests(r, tensors));
  // Fill the cache from one full negotiation.
  ResponseCache cache(1024);
  {
    MessageTable table(ranks);
    const Clock::time_point now = Clock::now();
    for (int r = 0; r < ranks; ++r)
      for (const auto& q : reqs[r]) table.Add(r, q, now);
    for (const auto& name : table.TakeReady()) {
      const proto::Response resp = table.BuildResponse(name);
      const int i = std::stoi(name.substr(1));
      cache.Put(reqs[0][i], resp);
    }
  }
  const size_t words = cache.words();
  for (auto _ : state) {
    std::vector<uint64_t> all(words, ~uint64_t{0});
    for (int r = 0; r < ranks; ++r) {
      std::vector<uint64_t> bits(words, 0);
      for (const auto& q : reqs[r]) {
        uint32_t index = 0;
        if (cache.Lookup(q, &index) == ResponseCache::Match::kHit)
          bits[index / 64] |= uint64_t{1} << (index % 64);
      }
      for (size_t w = 0; w < words; ++w) all[w] &= bits[w];
    }
    std::vector<proto::Response> hits;
    for (size_t w = 0; w < words; ++w) {
      for (uint64_t word = all[w]; word; word &= word - 1) {
        const uint32_t i = static_cast<uint32_t>(w * 64 + __builtin_ctzll(word));
        hits.push_back(cache.response(i));
        cache.Touch(i);
      }
    }
    auto planned = PlanFusion(hits, kThreshold, ranks);
    benchmark::DoNotOptimize(planned.data());
  }
  state.SetItemsProcessed(state.iterations() * tensors);
}
BENCHMARK(BM_NegotiateCached)->ArgsProduct({{1, 100, 1000}, {2, 4}})->ArgNames({"tensors", "ranks"});

// An in-process ControlChannel among `n` ranks (threads). Gather deposits a
// non-root's message and returns; the root waits for all of them. Broadcast
// publishes the root's message under a new generation; non-roots wait for it.
// Controller::Cycle always calls Gather then Broadcast, so a non-root cannot
// deposit cycle k+1 before the root consumed cycle k. Stop() fails every waiter.
class Hub {
 public:
  explicit Hub(int n) : n_(n), slots_(n), have_(n, false) {}

  Status Gather(int rank, const std::string& mine, std::vector<std::string>* all) {
    std::unique_lock<std::mutex> lock(mu_);
    if (rank != 0) {
      slots_[rank] = mine;
      have_[rank] = true;
      cv_.notify_all();
      return Status::OK();
    }
    cv_.wait(lock, [&] { return stop_ || Arrived(); });
    if (stop_) return Status::RemoteError("hub stopped");
    all->assign(n_, "");
    (*all)[0] = mine;
    for (int r = 1; r < n_; ++r) {
      (*all)[r].swap(slots_[r]);
      have_[r] = false;
    }
    return Status::OK();
  }

  Status Broadcast(int rank, uint64_t* seen, std::string* msg) {
    std::unique_lock<std::mutex> lock(mu_);
    if (rank == 0) {
      message_ = *msg;
      ++generation_;
      cv_.notify_all();
      return Status::OK();
    }
    cv_.wait(lock, [&] { return stop_ || generation_ > *seen; });
    if (stop_) return Status::RemoteError("hub stopped");
    *seen = generation_;
    *msg = message_;
    return Status::OK();
  }

  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }

  int size() const { return n_; }

 private:
  bool Arrived() const {
    for (int r = 1; r < n_; ++r)
      if (!have_[r]) return false;
    return true;
  }

  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> slots_;
  std::vector<bool> have_;
  std::string message_;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

class HubChannel : public ControlChannel {
 public:
  HubChannel(Hub* hub, int rank) : hub_(hub), rank_(rank) {}
  Status Gather(const std::string& mine, std::vector<std::string>* all) override {
    return hub_->Gather(rank_, mine, all);
  }
  Status Broadcast(std::string* msg) override { return hub_->Broadcast(rank_, &seen_, msg); }
  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }

 private:
  Hub* hub_;
  int rank_;
  uint64_t seen_ = 0;
};

ControllerOptions QuietOptions(bool cache) {
  ControllerOptions o;
  o.fusion_threshold = kThreshold;
  o.cache_capacity = cache ? 1024 : 0;
  o.log = [](const std::string&) {};
  return o;
}

proto::RequestList RequestListOf(int rank, int tensors) {
  proto::RequestList l;
  for (auto& r : Requests(rank, tensors)) *l.add_requests() = std::move(r);
  return l;
}

void BM_ControllerCycle(benchmark::State& state) {
  const int tensors = static_cast<int>(state.range(0));
  const int ranks = static_cast<int>(state.range(1));
  const bool cache = state.range(2) != 0;
  Hub hub(ranks);
  std::vector<std::thread> others;
  for (int r = 1; r < ranks; ++r) {
    others.emplace_back([&hub, r, tensors, cache] {
      Controller c(std::make_unique<HubChannel>(&hub, r), QuietOptions(cache));
      const proto::RequestList mine = RequestListOf(r, tensors);
      proto::ResponseList out;
      while (c.Cycle(mine, Clock::now(), &out).ok()) {
      }
    });
  }
  ControllerOptions coordinator = QuietOptions(cache);
  StragglerTracker straggler(ranks);
  coordinator.on_arrivals = [&straggler](const std::string&, OpType, const Arrivals& arrivals,
                                         Clock::time_point, bool) { straggler.Record(arrivals); };
  Controller c(std::make_unique<HubChannel>(&hub, 0), std::move(coordinator));
  const proto::RequestList mine = RequestListOf(0, tensors);
  proto::ResponseList out;
  // Untimed cycles first, so the cache variant is timed in its steady state.
  for (int i = 0; i < 3; ++i) {
    Status s = c.Cycle(mine, Clock::now(), &out);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  }
  for (auto _ : state) {
    Status s = c.Cycle(mine, Clock::now(), &out);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(out.responses_size());
  }
  hub.Stop();
  for (auto& t : others) t.join();
  state.SetItemsProcessed(state.iterations() * tensors);
  state.counters["cache_hits"] = static_cast<double>(c.stats().cache_hits);
}
BENCHMARK(BM_ControllerCycle)
    ->ArgsProduct({{0, 1, 100, 1000}, {1, 2}, {0, 1}})
    ->ArgNames({"tensors", "ranks", "cache"})
    ->UseRealTime();

// The ResNet-50 tensor sizes in DDP order, from the same file as allreduce_bench.
std::vector<int64_t> ResNet50Counts() {
  std::vector<bench::Workload> w;
  std::string error;
  if (!bench::MakeWorkloads("resnet50", bench::ResNet50SizesPath("", HVD_SOURCE_DIR), &w, &error))
    return {};
  std::vector<int64_t> counts;
  for (const auto& t : w[0].tensors) counts.push_back(t.count);
  return counts;
}

void BM_PlanFusion(benchmark::State& state) {
  std::vector<int64_t> counts =
      state.range(0) == 0 ? ResNet50Counts() : std::vector<int64_t>(1000, 1024);
  if (counts.empty()) {
    state.SkipWithError("resnet50_sizes.txt not found");
    return;
  }
  std::vector<proto::Response> responses;
  for (size_t i = 0; i < counts.size(); ++i) {
    proto::Response r;
    r.set_type(proto::RESPONSE_ALLREDUCE);
    r.add_names("t" + std::to_string(i));
    r.set_dtype(static_cast<int>(DataType::kFloat32));
    r.set_reduce_op(static_cast<int>(ReduceOp::kSum));
    r.set_prescale_factor(1.0);
    r.set_postscale_factor(1.0);
    r.set_device(-1);
    r.add_counts(counts[i]);
    responses.push_back(std::move(r));
  }
  for (auto _ : state) {
    auto planned = PlanFusion(responses, kThreshold, 2);
    benchmark::DoNotOptimize(planned.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(counts.size()));
  state.SetLabel(state.range(0) == 0 ? "resnet50" : "1000x4KiB");
}
BENCHMARK(BM_PlanFusion)->Arg(0)->Arg(1)->ArgName("workload");

// Element i of a kernel operand: a small repeating pattern of ordinary values
// (varying, so max cannot be predicted), in dtype's representation.
void FillOperand(DataType dtype, void* buf, size_t n, int seed) {
  for (size_t i = 0; i < n; ++i) {
    const int v = static_cast<int>((i * 7 + seed * 3) % 13) - 6;
    const float f = static_cast<float>(v) * 0.75f;
    switch (dtype) {
      case DataType::kFloat32: static_cast<float*>(buf)[i] = f; break;
      case DataType::kFloat64: static_cast<double*>(buf)[i] = f; break;
      case DataType::kFloat16: static_cast<uint16_t*>(buf)[i] = FloatToHalf(f); break;
      case DataType::kBFloat16: static_cast<uint16_t*>(buf)[i] = FloatToBFloat16(f); break;
      case DataType::kInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
      case DataType::kUInt8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v + 6); break;
      case DataType::kInt32: static_cast<int32_t*>(buf)[i] = v; break;
      case DataType::kInt64: static_cast<int64_t*>(buf)[i] = v; break;
      case DataType::kInt16: static_cast<int16_t*>(buf)[i] = static_cast<int16_t>(v); break;
    }
  }
}

void BM_Reduce(benchmark::State& state) {
  const auto dtype = static_cast<DataType>(state.range(0));
  const auto op = static_cast<ReduceOp>(state.range(1));
  const size_t bytes = 1 << 20;
  const size_t n = bytes / DataTypeSize(dtype);
  std::vector<uint64_t> a(bytes / 8), b(bytes / 8), dst(bytes / 8);  // 8-byte aligned
  FillOperand(dtype, a.data(), n, 0);
  FillOperand(dtype, b.data(), n, 1);
  ReduceFn fn = GetReduceFn(dtype, op);
  for (auto _ : state) {
    fn(dst.data(), a.data(), b.data(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  state.SetLabel(std::string(DataTypeName(dtype)) + " " + ReduceOpName(op));
}
BENCHMARK(BM_Reduce)
    ->ArgsProduct({benchmark::CreateDenseRange(0, kNumDataTypes - 1, 1),
                   {static_cast<int>(ReduceOp::kSum), static_cast<int>(ReduceOp::kMax)}})
    ->ArgNames({"dtype", "op"});

}  // namespace
}  // namespace hvd

BENCHMARK_MAIN();
