// The shared-memory ControlChannel (see shm_control_channel.h).
//
// The segment holds one *slot* per rank and one broadcast slot. A slot carries one
// *chunk*: a 64-byte header (the whole message's length) and up to
// slot_bytes - 64 bytes of payload; a message is ceil(length / payload) chunks (at
// least one), so the usual ~100-byte cycle is a single chunk each way.
//
// Counters (ShmSegment counters, each with one writer):
//   posted[r]        rank r's chunks written into its slot (for the root: broadcast
//                    chunks written into the broadcast slot);
//   acked[r]         chunks of rank r's slot that the root has consumed (in r's block,
//                    written by the root);
//   bcast_acked[r]   broadcast chunks that rank r has consumed.
//   up[r]            children of rank r that have combined their subtrees, summed
//                    over its word all-reduces (each child adds one a call: the one
//                    counter with several writers);
//   down[r]          word all-reduces whose result rank r has passed down.
// Gather: a rank writes a chunk once acked[r] shows the root consumed its previous
// one, then bumps posted[r]; the root, rank by rank, waits for posted[r], copies the
// chunk out and bumps acked[r]. Broadcast is the mirror: the root writes once every
// bcast_acked[r] has caught up, bumps posted[0]; each rank copies and bumps its
// bcast_acked. Both sides count chunks locally in the same order, so nothing else
// is exchanged. In the usual cycle no rank waits for slot space: a rank's next
// Gather follows a Broadcast that the root only sent after consuming its last one.
//
// AllreduceWords runs over a *tree* of fan-out kFanOut (rank r's children are
// r * kFanOut + 1 ... r * kFanOut + kFanOut), each rank with an *up area* and a
// *down area* of its own after the slots. Up: a rank waits until its up counter
// shows every child's part of call g (g times its children: one wait, one wake-up
// at most, however many children), combines the children's up areas into its words,
// writes the result to its own up area and adds one to its parent's up counter.
// Rank 0 then holds the result: it writes it to its down area and posts down = g;
// every other rank waits for its parent's down = g, copies the parent's down area
// and, if it has children, writes it to its own and posts down = g. Each rank waits
// twice and wakes at most kFanOut ranks, and the tree is log_kFanOut(size) deep (2
// levels below rank 0 up to 272 ranks). Rank 0 waking every rank at once would cost
// it a futex wake of size - 1 sleepers, linear in the ranks (the Broadcast above
// does that). Areas are reused safely: a child writes its up area for call g + 1
// only after reading its parent's down area of call g, which the parent wrote
// after reading the child's up area of g; and a parent writes its down area for
// g + 1 only after every child's part of g + 1, which each child adds after reading
// the parent's down area of g.
#include "runtime/transport/shm/shm_control_channel.h"

#include <algorithm>
#include <cstring>

#include "runtime/transport/shm/shm_segment.h"

namespace hvd {
namespace {

enum Counter : int { kPosted = 0, kAcked = 1, kBcastAcked = 2, kUp = 3, kDown = 4, kNumCounters = 5 };
constexpr size_t kHeaderBytes = 64;
constexpr int kFanOut = 16;
// Each up and down area: the most words one AllreduceWords may carry.
constexpr size_t kMaxWords = 4096;
constexpr size_t kWordAreaBytes = kMaxWords * sizeof(uint64_t);
// The most a control message may carry; a larger length is a corrupt chunk.
constexpr uint64_t kMaxMessageBytes = 256ull << 20;

class ShmControlChannel : public ControlChannel {
 public:
  ShmControlChannel(std::unique_ptr<ShmSegment> seg, size_t slot_bytes)
      : seg_(std::move(seg)), slot_bytes_(slot_bytes), consumed_(seg_->size(), 0) {}

  int rank() const override { return seg_->rank(); }
  int size() const override { return seg_->size(); }

  Status Gather(const std::string& mine, std::vector<std::string>* all) override {
    if (!broken_.ok()) return broken_;
    if (rank() != 0) {
      if (all != nullptr) all->clear();
      return Check(Send(mine));
    }
    all->assign(size(), std::string());
    (*all)[0] = mine;
    for (int r = 1; r < size(); ++r) HVD_RETURN_IF_ERROR(Check(ReceiveFrom(r, &(*all)[r])));
    return Status::OK();
  }

