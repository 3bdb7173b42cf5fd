// Fakes for the Controller's unit tests: N Controllers in one process connected by
// an in-process ControlChannel (shared queues), each rank's Cycle on its own thread,
// and helpers that build request lists. controller_test.cc and
// controller_tree_test.cc use them.
#ifndef HVD_TESTS_UNIT_CONTROLLER_FAKES_H_
#define HVD_TESTS_UNIT_CONTROLLER_FAKES_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "controller/controller.h"
#include "runtime/common/types.h"

namespace hvd {
namespace fakes {

using std::chrono::milliseconds;

// The shared state of one fake communicator: a queue per non-root rank in each
// direction. Close() releases every waiter with an error (used when a rank's Cycle
// has failed and will not take part in the rest of the cycle).
class Hub {
 public:
  explicit Hub(int size) : size_(size), to_root_(size), from_root_(size), exchanged_(size) {}

  int size() const { return size_; }

  void Send(std::vector<std::deque<std::string>>& box, int rank, std::string msg) {
    std::lock_guard<std::mutex> lock(mu_);
    box[rank].push_back(std::move(msg));
    cv_.notify_all();
  }

  Status Receive(std::vector<std::deque<std::string>>& box, int rank, std::string* msg) {
    std::unique_lock<std::mutex> lock(mu_);
    if (lost_.count(rank)) return Status::RemoteError("rank " + std::to_string(rank) + " is lost");
    if (!cv_.wait_for(lock, std::chrono::seconds(5), [&] { return closed_ || !box[rank].empty(); }))
      return Status::Timeout("fake channel: nothing from/for rank " + std::to_string(rank));
    if (box[rank].empty()) return Status::RemoteError("fake channel closed");
    *msg = std::move(box[rank].front());
    box[rank].pop_front();
    return Status::OK();
  }

  // Rank `rank` is gone: receiving from it fails at once.
  void Lose(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    lost_.insert(rank);
  }
  std::vector<int> lost() {
    std::lock_guard<std::mutex> lock(mu_);
    return {lost_.begin(), lost_.end()};
  }

  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }

  std::vector<std::deque<std::string>>& to_root() { return to_root_; }
  std::vector<std::deque<std::string>>& from_root() { return from_root_; }
  std::vector<std::deque<std::string>>& exchanged() { return exchanged_; }

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  std::set<int> lost_;
  std::vector<std::deque<std::string>> to_root_;    // [rank]: rank -> root
  std::vector<std::deque<std::string>> from_root_;  // [rank]: root -> rank
  std::vector<std::deque<std::string>> exchanged_;  // [rank]: the other rank -> rank
};

class FakeChannel : public ControlChannel {
 public:
  // `exchange`: at 2 ranks, offer Exchange as the Gloo channel does. `words`: say
  // SupportsWordAllreduce (the word all-reduce is the default one, through the
  // root), so that the Controller runs tree cycles.
  FakeChannel(std::shared_ptr<Hub> hub, int rank, bool exchange = false, bool words = false)
      : hub_(std::move(hub)), rank_(rank), exchange_(exchange), words_(words) {}

  bool SupportsExchange() const override { return exchange_ && size() == 2; }
  bool SupportsWordAllreduce() const override { return words_; }
  int word_allreduces() const { return word_allreduces_; }
  Status AllreduceWords(std::vector<uint64_t>* words, size_t or_words) override {
    ++word_allreduces_;
    return ControlChannel::AllreduceWords(words, or_words);
  }
  Status Exchange(const std::string& mine, std::string* theirs) override {
    hub_->Send(hub_->exchanged(), 1 - rank_, corrupt ? corrupt(mine) : mine);
    return hub_->Receive(hub_->exchanged(), rank_, theirs);
  }

  // Rewrites this rank's outgoing request bytes (to simulate corruption).
  std::function<std::string(const std::string&)> corrupt;

  Status Gather(const std::string& mine, std::vector<std::string>* all) override {
    const std::string out = corrupt ? corrupt(mine) : mine;
    if (rank_ != 0) {
      hub_->Send(hub_->to_root(), rank_, out);
      all->clear();
      return Status::OK();
    }
    all->assign(size(), "");
    (*all)[0] = out;
    Status first;  // like the real channel, wait for every peer even after one is lost
    for (int r = 1; r < size(); ++r) {
      Status s = hub_->Receive(hub_->to_root(), r, &(*all)[r]);
      if (first.ok() && !s.ok()) first = s;
    }
    return first;
  }

