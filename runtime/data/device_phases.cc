#include "runtime/data/device_phases.h"

namespace hvd {
namespace {

DevicePhases::Clock::time_point Before(const DevicePhases& p, float ms) {
  return p.end - std::chrono::duration_cast<DevicePhases::Clock::duration>(
                     std::chrono::duration<double, std::milli>(ms));
}

}  // namespace

std::vector<PhaseSpan> DevicePhaseSpans(const std::vector<std::string>& names,
                                        const char* collective_label, const DevicePhases& p) {
  const auto collective_begin = Before(p, p.collective_ms);
  const auto collective_end = p.copy_out_ms >= 0 ? Before(p, p.copy_out_ms) : p.end;
  std::vector<PhaseSpan> spans;
  for (const std::string& name : names) {
    if (p.copy_in_ms >= 0) spans.push_back({name, "COPY_IN", Before(p, p.copy_in_ms), collective_begin});
    spans.push_back({name, collective_label, collective_begin, collective_end});
    if (p.copy_out_ms >= 0) spans.push_back({name, "COPY_OUT", collective_end, p.end});
  }
  return spans;
}

}  // namespace hvd
