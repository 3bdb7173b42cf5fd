// Backend: moves bytes among the ranks of one communicator (the global set or a
// process set). Backends know nothing of tensors, names or negotiation: the
// executor (runtime/data/executor.h) hands them flat host buffers in the agreed order.
//
// Every call is collective: each rank of the communicator makes the same calls in
// the same order. A failure (peer lost, timeout) returns kRemoteError or kTimeout
// and leaves the backend broken; the runtime then fails all outstanding work.
// Not thread-safe: only the background thread calls a backend.
#ifndef HVD_RUNTIME_COMMON_BACKEND_H_
#define HVD_RUNTIME_COMMON_BACKEND_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/types.h"

namespace hvd {

// One tensor of a piecewise all-reduce (Backend::AllreducePieces): `count`
// elements read from `in`, results written to `out` (which may equal `in`).
struct AllreducePiece {
  const void* in;
  void* out;
  int64_t count;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* Name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Reduces `count` elements at `buf` in place across all ranks; every rank ends
  // with bitwise-identical bytes. AVERAGE reduces as SUM: the caller divides.
  virtual Status Allreduce(void* buf, int64_t count, DataType dtype, ReduceOp op) = 0;

  // Optional (SupportsPieces): all-reduces the pieces' inputs as if laid end to end
  // in one buffer, writing each piece's part of the result to its `out`, and calls
  // finish(out, count) on every stretch of output right after writing it (while it
  // is in cache; null: nothing to do). Saves fused tensors the copies into and out
  // of a fusion buffer. Pieces must not overlap each other, except a piece's `in`
  // with its own `out`.
  using FinishFn = std::function<void(void* out, int64_t count)>;
  virtual bool SupportsPieces() const { return false; }
  virtual Status AllreducePieces(const std::vector<AllreducePiece>& pieces, DataType dtype,
                                 ReduceOp op, const FinishFn& finish) {
    (void)pieces, (void)dtype, (void)op, (void)finish;
    return Status::Internal(std::string(Name()) + " backend has no piecewise all-reduce");
  }

  // Concatenates each rank's `in` (rank r sends bytes_per_rank[r] bytes) into `out`
  // in rank order; `out` holds the sum of bytes_per_rank.
  virtual Status Allgatherv(const void* in, void* out,
                            const std::vector<int64_t>& bytes_per_rank) = 0;

  // Copies `bytes` bytes at `buf` from `root` to every rank.
  virtual Status Broadcast(void* buf, int64_t bytes, int root) = 0;

  // Sends send_bytes[r] bytes (consecutive in `in`) to each rank r and receives
  // recv_bytes[r] bytes from each rank r into `out`, in rank order.
  virtual Status Alltoallv(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                           const std::vector<int64_t>& recv_bytes) = 0;

  // Reduces `buf` (sum over recv_counts elements) and leaves rank r's block,
  // recv_counts[r] elements, at the start of `out`. `buf` may be clobbered.
  virtual Status ReduceScatter(void* buf, void* out, const std::vector<int64_t>& recv_counts,
                               DataType dtype, ReduceOp op) = 0;

  virtual Status Barrier() = 0;

  // Makes peers that wait on this rank, now or later, fail at once with `why`
  // instead of waiting out their timeouts; the backend is broken afterwards. Called
  // by the runtime when the job fails. Backends whose peers notice a closed
  // connection need do nothing.
  virtual void Abort(const Status& why) { (void)why; }
};

// AllreducePieces in a communicator of one rank: each piece's input is its result
// (copied to its output if apart, then finished).
inline void AllreducePiecesAlone(const std::vector<AllreducePiece>& pieces, DataType dtype,
                                 const Backend::FinishFn& finish) {
  for (const auto& p : pieces) {
    if (p.count == 0) continue;
    if (p.out != p.in) std::memmove(p.out, p.in, p.count * DataTypeSize(dtype));
    if (finish) finish(p.out, p.count);
  }
}

}  // namespace hvd

#endif  // HVD_RUNTIME_COMMON_BACKEND_H_
