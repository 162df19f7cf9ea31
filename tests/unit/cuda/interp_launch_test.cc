// Launching the device interpreter through the driver table (src/cuda/interp_launch.h) against
// the fake stream driver, loaded with loadDriver as libcuda.so.1 would be: its "kernels" run the
// interpreter's host build, one host thread per block. The library's plans of 2-4 ranks run with
// every rank in one launch, over two launches in sequence (epoch 2 on the same FIFOs and
// counters), with their ranks split over two streams, and captured then replayed; plans, FIFOs,
// counters and buffers are in the fake's device memory, set up through the table (cuMemAlloc,
// cuMemcpyHtoD, cuMemsetD8). Results equal the host executor's bit for bit. Also: which block
// runs which rank, the launches refused, and why a load fails.
#include "src/cuda/interp_launch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/registry.h"
#include "src/cuda/device_plan.h"
#include "tests/unit/cuda/device_harness.h"

extern "C" {
void* weftFakeStreamCreate();
void weftFakeStreamDestroy(void* s);
void weftFakeStreamSynchronize(void* s);
void weftFakeBeginCapture(void* stream);
void* weftFakeEndCapture(void* stream);
void weftFakeGraphLaunch(void* graph, void* stream);
void weftFakeGraphDestroy(void* graph);
uint64_t weftFakeKernelLaunches();
size_t weftFakeModulesLoaded();
}

namespace weft::cuda::test {
namespace {

using plan::Collective;

// The fake, loaded once for the process (as the library keeps libcuda.so.1).
const DriverApi& fakeApi() {
  static const DriverLoad load = loadDriver(WEFT_FAKE_STREAM_DRIVER);
  if (!load.api) throw std::runtime_error(load.why);
  return *load.api;
}

// The embedded image where the build has one; otherwise any bytes (the fake accepts any image).
std::unique_ptr<InterpModule> loadModule(const DriverApi& api, std::string* why) {
  static const char kAnyImage[] = "not a fatbin: the fake runs the host build";
  return interpImageBuilt() ? InterpModule::load(api, why)
                            : InterpModule::loadImage(api, kAnyImage, why);
}

void check(const DriverApi& api, CuResult rc, const char* what) {
  if (rc != kCuSuccess) throw std::runtime_error(std::string(what) + ": " + resultText(&api, rc));
}

// One cuMemAlloc'd block of the fake's device memory.
class DeviceMemory {
 public:
  DeviceMemory(const DriverApi& api, size_t bytes) : api_(api) {
    check(api, api.memAlloc(&ptr_, bytes ? bytes : 1), "cuMemAlloc");
  }
  ~DeviceMemory() { api_.memFree(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  CuDevicePtr ptr() const { return ptr_; }
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(ptr_);
  }

 private:
  const DriverApi& api_;
  CuDevicePtr ptr_ = 0;
};

// A rank's control words, in one device allocation: zeroed once, kept from run to run.
struct Control {
  DeviceStatus status;
  uint32_t abort;
  uint64_t lanesFinished;
  uint64_t laneDone[1];  // plan->lanes of them
};

// Every rank of a Plan in the fake's device memory, out of place: the lowered plan, FIFOs per
// (sender, receiver, channel), FIFO tables, control words, input, output and scratch buffers.
class DeviceRanks {
 public:
  DeviceRanks(const DriverApi& api, const plan::Plan& p, const RunSetup& setup)
      : api_(api), plan_(p), setup_(setup) {
    const int n = p.spec.nranks;
    const size_t es = dataTypeSize(setup.type);
    const DeviceCall call{setup.type, setup.op, setup.scalar, setup.slotBytes};
    ranks_.resize(n);
    for (int r = 0; r < n; ++r) {
      Rank& k = ranks_[r];
      k.blob = lowerForDevice(p.programs[r], p.spec, r, call);
      const DevicePlan* dp = k.blob.plan();
      k.plan = copyIn(k.blob.data(), k.blob.bytes());
      std::vector<DeviceFifo> sends, recvs;
      for (uint32_t i = 0; i < dp->sendLinks; ++i)
        sends.push_back(fifo(r, sendLinksOf(dp)[i].peer, sendLinksOf(dp)[i].channel));
      for (uint32_t i = 0; i < dp->recvLinks; ++i)
        recvs.push_back(fifo(recvLinksOf(dp)[i].peer, r, recvLinksOf(dp)[i].channel));
      k.sendTable = copyIn(sends.data(), sends.size() * sizeof(DeviceFifo));
      k.recvTable = copyIn(recvs.data(), recvs.size() * sizeof(DeviceFifo));
      const size_t controlBytes = sizeof(Control) + dp->lanes * sizeof(uint64_t);
      k.control = std::make_unique<DeviceMemory>(api, controlBytes);
      check(api, api.memsetD8(k.control->ptr(), 0, controlBytes), "cuMemsetD8");
      const plan::BufferSizes sz = plan::bufferSizes(p.spec, r);
      k.inBytes = sz.input * es;
      k.outBytes = sz.output * es;
      k.in = std::make_unique<DeviceMemory>(api, k.inBytes);
      k.out = std::make_unique<DeviceMemory>(api, k.outBytes);
      k.scratch = std::make_unique<DeviceMemory>(api, p.programs[r].scratchElems * es + 64);
    }
  }

