#include "runtime/common/options.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace hvd {
namespace {

// Finds the first set variable among `names`; returns its name through `which`.
const char* Lookup(const RuntimeOptions::GetEnv& env, std::initializer_list<const char*> names,
                   const char** which) {
  for (const char* n : names) {
    const char* v = env(n);
    if (v != nullptr) {
      *which = n;
      return v;
    }
  }
  return nullptr;
}

Status Bad(const char* var, const char* value, const char* expected) {
  return Status::InvalidArgument(std::string("environment variable ") + var + "='" + value +
                                 "' is not " + expected);
}

Status ParseInt(const RuntimeOptions::GetEnv& env, std::initializer_list<const char*> names,
                int64_t min, int64_t* out) {
  const char* which = nullptr;
  const char* v = Lookup(env, names, &which);
  if (v == nullptr) return Status::OK();
  errno = 0;
  char* end = nullptr;
  long long parsed = std::strtoll(v, &end, 10);
  if (*v == '\0' || *end != '\0' || errno == ERANGE) return Bad(which, v, "an integer");
  if (parsed < min) return Bad(which, v, ("an integer >= " + std::to_string(min)).c_str());
  *out = parsed;
  return Status::OK();
}

// An integer in [min, max].
Status ParseIntIn(const RuntimeOptions::GetEnv& env, std::initializer_list<const char*> names,
                  int64_t min, int64_t max, int64_t* out) {
  int64_t v = *out;
  HVD_RETURN_IF_ERROR(ParseInt(env, names, min, &v));
  if (v > max) {
    const char* which = nullptr;
    const char* text = Lookup(env, names, &which);
    return Bad(which, text,
               ("an integer in " + std::to_string(min) + ".." + std::to_string(max)).c_str());
  }
  *out = v;
  return Status::OK();
}

Status ParseInt32(const RuntimeOptions::GetEnv& env, std::initializer_list<const char*> names,
                  int64_t min, int* out) {
  int64_t v = *out;
  HVD_RETURN_IF_ERROR(ParseInt(env, names, min, &v));
  if (v > INT32_MAX) {
    const char* which = nullptr;
    const char* text = Lookup(env, names, &which);
    return Bad(which, text, "an integer below 2^31");
  }
  *out = static_cast<int>(v);
  return Status::OK();
}

// A non-negative decimal number no larger than `max`, e.g. "1", "0.5", "2.5".
Status ParseNumber(const RuntimeOptions::GetEnv& env, std::initializer_list<const char*> names,
                   double max, double* out, bool* found) {
  *found = false;
  const char* which = nullptr;
  const char* v = Lookup(env, names, &which);
  if (v == nullptr) return Status::OK();
  char* end = nullptr;
  double parsed = std::strtod(v, &end);
  if (*v == '\0' || *end != '\0' || !std::isfinite(parsed) || parsed < 0)
    return Bad(which, v, "a non-negative number");
  if (parsed > max) {
    std::ostringstream limit;
    limit << "a number no larger than " << max;
    return Bad(which, v, limit.str().c_str());
  }
  *out = parsed;
  *found = true;
  return Status::OK();
}

Status ParseSeconds(const RuntimeOptions::GetEnv& env, std::initializer_list<const char*> names,
                    std::chrono::milliseconds* out) {
  double seconds = 0;
  bool found = false;
  // A year is far past any sensible wait, and far inside int64 milliseconds.
  HVD_RETURN_IF_ERROR(ParseNumber(env, names, 365.0 * 24 * 3600, &seconds, &found));
  if (found) *out = std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
  return Status::OK();
}

Status ParseBool(const RuntimeOptions::GetEnv& env, std::initializer_list<const char*> names,
                 bool* out) {
  const char* which = nullptr;
  const char* v = Lookup(env, names, &which);
  if (v == nullptr) return Status::OK();
  std::string s(v);
  if (s == "1" || s == "true" || s == "yes") {
    *out = true;
  } else if (s == "0" || s == "false" || s == "no" || s.empty()) {
    *out = false;
  } else {
    return Bad(which, v, "a boolean (0/1, true/false)");
  }
  return Status::OK();
}

void ParseString(const RuntimeOptions::GetEnv& env, std::initializer_list<const char*> names,
                 std::string* out) {
  const char* which = nullptr;
  const char* v = Lookup(env, names, &which);
  if (v != nullptr) *out = v;
}

Status ParseProcessSets(const RuntimeOptions::GetEnv& env, std::vector<std::vector<int>>* out) {
  const char* which = nullptr;
  const char* v = Lookup(env, {"HVD_PROCESS_SETS"}, &which);
  if (v == nullptr || *v == '\0') return Status::OK();
  std::vector<std::vector<int>> sets(1);
  std::string num;
  bool num_ended = false;  // a space came after the digits: only a separator may follow
  auto flush = [&]() -> bool {
    if (num.empty()) return false;
    sets.back().push_back(std::stoi(num));
    num.clear();
    num_ended = false;
    return true;
  };
  // Spaces may stand around the separators, never inside a number: "0 1" is an error,
  // not rank 1 (nor 01).
  for (const char* p = v;; ++p) {
    if (*p >= '0' && *p <= '9') {
      if (num_ended) return Bad(which, v, "a list like \"0,1;2,3\" (ranks separated by commas)");
      num += *p;
      if (num.size() > 6) return Bad(which, v, "a list like \"0,1;2,3\"");
    } else if (*p == ',' || *p == ';' || *p == '\0') {
      if (!flush()) return Bad(which, v, "a list like \"0,1;2,3\"");
      if (*p == ';') sets.emplace_back();
      if (*p == '\0') break;
    } else if (*p == ' ') {
      num_ended = !num.empty();
    } else {
      return Bad(which, v, "a list like \"0,1;2,3\"");
    }
  }
  *out = std::move(sets);
  return Status::OK();
}

// One of `choices`, in any case.
Status ParseChoice(const RuntimeOptions::GetEnv& env, std::initializer_list<const char*> names,
                   const std::vector<std::string>& choices, std::string* out) {
  const char* which = nullptr;
  const char* v = Lookup(env, names, &which);
  if (v == nullptr || *v == '\0') return Status::OK();
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (std::find(choices.begin(), choices.end(), s) == choices.end()) {
    std::string expected;
    for (size_t i = 0; i < choices.size(); ++i)
      expected += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
    return Bad(which, v, expected.c_str());
  }
  *out = s;
  return Status::OK();
}

}  // namespace