  std::vector<int> lost_peers() const override { return hub_->lost(); }

  Status Broadcast(std::string* msg) override {
    if (rank_ == 0) {
      for (int r = 1; r < size(); ++r) hub_->Send(hub_->from_root(), r, *msg);
      return Status::OK();
    }
    return hub_->Receive(hub_->from_root(), rank_, msg);
  }

  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }

 private:
  std::shared_ptr<Hub> hub_;
  const int rank_;
  const bool exchange_;
  const bool words_;
  int word_allreduces_ = 0;
};

// N controllers over one hub. Cycle runs every rank's Cycle on its own thread.
class FakeJob {
 public:
  FakeJob(int size, const ControllerOptions& options, bool exchange = false, bool words = false)
      : hub_(std::make_shared<Hub>(size)) {
    for (int r = 0; r < size; ++r) {
      auto channel = std::make_unique<FakeChannel>(hub_, r, exchange, words);
      channels_.push_back(channel.get());
      controllers_.push_back(std::make_unique<Controller>(std::move(channel), options));
    }
  }

  int size() const { return static_cast<int>(controllers_.size()); }
  FakeChannel& channel(int rank) { return *channels_[rank]; }
  Hub& hub() { return *hub_; }
  Controller& controller(int rank) { return *controllers_[rank]; }

  // One cycle; `lists[r]` is rank r's RequestList. Returns each rank's status and list.
  // Ranks in `absent` do not take part (they have died).
  std::vector<Status> TryCycle(const std::vector<proto::RequestList>& lists, Clock::time_point now,
                               std::vector<proto::ResponseList>* out, const std::set<int>& absent = {}) {
    out->assign(size(), proto::ResponseList());
    std::vector<Status> status(size());
    std::vector<std::thread> threads;
    for (int r = 1; r < size(); ++r)
      if (!absent.count(r)) threads.emplace_back([&, r] { status[r] = controllers_[r]->Cycle(lists[r], now, &(*out)[r]); });
    status[0] = controllers_[0]->Cycle(lists[0], now, &(*out)[0]);
    if (!status[0].ok()) hub_->Close();  // the coordinator will not broadcast
    for (auto& t : threads) t.join();
    return status;
  }

  // One cycle that must succeed everywhere with the same list on every rank.
  proto::ResponseList Cycle(const std::vector<proto::RequestList>& lists, Clock::time_point now) {
    std::vector<proto::ResponseList> out;
    std::vector<Status> status = TryCycle(lists, now, &out);
    for (int r = 0; r < size(); ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r].ToString();
    for (int r = 1; r < size(); ++r)
      EXPECT_EQ(out[r].SerializeAsString(), out[0].SerializeAsString())
          << "rank " << r << " got a different response list:\n"
          << out[r].DebugString() << "rank 0 got:\n"
          << out[0].DebugString();
    return out[0];
  }

 private:
  std::shared_ptr<Hub> hub_;
  std::vector<FakeChannel*> channels_;
  std::vector<std::unique_ptr<Controller>> controllers_;
};

inline proto::Request Allreduce(const std::string& name, int64_t count) {
  proto::Request r;
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

inline proto::Request Join() {
  proto::Request r;
  r.set_type(proto::JOIN);
  r.set_name("__join");
  r.set_device(-1);
  return r;
}

// Request lists for `size` ranks, built up with Add.
struct Lists {
  explicit Lists(int size) : lists(size) {}
  Lists& Add(int rank, const proto::Request& r) {
    *lists[rank].add_requests() = r;
    return *this;
  }
  std::vector<proto::RequestList> lists;
};

inline std::vector<std::string> NamesOf(const proto::Response& r) { return {r.names().begin(), r.names().end()}; }

inline const Clock::time_point kT0 = Clock::now();
inline Clock::time_point At(int ms) { return kT0 + milliseconds(ms); }

inline ControllerOptions Options() {
  ControllerOptions o;
  o.log = [](const std::string&) {};  // keep test output clean unless a test captures it
  return o;
}


}  // namespace fakes
}  // namespace hvd

#endif  // HVD_TESTS_UNIT_CONTROLLER_FAKES_H_