  // Inputs copied in and outputs cleared, in `stream`'s order (the inputs are kept until this
  // object goes: the copies read them when the stream reaches them).
  void prepare(std::vector<Bytes> inputs, CuStream stream) {
    staged_.push_back(std::move(inputs));
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const Rank& k = ranks_[r];
      check(api_, api_.memcpyHtoDAsync(k.in->ptr(), staged_.back()[r].data(), k.inBytes, stream),
            "cuMemcpyHtoDAsync");
      check(api_, api_.memsetD8Async(k.out->ptr(), 0xA5, k.outBytes, stream), "cuMemsetD8Async");
    }
  }

  // One launch of `ranks` (in this order), run `epoch`.
  InterpLaunch launchOf(const std::vector<int>& ranks, uint32_t epoch) const {
    InterpLaunch p;
    p.ranks = static_cast<uint32_t>(ranks.size());
    for (size_t i = 0; i < ranks.size(); ++i) {
      p.args[i] = argsOf(ranks[i], epoch);
      p.firstBlock[i + 1] = p.firstBlock[i] + ranks_[ranks[i]].blob.plan()->lanes;
    }
    return p;
  }

  // Every rank's output (synchronous copies); throws with the ranks' recorded failures.
  std::vector<Bytes> outputs() const {
    std::vector<Bytes> out;
    std::string failures;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const Rank& k = ranks_[r];
      DeviceStatus status;
      check(api_,
            api_.memcpyDtoH(&status, k.control->ptr() + offsetof(Control, status), sizeof status),
            "cuMemcpyDtoH");
      if (status.error != 0)
        failures += "rank " + std::to_string(r) + ": " + describe(status) + "; ";
      out.emplace_back(k.outBytes);
      check(api_, api_.memcpyDtoH(out.back().data(), k.out->ptr(), k.outBytes), "cuMemcpyDtoH");
    }
    if (!failures.empty()) throw std::runtime_error(failures);
    return out;
  }

 private:
  struct Rank {
    DevicePlanBlob blob;
    std::unique_ptr<DeviceMemory> plan, sendTable, recvTable, control, in, out, scratch;
    size_t inBytes = 0, outBytes = 0;
  };

  std::unique_ptr<DeviceMemory> copyIn(const void* data, size_t bytes) {
    auto mem = std::make_unique<DeviceMemory>(api_, bytes);
    if (bytes) check(api_, api_.memcpyHtoD(mem->ptr(), data, bytes), "cuMemcpyHtoD");
    return mem;
  }

  DeviceFifo fifo(int from, int to, int channel) {
    auto& mem = fifos_[std::make_tuple(from, to, channel)];
    const size_t bytes = fifoBytes(setup_.slots, setup_.slotBytes);
    if (!mem) {
      mem = std::make_unique<DeviceMemory>(api_, bytes);
      check(api_, api_.memsetD8(mem->ptr(), 0, bytes), "cuMemsetD8");
    }
    return fifoAt(mem->as<void>(), setup_.slots, setup_.slotBytes);
  }

  DeviceRunArgs argsOf(int r, uint32_t epoch) const {
    const Rank& k = ranks_[r];
    DeviceRunArgs a;
    a.plan = k.plan->as<DevicePlan>();
    a.buffers[plan::kInput] = k.in->as<char>();
    a.buffers[plan::kOutput] = k.out->as<char>();
    a.buffers[plan::kScratch] = k.scratch->as<char>();
    a.sendFifos = k.sendTable->as<DeviceFifo>();
    a.recvFifos = k.recvTable->as<DeviceFifo>();
    Control* control = k.control->as<Control>();
    a.laneDone = control->laneDone;
    a.lanesFinished = &control->lanesFinished;
    a.abort = &control->abort;
    a.status = &control->status;
    a.epoch = epoch;
    a.lanesBefore = uint64_t{epoch - 1} * k.plan->as<DevicePlan>()->lanes;
    a.timeoutNs = setup_.timeoutNs;
    return a;
  }

