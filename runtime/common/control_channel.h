// ControlChannel: the primitives the coordinator needs, per communicator.
//
// Each cycle every rank calls Gather (the root receives every rank's request list)
// and then Broadcast (every rank receives the root's response list); at two ranks,
// a channel may offer Exchange instead (see there). Calls are
// collective and made in the same order on every rank. A failure names the rank
// that could not be reached. The root's Gather waits for every peer even after one
// is lost, so it can name all of them; a timeout breaks the channel for good.
//
// Transport-neutral: the transports implement it (runtime/transport/gloo,
// runtime/transport/shm) and the controller (controller/controller.h) uses it.
#ifndef HVD_RUNTIME_COMMON_CONTROL_CHANNEL_H_
#define HVD_RUNTIME_COMMON_CONTROL_CHANNEL_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace hvd {

class ControlChannel {
 public:
  virtual ~ControlChannel() = default;

  // On the root, `all` receives every rank's message (the root's own at its index);
  // elsewhere `mine` is sent and `all` is left empty.
  virtual Status Gather(const std::string& mine, std::vector<std::string>* all) = 0;

  // The root's `*msg` reaches every rank, replacing `*msg` there. On the root,
  // peers already known to be lost are skipped, so an abort still reaches the rest.
  virtual Status Broadcast(std::string* msg) = 0;

  // Two ranks only (size() == 2), where SupportsExchange(): each rank sends `mine`
  // and receives the other's into `*theirs`, both on their way at once, so a
  // cycle's request lists cross in one trip instead of a Gather and a Broadcast's
  // two. Collective like the others; a failure names the other rank. A channel
  // used with Exchange is used with nothing else (each call posts the next one's
  // receive ahead).
  virtual bool SupportsExchange() const { return false; }
  virtual Status Exchange(const std::string& mine, std::string* theirs) {
    (void)mine;
    (void)theirs;
    return Status::Internal("this control channel has no Exchange");
  }

  // Peers this rank has lost contact with (their connection closed), ascending.
  virtual std::vector<int> lost_peers() const { return {}; }

  // As Backend::Abort: peers waiting on this rank fail now with `why`.
  virtual void Abort(const Status& why) { (void)why; }

  virtual int rank() const = 0;
  virtual int size() const = 0;
};

}  // namespace hvd

#endif  // HVD_RUNTIME_COMMON_CONTROL_CHANNEL_H_
