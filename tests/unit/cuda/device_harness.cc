#include "tests/unit/cuda/device_harness.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <thread>
#include <tuple>

#include "src/common/error.h"
#include "src/cuda/device_plan.h"
#include "src/exec/executor.h"
#include "src/exec/lower.h"
#include "tests/support/pair_fabric.h"

namespace weft::cuda::test {
namespace {

// One rank's buffers for one run. In place: one buffer holding the input at inOff and the output
// at outOff (elements).
struct RankMemory {
  Bytes mem, out, scratch;
  uint64_t inOff = 0, outOff = 0;
  char* buffers[3] = {};

  RankMemory(const plan::Plan& p, int r, const Bytes& input, size_t es, bool inPlace) {
    const plan::BufferSizes sz = plan::bufferSizes(p.spec, r);
    if (input.size() != sz.input * es)
      throw Error(Status::kInvalidArgument, "harness: rank " + std::to_string(r) + " input has " +
                                                std::to_string(input.size()) + " bytes");
    scratch.assign(p.programs[r].scratchElems * es + 64, 0);
    if (inPlace) {
      const uint64_t c = p.spec.count;
      // A rank's share sits at its own offset of the larger buffer.
      const bool inputInside =
          p.spec.coll == plan::Collective::kAllGather || p.spec.coll == plan::Collective::kGather;
      const bool outputInside = p.spec.coll == plan::Collective::kReduceScatter ||
                                p.spec.coll == plan::Collective::kScatter;
      inOff = inputInside ? r * c : 0;
      outOff = outputInside ? r * c : 0;
      mem.assign(std::max(sz.input + inOff, sz.output + outOff) * es + 64, 0xA5);
      std::copy(input.begin(), input.end(), mem.begin() + inOff * es);
      buffers[plan::kInput] = reinterpret_cast<char*>(mem.data() + inOff * es);
      buffers[plan::kOutput] = reinterpret_cast<char*>(mem.data() + outOff * es);
    } else {
      mem = input;
      mem.resize(input.size() + 64);
      out.assign(sz.output * es + 64, 0xA5);
      buffers[plan::kInput] = reinterpret_cast<char*>(mem.data());
      buffers[plan::kOutput] = reinterpret_cast<char*>(out.data());
    }
    buffers[plan::kScratch] = reinterpret_cast<char*>(scratch.data());
  }

  Bytes output(const plan::Plan& p, int r, size_t es) const {
    const uint64_t n = plan::bufferSizes(p.spec, r).output * es;
    const unsigned char* at = out.empty() ? mem.data() + outOff * es : out.data();
    return Bytes(at, at + n);
  }
};

// FIFO memory of every (sender, receiver, channel), made on first use.
class HostFifos {
 public:
  HostFifos(uint32_t slots, uint32_t slotBytes) : slots_(slots), slotBytes_(slotBytes) {}
  DeviceFifo fifo(int from, int to, int channel) {
    auto& block = blocks_[std::make_tuple(from, to, channel)];
    if (!block) block = std::make_unique<weft::test::ZeroedPages>(fifoBytes(slots_, slotBytes_));
    return fifoAt(block->mem, slots_, slotBytes_);
  }

