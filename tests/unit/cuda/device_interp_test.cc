// The device interpreter's shared source, run on host threads (one per rank x lane, FIFOs in host
// memory) for the plans the library builds and imported MSCCL XML: results equal a reference
// computed here from exact inputs AND the host executor's results for the same inputs, bit for
// bit. Both run the same Work per rank, its operator lowered once (device_harness.h). Also:
// abort, timeout and mismatched calls end a run with a recorded reason. The encoding's own
// rules are device_plan_test.cc's.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>

#include "algorithms/registry.h"
#include "src/common/error.h"
#include "src/common/reduce.h"
#include "src/cuda/device_plan.h"
#include "src/plan/msccl_xml.h"
#include "tests/unit/cuda/device_harness.h"

namespace weft::cuda::test {
namespace {

using plan::Collective;

bool isFp8(DataType t) { return t == DataType::kFp8E4M3 || t == DataType::kFp8E5M2; }

// Input element i of rank r: small integers whose sums and products are exact in every type.
double inputValue(RedOp op, DataType t, int r, uint64_t i) {
  const int k = static_cast<int>((r + i) % 3);
  if (op == RedOp::kProd) return isFp8(t) ? (k == 0 ? -1 : 1) : (k == 0 ? 2 : k == 1 ? 1 : -1);
  if (isFp8(t)) return static_cast<double>((r + i) % 2);
  return static_cast<double>(static_cast<int>((r * 5 + i * 3) % 5) - 2);
}

template <class E>
typename E::Storage fromValue(double v) {
  if constexpr (std::is_integral_v<typename E::Calc>)
    return static_cast<typename E::Storage>(static_cast<int64_t>(v));
  else
    return E::fromCalc(static_cast<typename E::Calc>(v));
}

template <class E>
double toValue(typename E::Storage s) {
  return static_cast<double>(E::toCalc(s));
}

template <class E>
typename E::Storage at(const Bytes& b, uint64_t i) {
  typename E::Storage v;
  std::memcpy(&v, b.data() + i * sizeof v, sizeof v);
  return v;
}

std::vector<Bytes> makeInputs(const plan::Spec& spec, DataType t, RedOp op) {
  std::vector<Bytes> in(spec.nranks);
  elements::withElem(t, [&](auto e) {
    using E = decltype(e);
    using S = typename E::Storage;
    for (int r = 0; r < spec.nranks; ++r) {
      const uint64_t n = plan::bufferSizes(spec, r).input;
      in[r].resize(n * sizeof(S));
      for (uint64_t i = 0; i < n; ++i) {
        const S v = fromValue<E>(inputValue(op, t, r, i));
        std::memcpy(in[r].data() + i * sizeof v, &v, sizeof v);
      }
    }
  });
  return in;
}

// The reduction of element i of every rank's input, in rank order and in the type's own
// arithmetic (exact for these inputs, so the plan's order does not matter).
template <class E, class Op>
typename E::Storage reduceAt(const std::vector<Bytes>& in, uint64_t i, bool scaled,
                             typename E::Calc scale) {
  auto operand = [&](int r) {
    return scaled ? elements::operand<E, true>(at<E>(in[r], i), scale)
                  : elements::operand<E, false>(at<E>(in[r], i), scale);
  };
  typename E::Calc acc = operand(0);
  for (size_t r = 1; r < in.size(); ++r) acc = Op::template apply<E>(acc, operand(r));
  return E::fromCalc(acc);
}

// "" when every rank's output is what the collective computes from `in`; else the first error.
std::string checkReference(const plan::Spec& spec, DataType t, RedOp op, const Scalar& scalar,
                           const std::vector<Bytes>& in, const std::vector<Bytes>& out) {
  std::string bad;
  elements::withElem(t, [&](auto e) {
    using E = decltype(e);
    using S = typename E::Storage;
    const int n = spec.nranks;
    const uint64_t c = spec.count;
    const bool floatAvg = op == RedOp::kAvg && isFloating(t);
    auto reduced = [&](uint64_t i) -> S {
      S dummy{};
      std::memcpy(&dummy, scalar.bytes, sizeof dummy);
      const typename E::Calc s = E::toCalc(dummy);
      // The arithmetic is reduce_elements.h's (tested on its own in elements_test.cc); what this
      // reference adds is which contributions each output element holds.
      return elements::withOp(op, [&](auto o) -> S {
        using Op = decltype(o);
        const S r = reduceAt<E, Op>(in, i, op == RedOp::kPreMulSum, s);
        return op == RedOp::kAvg && !floatAvg ? elements::divide<E>(r, n) : r;
      });
    };
    for (int r = 0; r < n && bad.empty(); ++r) {
      const bool rooted = spec.coll == Collective::kReduce || spec.coll == Collective::kGather;
      if (rooted && r != spec.root) continue;
      const uint64_t outElems = out[r].size() / sizeof(S);
      for (uint64_t i = 0; i < outElems && bad.empty(); ++i) {
        S want{};
        switch (spec.coll) {
          case Collective::kAllReduce:
          case Collective::kReduce:
            want = reduced(i);
            break;
          case Collective::kReduceScatter:
            want = reduced(r * c + i);
            break;
          case Collective::kBroadcast:
            want = at<E>(in[spec.root], i);
            break;
          case Collective::kAllGather:
          case Collective::kGather:
            want = at<E>(in[i / c], i % c);
            break;
          case Collective::kAlltoAll:
            want = at<E>(in[i / c], r * c + i % c);
            break;
          case Collective::kScatter:
            want = at<E>(in[spec.root], r * c + i);
            break;
          default:
            break;
        }
        const S got = at<E>(out[r], i);
        bool ok = std::memcmp(&got, &want, sizeof got) == 0;
        if (floatAvg) {
          // PreMulSum by a rounded 1/n: close to the exact mean, not equal.
          const double exact = toValue<E>(want) / n;
          const double tol = sizeof(S) >= 4             ? 1e-5
                             : t == DataType::kFloat16  ? 4e-3
                             : t == DataType::kBfloat16 ? 3e-2
                                                        : 0.3;
          ok = std::fabs(toValue<E>(got) - exact) <= tol * std::max(1.0, std::fabs(exact));
        }
        if (!ok)
          bad = "rank " + std::to_string(r) + " output[" + std::to_string(i) +
                "] = " + std::to_string(toValue<E>(got)) + ", expected " +
                std::to_string(toValue<E>(want));
      }
    }
  });
  return bad;
}

struct Case {
  std::string name;
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  bool inPlace = false;
  uint32_t slotBytes = 256;
};

// Runs `p` on the device interpreter and the host executor; "" when both equal the reference
// and each other.
std::string runBoth(const plan::Plan& p, const Case& k) {
  RunSetup setup;
  setup.type = k.type;
  setup.op = k.op;
  setup.inPlace = k.inPlace;
  setup.slotBytes = k.slotBytes;
  if (k.op == RedOp::kPreMulSum) {
    elements::withElem(k.type, [&](auto e) {
      using E = decltype(e);
      const auto two = fromValue<E>(2);
      std::memcpy(setup.scalar.bytes, &two, sizeof two);
    });
  }
  const std::vector<Bytes> in = makeInputs(p.spec, k.type, k.op);
  std::vector<Bytes> device, host;
  try {
    device = runDeviceInterpreter(p, in, setup);
  } catch (const Error& e) {
    return k.name + ": device interpreter: " + e.what();
  }
  const std::string ref = checkReference(p.spec, k.type, k.op, setup.scalar, in, device);
  if (!ref.empty()) return k.name + ": device interpreter: " + ref;
  host = runHostExecutor(p, in, setup);
  for (int r = 0; r < p.spec.nranks; ++r) {
    const bool rooted = p.spec.coll == Collective::kReduce || p.spec.coll == Collective::kGather;
    if (rooted && r != p.spec.root) continue;
    if (device[r] != host[r])
      return k.name + ": rank " + std::to_string(r) + " differs from the host executor";
  }
  return "";
}

std::string caseName(const std::string& algo, const plan::Spec& s, const Case& k) {
  return algo + " " + plan::collectiveName(s.coll) + " n=" + std::to_string(s.nranks) +
         " count=" + std::to_string(s.count) + " root=" + std::to_string(s.root) + " " +
         dataTypeName(k.type) + " " + redOpName(k.op) + (k.inPlace ? " in place" : "");
}

TEST(DeviceInterpHost, EveryBuiltInAlgorithmAndCollective) {
  int ran = 0;
  for (const algo::Algorithm& a : algo::all())
    for (Collective coll : a.colls)
      for (int n = 1; n <= 4; ++n)
        for (uint64_t count : {1, 37, 300}) {
          plan::Spec spec;
          spec.coll = coll;
          spec.nranks = n;
          spec.count = count;
          spec.root = n > 2 ? 2 : 0;
          algo::Options opt;
          opt.channels = count == 300 ? 2 : 1;
          plan::Plan p;
          try {
            p = algo::build(a.name, spec, opt);
          } catch (const Error&) {
            continue;  // the algorithm does not build this shape
          }
          for (bool inPlace : {false, true}) {
            if (inPlace ? !p.inPlaceSafe : !p.outOfPlaceSafe) continue;
            for (auto [t, op] : {std::pair{DataType::kFloat32, RedOp::kSum},
                                 std::pair{DataType::kInt32, RedOp::kMax}}) {
              Case k{"", t, op, inPlace};
              k.name = caseName(a.name, spec, k);
              EXPECT_EQ(runBoth(p, k), "");
              ++ran;
            }
          }
        }
  EXPECT_GT(ran, 300);
}

TEST(DeviceInterpHost, EveryTypeAndOperator) {
  const RedOp ops[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax,
                       RedOp::kMin, RedOp::kAvg,  RedOp::kPreMulSum};
  for (auto [algorithm, coll, n] : {std::tuple{"ring", Collective::kAllReduce, 3},
                                    std::tuple{"rhd", Collective::kReduceScatter, 4},
                                    std::tuple{"tree", Collective::kReduce, 3}}) {
    plan::Spec spec;
    spec.coll = coll;
    spec.nranks = n;
    spec.count = 101;
    spec.root = 1;
    algo::Options opt;
    opt.channels = 2;
    const plan::Plan p = algo::build(algorithm, spec, opt);
    for (int t = 0; t < kNumDataTypes; ++t)
      for (RedOp op : ops)
        for (bool inPlace : {false, true}) {
          Case k{"", static_cast<DataType>(t), op, inPlace, 64};
          k.name = caseName(algorithm, spec, k);
          EXPECT_EQ(runBoth(p, k), "");
        }
  }
}

TEST(DeviceInterpHost, EightRanks) {
  for (auto [algorithm, coll] :
       {std::pair{"ring", Collective::kAllReduce}, std::pair{"ring", Collective::kAllGather},
        std::pair{"tree", Collective::kAllReduce}, std::pair{"direct", Collective::kAlltoAll}}) {
    plan::Spec spec;
    spec.coll = coll;
    spec.nranks = 8;
    spec.count = 200;
    const plan::Plan p = algo::build(algorithm, spec);
    for (bool inPlace : {false, true}) {
      if (inPlace && !p.inPlaceSafe) continue;
      Case k{"", DataType::kBfloat16, RedOp::kSum, inPlace};
      k.name = caseName(algorithm, spec, k);
      EXPECT_EQ(runBoth(p, k), "");
    }
  }
}

const std::string kMsccl = WEFT_SHARED_MSCCL;

// The *.xml files one directory below `root` ("ndv4/ap2ll.xml", ...).
std::vector<std::string> mscclFiles(const std::string& root) {
  std::vector<std::string> files;
  DIR* top = opendir(root.c_str());
  if (!top) return files;
  while (dirent* d = readdir(top)) {
    if (d->d_name[0] == '.') continue;
    const std::string sub = root + "/" + d->d_name;
    if (DIR* inner = opendir(sub.c_str())) {
      while (dirent* f = readdir(inner)) {
        const std::string name = f->d_name;
        if (name.size() > 4 && name.substr(name.size() - 4) == ".xml")
          files.push_back(sub + "/" + name);
      }
      closedir(inner);
    }
  }
  closedir(top);
  return files;
}

TEST(DeviceInterpHost, ImportedMscclXml) {
  const std::vector<std::string> files = mscclFiles(kMsccl);
  if (files.empty()) GTEST_SKIP() << "no MSCCL XML under " << kMsccl << " (../shared/msccl-xml)";
  for (const std::string& file : files) {
    const plan::ChunkPlan cp = plan::importMscclFile(file);
    // Two elements per chunk: whole chunks for every rank's buffers.
    const uint64_t mult = plan::sizeMultiplier(cp.coll, cp.nranks);
    uint64_t count = 2 * cp.chunksPerLoop;
    if (count % mult == 0) count /= mult;
    const plan::Plan p = plan::instantiate(cp, count);
    for (bool inPlace : {false, true}) {
      if (inPlace ? !cp.inPlace : !cp.outOfPlace) continue;
      Case k{"", DataType::kFloat16, RedOp::kSum, inPlace};
      k.name = file + ": " + caseName(p.algorithm, p.spec, k);
      EXPECT_EQ(runBoth(p, k), "");
    }
  }
}

// Rank 0 of a 2-rank ring allreduce, its peer never running: every lane ends up waiting.
struct LoneRank {
  plan::Plan plan;
  DevicePlanBlob blob;
  std::vector<unsigned char> fifoMemory[2];
  DeviceFifo send, recv;
  std::vector<float> input, output;
  std::vector<uint64_t> laneDone;
  uint64_t finished = 0;
  uint32_t abort = 0;
  DeviceStatus status;
  DeviceRunArgs args;

