// GPU check of the device interpreter, without GoogleTest: N ranks (1-4) of one process on the
// one GPU, each with device buffers, run the library's plans (ring, tree, rhd, direct) through
// the interpreter kernel as the library launches it (InterpModule: the embedded image loaded
// with cuModuleLoadData, launched with cuLaunchKernel through the driver table). Results are
// checked against a reference computed here from exact inputs for allreduce, allgather,
// reducescatter and broadcast on float, half, bf16 and int32 with sum and max, in and out of
// place, twice over the same FIFOs (the counters carry on from run to run): run 1 with each rank
// a host thread with its own stream and launch, run 2 with every rank in one launch on one
// stream. Stream order: a slow kernel writes each input just before the collective, and a
// kernel after it copies the output out. Exit status 0: pass, 1: a failure, 77: no GPU (skip).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "algorithms/registry.h"
#include "src/common/error.h"
#include "src/common/reduce_elements.h"
#include "src/cuda/device_plan.h"
#include "src/cuda/interp_launch.h"

namespace {

using weft::DataType;
using weft::RedOp;
using weft::plan::Collective;
namespace wc = weft::cuda;

int gFailures = 0;
// The interpreter, loaded into the primary context through the driver table.
const wc::DriverApi* gDriver = nullptr;
const wc::InterpModule* gModule = nullptr;

bool ok(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return true;
  std::printf("FAIL %s: %s\n", what, cudaGetErrorString(rc));
  return false;
}

// Input element i of rank r: small integers whose sums are exact in every type tested.
__host__ __device__ inline int inputValue(int r, uint64_t i) {
  return static_cast<int>((r * 5 + i * 3) % 5) - 2;
}

template <class E>
__host__ __device__ inline typename E::Storage fromInt(int v) {
  if constexpr (std::is_integral_v<typename E::Calc>)
    return static_cast<typename E::Storage>(v);
  else
    return E::fromCalc(static_cast<typename E::Calc>(v));
}

// The producer before the collective: waits ~2 ms (so a collective that did not wait for it
// would read the garbage left in the buffer), then writes the rank's input.
template <class E>
__global__ void writeInputSlowly(typename E::Storage* in, uint64_t n, int rank) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    uint64_t start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
      __nanosleep(10000);
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < 2000000);
  }
  __syncthreads();
  for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) in[i] = fromInt<E>(inputValue(rank, i));
}

// The consumer after the collective: copies the output where the host reads it.
__global__ void copyOutput(const unsigned char* out, unsigned char* seen, uint64_t bytes) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < bytes;
       i += uint64_t(gridDim.x) * blockDim.x)
    seen[i] = out[i];
}

