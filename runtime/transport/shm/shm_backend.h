// ShmBackend: the CPU data plane among the ranks of one communicator that share a
// host, through one POSIX shared-memory segment (runtime/transport/shm/shm_segment.h) instead of
// loopback TCP. The algorithms are described at the top of shm_backend.cc.
//
// Every rank of the communicator must be on this host and create its ShmBackend
// with the same options (store scope, name prefix, size, segment_bytes); creation
// is itself collective and bounded by `timeout`. Errors follow runtime/common/backend.h: a
// peer that stops answering gives kTimeout naming it, a peer process that exited
// gives kRemoteError "lost rank N (pid P exited)", and the backend then stays broken,
// returning the same status from every later call. A rank that fails first also
// tells the others (they fail at once with its status) rather than letting them wait
// out their own timeouts.
//
// Buffers: Allgatherv's `in` may be `out` plus this rank's offset (in place) but must
// not overlap `out` otherwise; ReduceScatter's `out` may overlap `buf`; Alltoallv's
// `in` and `out` must not overlap.
//
// Works the same whether ranks are processes or threads of one process; several
// communicators (each with its own segment) may run concurrently. The segment takes
// (size + 1) * segment_bytes of /dev/shm, reserved at creation (a /dev/shm too small
// for it fails creation with kInternal rather than faulting later).
#ifndef HVD_RUNTIME_TRANSPORT_SHM_SHM_BACKEND_H_
#define HVD_RUNTIME_TRANSPORT_SHM_SHM_BACKEND_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "runtime/common/backend.h"
#include "runtime/store/store.h"
#include "runtime/transport/shm/shm_segment.h"

namespace hvd {

// The store (already scoped to this communicator, e.g. NewPrefixStore(base,
// "ps3/")), names, ranks, timeout (creation and every wait inside a collective) and
// interrupt are ShmMembership's (shm_segment.h).
struct ShmOptions : ShmMembership {
  // Staging bytes per rank (default 4 MiB). The segment holds size + 1 such areas
  // (one per rank plus the shared result area). Buffers larger than a staging area
  // are pipelined through it in segments. At least 128 * size bytes.
  size_t segment_bytes = 4u << 20;
};

// Creates this rank's backend; collective over the communicator. kInvalidArgument
// for bad options, kTimeout naming the ranks that never arrived, kInternal when the
// segment cannot be created or mapped (e.g. /dev/shm is full).
Status CreateShmBackend(const ShmOptions& opts, std::unique_ptr<Backend>* out);

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_SHM_SHM_BACKEND_H_
