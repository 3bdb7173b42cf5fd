// TensorEntry and TensorQueue: this rank's collectives between enqueue and completion.
//
// User threads Enqueue; the background thread visits the entries enqueued since the
// last cycle (PopNew, to send their requests), and after negotiation takes the
// entries named by each response (TakeAll). A name stays reserved from Enqueue until its entry is taken, so the same
// name enqueued twice while in flight is refused with kInvalidUsage.
// Thread-safe; no lock is held while communicating.
#ifndef HVD_RUNTIME_DATA_TENSOR_QUEUE_H_
#define HVD_RUNTIME_DATA_TENSOR_QUEUE_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/common/dims.h"
#include "runtime/common/status.h"
#include "runtime/common/types.h"
#include "runtime/data/work.h"

namespace hvd {

// One collective as this rank enqueued it. Buffers belong to the caller and must
// stay valid until the Work completes.
struct TensorEntry {
  std::string name;
  OpType type = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  const void* input = nullptr;
  void* output = nullptr;
  // Full shape; an allreduce of `count` elements has shape {count}.
  Dims shape;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  int root_rank = 0;
  int device = -1;
  // Device tensors: the caller's cudaStream_t (null: the legacy default stream). The
  // collective starts after the work queued on it so far; the Work completes once
  // the GPU work is done. Local to this rank (not negotiated).
  void* stream = nullptr;
  std::vector<int64_t> splits;
  int64_t group_id = 0;
  int group_size = 0;
  std::shared_ptr<Work> work;
  // Barriers only: run by the background thread when every rank has arrived
  // (process-set changes use it); its status completes the Work.
  std::function<Status()> loop_action;
  // TensorQueue's bookkeeping: the entry's index in its list of entries not yet
  // popped (PopNew), or -1.
  int64_t unpopped_slot = -1;

  int64_t NumElements() const;
};

class TensorQueue {
 public:
  // Adds entries atomically (a group goes in one cycle). Refuses with kInvalidUsage,
  // adding none, if a name is already in flight or repeated in `entries`.
  Status Enqueue(std::vector<TensorEntry> entries) { return Enqueue(entries.data(), entries.size()); }
  // The same for entries[0..n), which are moved from when they are added.
  Status Enqueue(TensorEntry* entries, size_t n);

  // Calls f(entry) for every entry added since the last call, in the order they
  // were added, under the queue's lock (f must not call back into the queue), and
  // forgets them. The runtime turns each into the request it sends.
  // An entry taken before it was popped (an error response can name a tensor this
  // rank enqueued after the cycle began) is never visited.
  template <typename F>
  void PopNew(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    for (TensorEntry* e : new_) {
      if (e == nullptr) continue;
      e->unpopped_slot = -1;
      f(static_cast<const TensorEntry&>(*e));
    }
    new_.clear();
  }

  using Map = std::unordered_map<std::string, TensorEntry>;

  // Entries taken for one response. They stay in the queue's map nodes (no entry
  // is moved or copied) until Recycle hands the nodes back for reuse.
  class Taken {
   public:
    int size() const { return static_cast<int>(nodes_.size()); }
    // names[i]'s entry, or null when this rank had none.
    TensorEntry* get(int i) { return nodes_[i] ? &nodes_[i].mapped() : nullptr; }

   private:
    friend class TensorQueue;
    std::vector<Map::node_type> nodes_;
  };

  // Removes the entries for `names`, under one lock, into `out` (replacing what
  // it held): out->get(i) is names[i]'s entry.
  void TakeAll(const std::vector<std::string>& names, Taken* out);

  // Once their response has run: drops the taken entries' Works and actions and
  // keeps their nodes for later enqueues. Leaves `taken` empty.
  void Recycle(Taken* taken);

  // Completes every entry with `status` and empties the queue; later Enqueue calls
  // are refused with `status` too when `refuse_new` is set.
  void FailAll(const Status& status, bool refuse_new);

  size_t size() const;

 private:
  // Adds `e` under its name, reusing a spare node; false if the name is taken.
  bool Insert(TensorEntry* e);

  mutable std::mutex mu_;
  Map entries_;
  // Nodes of taken entries, reused by later enqueues (a step's tensors come back
  // every step), so that an enqueue allocates no map node or key.
  std::vector<Map::node_type> spare_;
  // Entries added since the last PopNew, in order. They live in entries_' nodes,
  // which do not move while the entry is in the map; TakeAll nulls the slot of an
  // entry it takes before it was popped, and FailAll clears the list with the map.
  std::vector<TensorEntry*> new_;
  Status refusal_;
};

}  // namespace hvd

#endif  // HVD_RUNTIME_DATA_TENSOR_QUEUE_H_