struct Device {
  void* ptr = nullptr;
  explicit Device(size_t bytes) {
    if (cudaMalloc(&ptr, bytes ? bytes : 1) != cudaSuccess) ptr = nullptr;
  }
  ~Device() { cudaFree(ptr); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

// The per-rank control words, in one device allocation.
struct Control {
  wc::DeviceStatus status;
  uint32_t abort;
  uint64_t lanesFinished;
  uint64_t laneDone[1];  // plan->lanes of them
};

struct Case;

struct Rank {
  wc::DevicePlanBlob blob;
  std::unique_ptr<Device> plan, sendTable, recvTable, control, in, out, scratch, seen;
  uint64_t inElems = 0, outElems = 0, inOff = 0, outOff = 0;
  char* outPtr(const Case& c, size_t es) const;
};

struct Case {
  const char* algorithm;
  Collective coll;
  int nranks;
  uint64_t count;
  DataType type;
  RedOp op;
  bool inPlace;
};

char* Rank::outPtr(const Case& c, size_t es) const {
  return c.inPlace ? in->as<char>() + outOff * es : out->as<char>();
}

template <class E>
bool checkOutputs(const Case& c, const std::vector<std::vector<unsigned char>>& seen,
                  std::string* why) {
  using S = typename E::Storage;
  const int root = c.nranks > 1 ? 1 : 0;
  for (int r = 0; r < c.nranks; ++r) {
    const uint64_t n = seen[r].size() / sizeof(S);
    for (uint64_t i = 0; i < n; ++i) {
      auto reduced = [&](uint64_t k) {
        typename E::Calc acc = E::toCalc(fromInt<E>(inputValue(0, k)));
        for (int q = 1; q < c.nranks; ++q) {
          const typename E::Calc v = E::toCalc(fromInt<E>(inputValue(q, k)));
          acc = c.op == RedOp::kMax ? weft::elements::OpMax::apply<E>(acc, v)
                                    : weft::elements::OpSum::apply<E>(acc, v);
        }
        return E::fromCalc(acc);
      };
      S want{};
      switch (c.coll) {
        case Collective::kAllReduce:
          want = reduced(i);
          break;
        case Collective::kReduceScatter:
          want = reduced(r * c.count + i);
          break;
        case Collective::kAllGather:
          want = fromInt<E>(inputValue(static_cast<int>(i / c.count), i % c.count));
          break;
        default:  // broadcast
          want = fromInt<E>(inputValue(root, i));
          break;
      }
      S got;
      std::memcpy(&got, seen[r].data() + i * sizeof(S), sizeof(S));
      if (std::memcmp(&got, &want, sizeof(S)) != 0) {
        *why = "rank " + std::to_string(r) + " output[" + std::to_string(i) +
               "] = " + std::to_string(double(E::toCalc(got))) + ", expected " +
               std::to_string(double(E::toCalc(want)));
        return false;
      }
    }
  }
  return true;
}

// Runs one case twice over the same FIFOs; true when both runs are right.
template <class E>
bool runCase(const Case& c) {
  using S = typename E::Storage;
  const size_t es = sizeof(S);
  weft::plan::Spec spec;
  spec.coll = c.coll;
  spec.nranks = c.nranks;
  spec.count = c.count;
  spec.root = c.nranks > 1 ? 1 : 0;
  spec.elemSize = static_cast<uint32_t>(es);
  weft::algo::Options opt;
  opt.channels = c.count > 4096 ? 2 : 1;
  const weft::plan::Plan p = weft::algo::build(c.algorithm, spec, opt);
  if (c.inPlace ? !p.inPlaceSafe : !p.outOfPlaceSafe) return true;
  const uint32_t slotBytes = 64 * 1024, slots = 4;
  const wc::DeviceCall call{c.type, c.op, {}, slotBytes};

  // FIFO memory per (from, to, channel), zeroed once.
  std::map<std::tuple<int, int, int>, std::unique_ptr<Device>> fifoMemory;
  auto fifo = [&](int from, int to, int channel) {
    auto& m = fifoMemory[std::make_tuple(from, to, channel)];
    if (!m) {
      m = std::make_unique<Device>(wc::fifoBytes(slots, slotBytes));
      cudaMemset(m->ptr, 0, wc::fifoBytes(slots, slotBytes));
    }
    return wc::fifoAt(m->ptr, slots, slotBytes);
  };
  std::vector<Rank> ranks(c.nranks);
  for (int r = 0; r < c.nranks; ++r) {
    Rank& k = ranks[r];
    k.blob = wc::lowerForDevice(p.programs[r], spec, r, call);
    const wc::DevicePlan* dp = k.blob.plan();
    k.plan = std::make_unique<Device>(k.blob.bytes());
    if (!ok(cudaMemcpy(k.plan->ptr, k.blob.data(), k.blob.bytes(), cudaMemcpyHostToDevice),
            "copy plan"))
      return false;
    std::vector<wc::DeviceFifo> sends, recvs;
    for (uint32_t i = 0; i < dp->sendLinks; ++i)
      sends.push_back(fifo(r, wc::sendLinksOf(dp)[i].peer, wc::sendLinksOf(dp)[i].channel));
    for (uint32_t i = 0; i < dp->recvLinks; ++i)
      recvs.push_back(fifo(wc::recvLinksOf(dp)[i].peer, r, wc::recvLinksOf(dp)[i].channel));
    k.sendTable = std::make_unique<Device>(sends.size() * sizeof(wc::DeviceFifo));
    k.recvTable = std::make_unique<Device>(recvs.size() * sizeof(wc::DeviceFifo));
    cudaMemcpy(k.sendTable->ptr, sends.data(), sends.size() * sizeof(wc::DeviceFifo),
               cudaMemcpyHostToDevice);
    cudaMemcpy(k.recvTable->ptr, recvs.data(), recvs.size() * sizeof(wc::DeviceFifo),
               cudaMemcpyHostToDevice);
    const size_t controlBytes = sizeof(Control) + dp->lanes * sizeof(uint64_t);
    k.control = std::make_unique<Device>(controlBytes);
    cudaMemset(k.control->ptr, 0, controlBytes);
    const weft::plan::BufferSizes sz = weft::plan::bufferSizes(spec, r);
    k.inElems = sz.input;
    k.outElems = sz.output;
    if (c.inPlace) {
      k.inOff = c.coll == Collective::kAllGather ? r * c.count : 0;
      k.outOff = c.coll == Collective::kReduceScatter ? r * c.count : 0;
    }
    const uint64_t memElems =
        c.inPlace ? std::max(sz.input + k.inOff, sz.output + k.outOff) : sz.input;
    k.in = std::make_unique<Device>(memElems * es);
    if (!c.inPlace) k.out = std::make_unique<Device>(sz.output * es);
    k.scratch = std::make_unique<Device>(p.programs[r].scratchElems * es + 16);
    k.seen = std::make_unique<Device>(sz.output * es);
  }
  if (!ok(cudaDeviceSynchronize(), "setup")) return false;

  for (uint32_t epoch = 1; epoch <= 2; ++epoch) {
    std::vector<std::vector<unsigned char>> seen(c.nranks);
    std::vector<int> failed(c.nranks, 0);
    std::vector<wc::DeviceStatus> status(c.nranks);
    // Before the collective on `stream`: clear the rank's buffers, then write its input slowly.
    auto queueInput = [&](int r, cudaStream_t stream) {
      Rank& k = ranks[r];
      char* base = k.in->as<char>();
      cudaMemsetAsync(
          base, 0xFF,
          (c.inPlace ? std::max(k.inElems + k.inOff, k.outElems + k.outOff) : k.inElems) * es,
          stream);
      if (!c.inPlace) cudaMemsetAsync(k.outPtr(c, es), 0xFF, k.outElems * es, stream);
      writeInputSlowly<E>
          <<<1, 256, 0, stream>>>(reinterpret_cast<S*>(base + k.inOff * es), k.inElems, r);
    };
    auto argsOf = [&](int r) {
      Rank& k = ranks[r];
      wc::DeviceRunArgs a;
      a.plan = k.plan->as<wc::DevicePlan>();
      a.buffers[weft::plan::kInput] = k.in->as<char>() + k.inOff * es;
      a.buffers[weft::plan::kOutput] = k.outPtr(c, es);
      a.buffers[weft::plan::kScratch] = k.scratch->as<char>();
      a.sendFifos = k.sendTable->as<wc::DeviceFifo>();
      a.recvFifos = k.recvTable->as<wc::DeviceFifo>();
      Control* control = k.control->as<Control>();
      a.laneDone = control->laneDone;
      a.lanesFinished = &control->lanesFinished;
      a.abort = &control->abort;
      a.status = &control->status;
      a.epoch = epoch;
      a.lanesBefore = uint64_t{epoch - 1} * k.blob.plan()->lanes;
      a.timeoutNs = 10'000'000'000ull;
      return a;
    };
    auto launch = [&](const std::vector<int>& which, cudaStream_t stream) {
      wc::InterpLaunch lp;
      lp.ranks = static_cast<uint32_t>(which.size());
      for (size_t i = 0; i < which.size(); ++i) {
        lp.args[i] = argsOf(which[i]);
        lp.firstBlock[i + 1] = lp.firstBlock[i] + ranks[which[i]].blob.plan()->lanes;
      }
      const wc::CuResult rc = gModule->launch(lp, reinterpret_cast<wc::CuStream>(stream));
      if (rc == wc::kCuSuccess) return true;
      std::printf("FAIL launch: %s\n", wc::resultText(gDriver, rc).c_str());
      return false;
    };
    // After the collective: copy the output where the host reads it.
    auto queueOutputCopy = [&](int r, cudaStream_t stream) {
      Rank& k = ranks[r];
      copyOutput<<<64, 256, 0, stream>>>(reinterpret_cast<unsigned char*>(k.outPtr(c, es)),
                                         k.seen->as<unsigned char>(), k.outElems * es);
    };
    auto readBack = [&](int r) {
      Rank& k = ranks[r];
      seen[r].resize(k.outElems * es);
      cudaMemcpy(seen[r].data(), k.seen->ptr, seen[r].size(), cudaMemcpyDeviceToHost);
      cudaMemcpy(&status[r], &k.control->as<Control>()->status, sizeof status[r],
                 cudaMemcpyDeviceToHost);
    };
    if (epoch == 1) {
      // Each rank from its own thread, on its own stream, in a launch of its own.
      std::vector<std::thread> threads;
      for (int r = 0; r < c.nranks; ++r)
        threads.emplace_back([&, r] {
          cudaSetDevice(0);
          cudaStream_t stream;
          if (!ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream")) {
            failed[r] = 1;
            return;
          }
          queueInput(r, stream);
          failed[r] = !launch({r}, stream);
          queueOutputCopy(r, stream);
          failed[r] |= !ok(cudaStreamSynchronize(stream), "collective");
          readBack(r);
          cudaStreamDestroy(stream);
        });
      for (auto& t : threads) t.join();
    } else {
      // Every rank on one stream: one launch runs them all (separate launches would wait for
      // each other in stream order).
      cudaStream_t stream;
      if (!ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream")) return false;
      std::vector<int> all;
      for (int r = 0; r < c.nranks; ++r) {
        queueInput(r, stream);
        all.push_back(r);
      }
      failed[0] = !launch(all, stream);
      for (int r = 0; r < c.nranks; ++r) queueOutputCopy(r, stream);
      failed[0] |= !ok(cudaStreamSynchronize(stream), "collective");
      for (int r = 0; r < c.nranks; ++r) readBack(r);
      cudaStreamDestroy(stream);
    }
    std::string why;
    for (int r = 0; r < c.nranks && why.empty(); ++r)
      if (failed[r] || status[r].error)
        why = "rank " + std::to_string(r) + " failed: error " + std::to_string(status[r].error) +
              " lane " + std::to_string(status[r].lane) + " step " +
              std::to_string(status[r].step) + " waiting on " +
              std::to_string(status[r].waitingOn) + " peer " + std::to_string(status[r].peer);
    if (why.empty()) checkOutputs<E>(c, seen, &why);
    if (!why.empty()) {
      std::printf("FAIL %s %s n=%d count=%llu %s %s%s run %u: %s\n", c.algorithm,
                  weft::plan::collectiveName(c.coll), c.nranks,
                  static_cast<unsigned long long>(c.count), weft::dataTypeName(c.type),
                  weft::redOpName(c.op), c.inPlace ? " in place" : "", epoch, why.c_str());
      return false;
    }
  }
  return true;
}

bool runTyped(const Case& c) {
  switch (c.type) {
    case DataType::kFloat32:
      return runCase<weft::elements::FloatElem<float>>(c);
    case DataType::kFloat16:
      return runCase<weft::elements::HalfElem>(c);
    case DataType::kBfloat16:
      return runCase<weft::elements::Bf16Elem>(c);
    default:
      return runCase<weft::elements::IntElem<int32_t>>(c);
  }
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP device_interp_gpu_test: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device_interp_gpu_test on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  // The runtime makes the primary context current; the module is loaded into it.
  if (!ok(cudaSetDevice(0), "cudaSetDevice") || !ok(cudaFree(nullptr), "context")) return 1;
  const wc::DriverLoad& driver = wc::driver();
  if (!driver.api) {
    std::printf("FAIL driver: %s\n", driver.why.c_str());
    return 1;
  }
  std::string why;
  const std::unique_ptr<wc::InterpModule> module = wc::InterpModule::load(*driver.api, &why);
  if (!module) {
    std::printf("FAIL loading the interpreter: %s\n", why.c_str());
    return 1;
  }
  gDriver = driver.api.get();
  gModule = module.get();
  int cases = 0;
  const struct {
    const char* algorithm;
    Collective coll;
  } plans[] = {{"ring", Collective::kAllReduce},     {"ring", Collective::kAllGather},
               {"ring", Collective::kReduceScatter}, {"ring", Collective::kBroadcast},
               {"tree", Collective::kAllReduce},     {"rhd", Collective::kAllReduce},
               {"direct", Collective::kAllGather},   {"direct", Collective::kReduceScatter}};
  for (const auto& pl : plans)
    for (int n = 1; n <= 4; ++n)
      for (uint64_t count : {uint64_t{1000}, uint64_t{1} << 20})
        for (DataType t :
             {DataType::kFloat32, DataType::kFloat16, DataType::kBfloat16, DataType::kInt32})
          for (RedOp op : {RedOp::kSum, RedOp::kMax})
            for (bool inPlace : {false, true}) {
              if (pl.coll == Collective::kAllGather || pl.coll == Collective::kBroadcast) {
                if (op != RedOp::kSum) continue;  // nothing reduced
              }
              if (count > 1000 && (t != DataType::kFloat32 || op != RedOp::kSum)) continue;
              const Case c{pl.algorithm, pl.coll, n, count, t, op, inPlace};
              try {
                gFailures += !runTyped(c);
              } catch (const weft::Error& e) {
                std::printf("FAIL %s %s n=%d: %s\n", pl.algorithm,
                            weft::plan::collectiveName(pl.coll), n, e.what());
                ++gFailures;
              }
              ++cases;
            }
  std::printf("device_interp_gpu_test: %d cases, %d failed\n", cases, gFailures);
  return gFailures ? 1 : 0;
}
