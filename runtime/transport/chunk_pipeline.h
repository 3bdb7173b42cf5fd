// ChunkPipeline: one helper thread that runs a job while its owner does something
// else, for overlapping a fused all-reduce's copies with its collective.
//
// A large fused all-reduce on the hierarchical path costs pack + all-reduce +
// unpack when done in turn. Split into chunks, the owner (the background loop)
// all-reduces chunk c while this thread unpacks chunk c-1 and packs chunk c+1, so
// the copies hide behind the wire (HierarchicalBackend::AllreducePieces). The
// thread starts with the first job and lives as long as the pipeline.
//
// Threads: Run and Wait belong to the owner, one job at a time (Run after Wait).
#ifndef HVD_RUNTIME_TRANSPORT_CHUNK_PIPELINE_H_
#define HVD_RUNTIME_TRANSPORT_CHUNK_PIPELINE_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace hvd {

class ChunkPipeline {
 public:
  ChunkPipeline() = default;
  ~ChunkPipeline();
  ChunkPipeline(const ChunkPipeline&) = delete;
  ChunkPipeline& operator=(const ChunkPipeline&) = delete;

  // Starts `job` on the helper thread and returns at once.
  void Run(std::function<void()> job);
  // Returns once the job given to Run has finished (at once if there is none). No
  // timeout: a job is memory copies of at most one chunk each way, which always end.
  void Wait();

 private:
  void Loop();

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;  // guarded by mu_; empty when idle
  bool stop_ = false;          // guarded by mu_
};

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_CHUNK_PIPELINE_H_
