// Unit tests for runtime/common/options.h: RuntimeOptions::FromEnv through an injected
// getenv (a map lookup), and Validate's cross-field rules.
#include "runtime/common/options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hvd {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using Env = std::map<std::string, std::string>;

// A getenv over `vars`; the strings live as long as the returned function (and its copies).
RuntimeOptions::GetEnv MapEnv(Env vars) {
  auto shared = std::make_shared<const Env>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

Status Parse(Env vars, RuntimeOptions* out) { return RuntimeOptions::FromEnv(out, MapEnv(std::move(vars))); }

RuntimeOptions ParseOk(Env vars) {
  RuntimeOptions o;
  Status s = Parse(std::move(vars), &o);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return o;
}

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(RuntimeOptionsTest, DefaultsWhenNothingIsSet) {
  RuntimeOptions o;
  // Start from non-defaults: FromEnv must overwrite every field.
  o.rank = 5;
  o.size = 9;
  o.local_rank = 3;
  o.local_size = 4;
  o.cross_rank = 2;
  o.cross_size = 3;
  o.store_addr = "x";
  o.store_secret = "x";
  o.job_id = "x";
  o.gloo_hostname = "x";
  o.gloo_iface = "x";
  o.cycle_time = microseconds(7);
  o.fusion_threshold = 7;
  o.cache_capacity = 7;
  o.timeout = milliseconds(7);
  o.stall_check = milliseconds(7);
  o.stall_shutdown = milliseconds(7);
  o.timeline_path = "x";
  o.log_cycles = true;
  std::vector<std::string> asked;
  Status s = RuntimeOptions::FromEnv(&o, [&](const char* name) -> const char* {
    asked.push_back(name);
    return nullptr;
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(o.rank, 0);
  EXPECT_EQ(o.size, 1);
  EXPECT_EQ(o.local_rank, 0);
  EXPECT_EQ(o.local_size, 1);
  EXPECT_EQ(o.cross_rank, 0);
  EXPECT_EQ(o.cross_size, 1);
  EXPECT_EQ(o.store_addr, "");
  EXPECT_EQ(o.store_secret, "");
  EXPECT_EQ(o.job_id, "");
  EXPECT_EQ(o.gloo_hostname, "127.0.0.1");
  EXPECT_EQ(o.gloo_iface, "");
  EXPECT_EQ(o.cycle_time, microseconds(1000));
  EXPECT_EQ(o.fusion_threshold, int64_t{128} << 20);
  EXPECT_EQ(o.cache_capacity, 1024);
  EXPECT_EQ(o.timeout, milliseconds(30000));
  EXPECT_EQ(o.stall_check, milliseconds(60000));
  // Every wait is bounded by default: a stall fails after 30 minutes, as
  // torch.distributed's default timeout.
  EXPECT_EQ(o.stall_shutdown, milliseconds(1800000));
  EXPECT_EQ(o.timeline_path, "");
  EXPECT_FALSE(o.log_cycles);
  // The injected function is what is consulted, for every documented variable.
  for (const char* v : {"HVD_RANK", "HVD_SIZE", "HVD_LOCAL_RANK", "HVD_LOCAL_SIZE", "HVD_CROSS_RANK",
                        "HVD_CROSS_SIZE", "HVD_STORE_ADDR", "HVD_STORE_SECRET", "HVD_JOB_ID",
                        "HVD_GLOO_HOSTNAME", "HVD_GLOO_IFACE", "HVD_CYCLE_TIME", "HVD_FUSION_THRESHOLD",
                        "HVD_CACHE_CAPACITY", "HVD_TIMEOUT", "HVD_STALL_CHECK_TIME",
                        "HVD_STALL_SHUTDOWN_TIME", "HVD_TIMELINE", "HVD_LOG_CYCLES"})
    EXPECT_NE(std::find(asked.begin(), asked.end(), v), asked.end()) << v << " was never looked up";
}

TEST(RuntimeOptionsTest, DefaultConstructedOptionsAreValid) {
  Status s = RuntimeOptions().Validate();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(RuntimeOptionsTest, ReadsEveryVariable) {
  RuntimeOptions o = ParseOk({
      {"HVD_RANK", "5"},
      {"HVD_SIZE", "8"},
      {"HVD_LOCAL_RANK", "1"},
      {"HVD_LOCAL_SIZE", "4"},
      {"HVD_CROSS_RANK", "1"},
      {"HVD_CROSS_SIZE", "2"},
      {"HVD_STORE_ADDR", "10.0.0.1:29500"},
      {"HVD_STORE_SECRET", "s3cret"},
      {"HVD_JOB_ID", "job-42"},
      {"HVD_GLOO_HOSTNAME", "node7"},
      {"HVD_GLOO_IFACE", "eth1"},
      {"HVD_CYCLE_TIME", "2.5"},
      {"HVD_FUSION_THRESHOLD", "1048576"},
      {"HVD_CACHE_CAPACITY", "0"},
      {"HVD_TIMEOUT", "1.5"},
      {"HVD_STALL_CHECK_TIME", "5"},
      {"HVD_STALL_SHUTDOWN_TIME", "120"},
      {"HVD_TIMELINE", "/tmp/timeline.json"},
      {"HVD_LOG_CYCLES", "1"},
  });
  EXPECT_EQ(o.rank, 5);
  EXPECT_EQ(o.size, 8);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_EQ(o.local_size, 4);
  EXPECT_EQ(o.cross_rank, 1);
  EXPECT_EQ(o.cross_size, 2);
  EXPECT_EQ(o.store_addr, "10.0.0.1:29500");
  EXPECT_EQ(o.store_secret, "s3cret");
  EXPECT_EQ(o.job_id, "job-42");
  EXPECT_EQ(o.gloo_hostname, "node7");
  EXPECT_EQ(o.gloo_iface, "eth1");
  EXPECT_EQ(o.cycle_time, microseconds(2500));
  EXPECT_EQ(o.fusion_threshold, 1048576);
  EXPECT_EQ(o.cache_capacity, 0);
  EXPECT_EQ(o.timeout, milliseconds(1500));
  EXPECT_EQ(o.stall_check, milliseconds(5000));
  EXPECT_EQ(o.stall_shutdown, milliseconds(120000));
  EXPECT_EQ(o.timeline_path, "/tmp/timeline.json");
  EXPECT_TRUE(o.log_cycles);
}

// That 0 disables fusion is checked where it happens (allreduce_test's
// FusionThresholdZeroRunsEveryTensorAlone); here only the parsing.
TEST(RuntimeOptionsTest, FusionThresholdZeroAndLargeValuesParse) {
  EXPECT_EQ(ParseOk({{"HVD_FUSION_THRESHOLD", "0"}}).fusion_threshold, 0);
  EXPECT_EQ(ParseOk({{"HVD_FUSION_THRESHOLD", "17179869184"}}).fusion_threshold, int64_t{16} << 30);
}

TEST(RuntimeOptionsTest, FractionalCycleTimeInMilliseconds) {
  EXPECT_EQ(ParseOk({{"HVD_CYCLE_TIME", "0.5"}}).cycle_time, microseconds(500));
  EXPECT_EQ(ParseOk({{"HVD_CYCLE_TIME", "0.001"}}).cycle_time, microseconds(1));
  EXPECT_EQ(ParseOk({{"HVD_CYCLE_TIME", "5"}}).cycle_time, microseconds(5000));
  EXPECT_EQ(ParseOk({{"HVD_CYCLE_TIME", "1.25"}}).cycle_time, microseconds(1250));
  EXPECT_EQ(ParseOk({{"HOROVOD_CYCLE_TIME", "0.25"}}).cycle_time, microseconds(250));
}

TEST(RuntimeOptionsTest, FractionalSeconds) {
  EXPECT_EQ(ParseOk({{"HVD_TIMEOUT", "0.25"}}).timeout, milliseconds(250));
  EXPECT_EQ(ParseOk({{"HVD_STALL_CHECK_TIME", "0.05"}}).stall_check, milliseconds(50));
  EXPECT_EQ(ParseOk({{"HVD_STALL_SHUTDOWN_TIME", "0.1"}}).stall_shutdown, milliseconds(100));
  EXPECT_EQ(ParseOk({{"HVD_STALL_CHECK_TIME", "0"}}).stall_check, milliseconds(0));
}

TEST(RuntimeOptionsTest, Booleans) {
  for (const char* v : {"1", "true", "yes"}) EXPECT_TRUE(ParseOk({{"HVD_LOG_CYCLES", v}}).log_cycles) << v;
  for (const char* v : {"0", "false", "no"}) EXPECT_FALSE(ParseOk({{"HVD_LOG_CYCLES", v}}).log_cycles) << v;
  for (const char* v : {"2", "abc", "on?"}) {
    RuntimeOptions o;
    Status s = Parse({{"HVD_LOG_CYCLES", v}}, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << v;
    EXPECT_THAT(s.message(), AllOf(HasSubstr("HVD_LOG_CYCLES"), HasSubstr(std::string("'") + v + "'")));
  }
}

// Each Horovod alias, read alone.
struct Alias {
  const char* hvd;
  const char* horovod;
  const char* value;
  std::function<void(const RuntimeOptions&)> check;
};

std::vector<Alias> Aliases() {
  return {
      {"HVD_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD", "4096",
       [](const RuntimeOptions& o) { EXPECT_EQ(o.fusion_threshold, 4096); }},
      {"HVD_CYCLE_TIME", "HOROVOD_CYCLE_TIME", "3.5",
       [](const RuntimeOptions& o) { EXPECT_EQ(o.cycle_time, microseconds(3500)); }},
      {"HVD_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY", "77",
       [](const RuntimeOptions& o) { EXPECT_EQ(o.cache_capacity, 77); }},
      {"HVD_STALL_CHECK_TIME", "HOROVOD_STALL_CHECK_TIME_SECONDS", "9",
       [](const RuntimeOptions& o) { EXPECT_EQ(o.stall_check, milliseconds(9000)); }},
      {"HVD_STALL_SHUTDOWN_TIME", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "11",
       [](const RuntimeOptions& o) { EXPECT_EQ(o.stall_shutdown, milliseconds(11000)); }},
      {"HVD_TIMELINE", "HOROVOD_TIMELINE", "/tmp/hvd.json",
       [](const RuntimeOptions& o) { EXPECT_EQ(o.timeline_path, "/tmp/hvd.json"); }},
      {"HVD_GLOO_IFACE", "HOROVOD_GLOO_IFACE", "ib0",
       [](const RuntimeOptions& o) { EXPECT_EQ(o.gloo_iface, "ib0"); }},
      {"HVD_TIMEOUT", "HOROVOD_GLOO_TIMEOUT_SECONDS", "45",
       [](const RuntimeOptions& o) { EXPECT_EQ(o.timeout, milliseconds(45000)); }},
      {"HVD_STALL_CHECK_DISABLE", "HOROVOD_STALL_CHECK_DISABLE", "1",
       [](const RuntimeOptions& o) {
         EXPECT_EQ(o.stall_check, milliseconds(0));  // no warnings...
         EXPECT_EQ(o.stall_shutdown, milliseconds(1800000));  // ...and a stall still ends
       }},
  };
}

TEST(RuntimeOptionsTest, StallCheckDisableOffKeepsTheWarnings) {
  EXPECT_EQ(ParseOk({{"HVD_STALL_CHECK_TIME", "9"}, {"HVD_STALL_CHECK_DISABLE", "0"}}).stall_check,
            milliseconds(9000));
  EXPECT_EQ(ParseOk({{"HVD_STALL_CHECK_TIME", "9"}, {"HOROVOD_STALL_CHECK_DISABLE", "1"}})
                .stall_check,
            milliseconds(0));
}

TEST(RuntimeOptionsTest, HorovodAliasesAreRead) {
  for (const Alias& a : Aliases()) {
    SCOPED_TRACE(a.horovod);
    a.check(ParseOk({{a.horovod, a.value}}));
  }
}

TEST(RuntimeOptionsTest, HvdNameWinsOverHorovodName) {
  RuntimeOptions o = ParseOk({
      {"HVD_FUSION_THRESHOLD", "100"},
      {"HOROVOD_FUSION_THRESHOLD", "200"},
      {"HVD_CYCLE_TIME", "2"},
      {"HOROVOD_CYCLE_TIME", "3"},
      {"HVD_CACHE_CAPACITY", "5"},
      {"HOROVOD_CACHE_CAPACITY", "6"},
      {"HVD_STALL_CHECK_TIME", "7"},
      {"HOROVOD_STALL_CHECK_TIME_SECONDS", "8"},
      {"HVD_STALL_SHUTDOWN_TIME", "9"},
      {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "10"},
      {"HVD_TIMELINE", "/a"},
      {"HOROVOD_TIMELINE", "/b"},
      {"HVD_GLOO_IFACE", "eth0"},
      {"HOROVOD_GLOO_IFACE", "eth1"},
  });
  EXPECT_EQ(o.fusion_threshold, 100);
  EXPECT_EQ(o.cycle_time, microseconds(2000));
  EXPECT_EQ(o.cache_capacity, 5);
  EXPECT_EQ(o.stall_check, milliseconds(7000));
  EXPECT_EQ(o.stall_shutdown, milliseconds(9000));
  EXPECT_EQ(o.timeline_path, "/a");
  EXPECT_EQ(o.gloo_iface, "eth0");
}

TEST(RuntimeOptionsTest, HvdNameWinsEvenWhenTheHorovodValueIsMalformed) {
  RuntimeOptions o = ParseOk({{"HVD_FUSION_THRESHOLD", "64"}, {"HOROVOD_FUSION_THRESHOLD", "junk"}});
  EXPECT_EQ(o.fusion_threshold, 64);
}

TEST(RuntimeOptionsTest, MalformedHorovodAliasNamesTheHorovodVariable) {
  RuntimeOptions o;
  Status s = Parse({{"HOROVOD_FUSION_THRESHOLD", "12x"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("HOROVOD_FUSION_THRESHOLD"), HasSubstr("'12x'")));
  s = Parse({{"HOROVOD_STALL_CHECK_TIME_SECONDS", "soon"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("HOROVOD_STALL_CHECK_TIME_SECONDS"), HasSubstr("'soon'")));
}

// Every numeric variable rejects every malformed value, naming the variable and value.
class MalformedValueTest
    : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(MalformedValueTest, FailsWithInvalidArgumentNamingVariableAndValue) {
  const auto [var, value] = GetParam();
  RuntimeOptions o;
  o.fusion_threshold = 12345;
  Status s = Parse({{var, value}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(var));
  EXPECT_THAT(s.message(), HasSubstr(std::string("'") + value + "'"));
  EXPECT_EQ(o.fusion_threshold, 12345) << "a failed FromEnv must not write *out";
}

const char* kNumericVars[] = {"HVD_RANK",          "HVD_SIZE",          "HVD_LOCAL_RANK",
                              "HVD_LOCAL_SIZE",    "HVD_CROSS_RANK",    "HVD_CROSS_SIZE",
                              "HVD_CYCLE_TIME",    "HVD_FUSION_THRESHOLD", "HVD_CACHE_CAPACITY",
                              "HVD_TIMEOUT",       "HVD_STALL_CHECK_TIME", "HVD_STALL_SHUTDOWN_TIME",
                              "HOROVOD_CYCLE_TIME", "HOROVOD_FUSION_THRESHOLD",
                              "HOROVOD_CACHE_CAPACITY", "HOROVOD_STALL_CHECK_TIME_SECONDS",
                              "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"};
const char* kMalformed[] = {"abc", "", "-1", "1e999", "12x", "1 2", "0x", "--3", "nan", "inf"};

std::string MalformedName(const ::testing::TestParamInfo<std::tuple<const char*, const char*>>& info) {
  std::string n;
  for (char c : std::string(std::get<1>(info.param)))
    n += isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return std::string(std::get<0>(info.param)) + "_" + std::to_string(info.index) + "_" + n;
}

INSTANTIATE_TEST_SUITE_P(AllNumericVariables, MalformedValueTest,
                         ::testing::Combine(::testing::ValuesIn(kNumericVars),
                                            ::testing::ValuesIn(kMalformed)),
                         MalformedName);

TEST(RuntimeOptionsTest, IntegersRejectFractionsAndValuesOutOfRange) {
  RuntimeOptions o;
  for (const char* v : {"1.5", "99999999999999999999", "-99999999999999999999"}) {
    Status s = Parse({{"HVD_FUSION_THRESHOLD", v}}, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << v;
    EXPECT_THAT(s.message(), AllOf(HasSubstr("HVD_FUSION_THRESHOLD"), HasSubstr(std::string("'") + v + "'")));
  }
  Status s = Parse({{"HVD_SIZE", "0"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("HVD_SIZE"), HasSubstr("'0'")));
  // Past int32 for an int field: refused, naming the variable.
  s = Parse({{"HVD_RANK", "3000000000"}, {"HVD_SIZE", "4"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("HVD_RANK"));
  s = Parse({{"HVD_SIZE", "4294967297"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("HVD_SIZE"));
}

// Regression (fixed in af21dad): a value that parses as an int64 but not an int32 was
// refused with "HVD_SIZE is too large", naming the variable but not the value.
TEST(RuntimeOptionsTest, Int32OverflowMessageNamesTheValue) {
  RuntimeOptions o;
  Status s = Parse({{"HVD_SIZE", "4294967297"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("HVD_SIZE"), HasSubstr("4294967297")));
}

// Regression (fixed in af21dad): a finite duration too large for int64 went through
// std::llround out of range (LLONG_MIN on x86-64), so HVD_STALL_CHECK_TIME=1e300 was
// accepted with a negative stall_check and HVD_TIMEOUT=1e300 was refused only as
// "HVD_TIMEOUT must be positive", naming neither the value nor the reason.
TEST(RuntimeOptionsTest, HugeFiniteDurationsAreRefusedNamingTheValue) {
  for (const char* var : {"HVD_STALL_CHECK_TIME", "HVD_STALL_SHUTDOWN_TIME", "HVD_TIMEOUT",
                          "HVD_CYCLE_TIME"}) {
    RuntimeOptions o;
    Status s = Parse({{var, "1e300"}}, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << var << ": stall_check=" << o.stall_check.count()
                                                  << " stall_shutdown=" << o.stall_shutdown.count();
    EXPECT_THAT(s.message(), AllOf(HasSubstr(var), HasSubstr("'1e300'")));
  }
}

TEST(RuntimeOptionsTest, CacheCapacityHasACeilingNamedInTheError) {
  EXPECT_EQ(ParseOk({{"HVD_CACHE_CAPACITY", "65536"}}).cache_capacity, 65536);
  RuntimeOptions o;
  Status s = Parse({{"HVD_CACHE_CAPACITY", "4294967296"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("HVD_CACHE_CAPACITY='4294967296' is not an integer in 0..65536"));
  EXPECT_EQ(Parse({{"HOROVOD_CACHE_CAPACITY", "65537"}}, &o).code(), StatusCode::kInvalidArgument);
}

// "0 1" must not read as rank 1 (a space inside a number is refused, not skipped).
TEST(RuntimeOptionsTest, ProcessSetsRefuseSpacesInsideARankList) {
  EXPECT_EQ(ParseOk({{"HVD_SIZE", "4"}, {"HVD_PROCESS_SETS", " 0 , 1 ; 2,3 "}}).process_sets,
            (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  for (const char* bad : {"0 1", "0,1 2", "1 0;2"}) {
    RuntimeOptions o;
    Status s = Parse({{"HVD_SIZE", "4"}, {"HVD_PROCESS_SETS", bad}}, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr(std::string("HVD_PROCESS_SETS='") + bad + "'"));
  }
}

TEST(RuntimeOptionsTest, CpuOperationsAndHostId) {
  EXPECT_EQ(ParseOk({}).cpu_operations, "auto");
  EXPECT_EQ(ParseOk({{"HVD_CPU_OPERATIONS", "GLOO"}}).cpu_operations, "gloo");
  EXPECT_EQ(ParseOk({{"HOROVOD_CPU_OPERATIONS", "gloo"}}).cpu_operations, "gloo");
  EXPECT_EQ(ParseOk({{"HVD_CPU_OPERATIONS", "shm"}}).cpu_operations, "shm");
  EXPECT_EQ(ParseOk({{"HVD_HOST_ID", "rack1-node3"}}).host_id, "rack1-node3");
  RuntimeOptions o;
  Status s = Parse({{"HOROVOD_CPU_OPERATIONS", "mpi"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("HOROVOD_CPU_OPERATIONS='mpi'"), HasSubstr("auto, shm or gloo")));
  o = RuntimeOptions();
  o.cpu_operations = "tcp";
  EXPECT_THAT(o.Validate().message(), HasSubstr("HVD_CPU_OPERATIONS='tcp'"));
}

TEST(RuntimeOptionsTest, HierarchicalAllreduce) {
  EXPECT_EQ(ParseOk({}).hierarchical_allreduce, "auto");
  EXPECT_EQ(ParseOk({{"HVD_HIERARCHICAL_ALLREDUCE", "1"}}).hierarchical_allreduce, "1");
  EXPECT_EQ(ParseOk({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "0"}}).hierarchical_allreduce, "0");
  EXPECT_EQ(ParseOk({{"HVD_HIERARCHICAL_ALLREDUCE", "True"}}).hierarchical_allreduce, "1");
  EXPECT_EQ(ParseOk({{"HVD_HIERARCHICAL_ALLREDUCE", "AUTO"}}).hierarchical_allreduce, "auto");
  EXPECT_EQ(ParseOk({{"HVD_HIERARCHICAL_ALLREDUCE", "no"}}).hierarchical_allreduce, "0");
  RuntimeOptions o;
  Status s = Parse({{"HVD_HIERARCHICAL_ALLREDUCE", "yes please"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("HVD_HIERARCHICAL_ALLREDUCE='yes please'"),
                                 HasSubstr("auto, 1, 0, true, false, yes or no")));
  o = RuntimeOptions();
  o.hierarchical_allreduce = "2";
  EXPECT_THAT(o.Validate().message(), HasSubstr("HVD_HIERARCHICAL_ALLREDUCE='2'"));
}

TEST(RuntimeOptionsTest, ScalingChoices) {
  const RuntimeOptions d = ParseOk({});
  EXPECT_EQ(d.negotiation_tree_ranks, 8);
  EXPECT_EQ(d.allreduce_algorithm, "auto");
  EXPECT_EQ(ParseOk({{"HVD_NEGOTIATION_TREE_RANKS", "0"}}).negotiation_tree_ranks, 0);
  EXPECT_EQ(ParseOk({{"HVD_NEGOTIATION_TREE_RANKS", "3"}}).negotiation_tree_ranks, 3);
  EXPECT_EQ(ParseOk({{"HVD_ALLREDUCE_ALGORITHM", "Halving_Doubling"}}).allreduce_algorithm,
            "halving_doubling");
  EXPECT_EQ(ParseOk({{"HVD_ALLREDUCE_ALGORITHM", "ring"}}).allreduce_algorithm, "ring");
  RuntimeOptions o;
  Status s = Parse({{"HVD_NEGOTIATION_TREE_RANKS", "-1"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("HVD_NEGOTIATION_TREE_RANKS='-1'"));
  s = Parse({{"HVD_ALLREDUCE_ALGORITHM", "tree"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("HVD_ALLREDUCE_ALGORITHM='tree'"),
                                 HasSubstr("auto, ring or halving_doubling")));
}

TEST(RuntimeOptionsTest, BindTo) {
  EXPECT_EQ(ParseOk({}).bind_to, "none");
  EXPECT_EQ(ParseOk({{"HVD_BIND_TO", "Core"}}).bind_to, "core");
  EXPECT_EQ(ParseOk({{"HVD_BIND_TO", "none"}}).bind_to, "none");
  RuntimeOptions o;
  Status s = Parse({{"HVD_BIND_TO", "socket"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("HVD_BIND_TO='socket'"), HasSubstr("none or core")));
  o = RuntimeOptions();
  o.bind_to = "numa";
  EXPECT_THAT(o.Validate().message(), HasSubstr("HVD_BIND_TO='numa'"));
}

TEST(RuntimeOptionsTest, ZeroTimeoutAndCycleTimeAreRefused) {
  RuntimeOptions o;
  Status s = Parse({{"HVD_TIMEOUT", "0"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("HVD_TIMEOUT"));
  s = Parse({{"HVD_CYCLE_TIME", "0"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("HVD_CYCLE_TIME"));
  // Rounds to zero microseconds.
  s = Parse({{"HVD_CYCLE_TIME", "0.0001"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("HVD_CYCLE_TIME"));
}

TEST(RuntimeOptionsTest, FromEnvRejectsRankNotBelowSize) {
  RuntimeOptions o;
  Status s = Parse({{"HVD_RANK", "4"}, {"HVD_SIZE", "4"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("HVD_RANK=4"), HasSubstr("HVD_SIZE=4")));
  s = Parse({{"HVD_RANK", "1"}}, &o);  // size defaults to 1
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("HVD_RANK=1"), HasSubstr("HVD_SIZE=1")));
  s = Parse({{"HVD_LOCAL_RANK", "2"}, {"HVD_LOCAL_SIZE", "2"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("HVD_LOCAL_RANK=2"), HasSubstr("HVD_LOCAL_SIZE=2")));
  s = Parse({{"HVD_CROSS_RANK", "3"}, {"HVD_CROSS_SIZE", "1"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("HVD_CROSS_RANK=3"), HasSubstr("HVD_CROSS_SIZE=1")));
  EXPECT_EQ(ParseOk({{"HVD_RANK", "3"}, {"HVD_SIZE", "4"}}).rank, 3);
}

TEST(RuntimeOptionsTest, ValidateCrossFieldRules) {
  auto expect_invalid = [](const RuntimeOptions& o, std::vector<std::string> parts) {
    Status s = o.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    for (const auto& p : parts) EXPECT_THAT(s.message(), HasSubstr(p));
  };
  RuntimeOptions o;
  o.size = 0;
  o.rank = 0;
  expect_invalid(o, {"size", "0"});
  o = RuntimeOptions();
  o.size = 4;
  o.rank = 4;
  expect_invalid(o, {"HVD_RANK=4", "HVD_SIZE=4"});
  o.rank = 7;
  expect_invalid(o, {"HVD_RANK=7", "HVD_SIZE=4"});
  o.rank = -1;
  expect_invalid(o, {"HVD_RANK=-1"});
  o.rank = 3;
  EXPECT_TRUE(o.Validate().ok());
  o.local_size = 2;
  o.local_rank = 2;
  expect_invalid(o, {"HVD_LOCAL_RANK=2", "HVD_LOCAL_SIZE=2"});
  o.local_rank = -1;
  expect_invalid(o, {"HVD_LOCAL_RANK=-1"});
  o.local_rank = 1;
  o.cross_size = 2;
  o.cross_rank = 2;
  expect_invalid(o, {"HVD_CROSS_RANK=2", "HVD_CROSS_SIZE=2"});
  o.cross_rank = 1;
  EXPECT_TRUE(o.Validate().ok());
  o.timeout = milliseconds(0);
  expect_invalid(o, {"HVD_TIMEOUT"});
  o.timeout = milliseconds(-5);
  expect_invalid(o, {"HVD_TIMEOUT"});
  o.timeout = milliseconds(1);
  o.cycle_time = microseconds(0);
  expect_invalid(o, {"HVD_CYCLE_TIME"});
  o.cycle_time = microseconds(1);
  EXPECT_TRUE(o.Validate().ok());
}

TEST(RuntimeOptionsTest, StringsAreTakenVerbatim) {
  RuntimeOptions o = ParseOk({{"HVD_JOB_ID", ""}, {"HVD_STORE_ADDR", " host:1 "}, {"HVD_GLOO_HOSTNAME", ""}});
  EXPECT_EQ(o.job_id, "");
  EXPECT_EQ(o.store_addr, " host:1 ");
  EXPECT_EQ(o.gloo_hostname, "");
}

TEST(RuntimeOptionsTest, DefaultGetEnvReadsTheProcessEnvironment) {
  ASSERT_EQ(::setenv("HVD_CACHE_CAPACITY", "31", 1), 0);
  RuntimeOptions o;
  Status s = RuntimeOptions::FromEnv(&o);
  ::unsetenv("HVD_CACHE_CAPACITY");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(o.cache_capacity, 31);
}

}  // namespace
}  // namespace hvd
