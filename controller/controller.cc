#include "controller/controller.h"

#include <cstdio>

#include "controller/fusion_planner.h"

namespace hvd {
namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

Controller::Controller(std::unique_ptr<ControlChannel> channel, ControllerOptions options)
    : channel_(std::move(channel)),
      options_(std::move(options)),
      table_(channel_->size()),
      shut_down_(channel_->size(), false) {
  if (!options_.log) options_.log = [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); };
}

Status Controller::Cycle(const proto::RequestList& mine, Clock::time_point now,
                         proto::ResponseList* out) {
  std::string bytes;
  if (!mine.SerializeToString(&bytes)) return Status::Internal("cannot serialize request list");
  std::vector<std::string> all;
  HVD_RETURN_IF_ERROR(channel_->Gather(bytes, &all));

  std::string reply;
  if (rank() == 0) {
    std::vector<proto::RequestList> lists(size());
    for (int r = 0; r < size(); ++r) {
      if (!lists[r].ParseFromString(all[r]))
        return Status::Internal("coordinator received a malformed request list from rank " +
                                std::to_string(r) + " (" + std::to_string(all[r].size()) + " bytes)");
    }
    proto::ResponseList responses;
    Coordinate(lists, now, &responses);
    if (!responses.SerializeToString(&reply)) return Status::Internal("cannot serialize responses");
  }
  HVD_RETURN_IF_ERROR(channel_->Broadcast(&reply));
  if (!out->ParseFromString(reply))
    return Status::Internal("rank " + std::to_string(rank()) +
                            " received a malformed response list from the coordinator");
  return Status::OK();
}

void Controller::Coordinate(const std::vector<proto::RequestList>& lists, Clock::time_point now,
                            proto::ResponseList* out) {
  // A rank's own failure ends the job everywhere; the first rank's report wins.
  for (int r = 0; r < size(); ++r) {
    if (lists[r].error_code() != 0) {
      out->set_abort_code(lists[r].error_code());
      out->set_abort_message("rank " + std::to_string(r) + " failed: " + lists[r].error_message());
      return;
    }
  }
  bool join_changed = false;
  for (int r = 0; r < size(); ++r) {
    for (const auto& req : lists[r].requests()) {
      if (req.type() == proto::JOIN) join_changed = joined_.insert(r).second || join_changed;
      table_.Add(r, req, now);
    }
  }
  if (join_changed) table_.SetJoined(joined_);
  std::vector<proto::Response> responses = table_.FailUnjoinable();
  // A join completes after everything else in its cycle, so a rank leaving join
  // can reuse names without meeting responses that were built before it left.
  std::vector<proto::Response> joins;
  for (const std::string& name : table_.TakeReady()) {
    proto::Response resp = table_.BuildResponse(name);
    if (options_.on_ready) {
      const auto& a = table_.last_arrival();
      options_.on_ready(name, a.last_rank, a.lag);
    }
    if (resp.type() == proto::RESPONSE_JOIN) {
      joined_.clear();
      table_.SetJoined(joined_);
      joins.push_back(std::move(resp));
    } else {
      responses.push_back(std::move(resp));
    }
  }
  bool all_shut_down = true;
  for (int r = 0; r < size(); ++r) {
    if (lists[r].shutdown()) shut_down_[r] = true;
    if (shut_down_[r]) {
      auto failed = table_.FailWaitingOn(r, static_cast<int>(StatusCode::kShutDown),
                                         "rank " + std::to_string(r) + " has shut down");
      responses.insert(responses.end(), failed.begin(), failed.end());
    } else {
      all_shut_down = false;
    }
  }
  InspectStalls(now, &responses);
  for (auto& r : PlanFusion(responses, options_.fusion_threshold, size()))
    *out->add_responses() = std::move(r);
  for (auto& r : joins) *out->add_responses() = std::move(r);
  out->set_shutdown(all_shut_down);
}

void Controller::InspectStalls(Clock::time_point now, std::vector<proto::Response>* errors) {
  if (options_.stall_check.count() <= 0 && options_.stall_shutdown.count() <= 0) return;
  const auto period = options_.stall_check.count() > 0 ? options_.stall_check : options_.stall_shutdown;
  if (now - last_stall_check_ < std::min(period, std::chrono::milliseconds(1000))) return;
  last_stall_check_ = now;
  std::string report;
  bool failing = false;
  for (const PendingTensor& p : table_.Pending()) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - p.first_seen);
    const std::string line = "tensor '" + p.name + "' waiting " +
                             std::to_string(waited.count() / 1000) + " s: submitted by ranks [" +
                             RankList(p.submitted) + "], missing ranks [" + RankList(p.missing) + "]";
    if (options_.stall_shutdown.count() > 0 && waited >= options_.stall_shutdown) {
      failing = true;
      errors->push_back(table_.Fail(
          p.name, static_cast<int>(StatusCode::kTimeout),
          "stalled for more than " + std::to_string(options_.stall_shutdown.count() / 1000) +
              " s (HVD_STALL_SHUTDOWN_TIME): " + line));
    } else if (options_.stall_check.count() <= 0 || waited < options_.stall_check) {
      continue;
    }
    report += "\n  " + line;
  }
  if (report.empty()) return;
  options_.log("dprun: stall: some ranks have submitted tensors that others have not:" + report +
               (failing ? "" : "\n  (set HVD_STALL_SHUTDOWN_TIME to fail such tensors)"));
}

}  // namespace hvd
