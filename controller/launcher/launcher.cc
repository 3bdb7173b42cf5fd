#include "controller/launcher/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <system_error>
#include <vector>

#include "controller/store/net_address.h"
#include "controller/launcher/local_spawner.h"
#include "controller/launcher/prefixed_line_writer.h"
#include "controller/launcher/rank_placement.h"
#include "controller/launcher/remote_spawner.h"
#include "controller/launcher/signal_scope.h"
#include "controller/store/tcp_store.h"
#include "runtime/common/job_keys.h"

extern char** environ;

namespace hvd {
namespace launcher {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The supervising loop wakes at least this often.
constexpr milliseconds kMaxPoll{100};
// How long to wait for processes to vanish after SIGKILL before giving up on them.
constexpr std::chrono::seconds kGiveUpAfterKill{10};
// After a rank dies, how long the others get to report it and exit before SIGTERM.
constexpr std::chrono::seconds kReportWindow{3};
// How long to wait for rank 0's straggler report once every rank has exited.
constexpr milliseconds kStragglerReportWait{500};
// Reads of one pipe per wakeup, so one chatty rank cannot starve the others.
constexpr int kReadsPerRound = 16;
constexpr size_t kSecretBytes = 32;
constexpr size_t kJobIdBytes = 8;

std::string ErrnoText(int err) { return std::system_category().message(err); }

std::string SecondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

// `bytes` random bytes from /dev/urandom, hex-encoded.
Status RandomHex(size_t bytes, std::string* out) {
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Internal("cannot open /dev/urandom: " + ErrnoText(errno));
  std::vector<unsigned char> raw(bytes);
  size_t got = 0;
  for (int tries = 0; got < bytes && tries < 100; ++tries) {
    const ssize_t n = ::read(fd, raw.data() + got, bytes - got);
    if (n > 0)
      got += static_cast<size_t>(n);
    else if (n < 0 && errno != EINTR)
      break;
  }
  ::close(fd);
  if (got < bytes) return Status::Internal("cannot read /dev/urandom");
  static const char kHex[] = "0123456789abcdef";
  out->clear();
  for (unsigned char b : raw) {
    out->push_back(kHex[b >> 4]);
    out->push_back(kHex[b & 15]);
  }
  return Status::OK();
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

int ExitCodeOf(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

// The variables dprun's own flags give every rank.
EnvVars FlagVariables(const LauncherOptions& options) {
  EnvVars vars;
  if (!options.timeline_path.empty()) vars.emplace_back("HVD_TIMELINE", options.timeline_path);
  if (!options.bind_to.empty()) vars.emplace_back("HVD_BIND_TO", options.bind_to);
  if (options.straggler_report) vars.emplace_back("HVD_STRAGGLER_REPORT", "1");
  return vars;
}

const char* SignalName(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "a signal";
  }
}

}  // namespace


// One run of the job: the state the supervising loop works on.
class Launcher::Job {
 public:
  Job(const LauncherOptions& options, int out_fd, int err_fd)
      : options_(options), out_fd_(out_fd), err_fd_(err_fd) {}

  int Run() {
    const int early_exit = Setup();
    if (early_exit >= 0) return early_exit;
    Supervise();
    for (Rank& r : ranks_) {
      CloseStream(r.out);
      CloseStream(r.err);
      CloseStdin(r);
    }
    if (options_.straggler_report) PrintStragglerReport();
    server_->Stop();
    return exit_code_;
  }

 private:
  struct Stream {
    int fd = -1;
    std::unique_ptr<PrefixedLineWriter> writer;
    // A remote rank's stdout starts with the remote script's start marker line, which
    // is held in `head` until complete and then stripped (remote_spawner.h).
    bool await_marker = false;
    std::string head;
    pid_t remote_pid = -1;  // From the marker: the remote script's pid.
  };
  struct Rank {
    int rank = 0;
    pid_t pid = -1;  // Also its process group; -1 if never spawned. Remote: ssh's.
    bool running = false;
    Stream out, err;
    std::string host;     // Empty in a job without -H.
    bool remote = false;  // Runs over ssh.
    int stdin_fd = -1;    // Remote: the write end of ssh's stdin; closing it ends the rank.
    RankPlacement placement;
    bool pending = false;  // Not spawned yet (SpawnPending).
  };
  // kRunning until the job must end; then SIGTERM (kTerminating), then SIGKILL. A
  // rank's death first gives the others kReportWindow to report it (kReporting).
  enum class Phase { kRunning, kReporting, kTerminating, kKilling };

