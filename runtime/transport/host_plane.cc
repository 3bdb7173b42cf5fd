#include "runtime/transport/host_plane.h"

#include "runtime/common/job_keys.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "runtime/transport/gloo/gloo_backend.h"
#include "runtime/transport/gloo/gloo_control_channel.h"
#include "runtime/transport/hierarchical_backend.h"
#include "runtime/transport/shm/shm_backend.h"
#include "runtime/transport/shm/shm_control_channel.h"

namespace hvd {
namespace {

constexpr char kShmDir[] = "/dev/shm";
// The shared-memory backend's staging area per rank and the control channel's slot.
constexpr size_t kShmSegmentBytes = 4u << 20;
constexpr size_t kShmSlotBytes = 64u << 10;

}  // namespace

HostInfo LocalHostInfo(const std::string& id_override) {
  HostInfo info;
  struct statvfs vfs;
  if (statvfs(kShmDir, &vfs) == 0)
    info.shm_free = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  if (!id_override.empty()) {
    info.id = id_override;
    return info;
  }
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  if (boot.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    boot = host;
  }
  struct stat st;
  info.id = boot + "/" +
            (stat(kShmDir, &st) == 0
                 ? std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino)
                 : std::string("no-shm"));
  return info;
}

namespace {

// Ranks gather their subtrees' host records up a tree of this fan-out.
constexpr int kHostTreeFanOut = 16;

// "<rank> <shm_free> <id>\n" (a newline in an HVD_HOST_ID becomes a space).
std::string HostRecord(int rank, const HostInfo& h) {
  std::string id = h.id;
  std::replace(id.begin(), id.end(), '\n', ' ');
  return std::to_string(rank) + " " + std::to_string(h.shm_free) + " " + id + "\n";
}

}  // namespace

Status ExchangeHostInfo(Store* store, int rank, int size, const HostInfo& mine,
                        std::chrono::milliseconds timeout, std::vector<HostInfo>* all) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  };
  // Up the tree: this rank's record, then each child's subtree, then on to the
  // parent (rank 0: to everyone). O(fan-out) store calls at every rank.
  std::string records = HostRecord(rank, mine);
  const int last_child = std::min(size - 1, rank * kHostTreeFanOut + kHostTreeFanOut);
  for (int c = rank * kHostTreeFanOut + 1; c <= last_child; ++c) {
    std::string sub;
    Status s = store->Get(keys::HostInfoTree(c), left(), &sub);
    if (!s.ok())
      return s.Prepend("rank " + std::to_string(rank) + " waiting for rank " + std::to_string(c) +
                       " to say which host it is on (with the ranks it gathers)");
    records += sub;
  }
  if (rank != 0) {
    HVD_RETURN_IF_ERROR(store->Set(keys::HostInfoTree(rank), records));
    Status s = store->Get(keys::kHostInfoAll, left(), &records);
    if (!s.ok())
      return s.Prepend("rank " + std::to_string(rank) +
                       " waiting for rank 0 to say which host every rank is on");
  } else {
    HVD_RETURN_IF_ERROR(store->Set(keys::kHostInfoAll, records));
  }
  all->assign(size, HostInfo());
  std::vector<bool> seen(size, false);
  size_t pos = 0;
  while (pos < records.size()) {
    const size_t end = std::min(records.find('\n', pos), records.size());
    const std::string line = records.substr(pos, end - pos);
    pos = end + 1;
    const size_t a = line.find(' '), b = a == std::string::npos ? a : line.find(' ', a + 1);
    const int r = b == std::string::npos ? -1 : std::atoi(line.substr(0, a).c_str());
    if (r < 0 || r >= size || seen[r])
      return Status::Internal("malformed host record '" + line + "' (job of " +
                              std::to_string(size) + " ranks)");
    seen[r] = true;
    (*all)[r].shm_free = std::strtoll(line.substr(a + 1, b - a - 1).c_str(), nullptr, 10);
    (*all)[r].id = line.substr(b + 1);
  }
  for (int r = 0; r < size; ++r)
    if (!seen[r])
      return Status::Internal("the host records gathered by rank 0 miss rank " + std::to_string(r));
  return Status::OK();
}

Placement PlaceRanks(const std::vector<int>& global_ranks, const std::vector<HostInfo>& info) {
  Placement p;
  std::vector<std::string> ids;
  for (int g : global_ranks) {
    const HostInfo& h = info.at(g);
    const auto it = std::find(ids.begin(), ids.end(), h.id);
    const int host = static_cast<int>(it - ids.begin());
    if (it == ids.end()) {
      ids.push_back(h.id);
      p.host_size.push_back(0);
      p.host_free.push_back(h.shm_free);
    }
    p.host_of.push_back(host);
    p.local_of.push_back(p.host_size[host]++);
    p.host_free[host] = std::min(p.host_free[host], h.shm_free);
  }
  return p;
}

