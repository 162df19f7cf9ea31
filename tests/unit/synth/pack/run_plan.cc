#include "run_plan.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#include "src/common/error.h"
#include "src/exec/executor.h"
#include "transports/shm/pair_fifo.h"

namespace weft::synth::test {
namespace {

struct Block {
  void* mem = nullptr;
  explicit Block(size_t bytes) : mem(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)) {}
  ~Block() { std::free(mem); }
};

// Connections of all ranks: one pair block per (lower rank, higher rank, channel).
class LocalFabric {
 public:
  LocalFabric(int n, uint32_t slotBytes) : peers_(n), bells_(n) {
    for (int r = 0; r < n; ++r) {
      peers_[r].rank = r;
      peers_[r].pid = getpid();
      bells_[r] = std::make_shared<Doorbell>();
      transport::ConnectContext ctx;
      ctx.commHash = 0x5eed;
      ctx.rank = r;
      ctx.nranks = n;
      ctx.peers = &peers_;
      ctx.bells = &bells_;
      ctx.slots = 4;
      ctx.slotBytes = slotBytes;
      ctx.timeout = std::chrono::milliseconds(20000);
      ctx_.push_back(ctx);
    }
  }

  transport::Connection* connection(int rank, int peer, int channel) {
    auto key = std::make_tuple(rank, peer, channel);
    auto it = conns_.find(key);
    if (it != conns_.end()) return it->second.get();
    auto pairKey = std::make_tuple(std::min(rank, peer), std::max(rank, peer), channel);
    std::shared_ptr<Block>& block = blocks_[pairKey];
    if (!block) {
      block = std::make_shared<Block>(transport::pairBytes(ctx_[rank]));
      transport::pairInit(block->mem, ctx_[rank]);
    }
    auto conn = transport::pairConnection(
        ctx_[rank], peer, block->mem, "test", block, [](std::string*) { return Status::kSuccess; },
        transport::RemoteMode::kDirect);
    transport::Connection* raw = conn.get();
    conns_[key] = std::move(conn);
    return raw;
  }

  Doorbell* bell(int r) { return bells_[r].get(); }

 private:
  std::vector<transport::PeerInfo> peers_;
  std::vector<std::shared_ptr<Doorbell>> bells_;
  std::vector<transport::ConnectContext> ctx_;
  std::map<std::tuple<int, int, int>, std::shared_ptr<Block>> blocks_;
  std::map<std::tuple<int, int, int>, std::unique_ptr<transport::Connection>> conns_;
};

class RankConnections : public exec::ConnectionSource {
 public:
  RankConnections(LocalFabric* fabric, int rank) : fabric_(fabric), rank_(rank) {}
  transport::Connection* connection(int peer, int channel) override {
    return fabric_->connection(rank_, peer, channel);
  }

 private:
  LocalFabric* fabric_;
  int rank_;
};

}  // namespace