  void Message(const std::string& text) { WriteFully(err_fd_, "dprun: " + text + "\n"); }

  int Abort(const Status& s, int exit_code) {
    Message(s.message());
    return exit_code;
  }

  // Returns an exit status if the job ends before any rank runs, else -1.
  int Setup() {
    Status s = signals_.Init();
    if (!s.ok()) return Abort(s, 1);
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    JobEndpoint job;
    s = RandomHex(kSecretBytes, &job.store_secret);
    if (s.ok()) s = RandomHex(kJobIdBytes, &job.job_id);
    if (!s.ok()) return Abort(s, 1);

    std::vector<HostSlots> hosts;
    std::vector<bool> local;
    s = ChooseAddresses(&hosts, &local, &job);
    if (!s.ok()) return Abort(s, 1);

    TcpStoreServer::Options store_options;
    store_options.host = store_host_;
    store_options.secret = job.store_secret;
    const int err_fd = err_fd_;
    store_options.log = [err_fd](const std::string& line) {
      WriteFully(err_fd, "dprun: store: " + line + "\n");
    };
    s = TcpStoreServer::Start(store_options, &server_);
    if (!s.ok()) return Abort(s, 1);
    local_store_ = server_->LocalStore();
    job.store_addr = JoinStoreAddress(store_host_, server_->port());
    if (options_.verbose) Message("store listening on " + job.store_addr + ", job " + job.job_id);

    std::vector<RankPlacement> placements;
    s = PlaceRanks(options_.num_ranks, hosts, job, &placements);
    if (!s.ok()) return Abort(s, 1);
    bool any_local = false, any_remote = false;
    for (const RankPlacement& p : placements) (local[p.host_index] ? any_local : any_remote) = true;
    if (any_local) {
      s = ResolveCommand(options_.command[0], &exe_);
      if (!s.ok()) return Abort(s, 127);
    }
    if (any_remote) {
      s = ResolveCommand("ssh", &ssh_.ssh_path);
      if (!s.ok()) return Abort(s.Prepend("remote hosts need ssh"), 1);
      ssh_.port = options_.ssh_port;
      ssh_.identity_file = options_.ssh_identity_file;
      ssh_.options = options_.ssh_options;
      ssh_.connect_timeout_s = options_.ssh_connect_timeout_s;
      char buf[4096];
      cwd_ = ::getcwd(buf, sizeof(buf)) != nullptr ? buf : "/";
    }
    std::vector<std::string> environment;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) environment.emplace_back(*e);
    const EnvVars forwarded =
        MergeVariables(ForwardedVariables(options_.env_vars, environment), FlagVariables(options_));