  const DriverApi& api_;
  const plan::Plan& plan_;
  RunSetup setup_;
  std::vector<Rank> ranks_;
  std::deque<std::vector<Bytes>> staged_;
  std::map<std::tuple<int, int, int>, std::unique_ptr<DeviceMemory>> fifos_;
};

// Inputs of small integers (exact sums in float), different for each `salt`.
std::vector<Bytes> makeInputs(const plan::Spec& spec, DataType type, int salt) {
  std::vector<Bytes> in(spec.nranks);
  for (int r = 0; r < spec.nranks; ++r) {
    const uint64_t n = plan::bufferSizes(spec, r).input;
    in[r].resize(n * 4);
    for (uint64_t i = 0; i < n; ++i) {
      const int v = static_cast<int>((r * 5 + i * 3 + salt) % 7) - 3;
      const float f = static_cast<float>(v);
      const int32_t k = v;
      std::memcpy(in[r].data() + i * 4, type == DataType::kFloat32 ? (const void*)&f : &k, 4);
    }
  }
  return in;
}

struct Shape {
  const char* algorithm;
  Collective coll;
  int nranks;
  uint64_t count;
  int channels;
  DataType type;
  RedOp op;
};

// How gtest names a Shape (not its bytes, which hold a pointer).
void PrintTo(const Shape& s, std::ostream* os) {
  *os << s.algorithm << " " << plan::collectiveName(s.coll) << " of " << s.nranks << " ranks";
}

plan::Plan buildPlan(const Shape& s) {
  plan::Spec spec;
  spec.coll = s.coll;
  spec.nranks = s.nranks;
  spec.count = s.count;
  spec.root = s.nranks > 2 ? 2 : 0;
  spec.elemSize = 4;
  algo::Options opt;
  opt.channels = s.channels;
  return algo::build(s.algorithm, spec, opt);
}

RunSetup setupOf(const Shape& s) {
  RunSetup setup;
  setup.type = s.type;
  setup.op = s.op;
  // Several slices a step, and room in the FIFO for a whole step's message: a lane that sends
  // a step before it receives (a ring's first step) waits for the FIFO to take all of it.
  setup.slotBytes = 512;
  setup.slots = 8;
  return setup;
}

class InterpLaunchFake : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    api_ = &fakeApi();
    module_ = loadModule(*api_, &why_);
    ASSERT_TRUE(module_) << why_;
    plan_ = buildPlan(GetParam());
    ASSERT_TRUE(plan_.outOfPlaceSafe);
    setup_ = setupOf(GetParam());
    ranks_ = std::make_unique<DeviceRanks>(*api_, plan_, setup_);
    streams_[0] = static_cast<CuStream>(weftFakeStreamCreate());
    streams_[1] = static_cast<CuStream>(weftFakeStreamCreate());
  }
  void TearDown() override {
    for (CuStream s : streams_)
      if (s) weftFakeStreamDestroy(s);
  }
  std::vector<int> allRanks() const {
    std::vector<int> all;
    for (int r = 0; r < plan_.spec.nranks; ++r) all.push_back(r);
    return all;
  }
  std::vector<Bytes> expected(int salt) const {
    return runHostExecutor(plan_, makeInputs(plan_.spec, setup_.type, salt), setup_);
  }

  const DriverApi* api_ = nullptr;
  std::string why_;
  std::unique_ptr<InterpModule> module_;
  plan::Plan plan_;
  RunSetup setup_;
  std::unique_ptr<DeviceRanks> ranks_;
  CuStream streams_[2] = {};
};

TEST_P(InterpLaunchFake, AllRanksInOneLaunchTwice) {
  CuStream s = streams_[0];
  for (uint32_t epoch = 1; epoch <= 2; ++epoch) {
    const int salt = static_cast<int>(epoch);
    ranks_->prepare(makeInputs(plan_.spec, setup_.type, salt), s);
    const uint64_t before = weftFakeKernelLaunches();
    ASSERT_EQ(module_->launch(ranks_->launchOf(allRanks(), epoch), s), kCuSuccess);
    EXPECT_EQ(weftFakeKernelLaunches(), before + 1);
    ASSERT_EQ(api_->streamSynchronize(s), kCuSuccess);
    EXPECT_EQ(ranks_->outputs(), expected(salt)) << "run " << epoch;
  }
}

