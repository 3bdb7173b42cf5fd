// The Gloo implementation of ControlChannel (see control_channel.h).
#include <algorithm>
#include <cstring>
#include <set>

#include <gloo/common/error.h>
#include <gloo/transport/unbound_buffer.h>

#include "runtime/transport/butterfly_schedule.h"
#include "runtime/transport/gloo/gloo_control_channel.h"

namespace hvd {
namespace {

constexpr size_t kFrameBytes = 1024;
constexpr size_t kHeaderBytes = 8;
constexpr size_t kInlineBytes = kFrameBytes - kHeaderBytes;
// Gloo builds its own slots as (prefix << 56) | tag with small prefixes; ours use 0x7e.
constexpr uint64_t kSlotPrefix = 0x7eull << 56;
constexpr uint64_t kTailBit = 1ull << 55;
constexpr uint64_t kCounterMask = kTailBit - 1;
// AllreduceWords' slots: one per call, counted apart from the slots above, whose
// receives are posted a call ahead (a word all-reduce between two Gathers must not
// take the slot such a receive waits on).
constexpr uint64_t kWordsSlotPrefix = 0x7cull << 56;
// The most a control message may carry; a larger length is a corrupt frame.
constexpr uint64_t kMaxMessageBytes = 256ull << 20;

class GlooControlChannel : public ControlChannel {
 public:
  GlooControlChannel(std::shared_ptr<gloo::Context> context, std::chrono::milliseconds timeout)
      : context_(std::move(context)),
        timeout_(timeout),
        frames_(context_->size),
        posted_ahead_(context_->size, 0) {
    for (auto& f : frames_) f.resize(kFrameBytes);
    for (int r = 0; r < context_->size; ++r)
      frame_bufs_.push_back(context_->createUnboundBuffer(frames_[r].data(), kFrameBytes));
  }

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::vector<int> lost_peers() const override { return {lost_.begin(), lost_.end()}; }

  // Gloo sends a message only once the receiver has posted its receive, and the
  // notice of that takes a trip between the hosts (and a wake-up of the sender's
  // thread). Each cycle is a Gather then a Broadcast, so each side posts the next
  // receive ahead: a peer posts the Broadcast's before it sends its Gather message,
  // and the root posts the next cycle's Gather receives as its Broadcast ends. A
  // message then leaves as soon as it is sent (across hosts, a cycle took ~0.45 ms
  // at 10 Gbit/s, mostly such trips and wake-ups).
  Status Gather(const std::string& mine, std::vector<std::string>* all) override {
    const uint64_t slot = NextSlot();
    if (!broken_.ok()) return broken_;
    if (rank() != 0) {
      PostAhead(0, PeekSlot());  // the Broadcast's receive
      return Send(0, slot, mine, "send its requests to the coordinator (rank 0)");
    }
    all->assign(size(), std::string());
    (*all)[0] = mine;
    Status first;
    std::vector<bool> posted(size(), false);
    for (int r = 1; r < size(); ++r) {
      if (lost_.count(r)) continue;
      if (TakePostedAhead(r, slot)) {
        posted[r] = true;
        continue;
      }
      Status s = PostRecv(r, slot, "receive its requests");
      posted[r] = s.ok();
      if (!s.ok() && first.ok()) first = s;
    }
    for (int r = 1; r < size(); ++r) {
      if (!posted[r]) continue;
      Status s = FinishRecv(r, slot, &(*all)[r], "receive its requests");
      if (!s.ok() && first.ok()) first = s;
      if (!broken_.ok()) return broken_;  // A timeout leaves nothing to wait for.
    }
    if (!lost_.empty()) {
      std::string ranks;
      for (int r : lost_) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      return Status::RemoteError("lost rank" + std::string(lost_.size() > 1 ? "s " : " ") + ranks +
                                 ": " + first.message());
    }
    return first;
  }

  Status Broadcast(std::string* msg) override {
    const uint64_t slot = NextSlot();
    if (!broken_.ok()) return broken_;
    if (rank() == 0) {
      std::vector<bool> started(size(), false);
      Status first;
      for (int r = 1; r < size(); ++r) {
        if (lost_.count(r)) continue;
        // Each peer gets its own frame buffer so sends may be in flight together.
        Status s = StartSend(r, r, slot, *msg);
        started[r] = s.ok();
        if (!s.ok() && first.ok()) first = s;
      }
      for (int r = 1; r < size(); ++r) {
        if (!started[r]) continue;
        Status s = FinishSend(r, r, "send the responses");
        if (!s.ok() && first.ok()) first = s;
      }
      // The next cycle's Gather receives, into the frames just sent from.
      for (int r = 1; r < size() && first.ok(); ++r)
        if (!lost_.count(r)) PostAhead(r, PeekSlot());
      return first;
    }
    if (!TakePostedAhead(0, slot))
      HVD_RETURN_IF_ERROR(PostRecv(0, slot, "receive the responses from the coordinator"));
    return FinishRecv(0, slot, msg, "receive the responses from the coordinator");
  }

