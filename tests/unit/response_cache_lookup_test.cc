// ResponseCache::Lookup (controller/response_cache.h): found by name, or by its
// guess from the order of earlier lookups, always the entry cached under the
// request's name, whatever the order, evictions and slot reuse in between.
#include "controller/response_cache.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace hvd {
namespace {

using Match = ResponseCache::Match;

proto::Request Req(const std::string& name, int64_t count) {
  proto::Request r;
  r.set_type(proto::ALLREDUCE);
  r.set_name(name);
  r.add_shape(count);
  return r;
}

// The cache keeps a response under its first name; the type does not matter here.
proto::Response Resp(const std::string& name, int64_t count) {
  proto::Response r;
  r.add_names(name);
  r.add_counts(count);
  return r;
}

// Looks `names` up in turn; each must hit at the index it was cached at.
void ExpectHits(ResponseCache& cache, const std::vector<std::string>& names,
                const std::map<std::string, uint32_t>& at) {
  for (const auto& n : names) {
    uint32_t index = 12345;
    ASSERT_EQ(cache.Lookup(Req(n, 4), &index), Match::kHit) << n;
    EXPECT_EQ(index, at.at(n)) << n;
    EXPECT_EQ(cache.response(index).names(0), n);
  }
}

TEST(ResponseCacheLookup, SameOrderAndAnyOtherOrderFindTheEntryByItsName) {
  ResponseCache cache(8);
  std::map<std::string, uint32_t> at;
  for (const char* n : {"a", "b", "c", "d"}) {
    ASSERT_EQ(cache.Put(Req(n, 4), Resp(n, 4)), -1);
    uint32_t index = 0;
    ASSERT_EQ(cache.Lookup(Req(n, 4), &index), Match::kHit);
    at[n] = index;
  }
  ExpectHits(cache, {"a", "b", "c", "d"}, at);
  ExpectHits(cache, {"a", "b", "c", "d"}, at);  // every guess right
  ExpectHits(cache, {"d", "b", "a", "c"}, at);  // every guess wrong
  ExpectHits(cache, {"a", "c", "a", "a", "d"}, at);
}

TEST(ResponseCacheLookup, AGuessedSlotReusedForAnotherNameIsNotTaken) {
  ResponseCache cache(3);
  std::map<std::string, uint32_t> at;
  uint32_t index = 0;
  for (const char* n : {"a", "b", "c"}) {
    cache.Put(Req(n, 4), Resp(n, 4));
    ASSERT_EQ(cache.Lookup(Req(n, 4), &index), Match::kHit);
    at[n] = index;
  }
  ExpectHits(cache, {"a", "b", "c"}, at);  // the guess after "a" is b's slot
  cache.Erase(at["b"]);
  ASSERT_EQ(cache.Put(Req("x", 4), Resp("x", 4)), -1);
  ASSERT_EQ(cache.Lookup(Req("a", 4), &index), Match::kHit);
  EXPECT_EQ(cache.Lookup(Req("b", 4), &index), Match::kNone) << "b's old slot now holds x";
  ASSERT_EQ(cache.Lookup(Req("x", 4), &index), Match::kHit);
  EXPECT_EQ(index, at["b"]) << "x took b's slot";
  EXPECT_EQ(cache.response(index).names(0), "x");
}

TEST(ResponseCacheLookup, ChangedParametersAreReportedOnTheGuessedPathToo) {
  ResponseCache cache(4);
  cache.Put(Req("a", 4), Resp("a", 4));
  cache.Put(Req("b", 4), Resp("b", 4));
  uint32_t a = 0, b = 0, index = 0;
  ASSERT_EQ(cache.Lookup(Req("a", 4), &a), Match::kHit);
  ASSERT_EQ(cache.Lookup(Req("b", 4), &b), Match::kHit);
  ASSERT_EQ(cache.Lookup(Req("a", 4), &index), Match::kHit);
  // Guessed after "a": b's slot, with a different count.
  EXPECT_EQ(cache.Lookup(Req("b", 8), &index), Match::kChanged);
  EXPECT_EQ(index, b);
}

TEST(ResponseCacheLookup, CapacityZeroFindsNothing) {
  ResponseCache cache(0);
  EXPECT_EQ(cache.Put(Req("a", 4), Resp("a", 4)), -1);
  uint32_t index = 0;
  EXPECT_EQ(cache.Lookup(Req("a", 4), &index), Match::kNone);
  EXPECT_EQ(cache.Lookup(Req("a", 4), &index), Match::kNone);
}

}  // namespace
}  // namespace hvd
