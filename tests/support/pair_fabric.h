// In-process ranks for host executor tests: every rank's connections over the local transport's
// pair blocks in this process's memory (one block per lower rank, higher rank and channel, made
// on first use), and the host executor's Work for one rank of a plan over them.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "src/common/doorbell.h"
#include "src/exec/work.h"
#include "src/plan/plan.h"
#include "transports/base/transport.h"

namespace weft::test {

// Page-aligned, zeroed memory (the size rounded up to whole pages), freed with the object.
struct ZeroedPages {
  void* mem = nullptr;
  explicit ZeroedPages(size_t bytes);
  ~ZeroedPages();
  ZeroedPages(const ZeroedPages&) = delete;
  ZeroedPages& operator=(const ZeroedPages&) = delete;
};

class PairFabric {
 public:
  // `commHash` names the ranks' communicator in the pair blocks.
  PairFabric(int nranks, uint32_t slots, uint32_t slotBytes, uint64_t commHash);
  ~PairFabric();
  PairFabric(const PairFabric&) = delete;
  PairFabric& operator=(const PairFabric&) = delete;

  // `rank`'s end of its link to `peer` on `channel`.
  transport::Connection* connection(int rank, int peer, int channel);
  // `rank`'s connections, as the executor asks for them.
  exec::ConnectionSource* connections(int rank);
  Doorbell* bell(int rank) { return bells_[rank].get(); }

 private:
  class RankConnections;
  std::vector<transport::PeerInfo> peers_;
  std::vector<std::shared_ptr<Doorbell>> bells_;
  std::vector<transport::ConnectContext> ctx_;
  std::vector<std::unique_ptr<RankConnections>> sources_;
  std::map<std::tuple<int, int, int>, std::shared_ptr<ZeroedPages>> blocks_;
  std::map<std::tuple<int, int, int>, std::unique_ptr<transport::Connection>> conns_;
};

// `rank`'s Work of `plan` over `fabric`: its program, every lane tagged 7, stopped by `abort`.
// The caller sets the buffers, the type and the operator.
exec::Work rankWork(const std::shared_ptr<const plan::Plan>& plan, int rank, PairFabric& fabric,
                    const std::atomic<bool>* abort);

}  // namespace weft::test