  // Recursive doubling (PlanDoubling): log2 rounds, each one message to and one
  // from a partner, the whole vector each way; ranks beyond the largest power of
  // two fold into a partner first and get the result back from it.
  bool SupportsWordAllreduce() const override { return true; }

  Status AllreduceWords(std::vector<uint64_t>* words, size_t or_words) override {
    if (!broken_.ok()) return broken_;
    HVD_CHECK(or_words <= words->size());
    const uint64_t slot = kWordsSlotPrefix | (words_counter_++ & kCounterMask);
    if (size() == 1 || words->empty()) return Status::OK();
    const size_t n = words->size(), bytes = n * sizeof(uint64_t);
    if (words_.size() != n) {
      words_.assign(n, 0);
      words_in_.assign(n, 0);
      words_buf_ = context_->createUnboundBuffer(words_.data(), bytes);
      words_in_buf_ = context_->createUnboundBuffer(words_in_.data(), bytes);
    }
    std::copy(words->begin(), words->end(), words_.begin());
    PlanDoubling(size(), rank(), static_cast<int64_t>(n), &words_plan_);
    for (const ButterflyStep& step : words_plan_.steps) {
      const size_t in = step.recv_count(), out = step.send_count();
      try {
        if (in) words_in_buf_->recv(step.peer, slot, step.recv_begin * 8, in * 8);
        if (out) words_buf_->send(step.peer, slot, step.send_begin * 8, out * 8);
        if (in) words_in_buf_->waitRecv(timeout_);
        if (out) words_buf_->waitSend(timeout_);
      } catch (const std::exception& e) {
        return Fail(step.peer, "exchange negotiation words", e);
      }
      if (in == 0) continue;
      if (step.reduce)
        CombineWords(words_in_.data() + step.recv_begin, in,
                     or_words > static_cast<size_t>(step.recv_begin) ? or_words - step.recv_begin : 0,
                     words_.data() + step.recv_begin);
      else
        std::copy(words_in_.begin() + step.recv_begin, words_in_.begin() + step.recv_end,
                  words_.begin() + step.recv_begin);
    }
    std::copy(words_.begin(), words_.end(), words->begin());
    return Status::OK();
  }

  // Two ranks: each sends from its own frame (index = its rank, which no receive
  // uses) and receives into the other's. Every call is an Exchange on both sides,
  // so each posts the next one's receive as this one ends, and a message leaves
  // as soon as it is sent, as in Gather and Broadcast above.
  bool SupportsExchange() const override { return size() == 2; }

  Status Exchange(const std::string& mine, std::string* theirs) override {
    if (size() != 2) return Status::Internal("Exchange needs 2 ranks, this channel has " +
                                             std::to_string(size()));
    const uint64_t slot = NextSlot();
    if (!broken_.ok()) return broken_;
    const int peer = 1 - rank();
    if (!TakePostedAhead(peer, slot))
      HVD_RETURN_IF_ERROR(PostRecv(peer, slot, "receive the other rank's message"));
    HVD_RETURN_IF_ERROR(StartSend(rank(), peer, slot, mine));
    // Receive first: a tail is received (its receive posted) only once its frame is
    // in, so two ranks that both waited for their own tails to leave would wait
    // for ever.
    // A receive that failed (the other rank lost, or the timeout) ends the call:
    // waiting for the send as well could double the bound.
    HVD_RETURN_IF_ERROR(FinishRecv(peer, slot, theirs, "receive the other rank's message"));
    HVD_RETURN_IF_ERROR(FinishSend(rank(), peer, "send its message to the other rank"));
    PostAhead(peer, PeekSlot());
    return Status::OK();
  }

 private:
  uint64_t NextSlot() { return kSlotPrefix | (counter_++ & kCounterMask); }
  uint64_t PeekSlot() const { return kSlotPrefix | (counter_ & kCounterMask); }

  // Posts the receive of `peer`'s frame for `slot` (a later call's) now. A failure
  // is left for that call to meet, and report, when it posts the receive itself.
  void PostAhead(int peer, uint64_t slot) {
    try {
      frame_bufs_[peer]->recv(peer, slot);
      posted_ahead_[peer] = slot;
    } catch (const std::exception&) {
      posted_ahead_[peer] = 0;
    }
  }

  // Whether the receive of `peer`'s frame for `slot` was posted ahead (and forgets it).
  bool TakePostedAhead(int peer, uint64_t slot) {
    const bool posted = posted_ahead_[peer] == slot;
    posted_ahead_[peer] = 0;
    return posted;
  }

  // Posts the receive of `peer`'s frame. Gloo throws here, not only when waiting,
  // when the pair is already closed (the peer died since the last message).
  Status PostRecv(int peer, uint64_t slot, const char* what) {
    try {
      frame_bufs_[peer]->recv(peer, slot);
      return Status::OK();
    } catch (const std::exception& e) {
      return Fail(peer, what, e);
    }
  }

