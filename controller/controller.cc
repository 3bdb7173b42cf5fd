#include "controller/controller.h"

#include <time.h>

#include <algorithm>
#include <cstdio>

#include "controller/fusion_planner.h"

namespace hvd {
namespace {

int64_t ThreadCpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Adds the calling thread's CPU time from construction to destruction to *total.
class CpuTimer {
 public:
  explicit CpuTimer(int64_t* total) : total_(total), start_(ThreadCpuNanos()) {}
  ~CpuTimer() { *total_ += ThreadCpuNanos() - start_; }

 private:
  int64_t* total_;
  int64_t start_;
};

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

Controller::Controller(std::unique_ptr<ControlChannel> channel, ControllerOptions options)
    : channel_(std::move(channel)),
      options_(std::move(options)),
      table_(channel_->size()),
      shut_down_(channel_->size(), false),
      cache_(static_cast<size_t>(std::max<int64_t>(0, options_.cache_capacity))),
      announced_cycle_time_(options_.cycle_time) {
  if (!options_.log) options_.log = [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); };
  if (options_.autotune && rank() == 0) {
    Autotuner::Options a;
    a.window = options_.autotune_window;
    if (!options_.autotune_log.empty()) {
      std::shared_ptr<std::FILE> file(std::fopen(options_.autotune_log.c_str(), "w"),
                                      [](std::FILE* f) { if (f) std::fclose(f); });
      if (file) {
        std::fprintf(file.get(), "fusion_threshold_bytes,cycle_time_ms,bytes_per_second\n");
        a.log = [file](const Autotuner::Setting& s, double score) {
          std::fprintf(file.get(), "%lld,%.3f,%.0f\n", static_cast<long long>(s.fusion_threshold),
                       s.cycle_time.count() / 1000.0, score);
          std::fflush(file.get());
        };
      } else {
        options_.log("dprun: cannot open HVD_AUTOTUNE_LOG '" + options_.autotune_log + "'");
      }
    }
    autotuner_ = std::make_unique<Autotuner>(
        Autotuner::Setting{options_.fusion_threshold, options_.cycle_time}, std::move(a));
    options_.fusion_threshold = autotuner_->current().fusion_threshold;
    options_.cycle_time = autotuner_->current().cycle_time;
  }
}

Status Controller::Cycle(const proto::RequestList& mine, Clock::time_point now,
                         proto::ResponseList* out) {
  ++stats_.cycles;
  CpuTimer timer(&stats_.cpu_ns);
  proto::RequestList send;
  PrepareRequests(mine, &send);
  if (channel_->SupportsExchange()) return ExchangeCycle(&send, now, out);
  if (options_.tree_cycle_ranks > 0 && size() >= options_.tree_cycle_ranks &&
      channel_->SupportsWordAllreduce())
    return TreeCycle(send, now, out);
  return GatherCycle(send, now, out);
}

Status Controller::GatherCycle(const proto::RequestList& send, Clock::time_point now,
                               proto::ResponseList* out) {
  std::string bytes;
  if (!send.SerializeToString(&bytes)) return Status::Internal("cannot serialize request list");
  std::vector<std::string> all;
  Status gathered = channel_->Gather(bytes, &all);
  if (!gathered.ok()) {
    // Tell the ranks that are still there why the job ends, then end it here too.
    if (rank() == 0 && !channel_->lost_peers().empty()) {
      proto::ResponseList abort;
      abort.set_abort_code(static_cast<int>(gathered.code()));
      abort.set_abort_message(gathered.message());
      std::string reply;
      if (abort.SerializeToString(&reply)) channel_->Broadcast(&reply);
    }
    return gathered;
  }

  std::string reply;
  if (rank() == 0) {
    std::vector<proto::RequestList> lists(size());
    proto::ResponseList responses;
    Status malformed;
    for (int r = 0; r < size() && malformed.ok(); ++r) {
      if (!lists[r].ParseFromString(all[r]))
        malformed = Status::Internal("coordinator received a malformed request list from rank " +
                                     std::to_string(r) + " (" + std::to_string(all[r].size()) + " bytes)");
    }
    if (!malformed.ok()) {
      // Tell every rank why, instead of leaving them to time out.
      responses.set_abort_code(static_cast<int>(malformed.code()));
      responses.set_abort_message(malformed.message());
      if (responses.SerializeToString(&reply)) channel_->Broadcast(&reply);
      return malformed;
    }
    Coordinate(lists, now, &responses);
    if (!responses.SerializeToString(&reply)) return Status::Internal("cannot serialize responses");
  }
  HVD_RETURN_IF_ERROR(channel_->Broadcast(&reply));
  proto::ResponseList in;
  if (!in.ParseFromString(reply))
    return Status::Internal("rank " + std::to_string(rank()) +
                            " received a malformed response list from the coordinator");
  Finish(in, out);
  return Status::OK();
}

void Controller::Finish(const proto::ResponseList& in, proto::ResponseList* out) {
  ApplyResponses(in, out);
  stats_.responses += out->responses_size();
  for (const auto& r : out->responses())
    stats_.max_fused = std::max<int64_t>(stats_.max_fused, r.names_size());
}

namespace {

// A list that asks for nothing but cached entries (or nothing at all).
bool OnlyCacheBits(const proto::RequestList& l) {
  if (l.requests_size() > 0 || l.shutdown() || l.error_code() != 0) return false;
  for (uint64_t w : l.invalid_bits())
    if (w) return false;
  return true;
}

}  // namespace

bool Controller::NeedsFullCycle(Clock::time_point now) const {
  if (announced_threshold_ < 0 || autotuner_ || table_.pending_count() > 0 || !joined_.empty())
    return true;
  for (bool s : shut_down_)
    if (s) return true;
  // An entry some ranks set long ago is dropped to the full path by CoordinateCache.
  for (const auto& [index, since] : partial_since_)
    if (now - since > std::chrono::seconds(1)) return true;
  return false;
}

Status Controller::ExchangeCycle(proto::RequestList* send, Clock::time_point now,
                                 proto::ResponseList* out) {
  const int peer = 1 - rank();
  if (rank() == 0) send->set_full_cycle(NeedsFullCycle(now));
  std::string bytes, theirs;
  if (!send->SerializeToString(&bytes)) return Status::Internal("cannot serialize request list");
  HVD_RETURN_IF_ERROR(channel_->Exchange(bytes, &theirs));
  std::vector<proto::RequestList> lists(2);
  lists[rank()] = std::move(*send);
  if (!lists[peer].ParseFromString(theirs))
    return Status::Internal("rank " + std::to_string(rank()) +
                            " received a malformed request list from rank " +
                            std::to_string(peer) + " (" + std::to_string(theirs.size()) + " bytes)");
  proto::ResponseList in;
  if (OnlyCacheBits(lists[0]) && OnlyCacheBits(lists[1]) && !lists[0].full_cycle()) {
    // Settled alone: the entries both ranks have set, fused with the announced
    // threshold. Rank 0 still coordinates, for what it records (arrivals, entries
    // set on one rank); its answer is the same by construction.
    const size_t words = cache_.words();
    bool any = false;
    for (size_t w = 0; w < words; ++w) {
      uint64_t both = ~uint64_t{0};
      for (const auto& l : lists) both &= w < static_cast<size_t>(l.cache_bits_size()) ? l.cache_bits(w) : 0;
      in.add_cache_hit_bits(both);
      any = any || both;
    }
    if (!any) in.clear_cache_hit_bits();
    in.set_fusion_threshold(announced_threshold_);
    if (rank() == 0) {
      proto::ResponseList coordinated;
      Coordinate(lists, now, &coordinated);
      HVD_CHECK_MSG(coordinated.responses_size() == 0 && coordinated.cache_invalid_bits_size() == 0 &&
                        !coordinated.shutdown() && coordinated.abort_code() == 0 &&
                        coordinated.fusion_threshold() == announced_threshold_ &&
                        std::equal(coordinated.cache_hit_bits().begin(),
                                   coordinated.cache_hit_bits().end(), in.cache_hit_bits().begin(),
                                   in.cache_hit_bits().end()),
                    "a cycle settled alone differs from the coordinator's:\n" +
                        coordinated.DebugString() + "settled:\n" + in.DebugString());
    }
    ++stats_.settled_alone;
  } else {
    std::string reply, got;
    if (rank() == 0) {
      Coordinate(lists, now, &in);
      if (!in.SerializeToString(&reply)) return Status::Internal("cannot serialize responses");
    }
    HVD_RETURN_IF_ERROR(channel_->Exchange(reply, &got));
    if (rank() != 0 && !in.ParseFromString(got))
      return Status::Internal("rank " + std::to_string(rank()) +
                              " received a malformed response list from the coordinator");
  }
  Finish(in, out);
  return Status::OK();
}

namespace {

// A tree cycle's flag word: some rank needs the coordinator this cycle.
constexpr uint64_t kTreeNeedsFullCycle = 1;

}  // namespace

Status Controller::TreeCycle(const proto::RequestList& send, Clock::time_point now,
                             proto::ResponseList* out) {
  ++stats_.tree_cycles;
  // [flags | cache bits (OR: any) | their complements (OR: NOT all) | straggler (max)]
  const size_t w = cache_.words();
  tree_words_.assign(2 + 2 * w, 0);
  const bool full = !OnlyCacheBits(send) || (rank() == 0 && NeedsFullCycle(now));
  tree_words_[0] = full ? kTreeNeedsFullCycle : 0;
  bool pending = false;
  for (size_t i = 0; i < w; ++i) {
    const uint64_t b = i < static_cast<size_t>(send.cache_bits_size()) ? send.cache_bits(i) : 0;
    tree_words_[1 + i] = b;
    tree_words_[1 + w + i] = ~b;
    pending = pending || b;
  }
  // The rank that set a pending bit last: its cycle, then its rank (ties go high).
  if (pending)
    tree_words_[1 + 2 * w] = static_cast<uint64_t>(last_new_bit_cycle_) << 32 |
                             static_cast<uint32_t>(rank());
  HVD_RETURN_IF_ERROR(channel_->AllreduceWords(&tree_words_, 1 + 2 * w));
  if (tree_words_[0] & kTreeNeedsFullCycle) return GatherCycle(send, now, out);
  // Settled alone: the hits are the entries every rank set.
  proto::ResponseList in;
  bool any_hit = false;
  for (size_t i = 0; i < w; ++i) {
    const uint64_t all = ~tree_words_[1 + w + i];
    tree_words_[1 + w + i] = all;
    in.add_cache_hit_bits(all);
    any_hit = any_hit || all;
  }
  if (!any_hit) in.clear_cache_hit_bits();
  in.set_fusion_threshold(announced_threshold_);
  if (rank() == 0)
    RecordTreeCycle(&tree_words_[1], &tree_words_[1 + w], w, tree_words_[1 + 2 * w], now);
  ++stats_.settled_alone;
  Finish(in, out);
  return Status::OK();
}

void Controller::RecordTreeCycle(const uint64_t* any, const uint64_t* all, size_t words,
                                 uint64_t straggler, Clock::time_point now) {
  CpuTimer timer(&stats_.coordinate_cpu_ns);
  const int last_rank = static_cast<int>(straggler & 0xffffffffu);
  for (size_t w = 0; w < words; ++w) {
    // Entries some ranks set and others not yet: since when (NeedsFullCycle sends
    // those waiting over a second the full path, as CoordinateCache does).
    for (uint64_t word = any[w] & ~all[w]; word; word &= word - 1)
      partial_since_.try_emplace(static_cast<uint32_t>(w * 64 + __builtin_ctzll(word)), now);
    for (uint64_t word = all[w]; word; word &= word - 1) {
      const uint32_t i = static_cast<uint32_t>(w * 64 + __builtin_ctzll(word));
      Arrivals a;
      a.first = a.last = now;
      auto it = partial_since_.find(i);
      if (it != partial_since_.end()) {
        a.first = it->second;
        a.last_rank = last_rank;
        partial_since_.erase(it);
      }
      if (options_.on_arrivals && cache_.Has(i))
        options_.on_arrivals(cache_.request(i).name(), static_cast<OpType>(cache_.request(i).type()),
                             a, now, true);
    }
  }
  // Entries no rank sets any more (dropped, or run): forgotten.
  for (auto it = partial_since_.begin(); it != partial_since_.end();) {
    const uint32_t i = it->first;
    const bool still = i / 64 < words && ((any[i / 64] & ~all[i / 64]) >> (i % 64) & 1);
    it = still ? std::next(it) : partial_since_.erase(it);
  }
}

namespace {

bool Cacheable(const proto::Response& r) {
  switch (r.type()) {
    case proto::RESPONSE_ALLREDUCE:
    case proto::RESPONSE_ALLGATHER:
    case proto::RESPONSE_BROADCAST:
    case proto::RESPONSE_ALLTOALL:
    case proto::RESPONSE_REDUCESCATTER:
      return r.joined_ranks_size() == 0;
    default:
      return false;
  }
}

void SetBit(std::vector<uint64_t>* bits, uint32_t i) { (*bits)[i / 64] |= uint64_t{1} << (i % 64); }
void ClearBit(std::vector<uint64_t>* bits, uint32_t i) {
  if (i / 64 < bits->size()) (*bits)[i / 64] &= ~(uint64_t{1} << (i % 64));
}
bool TestBit(const std::vector<uint64_t>& bits, uint32_t i) {
  return i / 64 < bits.size() && (bits[i / 64] >> (i % 64)) & 1;
}

template <typename F>
void ForEachBit(const google::protobuf::RepeatedField<uint64_t>& bits, F&& f) {
  for (int w = 0; w < bits.size(); ++w) {
    uint64_t word = bits.Get(w);
    while (word) {
      const int b = __builtin_ctzll(word);
      f(static_cast<uint32_t>(w * 64 + b));
      word &= word - 1;
    }
  }
}

}  // namespace

const proto::Request* Controller::CachedRequest(const std::string& name, uint32_t* index) {
  if (cache_.capacity() == 0 || !cache_.Find(name, index) || TestBit(pending_bits_, *index))
    return nullptr;
  return &cache_.request(*index);
}

void Controller::SendAsCacheBit(uint32_t index) {
  pending_bits_.resize(cache_.words(), 0);
  SetBit(&pending_bits_, index);
  ++stats_.cache_bits;
  // The bit goes in the next cycle (Cycle counts it on entry).
  last_new_bit_cycle_ = stats_.cycles + 1;
}

void Controller::PrepareRequests(const proto::RequestList& mine, proto::RequestList* send) {
  send->set_shutdown(mine.shutdown());
  send->set_error_code(mine.error_code());
  send->set_error_message(mine.error_message());
  pending_bits_.resize(cache_.words(), 0);
  std::vector<uint64_t> invalid(cache_.words(), 0);
  auto consider = [&](const proto::Request& req) {
    uint32_t index = 0;
    const auto match = cache_.capacity() ? cache_.Lookup(req, &index) : ResponseCache::Match::kNone;
    if (match == ResponseCache::Match::kHit && !TestBit(pending_bits_, index)) {
      SetBit(&pending_bits_, index);
      ++stats_.cache_bits;
      last_new_bit_cycle_ = stats_.cycles;
      return;
    }
    if (match == ResponseCache::Match::kChanged) SetBit(&invalid, index);
    own_requests_[req.name()] = req;
    *send->add_requests() = req;
    ++stats_.full_requests;
  };
  std::vector<proto::Request> resend;
  resend.swap(resend_);
  for (const auto& req : resend) consider(req);
  for (const auto& req : mine.requests()) consider(req);
  // Bits are sent every cycle until the entry runs: the coordinator keeps no state.
  bool any = false;
  for (uint64_t w : pending_bits_) any = any || w;
  for (uint64_t w : invalid) any = any || w;
  if (any) {
    for (uint64_t w : pending_bits_) send->add_cache_bits(w);
    for (uint64_t w : invalid) send->add_invalid_bits(w);
  }
}

bool Controller::waiting_on_others() const {
  if (!own_requests_.empty() || !resend_.empty()) return true;
  for (uint64_t w : pending_bits_)
    if (w) return true;
  return false;
}

void Controller::CoordinateCache(const std::vector<proto::RequestList>& lists,
                                 Clock::time_point now, proto::ResponseList* out) {
  const size_t words = cache_.words();
  std::vector<uint64_t> all(words, ~uint64_t{0}), any(words, 0), invalid(words, 0);
  bool degraded = !joined_.empty();  // join and shutdown take the full path
  for (int r = 0; r < size(); ++r) {
    const auto& l = lists[r];
    if (l.shutdown() || shut_down_[r]) degraded = true;
    for (size_t w = 0; w < words; ++w) {
      const uint64_t b = w < static_cast<size_t>(l.cache_bits_size()) ? l.cache_bits(w) : 0;
      all[w] &= b;
      any[w] |= b;
      if (w < static_cast<size_t>(l.invalid_bits_size())) invalid[w] |= l.invalid_bits(w);
    }
  }
  if (options_.on_arrivals) {
    // An entry every rank first set in this cycle arrived everywhere at `now`
    // (the steady state: a step's tensors are all in by the cycle that runs
    // them); only entries some ranks set earlier or not yet keep a vector of
    // arrivals, made once and reused: a step's 1000 cached tensors must not cost
    // 1000 vectors on the coordinator, whom every rank waits for.
    arrival_bits_.resize(words, 0);
    for (int r = 0; r < size(); ++r) {
      const auto& bits = lists[r].cache_bits();
      for (int w = 0; w < bits.size() && static_cast<size_t>(w) < words; ++w) {
        for (uint64_t word = bits.Get(w) & ~(all[w] & ~arrival_bits_[w]); word; word &= word - 1) {
          const uint32_t i = static_cast<uint32_t>(w * 64 + __builtin_ctzll(word));
          if (i >= bit_arrivals_.size()) bit_arrivals_.resize(i + 1);
          auto& v = bit_arrivals_[i];
          if (!TestBit(arrival_bits_, i)) {
            v.assign(size(), Clock::time_point{});
            SetBit(&arrival_bits_, i);
          }
          if (v[r] == Clock::time_point{}) v[r] = now;
        }
      }
    }
  }
  bool hit = false, drop = false;
  for (size_t w = 0; w < words; ++w) {
    if (degraded) {
      invalid[w] |= any[w];
      all[w] = 0;
    }
    // An entry some ranks are waiting on for long goes the full path, where the
    // stall inspector and the shutdown checks can see it.
    uint64_t partial = any[w] & ~all[w] & ~invalid[w];
    for (uint64_t word = partial; word; word &= word - 1) {
      const uint32_t i = static_cast<uint32_t>(w * 64 + __builtin_ctzll(word));
      auto [it, fresh] = partial_since_.try_emplace(i, now);
      if (!fresh && now - it->second > std::chrono::seconds(1)) invalid[w] |= uint64_t{1} << (i % 64);
    }
    all[w] &= ~invalid[w];
    hit = hit || all[w];
    drop = drop || invalid[w];
  }
  for (auto it = partial_since_.begin(); it != partial_since_.end();) {
    const uint32_t i = it->first;
    const bool still = (any[i / 64] & ~all[i / 64] & ~invalid[i / 64]) >> (i % 64) & 1;
    it = still ? std::next(it) : partial_since_.erase(it);
  }
  if (options_.on_arrivals) {
    // Entries every rank set in this cycle: all at `now`, O(1) each.
    Arrivals together;
    together.first = together.last = now;
    for (size_t w = 0; w < words; ++w) {
      for (uint64_t word = all[w] | invalid[w]; word; word &= word - 1) {
        const uint32_t i = static_cast<uint32_t>(w * 64 + __builtin_ctzll(word));
        const bool tracked = TestBit(arrival_bits_, i);
        if ((all[w] >> (i % 64)) & 1) {
          Arrivals each;
          if (tracked) each.each = &bit_arrivals_[i];
          options_.on_arrivals(cache_.request(i).name(),
                               static_cast<OpType>(cache_.request(i).type()),
                               tracked ? each : together, now, true);
        }
        if (tracked) ClearBit(&arrival_bits_, i);
      }
    }
  }
  if (hit)
    for (uint64_t w : all) out->add_cache_hit_bits(w);
  if (drop)
    for (uint64_t w : invalid) out->add_cache_invalid_bits(w);
}

void Controller::ApplyResponses(const proto::ResponseList& in, proto::ResponseList* out) {
  out->Clear();
  if (in.cycle_time_us() > 0) announced_cycle_time_ = std::chrono::microseconds(in.cycle_time_us());
  if (in.abort_code() == 0) announced_threshold_ = in.fusion_threshold();
  out->set_shutdown(in.shutdown());
  out->set_abort_code(in.abort_code());
  out->set_abort_message(in.abort_message());
  if (in.abort_code() != 0) return;
  // 1. Entries dropped everywhere: pending bits for them are resent in full.
  auto resend_if_pending = [&](uint32_t i, const proto::Request& request) {
    if (!TestBit(pending_bits_, i)) return;
    resend_.push_back(request);
    ClearBit(&pending_bits_, i);
  };
  ForEachBit(in.cache_invalid_bits(), [&](uint32_t i) {
    if (cache_.Has(i)) resend_if_pending(i, cache_.request(i));
    cache_.Erase(i);
  });
  // 2. Hits run first, in index order, fused as the coordinator would.
  const auto& hit_bits = in.cache_hit_bits();
  int64_t hit_count = 0;
  ForEachBit(hit_bits, [&](uint32_t i) {
    HVD_CHECK_MSG(cache_.Has(i), "cache hit on an empty slot " + std::to_string(i));
    cache_.Touch(i);
    ClearBit(&pending_bits_, i);
    ++hit_count;
  });
  stats_.cache_hits += hit_count;
  if (hit_count > 0)
    *out->mutable_responses() = PlanForHits(hit_bits, in.fusion_threshold()).responses;
  // 3. Full responses run next; each negotiated tensor enters the cache.
  const int64_t refills_before = cache_.refills();
  for (const auto& resp : in.responses()) {
    *out->add_responses() = resp;
    const bool cacheable = cache_.capacity() > 0 && Cacheable(resp);
    std::vector<proto::Response> singles;
    if (cacheable) singles = SplitResponse(resp, size());
    for (int i = 0; i < resp.names_size(); ++i) {
      auto own = own_requests_.find(resp.names(i));
      if (own == own_requests_.end()) continue;
      if (cacheable) {
        proto::Request evicted_request;
        const int64_t evicted = cache_.Put(own->second, singles[i], &evicted_request);
        if (evicted >= 0) resend_if_pending(static_cast<uint32_t>(evicted), evicted_request);
      }
      own_requests_.erase(own);
    }
  }
  const int64_t refilled = cache_.refills() - refills_before;
  stats_.cache_refills += refilled;
  if (refilled > 0) WarnIfCacheTooSmall(refilled);
  if (autotuner_) {
    int64_t bytes = 0;
    for (const auto& r : out->responses())
      for (int i = 0; i < r.names_size() && i < r.counts_size(); ++i)
        if (r.type() != proto::RESPONSE_ERROR) bytes += ResponseTensorBytes(r, i, size());
    if (autotuner_->Observe(bytes, Clock::now())) {
      options_.fusion_threshold = autotuner_->current().fusion_threshold;
      options_.cycle_time = autotuner_->current().cycle_time;
      if (autotuner_->done())
        options_.log("dprun: autotune chose HVD_FUSION_THRESHOLD=" +
                     std::to_string(options_.fusion_threshold) + " HVD_CYCLE_TIME=" +
                     std::to_string(options_.cycle_time.count() / 1000.0) + " ms");
    }
  }
}

const Controller::HitPlan& Controller::PlanForHits(
    const google::protobuf::RepeatedField<uint64_t>& hit_bits, int64_t threshold) {
  ++hit_plan_clock_;
  HitPlan* oldest = &hit_plans_[0];
  for (HitPlan& p : hit_plans_) {
    if (p.used != 0 && p.generation == cache_.generation() && p.threshold == threshold &&
        p.bits.size() == static_cast<size_t>(hit_bits.size()) &&
        std::equal(p.bits.begin(), p.bits.end(), hit_bits.begin())) {
      p.used = hit_plan_clock_;
      return p;
    }
    if (p.used < oldest->used) oldest = &p;
  }
  std::vector<const proto::Response*> hits;
  ForEachBit(hit_bits, [&](uint32_t i) { hits.push_back(&cache_.response(i)); });
  HitPlan& p = *oldest;
  p.responses.Clear();
  PlanFusion(hits, threshold, size(), &p.responses);
  p.bits.assign(hit_bits.begin(), hit_bits.end());
  p.generation = cache_.generation();
  p.threshold = threshold;
  p.used = hit_plan_clock_;
  ++stats_.hit_plans;
  return p;
}

void Controller::Coordinate(const std::vector<proto::RequestList>& lists, Clock::time_point now,
                            proto::ResponseList* out) {
  CpuTimer timer(&stats_.coordinate_cpu_ns);
  // A rank's own failure ends the job everywhere; the first rank's report wins.
  for (int r = 0; r < size(); ++r) {
    if (lists[r].error_code() != 0) {
      out->set_abort_code(lists[r].error_code());
      out->set_abort_message("rank " + std::to_string(r) + " failed: " + lists[r].error_message());
      return;
    }
  }
  bool join_changed = false;
  for (int r = 0; r < size(); ++r) {
    for (const auto& req : lists[r].requests()) {
      if (req.type() == proto::JOIN) join_changed = joined_.insert(r).second || join_changed;
      table_.Add(r, req, now);
    }
  }
  if (join_changed) table_.SetJoined(joined_);
  std::vector<proto::Response> responses = table_.FailUnjoinable();
  // A join completes after everything else in its cycle, so a rank leaving join
  // can reuse names without meeting responses that were built before it left.
  std::vector<proto::Response> joins;
  for (const std::string& name : table_.TakeReady()) {
    proto::Response resp = table_.BuildResponse(name);
    if (options_.on_ready) {
      const auto& a = table_.last_arrival();
      options_.on_ready(name, a.last_rank, a.lag);
    }
    if (options_.on_arrivals) {
      const auto& a = table_.last_arrival();
      Arrivals each;
      each.each = &a.arrivals;
      options_.on_arrivals(name, a.op, each, now, false);
    }
    if (resp.type() == proto::RESPONSE_JOIN) {
      joined_.clear();
      table_.SetJoined(joined_);
      joins.push_back(std::move(resp));
    } else {
      responses.push_back(std::move(resp));
    }
  }
  for (auto& failed : table_.FailBrokenGroups()) responses.push_back(std::move(failed));
  bool all_shut_down = true;
  for (int r = 0; r < size(); ++r) {
    if (lists[r].shutdown()) shut_down_[r] = true;
    if (shut_down_[r]) {
      auto failed = table_.FailWaitingOn(r, static_cast<int>(StatusCode::kShutDown),
                                         "rank " + std::to_string(r) + " has shut down");
      responses.insert(responses.end(), failed.begin(), failed.end());
    } else {
      all_shut_down = false;
    }
  }
  InspectStalls(now, &responses);
  CoordinateCache(lists, now, out);
  out->set_fusion_threshold(options_.fusion_threshold);
  out->set_cycle_time_us(options_.cycle_time.count());
  for (auto& r : PlanFusion(responses, options_.fusion_threshold, size()))
    *out->add_responses() = std::move(r);
  for (auto& r : joins) *out->add_responses() = std::move(r);
  out->set_shutdown(all_shut_down);
}

// Every rank's cache makes the same puts, so the coordinator speaks for all. A few
// refills are a rarely used tensor coming back; a sixteenth of the cache in one
// cycle is a step's working set that no longer fits.
void Controller::WarnIfCacheTooSmall(int64_t refilled) {
  const int64_t capacity = static_cast<int64_t>(cache_.capacity());
  if (rank() != 0 || warned_small_cache_ || refilled < std::max<int64_t>(1, capacity / 16)) return;
  warned_small_cache_ = true;
  const int64_t in_use = static_cast<int64_t>(cache_.names_in_use());
  int64_t suggest = 1;
  while (suggest < std::max(in_use, capacity + 1)) suggest *= 2;
  options_.log("dprun: the response cache holds " + std::to_string(capacity) +
               " tensors (HVD_CACHE_CAPACITY) but this job uses about " + std::to_string(in_use) +
               ": " + std::to_string(refilled) +
               " tensors were negotiated in full again in one cycle after their entries were "
               "evicted, so steady-state steps renegotiate instead of sending one bit per "
               "tensor. Set HVD_CACHE_CAPACITY=" + std::to_string(suggest) + " or more.");
}

void Controller::InspectStalls(Clock::time_point now, std::vector<proto::Response>* errors) {
  if (options_.stall_check.count() <= 0 && options_.stall_shutdown.count() <= 0) return;
  const auto period = options_.stall_check.count() > 0 ? options_.stall_check : options_.stall_shutdown;
  if (now - last_stall_check_ < std::min(period, std::chrono::milliseconds(1000))) return;
  last_stall_check_ = now;
  std::string report;
  bool failing = false;
  for (const PendingTensor& p : table_.Pending()) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - p.first_seen);
    const std::string line = "tensor '" + p.name + "' waiting " +
                             std::to_string(waited.count() / 1000) + " s: submitted by ranks [" +
                             RankList(p.submitted) + "], missing ranks [" + RankList(p.missing) + "]";
    if (options_.stall_shutdown.count() > 0 && waited >= options_.stall_shutdown) {
      failing = true;
      errors->push_back(table_.Fail(
          p.name, static_cast<int>(StatusCode::kTimeout),
          "stalled for more than " + std::to_string(options_.stall_shutdown.count() / 1000) +
              " s (HVD_STALL_SHUTDOWN_TIME): " + line));
    } else if (options_.stall_check.count() <= 0 || waited < options_.stall_check) {
      continue;
    }
    report += "\n  " + line;
  }
  if (report.empty()) return;
  // What happens next: a wait that ends (the default) is said, with its bound.
  const int64_t bound_ms = options_.stall_shutdown.count();
  const std::string next =
      failing ? ""
      : bound_ms > 0
          ? "\n  (each fails on every rank once it has waited " +
                (bound_ms % 1000 == 0 ? std::to_string(bound_ms / 1000) + " s"
                                      : std::to_string(bound_ms) + " ms") +
                ": HVD_STALL_SHUTDOWN_TIME)"
          : "\n  (HVD_STALL_SHUTDOWN_TIME is 0: they wait for ever; set it to fail them)";
  options_.log("dprun: stall: some ranks have submitted tensors that others have not:" + report +
               next);
}

}  // namespace hvd
