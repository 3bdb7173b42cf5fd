#include "launcher/host_list.h"

#include <algorithm>
#include <sstream>

namespace hvd {
namespace launcher {
namespace {

constexpr int kMaxSlots = 1 << 20;

bool ParseSlots(const std::string& text, int* out) {
  if (text.empty() || text.size() > 7 || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  const int v = std::stoi(text);
  if (v < 1 || v > kMaxSlots) return false;
  *out = v;
  return true;
}

// A host name or address: no spaces, commas or shell-significant characters, and not
// starting with '-' (it becomes an ssh destination).
bool IsPlausibleHost(const std::string& h) {
  if (h.empty() || h[0] == '-' || h.size() > 255) return false;
  return std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_' || c == ':' || c == '@' || c == '%';
  });
}

Status AddHost(HostSlots host, const std::string& where, std::vector<HostSlots>* hosts) {
  if (!IsPlausibleHost(host.host))
    return Status::InvalidUsage(where + ": '" + host.host + "' is not a host name or address");
  for (const HostSlots& h : *hosts)
    if (h.host == host.host)
      return Status::InvalidUsage(where + ": host '" + host.host + "' is listed twice");
  hosts->push_back(std::move(host));
  return Status::OK();
}

}  // namespace

Status ParseHostList(const std::string& list, std::vector<HostSlots>* out) {
  std::vector<HostSlots> hosts;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const std::string entry = list.substr(pos, end - pos);
    const std::string where = "-H entry '" + entry + "'";
    if (entry.empty()) return Status::InvalidUsage("-H '" + list + "' has an empty entry");
    HostSlots h;
    std::string slots;
    if (entry[0] == '[') {  // [v6addr] or [v6addr]:slots
      const size_t close = entry.find(']');
      if (close == std::string::npos) return Status::InvalidUsage(where + ": missing ']'");
      h.host = entry.substr(1, close - 1);
      if (close + 1 < entry.size()) {
        if (entry[close + 1] != ':') return Status::InvalidUsage(where + ": expected ':slots'");
        slots = entry.substr(close + 2);
        if (slots.empty()) return Status::InvalidUsage(where + ": empty slot count");
      }
    } else {
      const size_t colon = entry.find(':');
      h.host = entry.substr(0, colon);
      if (colon != std::string::npos) {
        slots = entry.substr(colon + 1);
        if (slots.find(':') != std::string::npos)
          return Status::InvalidUsage(where + ": an IPv6 address must be in brackets");
      }
    }
    h.slots = 1;
    const bool has_slots = !slots.empty() || entry.back() == ':';
    if (has_slots && !ParseSlots(slots, &h.slots))
      return Status::InvalidUsage(where + ": slots must be a number in 1.." +
                                  std::to_string(kMaxSlots) + ", got '" + slots + "'");
    HVD_RETURN_IF_ERROR(AddHost(std::move(h), where, &hosts));
    pos = end + 1;
  }
  *out = std::move(hosts);
  return Status::OK();
}

Status ParseHostfile(const std::string& text, const std::string& source,
                     std::vector<HostSlots>* out) {
  std::vector<HostSlots> hosts;
  std::istringstream in(text);
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string host;
    if (!(words >> host)) continue;
    const std::string where = source + ":" + std::to_string(line_no);
    HostSlots h;
    h.host = host;
    h.slots = 1;
    for (std::string word; words >> word;) {
      if (word.rfind("slots=", 0) != 0)
        return Status::InvalidUsage(where + ": expected 'host slots=N', got '" + word + "'");
      if (!ParseSlots(word.substr(6), &h.slots))
        return Status::InvalidUsage(where + ": slots must be a number in 1.." +
                                    std::to_string(kMaxSlots) + ", got '" + word.substr(6) + "'");
    }
    HVD_RETURN_IF_ERROR(AddHost(std::move(h), where, &hosts));
  }
  if (hosts.empty()) return Status::InvalidUsage(source + " lists no hosts");
  *out = std::move(hosts);
  return Status::OK();
}

std::string FormatHostList(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const HostSlots& h : hosts) {
    const bool v6 = h.host.find(':') != std::string::npos;
    out += (out.empty() ? "" : ",") + (v6 ? "[" + h.host + "]" : h.host) + ":" +
           std::to_string(h.slots);
  }
  return out;
}

}  // namespace launcher
}  // namespace hvd