  Status Fail(int peer, const char* what, const std::exception& e) {
    const std::string m = e.what();
    const std::string text = "rank " + std::to_string(rank()) + " could not " + what +
                             (peer == 0 && rank() != 0 ? "" : " (peer rank " + std::to_string(peer) + ")") +
                             ": " + m;
    if (m.find("imed out") != std::string::npos) {
      broken_ = Status::Timeout(text + " after " + std::to_string(timeout_.count()) +
                                " ms: rank " + std::to_string(peer) + " may be frozen or overloaded");
      return broken_;
    }
    lost_.insert(peer);
    // A non-root rank that lost the coordinator has nobody left to talk to.
    if (rank() != 0) broken_ = Status::RemoteError("lost rank " + std::to_string(peer) + ": " + text);
    return Status::RemoteError("lost rank " + std::to_string(peer) + ": " + text);
  }

  // Copies the header and inline part of `msg` into frame `buf_index` and sends it
  // to `peer`; a tail is sent from `tails_[peer]`.
  Status StartSend(int buf_index, int peer, uint64_t slot, const std::string& msg) {
    std::vector<char>& frame = frames_[buf_index];
    const uint64_t len = msg.size();
    std::memcpy(frame.data(), &len, kHeaderBytes);
    const size_t inline_len = std::min<size_t>(len, kInlineBytes);
    if (inline_len > 0) std::memcpy(frame.data() + kHeaderBytes, msg.data(), inline_len);
    if (tails_.size() < frames_.size()) tails_.resize(frames_.size());
    tails_[buf_index].reset();
    try {
      frame_bufs_[buf_index]->send(peer, slot);
      if (len > kInlineBytes) {
        tail_data_.resize(frames_.size());
        tail_data_[buf_index].assign(msg.begin() + kInlineBytes, msg.end());
        tails_[buf_index] = context_->createUnboundBuffer(&tail_data_[buf_index][0],
                                                          tail_data_[buf_index].size());
        tails_[buf_index]->send(peer, slot | kTailBit);
      }
    } catch (const std::exception& e) {
      return Fail(peer, "send", e);
    }
    return Status::OK();
  }

  Status FinishSend(int buf_index, int peer, const char* what) {
    try {
      frame_bufs_[buf_index]->waitSend(timeout_);
      if (tails_[buf_index]) tails_[buf_index]->waitSend(timeout_);
    } catch (const std::exception& e) {
      return Fail(peer, what, e);
    }
    return Status::OK();
  }

  Status Send(int peer, uint64_t slot, const std::string& msg, const char* what) {
    // A non-root rank sends from its own frame (index = its rank).
    HVD_RETURN_IF_ERROR(StartSend(rank(), peer, slot, msg));
    return FinishSend(rank(), peer, what);
  }

  Status FinishRecv(int peer, uint64_t slot, std::string* out, const char* what) {
    try {
      frame_bufs_[peer]->waitRecv(timeout_);
      uint64_t len;
      std::memcpy(&len, frames_[peer].data(), kHeaderBytes);
      if (len > kMaxMessageBytes) {
        broken_ = Status::Internal("corrupt control frame from rank " + std::to_string(peer) +
                                   ": length " + std::to_string(len));
        return broken_;
      }
      out->assign(frames_[peer].data() + kHeaderBytes, std::min<uint64_t>(len, kInlineBytes));
      if (len > kInlineBytes) {
        std::string tail(len - kInlineBytes, '\0');
        auto buf = context_->createUnboundBuffer(&tail[0], tail.size());
        buf->recv(peer, slot | kTailBit);
        buf->waitRecv(timeout_);
        out->append(tail);
      }
    } catch (const std::exception& e) {
      return Fail(peer, what, e);
    }
    return Status::OK();
  }

  std::shared_ptr<gloo::Context> context_;
  std::chrono::milliseconds timeout_;
  std::vector<std::vector<char>> frames_;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> frame_bufs_;
  std::vector<std::string> tail_data_;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> tails_;
  uint64_t counter_ = 0;
  uint64_t words_counter_ = 0;
  std::vector<uint64_t> words_, words_in_;  // this rank's words; a partner's, received
  std::unique_ptr<gloo::transport::UnboundBuffer> words_buf_, words_in_buf_;
  ButterflyPlan words_plan_;
  // Per peer: the slot whose receive was posted ahead into its frame, or 0 (slots
  // carry kSlotPrefix, so none is 0).
  std::vector<uint64_t> posted_ahead_;
  Status broken_;
  std::set<int> lost_;
};

}  // namespace

std::unique_ptr<ControlChannel> NewGlooControlChannel(std::shared_ptr<gloo::Context> context,
                                                      std::chrono::milliseconds timeout) {
  return std::make_unique<GlooControlChannel>(std::move(context), timeout);
}

}  // namespace hvd