 private:
  uint32_t slots_, slotBytes_;
  std::map<std::tuple<int, int, int>, std::unique_ptr<weft::test::ZeroedPages>> blocks_;
};

// A rank's state kept from run to run: its lowered plan, FIFO tables and counters.
struct DeviceRank {
  DevicePlanBlob blob;
  std::vector<DeviceFifo> sends, recvs;
  std::vector<uint64_t> laneDone;
  uint64_t lanesFinished = 0;
  uint32_t abort = 0;
  DeviceStatus status;
};

// Rank r's Work as a communicator builds it for either path: the plan's program, the call's
// type, and its operator lowered by exec::lowerOperator (the one lowering). Buffers and links
// are the caller's to fill.
exec::Work callWork(const std::shared_ptr<const plan::Plan>& p, int r, const RunSetup& s) {
  exec::Work w;
  w.plan = p;
  w.program = &p->programs[r];
  w.rank = r;
  w.type = s.type;
  w.buffers.assign(3, nullptr);
  exec::lowerOperator(&w, s.op, s.scalar);
  return w;
}

}  // namespace

std::string describe(const DeviceStatus& s) {
  static const char* const kErrors[] = {"none", "aborted", "timeout", "mismatch", "bad args"};
  static const char* const kWaits[] = {"nothing", "a dependency", "a send slot", "a message"};
  return std::string(s.error < 5 ? kErrors[s.error] : "?") + " in lane " + std::to_string(s.lane) +
         " step " + std::to_string(s.step) + " waiting for " +
         (s.waitingOn < 4 ? kWaits[s.waitingOn] : "?") + " (peer/lane " + std::to_string(s.peer) +
         ", expected " + std::to_string(s.expectedBytes) + " bytes, got " +
         std::to_string(s.gotBytes) + ")";
}

std::vector<Bytes> runDeviceInterpreter(const plan::Plan& p, const std::vector<Bytes>& inputs,
                                        const RunSetup& setup) {
  const int n = p.spec.nranks;
  const size_t es = dataTypeSize(setup.type);
  HostFifos fifos(setup.slots, setup.slotBytes);
  std::vector<DeviceRank> ranks(n);
  const auto shared = std::make_shared<const plan::Plan>(p);
  for (int r = 0; r < n; ++r) {
    DeviceRank& dr = ranks[r];
    dr.blob = encodeForDevice(callWork(shared, r, setup), setup.slotBytes);
    const DevicePlan* dp = dr.blob.plan();
    for (uint32_t k = 0; k < dp->sendLinks; ++k)
      dr.sends.push_back(fifos.fifo(r, sendLinksOf(dp)[k].peer, sendLinksOf(dp)[k].channel));
    for (uint32_t k = 0; k < dp->recvLinks; ++k)
      dr.recvs.push_back(fifos.fifo(recvLinksOf(dp)[k].peer, r, recvLinksOf(dp)[k].channel));
    dr.laneDone.assign(dp->lanes, 0);
  }
  std::vector<Bytes> result;
  for (int run = 1; run <= setup.runs; ++run) {
    std::vector<std::unique_ptr<RankMemory>> memory;
    std::vector<DeviceRunArgs> args(n);
    for (int r = 0; r < n; ++r) {
      memory.push_back(std::make_unique<RankMemory>(p, r, inputs[r], es, setup.inPlace));
      DeviceRank& dr = ranks[r];
      DeviceRunArgs& a = args[r];
      a.plan = dr.blob.plan();
      for (int b = 0; b < 3; ++b) a.buffers[b] = memory[r]->buffers[b];
      a.sendFifos = dr.sends.data();
      a.recvFifos = dr.recvs.data();
      a.laneDone = dr.laneDone.data();
      a.lanesFinished = &dr.lanesFinished;
      a.epoch = static_cast<uint32_t>(run);
      a.lanesBefore = uint64_t(run - 1) * dr.blob.plan()->lanes;
      a.abort = &dr.abort;
      a.status = &dr.status;
      a.timeoutNs = setup.timeoutNs;
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      for (uint32_t l = 0; l < args[r].plan->lanes; ++l)
        threads.emplace_back([&args, r, l] {
          LaneShared shared{};
          runLane(args[r], l, 0, 1, shared);
        });
    for (auto& t : threads) t.join();
    std::vector<Bytes> outputs;
    for (int r = 0; r < n; ++r) {
      if (ranks[r].status.error != 0)
        throw Error(Status::kInternalError, "device run " + std::to_string(run) + ", rank " +
                                                std::to_string(r) + ": " +
                                                describe(ranks[r].status));
      outputs.push_back(memory[r]->output(p, r, es));
    }
    if (run > 1 && outputs != result)
      throw Error(Status::kInternalError,
                  "device run " + std::to_string(run) + " differs from run 1 over the same FIFOs");
    result = std::move(outputs);
  }
  return result;
}

std::vector<Bytes> runHostExecutor(const plan::Plan& p, const std::vector<Bytes>& inputs,
                                   const RunSetup& setup) {
  const int n = p.spec.nranks;
  const size_t es = dataTypeSize(setup.type);
  auto shared = std::make_shared<const plan::Plan>(p);
  weft::test::PairFabric fabric(n, setup.slots, setup.slotBytes, 0xd1ce);
  std::vector<std::unique_ptr<RankMemory>> memory;
  std::vector<exec::Task> tasks(n);
  std::atomic<bool> abort{false};
  for (int r = 0; r < n; ++r) {
    memory.push_back(std::make_unique<RankMemory>(p, r, inputs[r], es, setup.inPlace));
    exec::Work w = callWork(shared, r, setup);
    const exec::Work linked = weft::test::rankWork(shared, r, fabric, &abort);
    w.conns = linked.conns;
    w.abort = linked.abort;
    w.laneTags = linked.laneTags;
    w.buffers.assign(memory[r]->buffers, memory[r]->buffers + 3);
    tasks[r].units.push_back(std::move(w));
    tasks[r].bell = fabric.bell(r);
  }
  const exec::RunResult res = exec::run(tasks, std::chrono::milliseconds(20000));
  if (res.status != Status::kSuccess)
    throw Error(res.status,
                "host executor: task " + std::to_string(res.failedTask) + ": " + res.message);
  std::vector<Bytes> outputs;
  for (int r = 0; r < n; ++r) outputs.push_back(memory[r]->output(p, r, es));
  return outputs;
}

}  // namespace weft::cuda::test