  explicit LoneRank(uint64_t timeoutNs) {
    plan::Spec spec;
    spec.nranks = 2;
    spec.count = 64;
    plan = algo::build("ring", spec);
    blob = lowerForDevice(plan.programs[0], spec, 0,
                          DeviceCall{DataType::kFloat32, RedOp::kSum, {}, 64});
    for (auto& m : fifoMemory) m.assign(fifoBytes(2, 64) + kFifoLine, 0);
    auto aligned = [](std::vector<unsigned char>& m) {
      const auto p = reinterpret_cast<uintptr_t>(m.data());
      return reinterpret_cast<void*>((p + kFifoLine - 1) / kFifoLine * kFifoLine);
    };
    send = fifoAt(aligned(fifoMemory[0]), 2, 64);
    recv = fifoAt(aligned(fifoMemory[1]), 2, 64);
    input.assign(64, 1.0f);
    output.assign(64, 0.0f);
    laneDone.assign(blob.plan()->lanes, 0);
    args.plan = blob.plan();
    args.buffers[plan::kInput] = reinterpret_cast<char*>(input.data());
    args.buffers[plan::kOutput] = reinterpret_cast<char*>(output.data());
    args.sendFifos = &send;
    args.recvFifos = &recv;
    args.laneDone = laneDone.data();
    args.lanesFinished = &finished;
    args.abort = &abort;
    args.status = &status;
    args.timeoutNs = timeoutNs;
  }

