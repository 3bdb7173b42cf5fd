#include "tests/test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "runtime/kernels/reduce_kernels.h"
#include "runtime/store/store.h"

namespace hvd {
namespace testing {

RuntimeOptions TestOptions(int rank, int size) {
  RuntimeOptions o;
  o.rank = rank;
  o.size = size;
  o.local_rank = rank;
  o.local_size = size;
  o.gloo_hostname = "127.0.0.1";
  o.timeout = std::chrono::milliseconds(20000);
  o.cycle_time = std::chrono::microseconds(1000);
  // CMake runs some suites a second time with Gloo (tests/CMakeLists.txt).
  if (const char* ops = std::getenv("HVD_TEST_CPU_OPERATIONS")) o.cpu_operations = ops;
  return o;
}

void RunRanks(int size, const std::function<void(int rank, Runtime& rt)>& fn,
              const std::function<void(RuntimeOptions&)>& adjust) {
  auto store = NewInMemoryStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      RuntimeOptions o = TestOptions(r, size);
      if (adjust) adjust(o);
      std::unique_ptr<Runtime> rt;
      Status s = Runtime::Create(o, store, &rt);
      if (!s.ok()) {
        ADD_FAILURE() << "rank " << r << ": Runtime::Create failed: " << s.ToString();
        return;
      }
      fn(r, *rt);
      Status shut = rt->Shutdown();
      EXPECT_TRUE(shut.ok()) << "rank " << r << ": " << shut.ToString();
    });
  }
  for (auto& t : threads) t.join();
}

Status AllreduceSync(Runtime& rt, const std::string& name, const void* in, void* out,
                     int64_t count, DataType dtype, ReduceOp op, double prescale,
                     double postscale) {
  TensorEntry args;
  args.name = name;
  args.input = in;
  args.output = out;
  args.shape = {count};
  args.dtype = dtype;
  args.reduce_op = op;
  args.prescale_factor = prescale;
  args.postscale_factor = postscale;
  std::shared_ptr<Work> work;
  HVD_RETURN_IF_ERROR(rt.EnqueueOne(std::move(args), 0, &work));
  return work->Wait(std::chrono::milliseconds(60000));
}

std::vector<double> RankData(int rank, int64_t count, uint32_t seed) {
  std::mt19937 gen(seed * 7919u + static_cast<uint32_t>(rank) * 104729u);
  std::uniform_int_distribution<int> dist(-4, 4);
  std::vector<double> v(count);
  for (auto& x : v) x = dist(gen);
  return v;
}

std::vector<uint8_t> RankInput(int rank, int64_t count, DataType dtype, uint32_t seed) {
  return Encode(RankData(rank, count, seed), dtype);
}

std::vector<uint8_t> RankOrderReduction(int size, int64_t count, DataType dtype, ReduceOp op,
                                        uint32_t seed) {
  std::vector<uint8_t> out = RankInput(0, count, dtype, seed);
  const ReduceFn fn = GetReduceFn(dtype, op);
  for (int r = 1; r < size; ++r) {
    const auto in = RankInput(r, count, dtype, seed);
    fn(out.data(), out.data(), in.data(), static_cast<size_t>(count));
  }
  return out;
}

std::vector<uint8_t> Encode(const std::vector<double>& v, DataType dtype) {
  const size_t elem = DataTypeSize(dtype);
  std::vector<uint8_t> out(v.size() * elem);
  for (size_t i = 0; i < v.size(); ++i) {
    uint8_t* p = out.data() + i * elem;
    switch (dtype) {
      case DataType::kFloat32: { float f = static_cast<float>(v[i]); std::memcpy(p, &f, 4); break; }
      case DataType::kFloat64: std::memcpy(p, &v[i], 8); break;
      case DataType::kFloat16: { uint16_t h = FloatToHalf(static_cast<float>(v[i])); std::memcpy(p, &h, 2); break; }
      case DataType::kBFloat16: { uint16_t h = FloatToBFloat16(static_cast<float>(v[i])); std::memcpy(p, &h, 2); break; }
      case DataType::kInt8: { int8_t x = static_cast<int8_t>(v[i]); std::memcpy(p, &x, 1); break; }
      case DataType::kUInt8: { uint8_t x = static_cast<uint8_t>(static_cast<int64_t>(v[i])); std::memcpy(p, &x, 1); break; }
      case DataType::kInt32: { int32_t x = static_cast<int32_t>(v[i]); std::memcpy(p, &x, 4); break; }
      case DataType::kInt64: { int64_t x = static_cast<int64_t>(v[i]); std::memcpy(p, &x, 8); break; }
      case DataType::kInt16: { int16_t x = static_cast<int16_t>(v[i]); std::memcpy(p, &x, 2); break; }
    }
  }
  return out;
}