std::vector<std::vector<int32_t>> runPlan(const plan::Plan& p,
                                          const std::vector<std::vector<int32_t>>& inputs,
                                          bool inPlace, uint32_t slotBytes) {
  const int n = p.spec.nranks;
  auto shared = std::make_shared<const plan::Plan>(p);
  LocalFabric fabric(n, slotBytes);
  std::vector<std::unique_ptr<RankConnections>> sources;
  std::vector<std::vector<int32_t>> outputs(n), mem(n);
  std::vector<exec::Task> tasks(n);
  std::atomic<bool> abort{false};
  for (int r = 0; r < n; ++r) {
    const plan::BufferSizes sz = plan::bufferSizes(p.spec, r);
    if (inputs[r].size() != sz.input)
      throw Error(Status::kInvalidArgument, "runPlan: rank " + std::to_string(r) + " input has " +
                                                std::to_string(inputs[r].size()) + " elements");
    sources.push_back(std::make_unique<RankConnections>(&fabric, r));
    exec::Work w;
    w.plan = shared;
    w.program = &shared->programs[r];
    w.rank = r;
    w.type = DataType::kInt32;
    w.op = RedOp::kSum;
    w.conns = sources.back().get();
    w.abort = &abort;
    w.laneTags.assign(w.program->lanes.size(), 7);
    auto scratch = std::make_shared<std::vector<int32_t>>(w.program->scratchElems + 1);
    w.keep = scratch;
    if (inPlace) {
      // One buffer; the input sits where NCCL's in-place rules put it inside the output.
      const uint64_t c = p.spec.count;
      const uint64_t inOff = p.spec.coll == plan::Collective::kAllGather ? r * c : 0;
      const uint64_t outOff = p.spec.coll == plan::Collective::kReduceScatter ? r * c : 0;
      mem[r].assign(std::max(sz.input + inOff, sz.output + outOff), -1);
      std::copy(inputs[r].begin(), inputs[r].end(), mem[r].begin() + inOff);
      w.buffers = {reinterpret_cast<char*>(mem[r].data() + inOff),
                   reinterpret_cast<char*>(mem[r].data() + outOff),
                   reinterpret_cast<char*>(scratch->data())};
    } else {
      mem[r] = inputs[r];
      outputs[r].assign(sz.output, -1);
      w.buffers = {reinterpret_cast<char*>(mem[r].data()),
                   reinterpret_cast<char*>(outputs[r].data()),
                   reinterpret_cast<char*>(scratch->data())};
    }
    tasks[r].units.push_back(std::move(w));
    tasks[r].bell = fabric.bell(r);
  }
  const exec::RunResult res = exec::run(tasks, std::chrono::milliseconds(20000));
  if (res.status != Status::kSuccess)
    throw Error(res.status, "runPlan: task " + std::to_string(res.failedTask) + ": " + res.message);
  if (inPlace)
    for (int r = 0; r < n; ++r) {
      const plan::BufferSizes sz = plan::bufferSizes(p.spec, r);
      const uint64_t outOff =
          p.spec.coll == plan::Collective::kReduceScatter ? r * p.spec.count : 0;
      outputs[r].assign(mem[r].begin() + outOff, mem[r].begin() + outOff + sz.output);
    }
  return outputs;
}

namespace {

int32_t inputValue(int rank, uint64_t i) {
  return (rank + 1) * 1000 + static_cast<int32_t>(i % 997);
}

}  // namespace

std::string runAndCheck(const plan::ChunkPlan& cp, uint64_t count) {
  using plan::Collective;
  const plan::Plan p = plan::instantiate(cp, count);
  const int n = p.spec.nranks;
  std::vector<std::vector<int32_t>> in(n);
  for (int r = 0; r < n; ++r) {
    in[r].resize(plan::bufferSizes(p.spec, r).input);
    for (uint64_t i = 0; i < in[r].size(); ++i) in[r][i] = inputValue(r, i);
  }
  auto sum = [&](uint64_t i) {
    int32_t s = 0;
    for (int q = 0; q < n; ++q) s += inputValue(q, i);
    return s;
  };
  auto expected = [&](int r, uint64_t i) {
    switch (cp.coll) {
      case Collective::kAllGather:
        return inputValue(static_cast<int>(i / count), i % count);
      case Collective::kAlltoAll:
        return inputValue(static_cast<int>(i / count), r * count + i % count);
      case Collective::kBroadcast:
        return inputValue(cp.root, i);
      case Collective::kReduceScatter:
        return sum(r * count + i);
      default:
        return sum(i);
    }
  };
  std::vector<bool> modes{false};
  if (cp.inPlace) modes.push_back(true);
  for (bool inPlace : modes) {
    const auto out = runPlan(p, in, inPlace, 256);
    for (int r = 0; r < n; ++r) {
      if (cp.coll == Collective::kReduce && r != cp.root) continue;
      for (uint64_t i = 0; i < out[r].size(); ++i) {
        const int32_t want = expected(r, i);
        if (out[r][i] != want)
          return cp.name + (inPlace ? " in place" : "") + ": rank " + std::to_string(r) +
                 " output[" + std::to_string(i) + "] = " + std::to_string(out[r][i]) +
                 ", expected " + std::to_string(want);
      }
    }
  }
  return "";
}

}  // namespace weft::synth::test
