// ResponseCache: the steady-state fast path of negotiation (Horovod's idea).
//
// Once a tensor has been negotiated, every rank keeps its response (and this
// rank's own request) at the same index. A later request equal to the cached one
// is sent as one bit of a bit vector instead of a full request; the coordinator
// ANDs the ranks' vectors, and a set bit means "ready everywhere". Every rank then
// rebuilds the responses from its own copy of the cache.
//
// All ranks make the same Put/Touch/Erase calls in the same order (they follow
// the response lists, which are identical), so indices and LRU order agree
// everywhere without being exchanged. Not thread-safe: the background thread owns it.
#ifndef HVD_CONTROLLER_RESPONSE_CACHE_H_
#define HVD_CONTROLLER_RESPONSE_CACHE_H_

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "controller/messages.pb.h"

namespace hvd {

class ResponseCache {
 public:
  explicit ResponseCache(size_t capacity)
      : capacity_(capacity), slots_(capacity), follows_(capacity + 1, kNoIndex),
        last_(static_cast<uint32_t>(capacity)), used_at_(capacity, 0) {}

  size_t capacity() const { return capacity_; }
  size_t size() const { return by_name_.size(); }

  enum class Match { kNone, kHit, kChanged };
  // Whether `request` matches the cached request for its name; the index on a hit
  // or a change.
  //
  // A step's tensors come in the same order every step, so the entry that followed
  // the previous lookup's last time is tried first, and the lookup by name (a hash
  // and a few cache misses per tensor) is needed only when the order changes.
  Match Lookup(const proto::Request& request, uint32_t* index);
  // Lookup's first half: the index cached under `name`, if any (the same guess
  // first).
  bool Find(const std::string& name, uint32_t* index);

  // Caches (request, response) for response.names(0), a single-tensor response,
  // evicting the least recently used entry when full. No-op if already cached or
  // if the capacity is 0. Returns the evicted index, or -1; the evicted entry's
  // request goes to `evicted_request` when non-null.
  int64_t Put(const proto::Request& request, const proto::Response& response,
              proto::Request* evicted_request = nullptr);

  // Marks `index` most recently used.
  void Touch(uint32_t index);

  // Drops `index`; its request is returned through `request` when non-null.
  void Erase(uint32_t index, proto::Request* request = nullptr);

  bool Has(uint32_t index) const { return index < capacity_ && used_at_[index] != 0; }
  const proto::Response& response(uint32_t index) const { return slots_[index].response; }
  const proto::Request& request(uint32_t index) const { return slots_[index].request; }

  // Puts so far of a name whose entry had been evicted (within the last
  // `capacity` evictions): a cache smaller than the set of tensors in use
  // evicts entries that are needed again, and every such put means that a
  // tensor which could have travelled as one bit was negotiated in full.
  int64_t refills() const { return refills_; }
  // How many tensors are in use, as far as the cache can tell: its entries plus
  // the names evicted recently that have not come back.
  size_t names_in_use() const { return by_name_.size() + evicted_.size(); }

  // Changes whenever an entry is put or erased (not on Touch): a plan built from
  // the responses at some indices stays valid while this stays the same.
  uint64_t generation() const { return generation_; }

  // Number of 64-bit words in a bit vector over the cache.
  size_t words() const { return (capacity_ + 63) / 64; }

  // True when the two requests ask for the same collective with the same
  // parameters, names aside (a lookup has already matched the name). The group id
  // is not compared: each grouped call gets a new one, and a group's tensors are
  // enqueued together, so they hit together anyway.
  static bool SameParameters(const proto::Request& a, const proto::Request& b);

 private:
  void RememberEviction(const std::string& name);
  // The used slot touched or put longest ago (the cache is full when it is asked).
  uint32_t LeastRecentlyUsed() const;

  struct Slot {
    proto::Request request;
    proto::Response response;
  };
  size_t capacity_;
  std::vector<Slot> slots_;
  std::unordered_map<std::string, uint32_t> by_name_;
  // Lookup's guess: follows_[i] is the index found right after index i last time
  // (follows_[capacity_]: after a miss). Only a guess: Lookup checks the slot's name.
  static constexpr uint32_t kNoIndex = ~uint32_t{0};
  std::vector<uint32_t> follows_;
  uint32_t last_;
  // When each slot was last put or touched, by clock_ (0: unused, which Has reads). A stamp is one
  // store per hit where a linked list's splice was a few cache misses; eviction
  // scans for the oldest stamp instead, and a cache evicts only when the tensors
  // in use do not fit it (see refills()).
  std::vector<uint64_t> used_at_;
  uint64_t clock_ = 0;
  std::vector<uint32_t> free_;
  uint32_t next_unused_ = 0;
  // Names evicted and not put again since, each with the number of its eviction;
  // eviction_order_ keeps the last `capacity_` evictions, oldest first, and
  // bounds evicted_ (a name put again or evicted anew leaves a stale pair there).
  std::unordered_map<std::string, uint64_t> evicted_;
  std::deque<std::pair<std::string, uint64_t>> eviction_order_;
  uint64_t evictions_ = 0;
  int64_t refills_ = 0;
  uint64_t generation_ = 0;
};

// Splits a fused response into one response per tensor (inverse of fusion).
std::vector<proto::Response> SplitResponse(const proto::Response& fused, int size);

}  // namespace hvd

#endif  // HVD_CONTROLLER_RESPONSE_CACHE_H_