  void Abort(const Status& why) override {
    if (broken_.ok()) broken_ = why;
    seg_->Abort(why);
  }

  Status Broadcast(std::string* msg) override {
    if (!broken_.ok()) return broken_;
    if (size() == 1) return Status::OK();
    return Check(rank() == 0 ? SendBroadcast(*msg) : ReceiveBroadcast(msg));
  }

  bool SupportsWordAllreduce() const override { return true; }

  Status AllreduceWords(std::vector<uint64_t>* words, size_t or_words) override {
    if (!broken_.ok()) return broken_;
    HVD_CHECK(or_words <= words->size());
    if (words->size() > kMaxWords)
      return Status::InvalidArgument("shm control channel: " + std::to_string(words->size()) +
                                     " words to all-reduce, at most " +
                                     std::to_string(kMaxWords));
    if (size() == 1 || words->empty()) return Status::OK();
    return Check(TreeAllreduce(words, or_words));
  }

 private:
  size_t payload() const { return slot_bytes_ - kHeaderBytes; }
  uint8_t* Slot(int r) const { return seg_->data() + static_cast<size_t>(r) * slot_bytes_; }
  uint8_t* BroadcastSlot() const { return Slot(size()); }
  size_t Chunks(uint64_t len) const { return std::max<uint64_t>(1, (len + payload() - 1) / payload()); }

  void WriteChunk(uint8_t* slot, const std::string& msg, size_t c) {
    const uint64_t len = msg.size();
    std::memcpy(slot, &len, sizeof(len));
    const size_t begin = c * payload();
    const size_t n = std::min<size_t>(payload(), len - std::min<size_t>(len, begin));
    if (n > 0) std::memcpy(slot + kHeaderBytes, msg.data() + begin, n);
  }

  // Appends chunk `c` of the message in `slot` to `*out` (sized on the first chunk).
  Status ReadChunk(const uint8_t* slot, int from, size_t c, std::string* out, size_t* chunks) {
    uint64_t len;
    std::memcpy(&len, slot, sizeof(len));
    if (c == 0) {
      if (len > kMaxMessageBytes)
        return Status::Internal("corrupt control message from rank " + std::to_string(from) +
                                ": length " + std::to_string(len));
      out->resize(len);
      *chunks = Chunks(len);
    } else if (len != out->size()) {
      return Status::Internal("corrupt control message from rank " + std::to_string(from) +
                              ": chunk " + std::to_string(c) + " says length " +
                              std::to_string(len) + ", the first said " +
                              std::to_string(out->size()));
    }
    const size_t begin = c * payload();
    const size_t n = std::min<size_t>(payload(), len - std::min<size_t>(len, begin));
    if (n > 0) std::memcpy(&(*out)[begin], slot + kHeaderBytes, n);
    return Status::OK();
  }

  Status Send(const std::string& msg) {
    ShmCounter& acked = seg_->counter(rank(), kAcked);
    for (size_t c = 0, n = Chunks(msg.size()); c < n; ++c) {
      HVD_RETURN_IF_ERROR(seg_->Wait(acked, posted_, 0,
                                     "take the previous request chunk (rank 0 is the coordinator)"));
      WriteChunk(Slot(rank()), msg, c);
      seg_->Post(kPosted, ++posted_);
    }
    return Status::OK();
  }

  Status ReceiveFrom(int r, std::string* out) {
    size_t chunks = 1;
    for (size_t c = 0; c < chunks; ++c) {
      HVD_RETURN_IF_ERROR(seg_->WaitAtLeast(r, kPosted, consumed_[r] + 1, "send its requests"));
      HVD_RETURN_IF_ERROR(ReadChunk(Slot(r), r, c, out, &chunks));
      seg_->PostTo(r, kAcked, ++consumed_[r]);
    }
    return Status::OK();
  }

  Status SendBroadcast(const std::string& msg) {
    for (size_t c = 0, n = Chunks(msg.size()); c < n; ++c) {
      HVD_RETURN_IF_ERROR(
          seg_->WaitAllAtLeast(kBcastAcked, posted_, "take the previous response chunk"));
      WriteChunk(BroadcastSlot(), msg, c);
      seg_->Post(kPosted, ++posted_);
    }
    return Status::OK();
  }

