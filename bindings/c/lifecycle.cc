// The default instance's life cycle (hvd_init, hvd_shutdown) and the calls that ask
// the running runtime about itself: topology, health, diagnostics, the timeline and
// what this build supports.
//
// States: never initialized -> running (hvd_init) -> shut down (hvd_shutdown) ->
// running (hvd_init again), under Instance::mu. Calls that need a runtime get it from
// Current, which says kNotInitialized or kShutDown otherwise. hvd_init is a call to
// the instance's Bootstrap (controller/loop/bootstrap.h), which reads the environment.
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "bindings/c/c_api_internal.h"
#include "controller/loop/launch_env.h"
#include "runtime/data/device_ops.h"

namespace hvd {
namespace capi {
namespace {

Status Topology(int* out, int RuntimeOptions::*field) {
  if (out == nullptr) return Status::InvalidArgument("out is NULL");
  std::shared_ptr<Runtime> rt;
  HVD_RETURN_IF_ERROR(Current(&rt));
  *out = rt->options().*field;
  return Status::OK();
}

// `text` into buf as the diagnostics calls of hvd.h copy it: up to capacity-1 bytes
// and a NUL, and its full length in *length (both checked by the caller).
hvd_status_t CopyText(const std::string& text, char* buf, size_t capacity, size_t* length) {
  *length = text.size();
  if (capacity > 0) {
    const size_t n = std::min(capacity - 1, text.size());
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return HVD_SUCCESS;
}

}  // namespace

Instance& Default() {
  static Instance* instance = new Instance;  // never destroyed (c_api_internal.h)
  return *instance;
}

Status Current(std::shared_ptr<Runtime>* out) {
  Instance& in = Default();
  std::lock_guard<std::mutex> lock(in.mu);
  switch (in.state) {
    case State::kNeverInitialized:
      return Status::NotInitialized("hvd_init has not been called");
    case State::kShutDown:
      return Status::ShutDown("the runtime has been shut down (hvd_shutdown)");
    case State::kRunning:
      *out = in.runtime;
      return Status::OK();
  }
  return Status::Internal("bad runtime state");
}

}  // namespace capi
}  // namespace hvd

using hvd::RuntimeOptions;
using hvd::Status;
using hvd::capi::CopyText;
using hvd::capi::Current;
using hvd::capi::Report;
using hvd::capi::Topology;

extern "C" {

hvd_status_t hvd_init(void) {
  HVD_C_GUARD({
    hvd::capi::Instance& in = hvd::capi::Default();
    std::lock_guard<std::mutex> lock(in.mu);
    if (in.state == hvd::capi::State::kRunning) return HVD_SUCCESS;
    std::unique_ptr<hvd::Runtime> runtime;
    Status s = in.bootstrap.Start(&runtime);
    if (!s.ok()) return Report(s);
    in.runtime = std::move(runtime);
    in.state = hvd::capi::State::kRunning;
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_shutdown(void) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Runtime> rt;
    hvd::capi::Instance& in = hvd::capi::Default();
    {
      std::lock_guard<std::mutex> lock(in.mu);
      if (in.state != hvd::capi::State::kRunning) return HVD_SUCCESS;
      rt = std::move(in.runtime);
      in.state = hvd::capi::State::kShutDown;
    }
    const Status s = rt->Shutdown();
    if (!s.ok()) {
      // The job failed: if this process serves the store, the other ranks may still be
      // reading the job's first failure from it, and the process may exit next.
      std::lock_guard<std::mutex> lock(in.mu);
      in.bootstrap.LingerForStoreClients(hvd::kStoreLingerOnFailure);
    }
    return Report(s);
  })
}

hvd_status_t hvd_elastic_generation(int64_t* generation) {
  HVD_C_GUARD({
    if (generation == nullptr) return Report(Status::InvalidArgument("generation is NULL"));
    hvd::capi::Instance& in = hvd::capi::Default();
    std::lock_guard<std::mutex> lock(in.mu);
    *generation = in.bootstrap.elastic_generation();
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_elastic_update_pending(int* pending) {
  HVD_C_GUARD({
    if (pending == nullptr) return Report(Status::InvalidArgument("pending is NULL"));
    hvd::capi::Instance& in = hvd::capi::Default();
    std::lock_guard<std::mutex> lock(in.mu);
    bool p = false;
    Status s = in.bootstrap.ElasticUpdatePending(&p);
    if (!s.ok()) return Report(s);
    *pending = p ? 1 : 0;
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_is_initialized(int* out) {
  HVD_C_GUARD({
    if (out == nullptr) return Report(Status::InvalidArgument("out is NULL"));
    hvd::capi::Instance& in = hvd::capi::Default();
    std::lock_guard<std::mutex> lock(in.mu);
    *out = in.state == hvd::capi::State::kRunning ? 1 : 0;
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_rank(int* out) {
  HVD_C_GUARD({ return Report(Topology(out, &RuntimeOptions::rank)); })
}
hvd_status_t hvd_size(int* out) {
  HVD_C_GUARD({ return Report(Topology(out, &RuntimeOptions::size)); })
}
hvd_status_t hvd_local_rank(int* out) {
  HVD_C_GUARD({ return Report(Topology(out, &RuntimeOptions::local_rank)); })
}
hvd_status_t hvd_local_size(int* out) {
  HVD_C_GUARD({ return Report(Topology(out, &RuntimeOptions::local_size)); })
}
hvd_status_t hvd_cross_rank(int* out) {
  HVD_C_GUARD({ return Report(Topology(out, &RuntimeOptions::cross_rank)); })
}
hvd_status_t hvd_cross_size(int* out) {
  HVD_C_GUARD({ return Report(Topology(out, &RuntimeOptions::cross_size)); })
}

hvd_status_t hvd_check_health(void) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (!s.ok()) return Report(s);
    return Report(rt->LoopStatus());
  })
}

hvd_status_t hvd_straggler_report(char* buf, size_t capacity, size_t* length) {
  HVD_C_GUARD({
    if (length == nullptr) return Report(Status::InvalidArgument("length is NULL"));
    if (buf == nullptr && capacity > 0) return Report(Status::InvalidArgument("buf is NULL"));
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (!s.ok()) return Report(s);
    return CopyText(rt->StragglerReport(), buf, capacity, length);
  })
}

hvd_status_t hvd_detect_launcher(char* buf, size_t capacity, size_t* length) {
  HVD_C_GUARD({
    if (length == nullptr) return Report(Status::InvalidArgument("length is NULL"));
    if (buf == nullptr && capacity > 0) return Report(Status::InvalidArgument("buf is NULL"));
    hvd::LaunchEnv env;
    Status s = hvd::DetectLaunchEnv(nullptr, &env);
    if (!s.ok()) return Report(s);
    std::string text = "launcher=" + env.launcher + "\n";
    for (const auto& [name, value] : env.vars) text += name + "=" + value + "\n";
    return CopyText(text, buf, capacity, length);
  })
}

hvd_status_t hvd_start_timeline(const char* file_path, int mark_cycles) {
  HVD_C_GUARD({
    if (file_path == nullptr) return Report(Status::InvalidArgument("file_path is NULL"));
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (s.ok()) s = rt->StartTimeline(file_path, mark_cycles != 0);
    return Report(s);
  })
}

hvd_status_t hvd_stop_timeline(void) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (s.ok()) rt->StopTimeline();
    return Report(s);
  })
}

hvd_status_t hvd_host_backend(int32_t process_set, const char** name) {
  HVD_C_GUARD({
    if (name == nullptr) return Report(Status::InvalidArgument("name is NULL"));
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (!s.ok()) return Report(s);
    *name = rt->HostBackendName(process_set);
    if (*name == nullptr)
      return Report(Status::InvalidArgument("unknown process set " + std::to_string(process_set)));
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_cuda_built(int* out) {
  HVD_C_GUARD({
    if (out == nullptr) return Report(Status::InvalidArgument("out is NULL"));
    *out = hvd::CudaBuilt() ? 1 : 0;
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_nccl_version(int* out) {
  HVD_C_GUARD({
    if (out == nullptr) return Report(Status::InvalidArgument("out is NULL"));
    *out = hvd::NcclVersionCode();
    return HVD_SUCCESS;
  })
}

}  // extern "C"
