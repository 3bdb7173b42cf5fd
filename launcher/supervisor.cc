#include "launcher/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <utility>

#include "launcher/elastic_membership.h"
#include "launcher/exit_status.h"
#include "launcher/host_discovery.h"
#include "launcher/job_setup.h"
#include "runtime/common/job_keys.h"
#include "runtime/store/net_address.h"

namespace hvd {
namespace launcher {
namespace {

// The host an elastic job counts a rank on: a local rank's spec names none.
std::string ElasticHost(const RankProcess& r) {
  return r.spec.host.empty() ? "localhost" : r.spec.host;
}

}  // namespace

Supervisor::Supervisor(const LauncherOptions& options, std::vector<RankSpec> ranks,
                       RankCommand command, std::string local_address, SignalScope& signals,
                       Store& store, int out_fd, const Reporter& reporter)
    : options_(options),
      command_(std::move(command)),
      local_address_(std::move(local_address)),
      signals_(signals),
      store_(store),
      out_fd_(out_fd),
      reporter_(reporter),
      teardown_(options.grace_period_s) {
  // Elastic workers are added as the job runs; references into ranks_ must survive.
  ranks_.reserve(options.min_np > 0 ? kMaxElasticWorkers : ranks.size());
  ranks_.resize(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) ranks_[i].spec = std::move(ranks[i]);
  if (options.min_np > 0) {
    elastic_ = std::make_unique<ElasticMembership>(
        options.min_np, options.max_np, options.reset_limit,
        BlacklistCooldown{options.cooldown_lo_s, options.cooldown_hi_s, nullptr});
    for (RankProcess& r : ranks_) {
      worker_ids_.push_back("w" + std::to_string(worker_ids_.size()));
      r.spec.placement.env.emplace_back("HVD_ELASTIC_ID", worker_ids_.back());
      elastic_->Add(worker_ids_.back(), ElasticHost(r));
    }
  }
}

int Supervisor::Run() {
  SpawnPending();
  if (elastic_) PublishGeneration();
  if (options_.start_timeout_s > 0) {
    start_check_pending_ = true;
    start_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(options_.start_timeout_s));
  }
  Loop();
  for (RankProcess& r : ranks_) r.CloseAll();
  return teardown_.exit_code();
}

// The loop runs while ranks do; once the teardown starts, each phase has a deadline.
void Supervisor::Loop() {
  std::vector<pollfd> fds;
  std::vector<RankOutput*> streams;
  for (;;) {
    CheckDeadlines(Clock::now());
    if (teardown_.given_up() || Finished()) return;
    if (elastic_ && teardown_.phase() == Teardown::Phase::kRunning) ElasticTick(Clock::now());
    SpawnPending();
    if (teardown_.phase() == Teardown::Phase::kRunning && !AnyRunning()) {
      std::string which;
      for (const RankProcess& r : ranks_)
        if (r.GroupAlive()) which += " " + std::to_string(r.rank());
      reporter_.Message("all ranks exited; terminating processes left running by rank(s)" + which);
      SignalAll(teardown_.Terminate(Clock::now()));
    }
    fds.assign(1, {signals_.fd(), POLLIN, 0});
    streams.clear();
    for (RankProcess& r : ranks_) {
      for (RankOutput* s : {&r.out, &r.err}) {
        if (!s->is_open()) continue;
        fds.push_back({s->fd(), POLLIN, 0});
        streams.push_back(s);
      }
    }
    if (::poll(fds.data(), fds.size(), PollTimeoutMs()) > 0) {
      if (fds[0].revents & POLLIN) HandleSignals();
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) streams[i - 1]->ReadAvailable();
    }
    Reap();
  }
}

void Supervisor::SpawnPending() {
  if (teardown_.phase() != Teardown::Phase::kRunning) return;
  for (size_t i : RanksToSpawn(ranks_)) {
    RankProcess& r = ranks_[i];
    r.pending = false;
    const Status s = SpawnRank(command_, signals_.original_mask(), out_fd_, reporter_.fd(), &r);
    if (!s.ok()) return Fail(s.message(), 1);
    reporter_.Verbose(r.Name() + (r.spec.remote
                                      ? " launched over ssh (ssh pid " + std::to_string(r.pid) + ")"
                                      : " launched"));
  }
}

void Supervisor::CheckDeadlines(Clock::time_point now) {
  if (start_check_pending_ && now >= start_deadline_) CheckStarted();
  const Teardown::Due due = teardown_.Tick(now, AnyRunning());
  if (due.grace_over) reporter_.Verbose("grace period over; sending SIGKILL");
  SignalAll(due.signal);
  if (due.give_up) {
    std::string left;
    for (const RankProcess& r : ranks_)
      if (r.running) left += " " + r.Name();
    reporter_.Message("giving up on processes still alive " +
                      std::to_string(kGiveUpAfterKill.count()) + " s after SIGKILL" +
                      (left.empty() ? "" : ":" + left));
  }
}