std::vector<double> Decode(const ResultBytes& bytes, DataType dtype) {
  return Decode(std::vector<uint8_t>(bytes.begin(), bytes.end()), dtype);
}

std::vector<double> Decode(const std::vector<uint8_t>& bytes, DataType dtype) {
  const size_t elem = DataTypeSize(dtype);
  std::vector<double> out(bytes.size() / elem);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t* p = bytes.data() + i * elem;
    switch (dtype) {
      case DataType::kFloat32: { float f; std::memcpy(&f, p, 4); out[i] = f; break; }
      case DataType::kFloat64: std::memcpy(&out[i], p, 8); break;
      case DataType::kFloat16: { uint16_t h; std::memcpy(&h, p, 2); out[i] = HalfToFloat(h); break; }
      case DataType::kBFloat16: { uint16_t h; std::memcpy(&h, p, 2); out[i] = BFloat16ToFloat(h); break; }
      case DataType::kInt8: { int8_t x; std::memcpy(&x, p, 1); out[i] = x; break; }
      case DataType::kUInt8: { uint8_t x; std::memcpy(&x, p, 1); out[i] = x; break; }
      case DataType::kInt32: { int32_t x; std::memcpy(&x, p, 4); out[i] = x; break; }
      case DataType::kInt64: { int64_t x; std::memcpy(&x, p, 8); out[i] = static_cast<double>(x); break; }
      case DataType::kInt16: { int16_t x; std::memcpy(&x, p, 2); out[i] = x; break; }
    }
  }
  return out;
}

namespace {

// Rank r's word i in round `round`: a few bits for the OR, a spread for the max.
uint64_t WordOf(int rank, int round, size_t i) {
  const uint64_t h = (static_cast<uint64_t>(rank) * 0x9e3779b97f4a7c15ull) ^
                     (static_cast<uint64_t>(round) << 20) ^ (i * 0xbf58476d1ce4e5b9ull);
  return (h ^ (h >> 29)) & ((i % 3 == 0) ? ~uint64_t{0} : (uint64_t{1} << ((rank + i) % 64)));
}

}  // namespace

std::string WordAllreduceRound(ControlChannel& ch, int round, size_t n, size_t or_words) {
  std::vector<uint64_t> words(n), expected(n, 0);
  for (size_t i = 0; i < n; ++i) words[i] = WordOf(ch.rank(), round, i);
  for (int r = 0; r < ch.size(); ++r) {
    std::vector<uint64_t> theirs(n);
    for (size_t i = 0; i < n; ++i) theirs[i] = WordOf(r, round, i);
    CombineWords(theirs.data(), n, or_words, expected.data());
  }
  const Status s = ch.AllreduceWords(&words, or_words);
  if (!s.ok()) return "rank " + std::to_string(ch.rank()) + ": " + s.ToString();
  for (size_t i = 0; i < n; ++i)
    if (words[i] != expected[i])
      return "rank " + std::to_string(ch.rank()) + " round " + std::to_string(round) + ": word " +
             std::to_string(i) + " of " + std::to_string(n) + " is " + std::to_string(words[i]) +
             ", expected " + std::to_string(expected[i]);
  return "";
}

}  // namespace testing
}  // namespace hvd
