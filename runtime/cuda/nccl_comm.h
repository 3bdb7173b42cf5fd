// NcclComm: one NCCL communicator, created non-blocking so that nothing waits on
// it longer than the timeout.
//
// Creation: rank 0 calls ncclGetUniqueId and publishes it in the store (key
// "nccl_unique_id"); the others read it, bounded by the timeout. Every rank then
// calls ncclCommInitRankConfig with blocking = 0 and polls ncclCommGetAsyncError
// until the communicator is ready; past the timeout it aborts it (kTimeout).
//
// Every later NCCL call goes through Run, which waits out ncclInProgress (bounded
// by the same timeout) and turns a failure into a Status with NCCL's text
// (ncclGetErrorString and ncclGetLastError). The first failure is sticky: the
// communicator is aborted and every later Run returns it.
// Thread-safe: the background thread issues calls while the finalizer thread polls
// for asynchronous errors and may abort a collective that hangs.
#ifndef HVD_RUNTIME_CUDA_NCCL_COMM_H_
#define HVD_RUNTIME_CUDA_NCCL_COMM_H_

#include <nccl.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/common/status.h"
#include "runtime/store/store.h"

namespace hvd {
namespace cuda {

class NcclComm {
 public:
  // Collective over `size` ranks; `device` must be current on the calling thread.
  static Status Create(Store* store, int rank, int size, std::chrono::milliseconds timeout,
                       std::unique_ptr<NcclComm>* out);
  // Aborts the communicator if it is still alive (local and prompt; the owner has
  // drained its work first).
  ~NcclComm();

  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // Runs `call` (one NCCL call, or a ncclGroupStart..ncclGroupEnd block that
  // returns the first failure) and waits until NCCL has queued it. `what` names
  // the operation in errors.
  Status Run(const std::string& what, const std::function<ncclResult_t(ncclComm_t)>& call);

  // An asynchronous failure NCCL found in the background, or the sticky failure.
  Status CheckAsyncError();

  // Aborts the communicator (if alive) and makes `why` the sticky failure.
  void Abort(const Status& why);

  // OK until the first failure.
  Status status();

  int size() const { return size_; }
  int rank() const { return rank_; }

 private:
  NcclComm(ncclComm_t comm, int rank, int size, std::chrono::milliseconds timeout)
      : comm_(comm), rank_(rank), size_(size), timeout_(timeout) {}
  // Polls ncclCommGetAsyncError until no operation is in progress: OK, NCCL's
  // failure, or kTimeout past the timeout. mu_ held.
  Status WaitLocked(const std::string& what);
  // Records `why` (the first failure wins) and aborts the communicator. mu_ held.
  void FailLocked(const Status& why);

  std::mutex mu_;
  ncclComm_t comm_;  // null once aborted
  Status broken_;
  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace cuda
}  // namespace hvd

#endif  // HVD_RUNTIME_CUDA_NCCL_COMM_H_
