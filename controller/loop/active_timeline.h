// ActiveTimeline: the timeline (controller/loop/timeline.h) a rank is writing, if any,
// which StartTimeline and StopTimeline swap while the background loop records
// into it.
//
// Threads. Start and Stop may be called from any thread; they are serialised
// with each other. Current is an atomic load of a shared_ptr (libstdc++ takes
// one of its pooled locks for it) behind a plain atomic flag, so that without a
// timeline it costs one load: the loop and the controller's hooks call it per
// event (a cached step's 1000 tensors, every step) and keep the copy they get
// for that event; a Start meanwhile may be seen an event late. A Stop meanwhile
// closes the file at once; the Timeline drops events recorded after its Close,
// and later events find no timeline.
#ifndef HVD_CONTROLLER_LOOP_ACTIVE_TIMELINE_H_
#define HVD_CONTROLLER_LOOP_ACTIVE_TIMELINE_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "controller/loop/timeline.h"
#include "runtime/common/status.h"

namespace hvd {

class ActiveTimeline {
 public:
  // `rank` labels the traces it writes.
  explicit ActiveTimeline(int rank) : rank_(rank) {}
  // Closes the timeline being written, if any.
  ~ActiveTimeline() { Stop(); }

  ActiveTimeline(const ActiveTimeline&) = delete;
  ActiveTimeline& operator=(const ActiveTimeline&) = delete;

  // Starts writing to `path`, replacing (and completing) the timeline being
  // written; naming the file already being written changes only `mark_cycles`.
  // kInvalidArgument for an empty path or a file that cannot be created.
  Status Start(const std::string& path, bool mark_cycles);
  // Completes and closes the timeline being written, if any: once this returns
  // the file is complete JSON. Idempotent.
  void Stop();

  // The timeline being written, or null.
  std::shared_ptr<Timeline> Current() const {
    if (!active_.load(std::memory_order_acquire)) return nullptr;
    return std::atomic_load(&current_);
  }
  // Whether a CYCLE_START mark goes in for each cycle that ran work.
  bool mark_cycles() const { return mark_cycles_.load(std::memory_order_relaxed); }

 private:
  const int rank_;
  std::mutex mu_;  // serialises Start and Stop
  // Read and written only through std::atomic_load/atomic_store/atomic_exchange.
  std::shared_ptr<Timeline> current_;
  // Whether current_ may be set: set after it is stored, cleared before it is
  // taken, both under mu_.
  std::atomic<bool> active_{false};
  std::atomic<bool> mark_cycles_{false};
};

}  // namespace hvd

#endif  // HVD_CONTROLLER_LOOP_ACTIVE_TIMELINE_H_
