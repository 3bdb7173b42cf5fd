// The control channel over Gloo: one fixed-size frame per rank per direction, an
// 8-byte length and up to kFrameBytes-8 bytes of payload, so the usual cycle costs
// one message each way; longer payloads follow in a second message. Slots come
// from a counter that advances identically on every rank.
#ifndef HVD_RUNTIME_TRANSPORT_GLOO_GLOO_CONTROL_CHANNEL_H_
#define HVD_RUNTIME_TRANSPORT_GLOO_GLOO_CONTROL_CHANNEL_H_

#include <chrono>
#include <memory>

#include <gloo/context.h>

#include "runtime/common/control_channel.h"

namespace hvd {

// A channel over `context` with root 0. Each wait is bounded by `timeout`.
std::unique_ptr<ControlChannel> NewGlooControlChannel(std::shared_ptr<gloo::Context> context,
                                                      std::chrono::milliseconds timeout);

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_GLOO_GLOO_CONTROL_CHANNEL_H_