  Status ReceiveBroadcast(std::string* msg) {
    std::string in;
    size_t chunks = 1;
    for (size_t c = 0; c < chunks; ++c) {
      HVD_RETURN_IF_ERROR(seg_->WaitAtLeast(0, kPosted, bcast_consumed_ + 1,
                                            "send the responses (rank 0 is the coordinator)"));
      HVD_RETURN_IF_ERROR(ReadChunk(BroadcastSlot(), 0, c, &in, &chunks));
      seg_->Post(kBcastAcked, ++bcast_consumed_);
    }
    msg->swap(in);
    return Status::OK();
  }

  uint64_t* UpArea(int r) const { return WordArea(r, 0); }
  uint64_t* DownArea(int r) const { return WordArea(r, 1); }
  uint64_t* WordArea(int r, int which) const {
    return reinterpret_cast<uint64_t*>(seg_->data() + slot_bytes_ * (size() + 1) +
                                       (static_cast<size_t>(r) * 2 + which) * kWordAreaBytes);
  }

  Status TreeAllreduce(std::vector<uint64_t>* words, size_t or_words) {
    const uint32_t g = ++word_calls_;
    const size_t n = words->size();
    const int first_child = rank() * kFanOut + 1;
    const int last_child = std::min(size() - 1, rank() * kFanOut + kFanOut);
    if (first_child <= last_child) {
      const uint32_t children = static_cast<uint32_t>(last_child - first_child + 1);
      Status s = seg_->Wait(seg_->counter(rank(), kUp), g * children, first_child,
                            "combine its negotiation words");
      if (s.code() == StatusCode::kTimeout)  // some child is late: name them all
        s = Status::Timeout("rank " + std::to_string(rank()) +
                            " timed out waiting for ranks " + std::to_string(first_child) + ".." +
                            std::to_string(last_child) +
                            " (its children in the negotiation tree) to combine their words: " +
                            s.message());
      HVD_RETURN_IF_ERROR(s);
      for (int c = first_child; c <= last_child; ++c)
        CombineWords(UpArea(c), n, or_words, words->data());
    }
    if (rank() != 0) {
      const int parent = (rank() - 1) / kFanOut;
      std::memcpy(UpArea(rank()), words->data(), n * sizeof(uint64_t));
      seg_->AddTo(parent, kUp, 1);
      HVD_RETURN_IF_ERROR(seg_->WaitAtLeast(parent, kDown, g,
                                            "pass down the combined negotiation words"));
      std::memcpy(words->data(), DownArea(parent), n * sizeof(uint64_t));
    }
    if (first_child <= last_child) {
      std::memcpy(DownArea(rank()), words->data(), n * sizeof(uint64_t));
      seg_->Post(kDown, g);
    }
    return Status::OK();
  }

  Status Check(Status s) {
    if (s.ok()) return s;
    broken_ = s.Prepend("shm control channel");
    seg_->Abort(broken_);
    return broken_;
  }

  std::unique_ptr<ShmSegment> seg_;
  size_t slot_bytes_;
  uint32_t posted_ = 0;                // chunks this rank wrote (root: broadcast chunks)
  std::vector<uint32_t> consumed_;     // root: chunks taken from each rank's slot
  uint32_t bcast_consumed_ = 0;        // broadcast chunks this rank took
  uint32_t word_calls_ = 0;            // AllreduceWords calls so far
  Status broken_;
};

}  // namespace

Status NewShmControlChannel(const ShmControlChannelOptions& opts,
                            std::unique_ptr<ControlChannel>* out) {
  if (opts.slot_bytes < 4096)
    return Status::InvalidArgument("shm control channel: slot_bytes " +
                                   std::to_string(opts.slot_bytes) + " is below 4096");
  const size_t slot_bytes = opts.slot_bytes / 64 * 64;
  ShmSegmentOptions so;
  static_cast<ShmMembership&>(so) = opts;
  so.kind = "control";
  so.data_bytes = slot_bytes * (opts.size + 1) + kWordAreaBytes * 2 * opts.size;
  so.counters_per_rank = kNumCounters;
  std::unique_ptr<ShmSegment> seg;
  HVD_RETURN_IF_ERROR(ShmSegment::Create(so, &seg));
  *out = std::make_unique<ShmControlChannel>(std::move(seg), slot_bytes);
  return Status::OK();
}

}  // namespace hvd
