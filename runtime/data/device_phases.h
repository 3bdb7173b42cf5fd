// DevicePhases: when a response's work ran on the device, for the timeline.
//
// A device backend measures its phases with CUDA events and knows only their
// distances from the end of the response's device work; the host time of that
// end is when the backend saw the work done (its completion signal fires right
// after the device gets there). DevicePhaseSpans turns that into the timeline's
// spans, one set per tensor of the response (fused tensors share them), with the
// host executor's labels: COPY_IN (into the fusion buffer), the collective, and
// COPY_OUT. Pure; no CUDA type.
#ifndef HVD_RUNTIME_DATA_DEVICE_PHASES_H_
#define HVD_RUNTIME_DATA_DEVICE_PHASES_H_

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "runtime/data/response.h"

namespace hvd {

struct DevicePhases {
  using Clock = std::chrono::steady_clock;
  // Milliseconds from the start of each phase to `end`, from CUDA event times. A
  // response without fusion copies has copy_in_ms < 0 and copy_out_ms < 0: its
  // collective runs from collective_ms before the end to the end.
  float copy_in_ms = -1;
  float collective_ms = 0;
  float copy_out_ms = -1;
  Clock::time_point end;  // host time at which the device work was seen done
};

struct PhaseSpan {
  std::string name;
  const char* label;
  DevicePhases::Clock::time_point begin;
  DevicePhases::Clock::time_point end;
};

// The spans of every tensor in `names`: COPY_IN [end - copy_in, end - collective),
// `collective_label` [end - collective, end - copy_out, or end), COPY_OUT
// [end - copy_out, end); phases that did not run are left out.
std::vector<PhaseSpan> DevicePhaseSpans(const std::vector<std::string>& names,
                                        const char* collective_label, const DevicePhases& p);

// Receives a response's device phases once its device work is done: on the
// backend's completion thread, not the loop thread.
using DevicePhasesHook = std::function<void(const std::vector<std::string>& names,
                                            ResponseType type, const DevicePhases& phases)>;

}  // namespace hvd

#endif  // HVD_RUNTIME_DATA_DEVICE_PHASES_H_
