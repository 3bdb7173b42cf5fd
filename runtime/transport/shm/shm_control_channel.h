// The shared-memory ControlChannel (see control_channel.h), for communicators whose
// ranks share a host: the coordinator's per-cycle Gather and Broadcast through one
// POSIX shared-memory segment (runtime/transport/shm/shm_segment.h) instead of loopback TCP.
//
// Same semantics as NewGlooControlChannel: root 0, collective calls in the same
// order everywhere, messages of any size up to 256 MiB, every wait bounded by
// `timeout`; a silent peer gives kTimeout and a peer process that exited gives
// kRemoteError "lost rank N (pid P exited) ...", and the channel then stays broken.
// A rank that fails first makes its peers fail at once with its status.
#ifndef HVD_RUNTIME_TRANSPORT_SHM_SHM_CONTROL_CHANNEL_H_
#define HVD_RUNTIME_TRANSPORT_SHM_SHM_CONTROL_CHANNEL_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "runtime/common/control_channel.h"
#include "runtime/common/status.h"
#include "runtime/store/store.h"
#include "runtime/transport/shm/shm_segment.h"

namespace hvd {

// The store, names, ranks, timeout and interrupt are ShmMembership's (shm_segment.h).
struct ShmControlChannelOptions : ShmMembership {
  // Bytes of one message slot (one per rank, plus one for the broadcast). A message
  // that fits (less a 64-byte header) moves in one handshake; longer ones move in
  // slot-sized chunks. Default 64 KiB; at least 4 KiB.
  size_t slot_bytes = 64u << 10;
};

// Connects this rank's channel; collective over the communicator. Errors as for
// CreateShmBackend: kInvalidArgument, kTimeout naming the ranks that never arrived,
// kInternal when the segment cannot be created or mapped.
Status NewShmControlChannel(const ShmControlChannelOptions& opts,
                            std::unique_ptr<ControlChannel>* out);

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_SHM_SHM_CONTROL_CHANNEL_H_