Status RuntimeOptions::FromEnv(RuntimeOptions* out, const GetEnv& getenv_fn) {
  GetEnv env = getenv_fn ? getenv_fn : GetEnv([](const char* n) { return std::getenv(n); });
  RuntimeOptions o;
  HVD_RETURN_IF_ERROR(ParseInt32(env, {"HVD_RANK"}, 0, &o.rank));
  HVD_RETURN_IF_ERROR(ParseInt32(env, {"HVD_SIZE"}, 1, &o.size));
  HVD_RETURN_IF_ERROR(ParseInt32(env, {"HVD_LOCAL_RANK"}, 0, &o.local_rank));
  HVD_RETURN_IF_ERROR(ParseInt32(env, {"HVD_LOCAL_SIZE"}, 1, &o.local_size));
  HVD_RETURN_IF_ERROR(ParseInt32(env, {"HVD_CROSS_RANK"}, 0, &o.cross_rank));
  HVD_RETURN_IF_ERROR(ParseInt32(env, {"HVD_CROSS_SIZE"}, 1, &o.cross_size));
  ParseString(env, {"HVD_STORE_ADDR"}, &o.store_addr);
  ParseString(env, {"HVD_STORE_SECRET"}, &o.store_secret);
  ParseString(env, {"HVD_JOB_ID"}, &o.job_id);
  ParseString(env, {"HVD_GLOO_HOSTNAME"}, &o.gloo_hostname);
  ParseString(env, {"HVD_GLOO_IFACE", "HOROVOD_GLOO_IFACE"}, &o.gloo_iface);

  double cycle_ms = 0;
  bool found = false;
  HVD_RETURN_IF_ERROR(
      ParseNumber(env, {"HVD_CYCLE_TIME", "HOROVOD_CYCLE_TIME"}, 60000, &cycle_ms, &found));
  if (found) o.cycle_time = std::chrono::microseconds(std::llround(cycle_ms * 1000));
  HVD_RETURN_IF_ERROR(
      ParseInt(env, {"HVD_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD"}, 0, &o.fusion_threshold));
  HVD_RETURN_IF_ERROR(ParseIntIn(env, {"HVD_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY"}, 0,
                                 RuntimeOptions::kMaxCacheCapacity, &o.cache_capacity));
  HVD_RETURN_IF_ERROR(
      ParseInt(env, {"HVD_NEGOTIATION_TREE_RANKS"}, 0, &o.negotiation_tree_ranks));

  HVD_RETURN_IF_ERROR(ParseChoice(env, {"HVD_GPU_OPERATIONS", "HOROVOD_GPU_OPERATIONS"},
                                  {"nccl", "gloo"}, &o.gpu_operations));
  HVD_RETURN_IF_ERROR(ParseChoice(env, {"HVD_CPU_OPERATIONS", "HOROVOD_CPU_OPERATIONS"},
                                  {"auto", "shm", "gloo"}, &o.cpu_operations));
  HVD_RETURN_IF_ERROR(ParseChoice(env, {"HVD_ALLREDUCE_ALGORITHM"},
                                  {"auto", "ring", "halving_doubling"}, &o.allreduce_algorithm));
  HVD_RETURN_IF_ERROR(
      ParseChoice(env, {"HVD_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLREDUCE"},
                  {"auto", "1", "0", "true", "false", "yes", "no"}, &o.hierarchical_allreduce));
  // The booleans as ParseBool reads them.
  if (o.hierarchical_allreduce == "true" || o.hierarchical_allreduce == "yes")
    o.hierarchical_allreduce = "1";
  if (o.hierarchical_allreduce == "false" || o.hierarchical_allreduce == "no")
    o.hierarchical_allreduce = "0";
  ParseString(env, {"HVD_HOST_ID"}, &o.host_id);
  ParseString(env, {"HVD_ELASTIC_ID"}, &o.elastic_id);
  HVD_RETURN_IF_ERROR(ParseSeconds(env, {"HVD_ELASTIC_TIMEOUT"}, &o.elastic_timeout));
  HVD_RETURN_IF_ERROR(ParseChoice(env, {"HVD_BIND_TO"}, {"none", "core"}, &o.bind_to));

  HVD_RETURN_IF_ERROR(
      ParseSeconds(env, {"HVD_TIMEOUT", "HOROVOD_GLOO_TIMEOUT_SECONDS"}, &o.timeout));
  HVD_RETURN_IF_ERROR(ParseSeconds(
      env, {"HVD_STALL_CHECK_TIME", "HOROVOD_STALL_CHECK_TIME_SECONDS"}, &o.stall_check));
  bool stall_check_off = false;
  HVD_RETURN_IF_ERROR(ParseBool(env, {"HVD_STALL_CHECK_DISABLE", "HOROVOD_STALL_CHECK_DISABLE"},
                                &stall_check_off));
  if (stall_check_off) o.stall_check = std::chrono::milliseconds(0);
  HVD_RETURN_IF_ERROR(ParseSeconds(
      env, {"HVD_STALL_SHUTDOWN_TIME", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"}, &o.stall_shutdown));
  ParseString(env, {"HVD_TIMELINE", "HOROVOD_TIMELINE"}, &o.timeline_path);
  if (o.timeline_path == "DYNAMIC") o.timeline_path.clear();
  HVD_RETURN_IF_ERROR(ParseBool(env, {"HVD_TIMELINE_MARK_CYCLES", "HOROVOD_TIMELINE_MARK_CYCLES"},
                                &o.timeline_mark_cycles));
  HVD_RETURN_IF_ERROR(ParseBool(env, {"HVD_LOG_CYCLES"}, &o.log_cycles));
  HVD_RETURN_IF_ERROR(ParseBool(env, {"HVD_AUTOTUNE", "HOROVOD_AUTOTUNE"}, &o.autotune));
  ParseString(env, {"HVD_AUTOTUNE_LOG", "HOROVOD_AUTOTUNE_LOG"}, &o.autotune_log);
  HVD_RETURN_IF_ERROR(ParseSeconds(env, {"HVD_AUTOTUNE_WINDOW"}, &o.autotune_window));
  HVD_RETURN_IF_ERROR(ParseBool(env, {"HVD_STRAGGLER_REPORT"}, &o.straggler_report));
  HVD_RETURN_IF_ERROR(ParseProcessSets(env, &o.process_sets));

  HVD_RETURN_IF_ERROR(o.Validate());
  *out = o;
  return Status::OK();
}

Status RuntimeOptions::Validate() const {
  if (size < 1) return Status::InvalidArgument("size must be >= 1, got " + std::to_string(size));
  if (rank < 0 || rank >= size)
    return Status::InvalidArgument("HVD_RANK=" + std::to_string(rank) + " is not below HVD_SIZE=" +
                                   std::to_string(size));
  if (local_rank < 0 || local_rank >= local_size)
    return Status::InvalidArgument("HVD_LOCAL_RANK=" + std::to_string(local_rank) +
                                   " is not below HVD_LOCAL_SIZE=" + std::to_string(local_size));
  if (cross_rank < 0 || cross_rank >= cross_size)
    return Status::InvalidArgument("HVD_CROSS_RANK=" + std::to_string(cross_rank) +
                                   " is not below HVD_CROSS_SIZE=" + std::to_string(cross_size));
  if (timeout.count() <= 0) return Status::InvalidArgument("HVD_TIMEOUT must be positive");
  if (elastic_timeout.count() <= 0)
    return Status::InvalidArgument("HVD_ELASTIC_TIMEOUT must be positive");
  if (cycle_time.count() <= 0) return Status::InvalidArgument("HVD_CYCLE_TIME must be positive");
  if (gpu_operations != "nccl" && gpu_operations != "gloo")
    return Status::InvalidArgument("HVD_GPU_OPERATIONS='" + gpu_operations + "' is not nccl or gloo");
  if (cpu_operations != "auto" && cpu_operations != "shm" && cpu_operations != "gloo")
    return Status::InvalidArgument("HVD_CPU_OPERATIONS='" + cpu_operations +
                                   "' is not auto, shm or gloo");
  if (hierarchical_allreduce != "auto" && hierarchical_allreduce != "1" &&
      hierarchical_allreduce != "0")
    return Status::InvalidArgument("HVD_HIERARCHICAL_ALLREDUCE='" + hierarchical_allreduce +
                                   "' is not auto, 1 or 0");
  if (bind_to != "none" && bind_to != "core")
    return Status::InvalidArgument("HVD_BIND_TO='" + bind_to + "' is not none or core");
  for (const auto& set : process_sets)
    for (int r : set)
      if (r >= size)
        return Status::InvalidArgument("HVD_PROCESS_SETS names rank " + std::to_string(r) +
                                       " but HVD_SIZE is " + std::to_string(size));
  return Status::OK();
}

}  // namespace hvd