// Fails the job if a running rank has not set its started key. Only the ranks dprun
// started with the job: an elastic job's later workers start after the deadline was
// set, and their started key carries the rank their generation gave them.
void Supervisor::CheckStarted() {
  start_check_pending_ = false;
  if (teardown_.phase() != Teardown::Phase::kRunning) return;
  std::vector<int> missing;
  for (const RankProcess& r : ranks_)
    if ((r.running || r.pending) && r.rank() < options_.num_ranks &&
        !store_.Wait({keys::Started(r.rank())}, std::chrono::milliseconds(0)).ok())
      missing.push_back(r.rank());
  if (missing.empty()) return reporter_.Verbose("all ranks started");
  Fail(NotStartedMessage(missing, options_.start_timeout_s), 1);
}

int Supervisor::PollTimeoutMs() const {
  auto next = std::min(Clock::now() + kMaxPoll, teardown_.NextDeadline());
  if (start_check_pending_) next = std::min(next, start_deadline_);
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(left, 0));
}

void Supervisor::HandleSignals() {
  for (int sig : signals_.Drain()) {
    if (sig == SIGCHLD) continue;  // Reap() runs every round.
    if (++interrupts_ == 1) {
      Fail(std::string("received ") + SignalName(sig) + "; terminating all ranks", 128 + sig);
    } else {
      reporter_.Message(std::string("received ") + SignalName(sig) +
                        " again; killing all ranks now");
      SignalAll(teardown_.Kill(Clock::now()));
    }
  }
}

void Supervisor::Reap() {
  for (int i = 0; i < 4096; ++i) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (RankProcess& r : ranks_)
      if (r.pid == pid && r.running) OnRankExit(r, status);
  }
}