  // Runs every lane on a thread of its own; returns each lane's result.
  std::vector<DeviceError> run() {
    std::vector<DeviceError> results(blob.plan()->lanes);
    std::vector<std::thread> threads;
    for (uint32_t l = 0; l < results.size(); ++l)
      threads.emplace_back([this, l, &results] {
        LaneShared shared{};
        results[l] = runLane(args, l, 0, 1, shared);
      });
    for (auto& t : threads) t.join();
    return results;
  }
};

TEST(DeviceInterpHost, AbortEndsAWaitingLane) {
  LoneRank rank(60'000'000'000ull);
  ASSERT_EQ(rank.blob.plan()->lanes, 1u);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    __atomic_store_n(&rank.abort, 1u, __ATOMIC_RELEASE);
  });
  const auto start = std::chrono::steady_clock::now();
  const std::vector<DeviceError> results = rank.run();
  aborter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(results[0], DeviceError::kAborted);
  EXPECT_EQ(rank.status.error, static_cast<uint32_t>(DeviceError::kAborted))
      << describe(rank.status);
  EXPECT_EQ(rank.status.waitingOn, static_cast<uint32_t>(DeviceWait::kReceive));
  EXPECT_EQ(rank.status.peer, 1);
  EXPECT_EQ(rank.status.lane, 0);
}

TEST(DeviceInterpHost, AWaitPastTheBudgetTimesOut) {
  LoneRank rank(50'000'000ull);  // 50 ms
  const auto start = std::chrono::steady_clock::now();
  const std::vector<DeviceError> results = rank.run();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(results[0], DeviceError::kTimeout);
  EXPECT_EQ(rank.status.error, static_cast<uint32_t>(DeviceError::kTimeout))
      << describe(rank.status);
  EXPECT_EQ(rank.status.waitingOn, static_cast<uint32_t>(DeviceWait::kReceive));
  EXPECT_EQ(rank.abort, 1u) << "a failing lane stops the rank's other lanes";
  EXPECT_GE(took, std::chrono::milliseconds(50));
  EXPECT_LT(took, std::chrono::seconds(10));
}

TEST(DeviceInterpHost, MismatchedCountsAreReported) {
  plan::Spec a, b;
  a.nranks = b.nranks = 2;
  a.count = 10;
  b.count = 20;
  const plan::Plan pa = algo::build("ring", a), pb = algo::build("ring", b);
  plan::Plan mixed = pa;
  mixed.programs[1] = pb.programs[1];  // rank 1 was called with another count
  mixed.spec.count = 20;               // rank 1's buffers are sized by its own call
  RunSetup setup;
  setup.timeoutNs = 2'000'000'000ull;
  setup.runs = 1;
  std::vector<Bytes> in = {Bytes(20 * 4, 0), Bytes(20 * 4, 0)};
  try {
    runDeviceInterpreter(mixed, in, setup);
    FAIL() << "mismatched counts ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mismatch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft::cuda::test
