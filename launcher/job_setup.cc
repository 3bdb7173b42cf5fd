#include "launcher/job_setup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "launcher/local_spawner.h"
#include "launcher/prefixed_line_writer.h"
#include "runtime/store/net_address.h"
#include "runtime/store/socket_io.h"

extern char** environ;

namespace hvd {
namespace launcher {
namespace {

constexpr size_t kSecretBytes = 32;
constexpr size_t kJobIdBytes = 8;

// The hosts with their addresses, which of them are this machine, and the store's
// listen address (step 2 of SetUpJob).
Status ChooseAddresses(const LauncherOptions& options, std::vector<HostSlots>* hosts,
                       std::vector<bool>* local, std::string* store_host) {
  *hosts = options.hosts;
  if (hosts->empty()) hosts->push_back({"localhost", options.num_ranks, ""});
  // "user@host" is for ssh; the address is the host's.
  const HostSlots* first_remote = nullptr;
  for (const HostSlots& h : *hosts) {
    local->push_back(IsThisMachine(h.host));
    if (!local->back() && first_remote == nullptr) first_remote = &h;
  }
  *store_host = "127.0.0.1";
  // An elastic job's discovered hosts may be other machines later: with
  // --network-interface its store listens there from the start.
  const bool may_grow_remote =
      !options.host_discovery_script.empty() && !options.network_interface.empty();
  if (first_remote != nullptr || may_grow_remote) {
    if (!options.network_interface.empty())
      HVD_RETURN_IF_ERROR(
          InterfaceAddress(options.network_interface, store_host).Prepend("--network-interface"));
    else
      HVD_RETURN_IF_ERROR(SourceAddressToward(MachineOf(first_remote->host), store_host)
                              .Prepend("choosing the store's address (or pass "
                                       "--network-interface)"));
  }
  for (size_t i = 0; i < hosts->size(); ++i) {
    HostSlots& h = (*hosts)[i];
    if ((*local)[i])
      h.address = *store_host;
    else
      HVD_RETURN_IF_ERROR(ResolveAddress(MachineOf(h.host), &h.address));
  }
  return Status::OK();
}

// torch.distributed's env:// rendezvous, as torchrun gives it: rank 0's host and a
// port for torch's own store there (a free one when that host is this machine, else
// one in 29500..30499 picked by the job id), unless dprun's environment sets them.
Status ChooseTorchMaster(const HostSlots& rank0_host, bool rank0_local, const std::string& job_id,
                         JobEndpoint* endpoint) {
  if (std::getenv("MASTER_ADDR") == nullptr)
    endpoint->master_addr = rank0_host.address.empty() ? rank0_host.host : rank0_host.address;
  if (std::getenv("MASTER_PORT") != nullptr) return Status::OK();
  if (!rank0_local) {
    endpoint->master_port =
        std::to_string(29500 + std::stoul(job_id.substr(0, 6), nullptr, 16) % 1000);
    return Status::OK();
  }
  int fd = -1, port = 0;
  HVD_RETURN_IF_ERROR(ListenTcp(rank0_host.address, 0, &fd, &port)
                          .Prepend("choosing MASTER_PORT (or set MASTER_PORT)"));
  ::close(fd);
  endpoint->master_port = std::to_string(port);
  return Status::OK();
}

// `path` and the directories above it, as mkdir -p.
Status MakeDirs(const std::string& path) {
  for (size_t at = path.find('/', 1);; at = path.find('/', at + 1)) {
    const std::string dir = path.substr(0, at);
    struct stat st {};
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::Internal("cannot create " + dir + ": " + ErrnoText(errno));
    if (at == std::string::npos) {
      if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return Status::Internal(dir + " is not a directory");
      return Status::OK();
    }
  }
}

// Resolves the command for local ranks and ssh for remote ones (step 5), and makes
// the --output-filename directory. An elastic job with a discovery script may get
// either kind later: it resolves both, and one that is not found stays empty (the
// supervisor then starts no rank of that kind, saying why).
Status ResolveCommands(const LauncherOptions& options, bool any_local, bool any_remote,
                       RankCommand* command, int* exit_code) {
  const bool discovery = !options.host_discovery_script.empty();
  command->argv = options.command;
  command->grace_period_s = options.grace_period_s;
  command->stamp_lines = options.prefix_timestamp;
  if (!options.output_dir.empty()) {
    HVD_RETURN_IF_ERROR(MakeDirs(options.output_dir).Prepend("--output-filename"));
    command->output_dir = options.output_dir;
    const int last = std::max(options.num_ranks, options.max_np) - 1;
    command->rank_digits = static_cast<int>(std::to_string(std::max(last, 0)).size());
  }
  if (any_local) {
    *exit_code = 127;
    HVD_RETURN_IF_ERROR(ResolveCommand(options.command[0], &command->exe));
  } else if (discovery && !ResolveCommand(options.command[0], &command->exe).ok()) {
    command->exe.clear();
  }
  if (any_remote || discovery) {
    *exit_code = 1;
    const Status ssh =
        ResolveCommand("ssh", &command->ssh.ssh_path).Prepend("remote hosts need ssh");
    if (any_remote) HVD_RETURN_IF_ERROR(ssh);
    if (!ssh.ok()) command->ssh.ssh_path.clear();
    command->ssh.port = options.ssh_port;
    command->ssh.identity_file = options.ssh_identity_file;
    command->ssh.options = options.ssh_options;
    command->ssh.connect_timeout_s = options.ssh_connect_timeout_s;
    char buf[4096];
    command->cwd = ::getcwd(buf, sizeof(buf)) != nullptr ? buf : "/";
  }
  return Status::OK();
}

}  // namespace

EnvVars FlagVariables(const LauncherOptions& options) {
  EnvVars vars;
  if (!options.timeline_path.empty()) vars.emplace_back("HVD_TIMELINE", options.timeline_path);
  if (!options.bind_to.empty()) vars.emplace_back("HVD_BIND_TO", options.bind_to);
  if (options.straggler_report) vars.emplace_back("HVD_STRAGGLER_REPORT", "1");
  for (const auto& var : options.flag_variables) vars = MergeVariables(vars, {var});  // later wins
  return vars;
}

Status RandomHex(size_t bytes, std::string* out) {
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::Internal("cannot open /dev/urandom: " + ErrnoText(errno));
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

bool IsThisMachine(const std::string& host) {
  return host.find('@') == std::string::npos && IsLocalHost(host);
}

std::string MachineOf(const std::string& host) { return host.substr(host.find('@') + 1); }

Status SetUpJob(const LauncherOptions& options, const Reporter& reporter, JobSetup* job,
                int* exit_code) {
  *exit_code = 1;
  JobEndpoint endpoint;
  endpoint.network_interface = options.network_interface;
  HVD_RETURN_IF_ERROR(RandomHex(kSecretBytes, &endpoint.store_secret));
  HVD_RETURN_IF_ERROR(RandomHex(kJobIdBytes, &endpoint.job_id));

  std::vector<HostSlots> hosts;
  std::vector<bool> local;
  std::string store_host;
  HVD_RETURN_IF_ERROR(ChooseAddresses(options, &hosts, &local, &store_host));
  HVD_RETURN_IF_ERROR(ChooseTorchMaster(hosts[0], local[0], endpoint.job_id, &endpoint));

  TcpStoreServer::Options store_options;
  store_options.host = store_host;
  store_options.secret = endpoint.store_secret;
  const int err_fd = reporter.fd();  // The server's thread writes its lines directly.
  store_options.log = [err_fd](const std::string& line) {
    WriteFully(err_fd, "dprun: store: " + line + "\n");
  };
  HVD_RETURN_IF_ERROR(TcpStoreServer::Start(store_options, &job->server));
  job->store = job->server->LocalStore();
  endpoint.store_addr = JoinStoreAddress(store_host, job->server->port());
  reporter.Verbose("store listening on " + endpoint.store_addr + ", job " + endpoint.job_id);

  std::vector<RankPlacement> placements;
  HVD_RETURN_IF_ERROR(PlaceRanks(options.num_ranks, hosts, endpoint, &placements));
  bool any_local = false, any_remote = false;
  for (const RankPlacement& p : placements) (local[p.host_index] ? any_local : any_remote) = true;
  HVD_RETURN_IF_ERROR(ResolveCommands(options, any_local, any_remote, &job->command, exit_code));
  *exit_code = 1;
  job->local_address = store_host;
  // Whether a rank may run over ssh: now, or once discovery finds another machine.
  const bool remote_ranks = any_remote || (!options.host_discovery_script.empty() &&
                                           !IsLoopbackAddress(store_host));

  std::vector<std::string> environment;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) environment.emplace_back(*e);
  std::vector<std::string> left_out;
  const EnvVars forwarded = MergeVariables(
      ForwardedVariables(options.env_vars, environment,
                         remote_ranks ? kRemoteEnvBudget : SIZE_MAX, &left_out),
      FlagVariables(options));
  if (!left_out.empty()) {
    std::string names;
    for (const std::string& n : left_out) names += (names.empty() ? "" : ", ") + n;
    reporter.Message("not passing " + names + " to the remote ranks: dprun's environment is "
                     "over the " + std::to_string(kRemoteEnvBudget >> 10) +
                     " KiB one ssh command line carries (-x NAME passes one anyway)");
  }
  job->ranks.clear();
  for (RankPlacement& p : placements) {
    RankSpec spec;
    spec.remote = !local[p.host_index];
    if (!options.hosts.empty()) spec.host = p.host;
    p.env = MergeVariables(forwarded, p.env);
    spec.placement = std::move(p);
    job->ranks.push_back(std::move(spec));
  }
  return Status::OK();
}

}  // namespace launcher
}  // namespace hvd