void Supervisor::OnRankExit(RankProcess& r, int status) {
  r.running = false;
  // What the rank wrote before exiting is already in its pipes; print it first.
  r.out.ReadAvailable();
  r.err.ReadAvailable();
  r.CloseStdin();
  if (elastic_ && teardown_.phase() == Teardown::Phase::kRunning &&
      ElasticExit(static_cast<size_t>(&r - ranks_.data()), status))
    return;
  switch (teardown_.Judge(status, r.spec.remote && r.out.remote_pid() < 0)) {
    case ExitVerdict::kUnreachable: {
      const std::string& why = r.err.last_line();
      return Fail("cannot reach host " + r.spec.host + " for rank " + std::to_string(r.rank()) +
                      ": ssh exited with code 255" + (why.empty() ? "" : " (" + why + ")"),
                  1);
    }
    case ExitVerdict::kSucceeded:
      reporter_.Verbose(r.Name() + " exited with code 0");
      // Before the others: if they fail for want of it, this is why. The survivors'
      // runtimes read it as they read a crash (below).
      if (left_early_.empty() && teardown_.phase() == Teardown::Phase::kRunning && AnyRunning()) {
        left_early_ = r.Name() + " exited with code 0 while the job ran";
        store_.Set(keys::kLauncherAbortReason, left_early_);
      }
      return;
    case ExitVerdict::kCause: {
      // The survivors' runtimes read this when they lose the rank, and report it as the
      // cause; they get kReportWindow to do so before the teardown.
      const std::string why = CauseOf(r, status);
      store_.Set(keys::kLauncherAbortReason, why);
      return Fail(why, ExitCodeOf(status), /*let_others_report=*/true);
    }
    case ExitVerdict::kAfterFailure:
      return reporter_.Message(LostContact(r, status)
                                   ? LostContactMessage(r, status) + ", after the failure above"
                                   : r.Name() + " " + DescribeExit(status) + " after the failure above");
    case ExitVerdict::kTerminated:
      // A remote rank that ignored the teardown (its script never saw its stdin close)
      // was cut off: its ssh was killed after the grace period.
      if (r.spec.remote && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        return reporter_.Message("lost contact with host " + r.spec.host + " (" + r.Name() +
                                 "): it did not answer dprun's teardown, and its ssh session "
                                 "was killed after the grace period");
      return reporter_.Message(r.Name() + " terminated by dprun (" + DescribeExit(status) + ")");
  }
}

// ---- Elastic jobs.

bool Supervisor::ElasticExit(size_t index, int status) {
  RankProcess& r = ranks_[index];
  const std::string& id = worker_ids_[index];
  const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const bool member = elastic_->InLatest(id);
  bool reset = false;
  const std::string end = elastic_->Ended(id, failed, Clock::now(), &reset);
  const std::string how = r.Name() + " " + DescribeExit(status);
  if (!failed || !member) {
    reporter_.Verbose(how + (member ? "" : " (not in the current generation)"));
    return true;
  }
  // Where the runtimes of its generation look when they lose it (their launcher view).
  store_.Set(keys::ElasticScope(elastic_->generation()) + keys::kLauncherAbortReason, how);
  if (!end.empty()) {
    Fail(how + "; " + end, ExitCodeOf(status), /*let_others_report=*/true);
    return true;
  }
  reporter_.Message(how + "; the job goes on with " + std::to_string(elastic_->running()) +
                    " rank(s)");
  PublishGeneration();
  return true;
}

void Supervisor::PublishGeneration() {
  std::vector<std::pair<std::string, std::string>> assignments;
  const int64_t g = elastic_->NextGeneration(&assignments);
  for (const auto& [id, a] : assignments) store_.Set(keys::ElasticAssignment(g, id), a);
  store_.Set(keys::kElasticGeneration, std::to_string(g));
  store_.Set(keys::ElasticScope(g) + "ready", "1");
  if (g > 0)
    reporter_.Message("generation " + std::to_string(g) + ": " +
                      std::to_string(assignments.size()) + " rank(s)");
}

void Supervisor::ElasticTick(Clock::time_point now) {
  int64_t requests = 0;
  if (store_.Add(keys::kElasticResetRequest, 0, &requests).ok() &&
      requests > reset_requests_seen_) {
    reset_requests_seen_ = requests;
    if (reset_requested_in_ < 0) {
      reset_requested_in_ = elastic_->generation();
      reset_request_due_ = now + kResetRequestWait;
    }
  }
  if (reset_requested_in_ >= 0 && now >= reset_request_due_) {
    const bool still_due = elastic_->generation() == reset_requested_in_;
    reset_requested_in_ = -1;
    if (still_due) {  // else a rank's exit or discovery published one meanwhile
      reporter_.Message("a rank asked for a new generation");
      const std::string refused = elastic_->ResetRefused();
      if (!refused.empty()) return Fail(refused, 1);
      PublishGeneration();
    }
  }
  if (!options_.host_discovery_script.empty() && now >= next_discovery_) {
    next_discovery_ = now + std::chrono::seconds(1);
    Discover();
  }
}

void Supervisor::Discover() {
  std::vector<HostSlots> hosts;
  std::string why;
  if (!RunDiscoveryScript(options_.host_discovery_script, options_.slots_per_host, &hosts, &why)) {
    reporter_.Message("host discovery: " + why);
    return;
  }
  // Vanished hosts: their workers leave the job; free slots on the hosts there are
  // get new ones.
  std::vector<size_t> leaving;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const RankProcess& r = ranks_[i];
    const std::string host = ElasticHost(r);
    if (r.running && std::none_of(hosts.begin(), hosts.end(),
                                  [&](const HostSlots& h) { return h.host == host; }))
      leaving.push_back(i);
  }
  std::vector<std::string> joining;
  const auto now = Clock::now();
  const int can_add = elastic_->Vacancies(static_cast<int>(leaving.size()));
  for (const HostSlots& h : hosts) {
    if (elastic_->Blacklisted(h.host, now)) continue;
    int free = h.slots - elastic_->RunningOn(h.host);
    if (free <= 0 || static_cast<int>(joining.size()) >= can_add) continue;
    std::string why;
    if (!CanStartOn(h.host, &why)) {
      // Once per host: discovery runs every second.
      if (refused_hosts_.insert(h.host).second) reporter_.Message("host discovery: " + why);
      continue;
    }
    for (; free > 0 && static_cast<int>(joining.size()) < can_add; --free) {
      if (ranks_.size() + joining.size() >= kMaxElasticWorkers) break;
      joining.push_back(h.host);
    }
  }
  if (leaving.empty() && joining.empty()) return;
  const std::string refused = elastic_->ResetRefused();
  if (!refused.empty()) return Fail("the hosts changed, but " + refused, 1);
  for (size_t i : leaving) {
    RankProcess& r = ranks_[i];
    elastic_->Stopped(worker_ids_[i]);
    reporter_.Message("host " + ElasticHost(r) +
                      " is gone: stopping " + r.Name());
    Terminate(r);
  }
  for (const std::string& host : joining) {
    std::string why;
    if (!AddWorker(host, &why) && refused_hosts_.insert(host).second)
      reporter_.Message("host discovery: " + why);
  }
  PlaceNewWorkers();
  SpawnPending();
  PublishGeneration();
}

