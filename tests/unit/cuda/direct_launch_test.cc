// The direct peer-memory collectives (src/cuda/direct_kernels.h) launched through the driver
// table (DirectKernel) against the fake stream driver, whose weftDirect runs the kernel's host
// build with one host thread per block. Every collective, with types and operators, 1-4 ranks,
// counts 0, 1, 7, a prime and one past several blocks, in place and out of place, aligned and not
// (the 16-byte path and the element path), one-shot and two-shot: results against closed forms
// of integer inputs. Also: consecutive calls on one set of mailboxes (epochs), every rank in one
// launch, a captured launch replayed, a peer that never arrives, the abort word, refused launches,
// and the launch configuration.
#include "src/cuda/direct_launch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "src/common/reduce_elements.h"
#include "src/cuda/interp_launch.h"

extern "C" {
void* weftFakeStreamCreate();
void weftFakeStreamDestroy(void* s);
void weftFakeStreamSynchronize(void* s);
void weftFakeBeginCapture(void* stream);
void* weftFakeEndCapture(void* stream);
void weftFakeGraphLaunch(void* graph, void* stream);
void weftFakeGraphDestroy(void* graph);
uint64_t weftFakeKernelLaunches();
}

namespace weft::cuda::test {
namespace {

using plan::Collective;

const DriverApi& fakeApi() {
  static const DriverLoad load = loadDriver(WEFT_FAKE_STREAM_DRIVER);
  if (!load.api) throw std::runtime_error(load.why);
  return *load.api;
}

void check(CuResult rc, const char* what) {
  if (rc != kCuSuccess) throw std::runtime_error(std::string(what) + ": " + std::to_string(rc));
}

// The interpreter's module (the fake accepts any image) and the direct kernel in it.
struct Kernels {
  std::unique_ptr<InterpModule> module;
  std::unique_ptr<DirectKernel> direct;
};
const Kernels& kernels() {
  static const Kernels k = [] {
    static const char kAnyImage[] = "not a fatbin: the fake runs the host build";
    std::string why;
    Kernels out;
    out.module = interpImageBuilt() ? InterpModule::load(fakeApi(), &why)
                                    : InterpModule::loadImage(fakeApi(), kAnyImage, &why);
    if (!out.module) throw std::runtime_error(why);
    out.direct = DirectKernel::find(fakeApi(), out.module->module(), &why);
    if (!out.direct) throw std::runtime_error(why);
    return out;
  }();
  return k;
}

// Fake device memory (host memory the fake calls device memory), zeroed.
class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes) {
    check(fakeApi().memAlloc(&ptr_, bytes ? bytes : 1), "cuMemAlloc");
    std::memset(get(), 0, bytes ? bytes : 1);
  }
  ~DeviceMemory() { fakeApi().memFree(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  char* get() const { return reinterpret_cast<char*>(static_cast<uintptr_t>(ptr_)); }

 private:
  CuDevicePtr ptr_ = 0;
};

constexpr uint32_t kSlots = 4;  // mailbox slots per rank: the most blocks a call may use

// A world of n ranks: mailboxes, statuses and the abort word, kept from call to call.
struct World {
  explicit World(int ranks)
      : n(ranks),
        slots(sizeof(DirectSlot) * kSlots * ranks),
        status(sizeof(DirectStatus) * ranks),
        abortWord(sizeof(uint32_t)) {}
  DirectStatus& statusOf(int r) const { return reinterpret_cast<DirectStatus*>(status.get())[r]; }
  uint32_t* abort() const { return reinterpret_cast<uint32_t*>(abortWord.get()); }
  int n;
  DeviceMemory slots, status, abortWord;
};

// The closed-form inputs: small integers every type holds exactly, and sums, products and
// scaled sums of up to 4 of them too.
double inputValue(Collective c, int rank, uint64_t i) {
  if (c == Collective::kAllGather || c == Collective::kBroadcast || c == Collective::kAlltoAll)
    return static_cast<double>((rank * 7 + i) % 15 + 1);
  return static_cast<double>((rank + i) % 2 + 1);
}

void store(DataType t, char* base, uint64_t i, double v) {
  elements::withElem(t, [&](auto e) {
    using E = decltype(e);
    using S = typename E::Storage;
    const S x = E::fromCalc(static_cast<typename E::Calc>(v));
    std::memcpy(base + i * sizeof(S), &x, sizeof(S));
  });
}

struct Case {
  Collective coll = Collective::kAllReduce;
  DataType type = DataType::kInt32;
  RedOp op = RedOp::kSum;  // kAvg: integer Avg, launched as Sum with divisor n
  uint64_t count = 0;
  bool inPlace = false;
  bool misaligned = false;  // buffers one element past 16-byte alignment
  DirectAlgo algo = DirectAlgo::kTwoShot;
  bool oneLaunch = false;  // every rank in one launch on one stream
  int root = 0;
  uint32_t blocks = 0;  // 0: as directShape chooses on a 4-SM GPU with 64-byte blocks
};

double reduceOf(const Case& k, int n, uint64_t i, bool segmented, int r) {
  const uint64_t at = segmented ? static_cast<uint64_t>(r) * k.count + i : i;
  double acc = k.op == RedOp::kProd ? 1 : 0;
  for (int p = 0; p < n; ++p) {
    const double v = inputValue(k.coll, p, at);
    switch (k.op) {
      case RedOp::kProd:
        acc *= v;
        break;
      case RedOp::kMax:
        acc = p == 0 || v > acc ? v : acc;
        break;
      case RedOp::kMin:
        acc = p == 0 || v < acc ? v : acc;
        break;
      case RedOp::kPreMulSum:
        acc += 2 * v;
        break;
      default:
        acc += v;
    }
  }
  if (k.op == RedOp::kAvg) acc = static_cast<double>(static_cast<int64_t>(acc) / n);
  return acc;
}

// A launch on `w`'s mailboxes: GPU scope, a budget no healthy call comes near.
DirectLaunch baseLaunch(const World& w) {
  DirectLaunch p{};
  p.slots = reinterpret_cast<DirectSlot*>(w.slots.get());
  p.abort = w.abort();
  p.timeoutNs = 30ull * 1000 * 1000 * 1000;
  p.slotsPerRank = kSlots;
  p.nranks = w.n;
  p.scope = static_cast<uint8_t>(DirectScope::kGpu);
  return p;
}

// Runs one call of `k` on `w` and checks every rank's output; `tag` names the case.
void runCase(World& w, const Case& k, const std::string& tag) {
  const int n = w.n;
  const uint64_t es = dataTypeSize(k.type), c = k.count;
  const bool segIn = k.coll == Collective::kReduceScatter || k.coll == Collective::kAlltoAll;
  const bool segOut = k.coll == Collective::kAllGather || k.coll == Collective::kAlltoAll;
  const uint64_t inElems = segIn ? c * n : c, outElems = segOut ? c * n : c;
  const uint64_t skew = k.misaligned ? es : 0;
  std::vector<std::unique_ptr<DeviceMemory>> ins, outs;
  std::vector<char*> in(n), out(n);
  for (int r = 0; r < n; ++r) {
    if (k.inPlace) {
      // One buffer: out = in, except allgather (in = segment r of out) and reduce-scatter
      // (out = segment r of in).
      outs.push_back(std::make_unique<DeviceMemory>((segIn ? inElems : outElems) * es + 16));
      char* buf = outs.back()->get() + skew;
      in[r] = k.coll == Collective::kAllGather ? buf + r * c * es : buf;
      out[r] = k.coll == Collective::kReduceScatter ? buf + r * c * es : buf;
    } else {
      outs.push_back(std::make_unique<DeviceMemory>(outElems * es + 16));
      ins.push_back(std::make_unique<DeviceMemory>(inElems * es + 16));
      out[r] = outs.back()->get() + skew;
      in[r] = ins.back()->get() + skew;
      for (uint64_t i = 0; i < outElems; ++i) store(k.type, out[r], i, 99);  // untouched: 99
    }
    for (uint64_t i = 0; i < inElems; ++i) store(k.type, in[r], i, inputValue(k.coll, r, i));
  }
  DirectQuery q{k.coll, c, k.type, n, 4, 1, kSlots};
  Tuning t;
  t.directBlockBytes = 64;
  DirectShape shape = directShape(q, t);
  if (k.blocks) shape.blocks = c ? k.blocks : 0;
  DirectLaunch p = baseLaunch(w);
  p.count = c;
  p.divisor = k.op == RedOp::kAvg ? static_cast<uint64_t>(n) : 0;
  if (k.op == RedOp::kPreMulSum) store(k.type, reinterpret_cast<char*>(p.scalar.bytes), 0, 2);
  p.blocks = shape.blocks;
  p.nranks = n;
  p.root = k.root;
  p.coll = static_cast<uint8_t>(k.coll);
  p.type = static_cast<uint8_t>(k.type);
  p.op = static_cast<uint8_t>(k.op == RedOp::kAvg ? RedOp::kSum : k.op);
  p.algo = static_cast<uint8_t>(k.algo);
  const uint64_t launchesBefore = weftFakeKernelLaunches();
  std::vector<void*> streams;
  for (int first = 0; first < n; first += k.oneLaunch ? n : 1) {
    DirectLaunch l = p;
    l.ranks = static_cast<uint8_t>(k.oneLaunch ? n : 1);
    for (int j = 0; j < l.ranks; ++j)
      l.rank[j] =
          DirectRankArgs{in[first + j], out[first + j], &w.statusOf(first + j), first + j, 0};
    streams.push_back(weftFakeStreamCreate());
    ASSERT_EQ(kernels().direct->launch(l, static_cast<CuStream>(streams.back())), kCuSuccess)
        << tag;
  }
  for (void* s : streams) {
    weftFakeStreamSynchronize(s);
    weftFakeStreamDestroy(s);
  }
  EXPECT_EQ(weftFakeKernelLaunches() - launchesBefore, c ? streams.size() : 0u) << tag;
  for (int r = 0; r < n; ++r) ASSERT_EQ(w.statusOf(r).error, 0u) << tag << " rank " << r;
  std::vector<char> want(es);
  for (int r = 0; r < n; ++r) {
    for (uint64_t i = 0; i < outElems; ++i) {
      double v = 99;
      switch (k.coll) {
        case Collective::kAllReduce:
          v = reduceOf(k, n, i, false, r);
          break;
        case Collective::kReduceScatter:
          v = reduceOf(k, n, i, true, r);
          break;
        case Collective::kReduce:
          v = r == k.root ? reduceOf(k, n, i, false, r)
                          : (k.inPlace ? inputValue(k.coll, r, i) : 99);
          break;
        case Collective::kAllGather:
          v = inputValue(k.coll, static_cast<int>(i / c), i % c);
          break;
        case Collective::kBroadcast:
          v = inputValue(k.coll, k.root, i);
          break;
        case Collective::kAlltoAll:
          v = inputValue(k.coll, static_cast<int>(i / c), r * c + i % c);
          break;
        default:
          break;
      }
      store(k.type, want.data(), 0, v);
      ASSERT_EQ(std::memcmp(out[r] + i * es, want.data(), es), 0)
          << tag << " rank " << r << " element " << i << " of " << outElems << " expected " << v;
    }
  }
}

std::string describe(const Case& k, int n) {
  return std::string(plan::collectiveName(k.coll)) + " n=" + std::to_string(n) +
         " type=" + std::to_string(static_cast<int>(k.type)) +
         " op=" + std::to_string(static_cast<int>(k.op)) + " count=" + std::to_string(k.count) +
         (k.inPlace ? " in place" : "") + (k.misaligned ? " misaligned" : "") +
         (k.algo == DirectAlgo::kOneShot ? " one-shot" : "") + (k.oneLaunch ? " one launch" : "");
}

constexpr uint64_t kCounts[] = {0, 1, 7, 13, 1031};

struct TypeOp {
  DataType type;
  RedOp op;
};
constexpr TypeOp kReductions[] = {
    {DataType::kInt32, RedOp::kSum},         {DataType::kFloat32, RedOp::kSum},
    {DataType::kFp8E5M2, RedOp::kSum},       {DataType::kBfloat16, RedOp::kProd},
    {DataType::kUint8, RedOp::kMax},         {DataType::kFloat64, RedOp::kMin},
    {DataType::kFloat16, RedOp::kPreMulSum}, {DataType::kInt64, RedOp::kAvg},
    {DataType::kFp8E4M3, RedOp::kPreMulSum},
};
constexpr DataType kCopyTypes[] = {DataType::kInt8, DataType::kFloat16, DataType::kFloat32,
                                   DataType::kUint64};

// Every case of one collective for n ranks, on one world (so calls follow each other: epochs).
void sweep(Collective coll, int n) {
  World w(n);
  std::vector<TypeOp> combos;
  if (coll == Collective::kAllGather || coll == Collective::kBroadcast ||
      coll == Collective::kAlltoAll) {
    for (DataType t : kCopyTypes) combos.push_back({t, RedOp::kSum});
  } else {
    combos.assign(std::begin(kReductions), std::end(kReductions));
  }
  for (const TypeOp& to : combos)
    for (uint64_t count : kCounts)
      for (int variant = 0; variant < 4; ++variant) {
        Case k;
        k.coll = coll;
        k.type = to.type;
        k.op = to.op;
        k.count = count;
        k.inPlace = variant & 1;
        k.misaligned = variant == 2;
        k.algo = variant & 2 ? DirectAlgo::kOneShot : DirectAlgo::kTwoShot;
        k.oneLaunch = variant == 3;
        k.root = n - 1;
        runCase(w, k, describe(k, n));
        if (::testing::Test::HasFatalFailure()) return;
      }
}

class DirectCollectives : public ::testing::TestWithParam<std::tuple<Collective, int>> {};

TEST_P(DirectCollectives, MatchClosedForms) {
  sweep(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    All, DirectCollectives,
    ::testing::Combine(::testing::Values(Collective::kAllReduce, Collective::kReduceScatter,
                                         Collective::kReduce, Collective::kAllGather,
                                         Collective::kBroadcast, Collective::kAlltoAll),
                       ::testing::Values(1, 2, 3, 4)),
    [](const auto& info) {
      return std::string(plan::collectiveName(std::get<0>(info.param))) + "_" +
             std::to_string(std::get<1>(info.param)) + "ranks";
    });

// A 2-rank int32 Sum allreduce of `count` elements for rank `r` alone.
DirectLaunch lonelyRank(const World& w, int r, char* in, char* out, uint64_t count) {
  DirectLaunch p = baseLaunch(w);
  p.count = count;
  p.blocks = 1;
  p.coll = static_cast<uint8_t>(Collective::kAllReduce);
  p.type = static_cast<uint8_t>(DataType::kInt32);
  p.op = static_cast<uint8_t>(RedOp::kSum);
  p.ranks = 1;
  p.rank[0] = DirectRankArgs{in, out, &w.statusOf(r), r, 0};
  return p;
}

// A peer that never launches: the call ends within its time budget, saying which block waited
// for which rank in which barrier, and raises the abort word.
TEST(DirectFailures, PeerThatNeverArrivesTimesOut) {
  World w(2);
  DeviceMemory in(256), out(256);
  DirectLaunch p = lonelyRank(w, 0, in.get(), out.get(), 64);
  p.timeoutNs = 200ull * 1000 * 1000;
  void* s = weftFakeStreamCreate();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(kernels().direct->launch(p, static_cast<CuStream>(s)), kCuSuccess);
  weftFakeStreamSynchronize(s);
  weftFakeStreamDestroy(s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  const DirectStatus& st = w.statusOf(0);
  EXPECT_EQ(st.error, static_cast<uint32_t>(DirectError::kTimeout));
  EXPECT_EQ(st.phase, static_cast<uint32_t>(DirectPhase::kStart));
  EXPECT_EQ(st.peer, 1);
  EXPECT_EQ(st.block, 0);
  EXPECT_EQ(st.epoch, 1u);
  EXPECT_NE(*w.abort(), 0u);
}

// Ranks whose calls differ (here the count) fail at the start with kMismatch on both sides
// instead of reading past a peer's buffer.
TEST(DirectFailures, MismatchedCallsFail) {
  World w(2);
  DeviceMemory in0(4096), out0(4096), in1(4096), out1(4096);
  void* streams[2] = {weftFakeStreamCreate(), weftFakeStreamCreate()};
  ASSERT_EQ(kernels().direct->launch(lonelyRank(w, 0, in0.get(), out0.get(), 100),
                                     static_cast<CuStream>(streams[0])),
            kCuSuccess);
  ASSERT_EQ(kernels().direct->launch(lonelyRank(w, 1, in1.get(), out1.get(), 300),
                                     static_cast<CuStream>(streams[1])),
            kCuSuccess);
  for (void* s : streams) {
    weftFakeStreamSynchronize(s);
    weftFakeStreamDestroy(s);
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(w.statusOf(r).error, static_cast<uint32_t>(DirectError::kMismatch)) << r;
    EXPECT_EQ(w.statusOf(r).peer, 1 - r);
  }
}

// The abort word, raised by the host while a block waits, ends the wait long before its budget.
TEST(DirectFailures, AbortWordEndsTheWait) {
  World w(2);
  DeviceMemory in(256), out(256);
  DirectLaunch p = lonelyRank(w, 1, in.get(), out.get(), 64);
  p.timeoutNs = 600ull * 1000 * 1000 * 1000;
  void* s = weftFakeStreamCreate();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(kernels().direct->launch(p, static_cast<CuStream>(s)), kCuSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  __atomic_store_n(w.abort(), 1u, __ATOMIC_RELEASE);
  weftFakeStreamSynchronize(s);
  weftFakeStreamDestroy(s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_EQ(w.statusOf(1).error, static_cast<uint32_t>(DirectError::kAborted));
  EXPECT_EQ(w.statusOf(1).peer, 0);
}

// Launches captured once and replayed: the epoch lives in the mailboxes, so each replay is the
// next call; inputs changed between replays show in the outputs.
TEST(DirectGraphs, ReplaysAreConsecutiveCalls) {
  constexpr uint64_t kCount = 300;
  World w(2);
  DeviceMemory in0(kCount * 4), in1(kCount * 4), out0(kCount * 4), out1(kCount * 4);
  char* ins[2] = {in0.get(), in1.get()};
  char* outs[2] = {out0.get(), out1.get()};
  void* streams[2] = {weftFakeStreamCreate(), weftFakeStreamCreate()};
  void* graphs[2];
  for (int r = 0; r < 2; ++r) {
    DirectLaunch p = lonelyRank(w, r, ins[r], outs[r], kCount);
    p.blocks = 2;
    weftFakeBeginCapture(streams[r]);
    ASSERT_EQ(kernels().direct->launch(p, static_cast<CuStream>(streams[r])), kCuSuccess);
    graphs[r] = weftFakeEndCapture(streams[r]);
  }
  for (int32_t replay = 1; replay <= 3; ++replay) {
    for (int r = 0; r < 2; ++r)
      for (uint64_t i = 0; i < kCount; ++i) {
        const int32_t v = replay * 1000 + r * 100 + static_cast<int32_t>(i);
        std::memcpy(ins[r] + i * 4, &v, 4);
      }
    for (int r = 0; r < 2; ++r) weftFakeGraphLaunch(graphs[r], streams[r]);
    for (void* s : streams) weftFakeStreamSynchronize(s);
    for (int r = 0; r < 2; ++r)
      for (uint64_t i = 0; i < kCount; ++i) {
        int32_t got = 0;
        std::memcpy(&got, outs[r] + i * 4, 4);
        ASSERT_EQ(got, 2 * (replay * 1000 + static_cast<int32_t>(i)) + 100)
            << "replay " << replay << " rank " << r << " element " << i;
      }
    for (int r = 0; r < 2; ++r) ASSERT_EQ(w.statusOf(r).error, 0u);
  }
  const auto* slots = reinterpret_cast<const DirectSlot*>(w.slots.get());
  EXPECT_EQ(slots[0].arrived, 3u);  // rank 0, block 0: three calls
  EXPECT_EQ(slots[kSlots + 1].done, 3u);
  for (int r = 0; r < 2; ++r) {
    weftFakeGraphDestroy(graphs[r]);
    weftFakeStreamDestroy(streams[r]);
  }
}

// Launches the kernel could not run are refused before anything is queued.
TEST(DirectLaunches, RefusedBeforeQueueing) {
  World w(2);
  DeviceMemory in(64), out(64);
  const DirectLaunch good = lonelyRank(w, 0, in.get(), out.get(), 16);
  const DirectKernel& k = *kernels().direct;
  const uint64_t before = weftFakeKernelLaunches();
  auto refused = [&](DirectLaunch p, uint32_t threads = kDirectThreads) {
    return k.launch(p, nullptr, threads) == kCuErrorInvalidValue;
  };
  DirectLaunch p = good;
  p.blocks = kSlots + 1;
  EXPECT_TRUE(refused(p));
  p = good;
  p.op = static_cast<uint8_t>(RedOp::kAvg);
  EXPECT_TRUE(refused(p));
  p = good;
  p.rank[0].rank = 2;
  EXPECT_TRUE(refused(p));
  p = good;
  p.slots = nullptr;
  EXPECT_TRUE(refused(p));
  p = good;
  p.coll = static_cast<uint8_t>(Collective::kSendRecv);
  EXPECT_TRUE(refused(p));
  p = good;
  p.nranks = static_cast<int32_t>(kMaxDirectRanks) + 1;
  EXPECT_TRUE(refused(p));
  p = good;
  p.ranks = kMaxDirectLaunchRanks + 1;
  EXPECT_TRUE(refused(p));
  EXPECT_TRUE(refused(good, kDirectThreads * 2));
  EXPECT_EQ(weftFakeKernelLaunches(), before);
  p = good;
  p.ranks = 0;
  EXPECT_EQ(k.launch(p, nullptr), kCuSuccess);  // nothing to run
  EXPECT_EQ(weftFakeKernelLaunches(), before);
}

}  // namespace
}  // namespace weft::cuda::test
