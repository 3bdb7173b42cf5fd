#include "controller/loop/timeline.h"

#include <algorithm>
#include <cctype>
#include <cerrno>

namespace hvd {

Status Timeline::Open(const std::string& path, int rank, std::unique_ptr<Timeline>* out) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr)
    return Status::InvalidArgument("cannot open timeline '" + path + "' for writing: " +
                                   ErrnoText(errno));
  out->reset(new Timeline(f, path, rank));
  return Status::OK();
}

Timeline::Timeline(std::FILE* file, const std::string& path, int rank)
    : file_(file), path_(path), rank_(rank), start_(Clock::now()) {
  // Timestamps count from start_; its wall-clock time lets traces of several runs
  // be lined up (Horovod's start_time_since_epoch_in_micros).
  const int64_t epoch_us = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  buffer_ = "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + std::to_string(rank_) +
            ", \"args\": {\"name\": \"dprun rank " + std::to_string(rank_) + "\"}},\n" +
            "{\"name\": \"start_time\", \"ph\": \"M\", \"pid\": " + std::to_string(rank_) +
            ", \"args\": {\"start_time_since_epoch_in_micros\": " + std::to_string(epoch_us) + "}},\n";
  writer_ = std::thread([this] { WriterLoop(); });
}

Timeline::~Timeline() { Close(); }

void Timeline::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return;
    closing_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void Timeline::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return closing_; });
    std::string chunk;
    chunk.swap(buffer_);
    const bool last = closing_;
    lock.unlock();
    if (last) chunk += "{\"name\": \"end\", \"ph\": \"i\", \"pid\": " + std::to_string(rank_) +
                       ", \"tid\": 0, \"ts\": " + std::to_string(Micros(Clock::now())) + ", \"s\": \"g\"}\n]\n";
    if (!chunk.empty()) {
      std::fwrite(chunk.data(), 1, chunk.size(), file_);
      std::fflush(file_);
    }
    if (last) {
      std::fclose(file_);
      return;
    }
    lock.lock();
  }
}

int64_t Timeline::Micros(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::microseconds>(t - start_).count();
}

std::string Timeline::Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

int Timeline::Row(const std::string& name) {
  auto it = rows_.find(name);
  if (it != rows_.end()) return it->second;
  const int row = static_cast<int>(rows_.size()) + 1;
  rows_.emplace(name, row);
  buffer_ += "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + std::to_string(rank_) +
             ", \"tid\": " + std::to_string(row) + ", \"args\": {\"name\": \"" + Escape(name) +
             "\"}},\n";
  return row;
}

void Timeline::Negotiated(const std::string& name, OpType op, const Arrivals& a,
                          Clock::time_point ready, bool cached) {
  Clock::time_point first = ready;
  if (a.each != nullptr) {
    for (const auto& t : *a.each)
      if (t != Clock::time_point{} && t < first) first = t;
  } else if (a.first != Clock::time_point{}) {
    first = std::min(first, a.first);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) return;
  const std::string head = "\"pid\": " + std::to_string(rank_) + ", \"tid\": " + std::to_string(Row(name));
  std::string phase = std::string("NEGOTIATE_") + OpTypeName(op);
  for (char& c : phase) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  buffer_ += "{\"name\": \"" + phase + "\", \"ph\": \"X\", " + head + ", \"ts\": " +
             std::to_string(Micros(first)) + ", \"dur\": " + std::to_string(Micros(ready) - Micros(first)) +
             ", \"args\": {\"cached\": " + (cached ? "true" : "false") + "}},\n";
  auto mark = [&](size_t r, Clock::time_point t) {
    buffer_ += "{\"name\": \"rank " + std::to_string(r) + " ready\", \"ph\": \"i\", \"s\": \"t\", " + head +
               ", \"ts\": " + std::to_string(Micros(t)) + "},\n";
  };
  if (a.each != nullptr) {
    for (size_t r = 0; r < a.each->size(); ++r)
      if ((*a.each)[r] != Clock::time_point{}) mark(r, (*a.each)[r]);
  } else if (a.last_rank >= 0) {  // only the last rank's time is known
    mark(static_cast<size_t>(a.last_rank), a.last);
  }
}

void Timeline::Instant(const char* what, Clock::time_point t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) return;
  buffer_ += "{\"name\": \"" + std::string(what) + "\", \"ph\": \"i\", \"s\": \"p\", \"pid\": " +
             std::to_string(rank_) + ", \"tid\": 0, \"ts\": " + std::to_string(Micros(t)) + "},\n";
}

void Timeline::Span(const std::string& name, const char* phase, Clock::time_point begin,
                    Clock::time_point end) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) return;
  const int row = Row(name);
  buffer_ += "{\"name\": \"" + std::string(phase) + "\", \"ph\": \"X\", \"pid\": " + std::to_string(rank_) +
             ", \"tid\": " + std::to_string(row) + ", \"ts\": " + std::to_string(Micros(begin)) +
             ", \"dur\": " + std::to_string(Micros(end) - Micros(begin)) + "},\n";
}

}  // namespace hvd