void Supervisor::PlaceNewWorkers() {
  for (const ElasticMembership::Assignment& a : elastic_->Upcoming()) {
    for (size_t i = 0; i < ranks_.size(); ++i) {
      if (worker_ids_[i] != a.id || !ranks_[i].pending) continue;
      EnvVars& env = ranks_[i].spec.placement.env;
      env = MergeVariables(env, TopologyVariables(a.topology, a.host));
    }
  }
}

bool Supervisor::CanStartOn(const std::string& host, std::string* why) const {
  if (IsThisMachine(host)) {
    if (!command_.exe.empty()) return true;
    *why = host + " is this machine, but " + command_.argv[0] + " is not on dprun's PATH";
    return false;
  }
  if (IsLoopbackAddress(local_address_)) {
    *why = host + " is another machine, but the job's store listens on " + local_address_ +
           " (every first host was this machine): pass --network-interface to start it there";
    return false;
  }
  if (command_.ssh.ssh_path.empty()) {
    *why = host + " is another machine, but ssh is not on dprun's PATH";
    return false;
  }
  return true;
}

bool Supervisor::AddWorker(const std::string& host, std::string* why) {
  RankProcess r;
  r.spec = ranks_[0].spec;  // the job's variables; the generation gives the topology
  r.spec.host = host;
  r.spec.remote = !IsThisMachine(host);
  std::string address = local_address_;
  if (r.spec.remote) {
    const Status s = ResolveAddress(MachineOf(host), &address);
    if (!s.ok()) {
      *why = "cannot start a rank on " + host + ": " + s.message();
      return false;
    }
  }
  r.spec.placement.host = host;
  r.spec.placement.rank = static_cast<int>(ranks_.size());
  const std::string id = "w" + std::to_string(worker_ids_.size());
  for (auto& [name, value] : r.spec.placement.env) {
    if (name == "HVD_ELASTIC_ID") value = id;
    if (name == "HVD_GLOO_HOSTNAME") value = address;
  }
  ranks_.push_back(std::move(r));
  worker_ids_.push_back(id);
  elastic_->Add(id, host);
  return true;
}

void Supervisor::Terminate(RankProcess& r) {
  if (r.spec.remote) {
    r.CloseStdin();
  } else {
    ::kill(-r.pid, SIGTERM);
    ::kill(-r.pid, SIGCONT);
  }
}

// The first failing exit is the job's cause, unless the runtimes already agreed on an
// earlier one (a frozen rank, a rank that left): then that one is, and this exit
// follows from it.
// ssh exits with 255 when its connection dies (keep-alive, a reset link) after the
// rank started: that is the host lost, not the rank's own exit code.
bool Supervisor::LostContact(const RankProcess& r, int status) {
  return r.spec.remote && r.out.remote_pid() >= 0 && WIFEXITED(status) &&
         WEXITSTATUS(status) == 255;
}

std::string Supervisor::LostContactMessage(const RankProcess& r, int) {
  const std::string& why = r.err.last_line();
  return "lost contact with host " + r.spec.host + " (" + r.Name() +
         "): its ssh connection ended (exit code 255" + (why.empty() ? "" : ": " + why) + ")";
}

std::string Supervisor::CauseOf(const RankProcess& r, int status) {
  const std::string exit =
      LostContact(r, status) ? LostContactMessage(r, status) : r.Name() + " " + DescribeExit(status);
  std::string failure;
  if (store_.Get(keys::kJobFailure, std::chrono::milliseconds(0), &failure).ok() &&
      !failure.empty())
    return "the job failed: " + failure + "; then " + exit;
  if (!left_early_.empty()) return exit + ", after " + left_early_;
  return exit;
}

void Supervisor::Fail(const std::string& why, int exit_code, bool let_others_report) {
  reporter_.Message(why);
  SignalAll(teardown_.Fail(exit_code, let_others_report, Clock::now()));
}

void Supervisor::SignalAll(int sig) {
  if (sig == 0) return;
  for (RankProcess& r : ranks_) {
    if (r.pid <= 0) continue;
    if (sig == SIGTERM)
      Terminate(r);
    else
      ::kill(-r.pid, sig);
  }
}

// True while some rank runs or waits to be spawned.
bool Supervisor::AnyRunning() const {
  for (const RankProcess& r : ranks_)
    if (r.running || r.pending) return true;
  return false;
}

// Done when every rank is reaped, its pipes are closed and its group is empty.
bool Supervisor::Finished() const {
  for (const RankProcess& r : ranks_)
    if (r.running || r.out.is_open() || r.err.is_open()) return false;
  for (const RankProcess& r : ranks_)
    if (r.GroupAlive()) return false;
  return true;
}

}  // namespace launcher
}  // namespace hvd
