#include "tests/support/pair_fabric.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "src/common/error.h"
#include "transports/shm/pair_fifo.h"

namespace weft::test {

ZeroedPages::ZeroedPages(size_t bytes) {
  const size_t rounded = (bytes + 4095) / 4096 * 4096;
  mem = std::aligned_alloc(4096, rounded);
  std::memset(mem, 0, rounded);
}

ZeroedPages::~ZeroedPages() { std::free(mem); }

class PairFabric::RankConnections : public exec::ConnectionSource {
 public:
  RankConnections(PairFabric* fabric, int rank) : fabric_(fabric), rank_(rank) {}
  transport::Connection* connection(int peer, int channel) override {
    return fabric_->connection(rank_, peer, channel);
  }

 private:
  PairFabric* fabric_;
  int rank_;
};

PairFabric::PairFabric(int nranks, uint32_t slots, uint32_t slotBytes, uint64_t commHash)
    : peers_(nranks), bells_(nranks) {
  for (int r = 0; r < nranks; ++r) {
    peers_[r].rank = r;
    peers_[r].pid = getpid();
    bells_[r] = std::make_shared<Doorbell>();
    transport::ConnectContext ctx;
    ctx.commHash = commHash;
    ctx.rank = r;
    ctx.nranks = nranks;
    ctx.peers = &peers_;
    ctx.bells = &bells_;
    ctx.slots = slots;
    ctx.slotBytes = slotBytes;
    ctx.timeout = std::chrono::milliseconds(20000);
    ctx_.push_back(ctx);
    sources_.push_back(std::make_unique<RankConnections>(this, r));
  }
}

PairFabric::~PairFabric() = default;

transport::Connection* PairFabric::connection(int rank, int peer, int channel) {
  auto key = std::make_tuple(rank, peer, channel);
  auto it = conns_.find(key);
  if (it != conns_.end()) return it->second.get();
  auto pairKey = std::make_tuple(std::min(rank, peer), std::max(rank, peer), channel);
  std::shared_ptr<ZeroedPages>& block = blocks_[pairKey];
  if (!block) {
    block = std::make_shared<ZeroedPages>(transport::pairBytes(ctx_[rank]));
    transport::pairInit(block->mem, ctx_[rank]);
  }
  auto conn = transport::pairConnection(
      ctx_[rank], peer, block->mem, "test", block, [](std::string*) { return Status::kSuccess; },
      transport::RemoteMode::kDirect);
  transport::Connection* raw = conn.get();
  conns_[key] = std::move(conn);
  return raw;
}

exec::ConnectionSource* PairFabric::connections(int rank) { return sources_[rank].get(); }

exec::Work rankWork(const std::shared_ptr<const plan::Plan>& plan, int rank, PairFabric& fabric,
                    const std::atomic<bool>* abort) {
  exec::Work w;
  w.plan = plan;
  w.program = &plan->programs[rank];
  w.rank = rank;
  w.conns = fabric.connections(rank);
  w.abort = abort;
  w.laneTags.assign(w.program->lanes.size(), 7);
  return w;
}

}  // namespace weft::test