int64_t ShmBytesNeeded(int local_size) {
  // Each segment has a header and a line per rank besides its data; 1 MiB covers them.
  return static_cast<int64_t>(local_size + 1) * (kShmSegmentBytes + kShmSlotBytes) + (1 << 20);
}

Status ChooseHostPath(const std::string& mode, const Placement& placement, HostPath* out,
                      std::string* note) {
  *out = HostPath::kGloo;
  note->clear();
  const int hosts = placement.hosts();
  const int ranks = static_cast<int>(placement.host_of.size());
  if (mode == "gloo" || ranks <= 1 || hosts == ranks) return Status::OK();
  const int local = placement.host_size[0];
  if (hosts > 1 &&
      std::any_of(placement.host_size.begin(), placement.host_size.end(),
                  [&](int n) { return n != local; })) {
    *note = "hosts hold different numbers of ranks, so all-reduce runs over Gloo alone";
    return Status::OK();
  }
  for (int h = 0; h < hosts; ++h) {
    const int64_t need = ShmBytesNeeded(local);
    if (placement.host_free[h] >= need) continue;
    const std::string why = "/dev/shm has " + std::to_string(placement.host_free[h]) +
                            " bytes free on host " + std::to_string(h) + " (ranks sharing it need " +
                            std::to_string(need) + ")";
    if (mode == "shm")
      return Status::InvalidUsage("HVD_CPU_OPERATIONS=shm: " + why +
                                  "; enlarge /dev/shm or set HVD_CPU_OPERATIONS=gloo");
    *note = why + ", so host tensors go over Gloo";
    return Status::OK();
  }
  *out = hosts == 1 ? HostPath::kShm : HostPath::kHierarchical;
  return Status::OK();
}

Status ConnectHostPlane(const HostPlaneOptions& opts, HostPlane* out) {
  const Placement& p = opts.placement;
  const int size = opts.size;
  auto gloo = [&](const std::string& scope, int rank, int n, std::shared_ptr<gloo::Context>* ctx) {
    return ConnectGlooContext(NewPrefixStore(opts.store, scope), opts.device, rank, n,
                              opts.timeout, ctx);
  };
  auto members = [&](const std::string& scope, int rank, int n) {
    ShmMembership m;
    m.store = NewPrefixStore(opts.store, scope);
    m.name_prefix = opts.name_prefix;
    m.rank = rank;
    m.size = n;
    m.timeout = opts.timeout;
    m.interrupt = opts.interrupt;
    return m;
  };
  auto shm = [&](const std::string& scope, int rank, int n, std::unique_ptr<Backend>* backend) {
    ShmOptions so;
    static_cast<ShmMembership&>(so) = members(scope, rank, n);
    so.segment_bytes = kShmSegmentBytes;
    return CreateShmBackend(so, backend);
  };

  if (opts.path == HostPath::kShm) {
    HVD_RETURN_IF_ERROR(shm("shm/", opts.rank, size, &out->backend));
    ShmControlChannelOptions co;
    static_cast<ShmMembership&>(co) = members("shm/", opts.rank, size);
    co.slot_bytes = kShmSlotBytes;
    return NewShmControlChannel(co, &out->channel);
  }

  // Gloo over every rank: the whole plane, or the hierarchy's flat part.
  std::shared_ptr<gloo::Context> flat;
  HVD_RETURN_IF_ERROR(gloo("", opts.rank, size, &flat));
  out->channel = NewGlooControlChannel(flat, opts.timeout);
  auto flat_backend = std::make_unique<GlooBackend>(flat, PieceRingOptions(), opts.allreduce_algorithm);
  if (opts.path == HostPath::kGloo) {
    out->backend = std::move(flat_backend);
    return Status::OK();
  }
  const int host = p.host_of[opts.rank], local = p.local_of[opts.rank];
  std::unique_ptr<Backend> local_backend;
  HVD_RETURN_IF_ERROR(shm("shm/host" + std::to_string(host) + "/", local,
                          p.host_size[host], &local_backend));
  std::shared_ptr<gloo::Context> cross;
  HVD_RETURN_IF_ERROR(gloo("cross" + std::to_string(local) + "/", host, p.hosts(), &cross));
  out->backend = std::make_unique<HierarchicalBackend>(
      std::move(local_backend),
      std::make_unique<GlooBackend>(cross, PieceRingOptions(), opts.allreduce_algorithm),
      std::move(flat_backend),
      opts.hierarchy);
  return Status::OK();
}

}  // namespace hvd