    ranks_.resize(placements.size());
    for (size_t i = 0; i < placements.size(); ++i) {
      Rank& r = ranks_[i];
      r.placement = std::move(placements[i]);
      r.placement.env = MergeVariables(forwarded, r.placement.env);
      r.rank = r.placement.rank;
      r.remote = !local[r.placement.host_index];
      if (!options_.hosts.empty()) r.host = r.placement.host;
      r.pending = true;
    }
    SpawnPending();
    if (options_.start_timeout_s > 0) {
      start_check_pending_ = true;
      start_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options_.start_timeout_s));
    }
    return -1;
  }

  // Spawns the ranks still waiting, in rank order, while the job runs. A remote rank
  // waits while kMaxStartingSshPerHost ssh logins to its host are still in progress
  // (started, no start marker yet), so a host with many slots does not hit sshd's
  // MaxStartups limit, which drops connections beyond 10 unauthenticated ones.
  void SpawnPending() {
    if (phase_ != Phase::kRunning) return;
    std::map<std::string, int> starting;
    for (const Rank& r : ranks_)
      if (r.remote && r.running && r.out.remote_pid < 0) ++starting[r.placement.host];
    for (Rank& r : ranks_) {
      if (!r.pending) continue;
      if (r.remote && starting[r.placement.host] >= kMaxStartingSshPerHost) continue;
      r.pending = false;
      const Status s = Spawn(r);
      if (!s.ok()) return Fail(s.message(), 1);
      if (r.remote) ++starting[r.placement.host];
    }
  }

  Status Spawn(Rank& r) {
    SpawnedRank child;
    const RankPlacement& p = r.placement;
    HVD_RETURN_IF_ERROR(
        r.remote ? SpawnRemoteRank(p, p.env, ssh_, cwd_, options_.command, options_.grace_period_s,
                                   signals_.original_mask(), &child)
                 : SpawnLocalRank(p, exe_, options_.command, signals_.original_mask(), &child));
    r.pid = child.pid;
    r.stdin_fd = child.stdin_fd;
    r.running = true;
    const std::string tag = "[" + std::to_string(r.rank) + "]";
    r.out.fd = child.stdout_fd;
    r.out.writer = std::make_unique<PrefixedLineWriter>(tag + "<stdout>:", out_fd_);
    r.out.await_marker = r.remote;
    r.err.fd = child.stderr_fd;
    r.err.writer = std::make_unique<PrefixedLineWriter>(tag + "<stderr>:", err_fd_);
    if (options_.verbose)
      Message(RankName(r) + (r.remote ? " launched over ssh (ssh pid " + std::to_string(r.pid) + ")"
                                      : " launched"));
    return Status::OK();
  }

  // The hosts with their addresses, which of them are this machine, and the store's
  // listen address (store_host_): 127.0.0.1 when every host is this machine; else
  // --network-interface's IPv4 address, or the source address of the route to the
  // first remote host. A host that is this machine gets the store's address as its
  // Gloo address; a remote host its own, resolved here.
  Status ChooseAddresses(std::vector<HostSlots>* hosts, std::vector<bool>* local,
                         JobEndpoint* job) {
    *hosts = options_.hosts;
    if (hosts->empty()) hosts->push_back({"127.0.0.1", options_.num_ranks, ""});
    job->network_interface = options_.network_interface;
    // "user@host" is for ssh; the address is the host's.
    auto machine = [](const std::string& host) { return host.substr(host.find('@') + 1); };
    const HostSlots* first_remote = nullptr;
    for (const HostSlots& h : *hosts) {
      local->push_back(h.host.find('@') == std::string::npos && IsLocalHost(h.host));
      if (!local->back() && first_remote == nullptr) first_remote = &h;
    }
    store_host_ = "127.0.0.1";
    if (first_remote != nullptr) {
      if (!options_.network_interface.empty())
        HVD_RETURN_IF_ERROR(InterfaceAddress(options_.network_interface, &store_host_)
                                .Prepend("--network-interface"));
      else
        HVD_RETURN_IF_ERROR(SourceAddressToward(machine(first_remote->host), &store_host_)
                                .Prepend("choosing the store's address (or pass "
                                         "--network-interface)"));
    }
    for (size_t i = 0; i < hosts->size(); ++i) {
      HostSlots& h = (*hosts)[i];
      if ((*local)[i])
        h.address = store_host_;
      else
        HVD_RETURN_IF_ERROR(ResolveAddress(machine(h.host), &h.address));
    }
    return Status::OK();
  }

  // The loop runs while ranks do; once teardown starts, each phase has a deadline.
  void Supervise() {
    std::vector<pollfd> fds;
    std::vector<Stream*> streams;
    for (;;) {
      CheckDeadlines(Clock::now());
      if (given_up_ || Finished()) return;
      SpawnPending();
      if (phase_ == Phase::kRunning && !AnyRunning()) {
        std::string which;
        for (const Rank& r : ranks_)
          if (r.pid > 0 && ::kill(-r.pid, 0) == 0) which += " " + std::to_string(r.rank);
        Message("all ranks exited; terminating processes left running by rank(s)" + which);
        BeginTeardown();
      }
      fds.assign(1, {signals_.fd(), POLLIN, 0});
      streams.clear();
      for (Rank& r : ranks_) {
        for (Stream* s : {&r.out, &r.err}) {
          if (s->fd < 0) continue;
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
      }
      if (::poll(fds.data(), fds.size(), PollTimeoutMs()) > 0) {
        if (fds[0].revents & POLLIN) HandleSignals();
        for (size_t i = 1; i < fds.size(); ++i)
          if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) ReadStream(*streams[i - 1]);
      }
      Reap();
    }
  }

  int PollTimeoutMs() const {
    auto next = Clock::now() + kMaxPoll;
    if (start_check_pending_) next = std::min(next, start_deadline_);
    if (phase_ == Phase::kReporting) next = std::min(next, report_deadline_);
    if (phase_ == Phase::kTerminating) next = std::min(next, kill_deadline_);
    const auto left = std::chrono::ceil<milliseconds>(next - Clock::now()).count();
    return static_cast<int>(std::max<int64_t>(left, 0));
  }

  void ReadStream(Stream& s) {
    char buf[64 * 1024];
    for (int i = 0; i < kReadsPerRound && s.fd >= 0; ++i) {
      const ssize_t n = ::read(s.fd, buf, sizeof(buf));
      if (n > 0) {
        Feed(s, buf, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        CloseStream(s);  // End of stream, or an error that ends it.
      }
    }
  }

  // Passes output to the stream's writer, first stripping a remote start marker.
  static void Feed(Stream& s, const char* data, size_t n) {
    if (!s.await_marker) return s.writer->Append(data, n);
    s.head.append(data, n);
    const size_t newline = s.head.find('\n');
    if (newline == std::string::npos && s.head.size() < 256) return;
    s.await_marker = false;
    std::string rest = std::move(s.head);
    s.head.clear();
    const std::string marker = std::string(kRemoteStartedMarker) + " ";
    if (newline != std::string::npos && rest.compare(0, marker.size(), marker) == 0) {
      s.remote_pid = std::atoi(rest.substr(marker.size(), newline - marker.size()).c_str());
      rest.erase(0, newline + 1);
    }
    if (!rest.empty()) s.writer->Append(rest.data(), rest.size());
  }

  static void CloseStream(Stream& s) {
    if (s.fd < 0) return;
    if (s.await_marker && !s.head.empty()) {
      s.writer->Append(s.head.data(), s.head.size());
      s.head.clear();
    }
    s.writer->Finish();
    ::close(s.fd);
    s.fd = -1;
  }

  void HandleSignals() {
    for (int sig : signals_.Drain()) {
      if (sig == SIGCHLD) continue;  // Reap() runs every round.
      if (++interrupts_ == 1) {
        Fail(std::string("received ") + SignalName(sig) + "; terminating all ranks", 128 + sig);
      } else {
        Message(std::string("received ") + SignalName(sig) + " again; killing all ranks now");
        StartKilling();
      }
    }
  }

  // Reaps every child that has exited, ranks and adopted orphans alike.
  void Reap() {
    for (int i = 0; i < 4096; ++i) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (Rank& r : ranks_)
        if (r.pid == pid && r.running) OnRankExit(r, status);
    }
  }

  void OnRankExit(Rank& r, int status) {
    r.running = false;
    // What the rank wrote before exiting is already in its pipes; print it first.
    ReadStream(r.out);
    ReadStream(r.err);
    CloseStdin(r);
    // ssh exits 255 for its own failures; before the start marker that means the
    // remote script never ran.
    const bool unreachable =
        r.remote && r.out.remote_pid < 0 && WIFEXITED(status) && WEXITSTATUS(status) == 255;
    if (unreachable && !cause_recorded_) {
      const std::string& why = r.err.writer->last_line();
      Fail("cannot reach host " + r.host + " for rank " + std::to_string(r.rank) +
               ": ssh exited with code 255" + (why.empty() ? "" : " (" + why + ")"),
           1);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      if (options_.verbose) Message(RankName(r) + " exited with code 0");
    } else if (!cause_recorded_) {
      // The survivors' runtimes read this when they lose the rank, and report it as
      // the cause; they get kReportWindow to do so before the teardown.
      const std::string why = RankName(r) + " " + DescribeExit(status);
      local_store_->Set(keys::kLauncherAbortReason, why);
      Fail(why, ExitCodeOf(status), /*let_others_report=*/true);
    } else if (phase_ == Phase::kReporting) {
      Message(RankName(r) + " " + DescribeExit(status) + " after the failure above");
    } else {
      Message(RankName(r) + " terminated by dprun (" + DescribeExit(status) + ")");
    }
  }

  // Reports `why`; the first call decides the exit status and starts the teardown, or
  // with `let_others_report`, the report window that precedes it.
  void Fail(const std::string& why, int exit_code, bool let_others_report = false) {
    Message(why);
    if (!cause_recorded_) {
      cause_recorded_ = true;
      exit_code_ = exit_code;
    }
    if (let_others_report && phase_ == Phase::kRunning) {
      phase_ = Phase::kReporting;
      report_deadline_ = Clock::now() + kReportWindow;
      return;
    }
    BeginTeardown();
  }

  void BeginTeardown() {
    if (phase_ != Phase::kRunning && phase_ != Phase::kReporting) return;
    if (options_.grace_period_s <= 0) return StartKilling();
    phase_ = Phase::kTerminating;
    SignalAll(SIGTERM);
    kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.grace_period_s));
  }

  void StartKilling() {
    if (phase_ == Phase::kKilling) return;
    phase_ = Phase::kKilling;
    SignalAll(SIGKILL);
    give_up_deadline_ = Clock::now() + kGiveUpAfterKill;
  }

  // Signals each rank's process group: the rank and whatever it started; SIGTERM comes
  // with SIGCONT, so a stopped (frozen) rank acts on it now. A remote rank's SIGTERM is
  // the close of its ssh's stdin, which the remote script turns into SIGTERM there;
  // SIGKILL goes to the ssh itself.
  void SignalAll(int sig) {
    for (Rank& r : ranks_) {
      if (r.pid <= 0) continue;
      if (r.remote && sig == SIGTERM) {
        CloseStdin(r);
      } else {
        ::kill(-r.pid, sig);
        if (sig == SIGTERM) ::kill(-r.pid, SIGCONT);
      }
    }
  }

  static void CloseStdin(Rank& r) {
    if (r.stdin_fd < 0) return;
    ::close(r.stdin_fd);
    r.stdin_fd = -1;
  }

  void CheckDeadlines(Clock::time_point now) {
    if (start_check_pending_ && now >= start_deadline_) CheckStarted();
    if (phase_ == Phase::kReporting && (now >= report_deadline_ || !AnyRunning())) BeginTeardown();
    if (phase_ == Phase::kTerminating && now >= kill_deadline_) {
      if (options_.verbose) Message("grace period over; sending SIGKILL");
      StartKilling();
    }
    if (phase_ == Phase::kKilling) {
      SignalAll(SIGKILL);  // Again, for anything forked since.
      if (now >= give_up_deadline_) {
        std::string left;
        for (const Rank& r : ranks_)
          if (r.running) left += " " + RankName(r);
        Message("giving up on processes still alive " + std::to_string(kGiveUpAfterKill.count()) +
                " s after SIGKILL" + (left.empty() ? "" : ":" + left));
        given_up_ = true;
      }
    }
  }

  // Fails the job if a running rank has not set its started key.
  void CheckStarted() {
    start_check_pending_ = false;
    if (phase_ != Phase::kRunning) return;
    std::vector<int> missing;
    for (const Rank& r : ranks_)
      if ((r.running || r.pending) &&
          !local_store_->Wait({keys::Started(r.rank)}, milliseconds(0)).ok())
        missing.push_back(r.rank);
    if (missing.empty()) {
      if (options_.verbose) Message("all ranks started");
      return;
    }
    std::string list;
    for (int rank : missing) list += (list.empty() ? "" : ", ") + std::to_string(rank);
    Fail((missing.size() == 1 ? "rank " : "ranks ") + list + " did not start within " +
             SecondsText(options_.start_timeout_s) + " s",
         1);
  }

  // Prints rank 0's straggler report, one "dprun: " line per line of it.
  void PrintStragglerReport() {
    std::string report;
    if (!local_store_->Get(keys::kStragglerReport, kStragglerReportWait, &report).ok() ||
        report.empty())
      return Message("no straggler report: rank 0 leaves it in hvd_shutdown, and did not");
    std::istringstream lines(report);
    for (std::string line; std::getline(lines, line);) Message(line);
  }

  // True while some rank runs or waits to be spawned.
  bool AnyRunning() const {
    for (const Rank& r : ranks_)
      if (r.running || r.pending) return true;
    return false;
  }

  // Done when every rank is reaped, its pipes are closed and its group is empty.
  bool Finished() const {
    for (const Rank& r : ranks_)
      if (r.running || r.out.fd >= 0 || r.err.fd >= 0) return false;
    for (const Rank& r : ranks_)
      if (r.pid > 0 && ::kill(-r.pid, 0) == 0) return false;
    return true;
  }

  // "rank 2 (pid 123)"; in a job with -H, "rank 2 (pid 123 on hostB)", where a remote
  // rank's pid is the remote script's, once it has started.
  static std::string RankName(const Rank& r) {
    const std::string name = "rank " + std::to_string(r.rank);
    if (r.host.empty()) return name + " (pid " + std::to_string(r.pid) + ")";
    const pid_t pid = r.remote ? r.out.remote_pid : r.pid;
    return name + " (" + (pid > 0 ? "pid " + std::to_string(pid) + " " : "") + "on " + r.host + ")";
  }

  const LauncherOptions& options_;
  const int out_fd_;
  const int err_fd_;
  SignalScope signals_;
  std::string store_host_;
  std::string exe_;  // The command, resolved here, for local ranks.
  SshOptions ssh_;   // For remote ranks.
  std::string cwd_;  // Where remote ranks start.
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Store> local_store_;
  std::vector<Rank> ranks_;
  Phase phase_ = Phase::kRunning;
  bool cause_recorded_ = false;
  int exit_code_ = 0;
  int interrupts_ = 0;
  bool start_check_pending_ = false;
  bool given_up_ = false;
  Clock::time_point start_deadline_, report_deadline_, kill_deadline_, give_up_deadline_;
};

Launcher::Launcher(LauncherOptions options, int out_fd, int err_fd)
    : options_(std::move(options)), out_fd_(out_fd), err_fd_(err_fd) {}

Launcher::~Launcher() = default;

int Launcher::Run() {
  if (options_.num_ranks < 1 || options_.command.empty()) {
    WriteFully(err_fd_, "dprun: nothing to run\n");
    return 2;
  }
  Job job(options_, out_fd_, err_fd_);
  return job.Run();
}

int DprunMain(int argc, char** argv) {
  // Make sure fds 0-2 exist, so no pipe or socket dprun opens lands on them.
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  LauncherOptions options;
  const Status s = ParseLauncherArgs(args, &options);
  if (!s.ok()) {
    WriteFully(2, "dprun: " + s.message() + "\n\n" + LauncherUsage());
    return 2;
  }
  if (options.help) {
    WriteFully(1, LauncherUsage());
    return 0;
  }
  return Launcher(std::move(options)).Run();
}

}  // namespace launcher
}  // namespace hvd