// The second run queued behind the first on the stream, its inputs copied in between: stream
// order alone keeps them apart.
TEST_P(InterpLaunchFake, TwoLaunchesInStreamOrder) {
  CuStream s = streams_[0];
  ranks_->prepare(makeInputs(plan_.spec, setup_.type, 5), s);
  ASSERT_EQ(module_->launch(ranks_->launchOf(allRanks(), 1), s, 64), kCuSuccess);
  ranks_->prepare(makeInputs(plan_.spec, setup_.type, 6), s);
  ASSERT_EQ(module_->launch(ranks_->launchOf(allRanks(), 2), s, 64), kCuSuccess);
  ASSERT_EQ(api_->streamSynchronize(s), kCuSuccess);
  EXPECT_EQ(ranks_->outputs(), expected(6));
}

// One launch per rank, alternating between two streams; where a stream holds several ranks they
// share its launch (a second kernel of the same stream would wait for the first to end).
TEST_P(InterpLaunchFake, RanksSplitOverTwoStreams) {
  const int n = plan_.spec.nranks;
  for (uint32_t epoch = 1; epoch <= 2; ++epoch) {
    const int salt = 10 + static_cast<int>(epoch);
    ranks_->prepare(makeInputs(plan_.spec, setup_.type, salt), streams_[0]);
    ASSERT_EQ(api_->streamSynchronize(streams_[0]), kCuSuccess);
    if (n == 2) {
      for (int r = 0; r < 2; ++r)
        ASSERT_EQ(module_->launch(ranks_->launchOf({r}, epoch), streams_[r]), kCuSuccess);
    } else {
      std::vector<int> even, odd;
      for (int r = 0; r < n; ++r) (r % 2 ? odd : even).push_back(r);
      // Odd ranks first in their launch: a launch's ranks may come in any order.
      std::reverse(odd.begin(), odd.end());
      ASSERT_EQ(module_->launch(ranks_->launchOf(even, epoch), streams_[0]), kCuSuccess);
      ASSERT_EQ(module_->launch(ranks_->launchOf(odd, epoch), streams_[1]), kCuSuccess);
    }
    for (CuStream s : streams_) ASSERT_EQ(api_->streamSynchronize(s), kCuSuccess);
    EXPECT_EQ(ranks_->outputs(), expected(salt)) << "run " << epoch;
  }
}

// A launch made while the stream captures runs only when the graph is launched.
TEST_P(InterpLaunchFake, CapturedLaunchRunsWhenReplayed) {
  CuStream s = streams_[0];
  ranks_->prepare(makeInputs(plan_.spec, setup_.type, 3), s);
  ASSERT_EQ(api_->streamSynchronize(s), kCuSuccess);
  weftFakeBeginCapture(s);
  ASSERT_EQ(module_->launch(ranks_->launchOf(allRanks(), 1), s), kCuSuccess);
  void* graph = weftFakeEndCapture(s);
  ASSERT_EQ(api_->streamSynchronize(s), kCuSuccess);
  for (const Bytes& out : ranks_->outputs())
    for (unsigned char b : out) ASSERT_EQ(b, 0xA5) << "the captured launch ran before replay";
  weftFakeGraphLaunch(graph, s);
  ASSERT_EQ(api_->streamSynchronize(s), kCuSuccess);
  weftFakeGraphDestroy(graph);
  EXPECT_EQ(ranks_->outputs(), expected(3));
}

INSTANTIATE_TEST_SUITE_P(
    Plans, InterpLaunchFake,
    ::testing::Values(
        Shape{"ring", Collective::kAllReduce, 2, 1000, 1, DataType::kFloat32, RedOp::kSum},
        Shape{"ring", Collective::kAllReduce, 3, 777, 2, DataType::kFloat32, RedOp::kSum},
        Shape{"tree", Collective::kAllReduce, 4, 500, 1, DataType::kInt32, RedOp::kMax},
        Shape{"direct", Collective::kAllGather, 3, 300, 1, DataType::kFloat32, RedOp::kSum},
        Shape{"ring", Collective::kReduceScatter, 4, 250, 2, DataType::kFloat32, RedOp::kSum}),
    [](const ::testing::TestParamInfo<Shape>& info) {
      return std::string(info.param.algorithm) + "_" + plan::collectiveName(info.param.coll) + "_" +
             std::to_string(info.param.nranks) + "ranks";
    });

TEST(InterpLaunch, LaunchRankOfMapsBlocksToRanks) {
  InterpLaunch p;
  p.ranks = 4;
  // Rank 0: blocks 0-1, rank 1: none, rank 2: block 2, rank 3: blocks 3-5.
  const uint32_t first[] = {0, 2, 2, 3, 6};
  std::memcpy(p.firstBlock, first, sizeof first);
  const uint32_t want[] = {0, 0, 2, 3, 3, 3};
  for (uint32_t b = 0; b < 6; ++b) EXPECT_EQ(launchRankOf(p, b), want[b]) << "block " << b;
  p.ranks = 1;
  EXPECT_EQ(launchRankOf(p, 0), 0u);
  EXPECT_EQ(launchRankOf(p, 5), 0u);
}

TEST(InterpLaunch, RefusedLaunchesQueueNothing) {
  const DriverApi& api = fakeApi();
  std::string why;
  auto module = loadModule(api, &why);
  ASSERT_TRUE(module) << why;
  DevicePlan plan;  // never read: nothing is launched
  InterpLaunch p;
  p.ranks = 1;
  p.args[0].plan = &plan;
  const uint64_t before = weftFakeKernelLaunches();
  EXPECT_EQ(module->launch(p, nullptr), kCuSuccess) << "zero blocks";
  p.firstBlock[1] = 1;
  EXPECT_EQ(module->launch(p, nullptr, 0), kCuErrorInvalidValue);
  EXPECT_EQ(module->launch(p, nullptr, kMaxInterpThreads + 1), kCuErrorInvalidValue);
  InterpLaunch tooMany = p;
  tooMany.ranks = kMaxLaunchRanks + 1;
  EXPECT_EQ(module->launch(tooMany, nullptr), kCuErrorInvalidValue);
  InterpLaunch decreasing = p;
  decreasing.ranks = 2;
  decreasing.firstBlock[2] = 0;
  EXPECT_EQ(module->launch(decreasing, nullptr), kCuErrorInvalidValue);
  InterpLaunch noPlan = p;
  noPlan.args[0].plan = nullptr;
  EXPECT_EQ(module->launch(noPlan, nullptr), kCuErrorInvalidValue);
  InterpLaunch offset = p;
  offset.firstBlock[0] = 1;
  offset.firstBlock[1] = 2;
  EXPECT_EQ(module->launch(offset, nullptr), kCuErrorInvalidValue);
  EXPECT_EQ(weftFakeKernelLaunches(), before);
}

TEST(InterpLaunch, LoadNamesWhatIsMissing) {
  const DriverApi& fake = fakeApi();
  std::string why;
  DriverApi noModules = fake;
  noModules.moduleLoadData = nullptr;
  EXPECT_FALSE(InterpModule::load(noModules, &why));
  EXPECT_NE(why.find("lacks cuModuleLoadData"), std::string::npos) << why;
  DriverApi noLaunch = fake;
  noLaunch.launchKernel = nullptr;
  EXPECT_FALSE(InterpModule::loadImage(noLaunch, "image", &why));
  EXPECT_NE(why.find("lacks cuLaunchKernel"), std::string::npos) << why;

  // A module without the kernel is unloaded again.
  const size_t loaded = weftFakeModulesLoaded();
  DriverApi noKernel = fake;
  noKernel.moduleGetFunction = [](CuFunction*, CuModule, const char*) { return kCuErrorNotFound; };
  EXPECT_FALSE(InterpModule::loadImage(noKernel, "image", &why));
  EXPECT_NE(why.find("no kernel weftInterpret"), std::string::npos) << why;
  EXPECT_EQ(weftFakeModulesLoaded(), loaded);
  {
    auto module = loadModule(fake, &why);
    ASSERT_TRUE(module) << why;
    EXPECT_EQ(weftFakeModulesLoaded(), loaded + 1);
  }
  EXPECT_EQ(weftFakeModulesLoaded(), loaded) << "the module is unloaded with the InterpModule";
}

TEST(InterpLaunch, LoadWithoutAnImageSaysTheBuildHasNone) {
  if (interpImageBuilt()) GTEST_SKIP() << "this build embedded the image (nvcc was found)";
  std::string why;
  EXPECT_FALSE(InterpModule::load(fakeApi(), &why));
  EXPECT_NE(why.find("no device code"), std::string::npos) << why;
}

}  // namespace
}  // namespace weft::cuda::test
