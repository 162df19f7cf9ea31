// Ranks in the same process: the pair's FIFOs live on the heap, found through a process-wide
// rendezvous table keyed like the shm segment names.
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "transports/base/transport.h"
#include "transports/shm/pair_fifo.h"

namespace weft::transport {
namespace {

struct HeapBlock {
  void* mem = nullptr;
  explicit HeapBlock(size_t bytes) {
    mem = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!mem) fail(Status::kSystemError, "out of memory for a local connection");
  }
  ~HeapBlock() { std::free(mem); }
};

class LocalTransport : public Transport {
 public:
  const char* name() const override { return "local"; }
  // NCCL_P2P_DISABLE turns off direct access to a peer's memory: in host mode that is this
  // transport (ranks then fall back to shm, like NCCL's P2P -> SHM fallback).
  bool enabled(const Tuning& t) const override { return !t.localDisabled && !t.p2pDisabled; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return self.processHash == peer.processHash;
  }

  std::unique_ptr<Connection> connect(const ConnectContext& ctx, int peer, int channel) override {
    std::string key = pairName(ctx, peer, channel);
    std::shared_ptr<HeapBlock> block;
    {
      // First side creates the block; the second takes it out of the table. The table holds
      // it weakly: a block whose creator let go before the peer came (the creator failed or
      // was aborted) is freed, not kept for a peer that will never connect.
      std::lock_guard<std::mutex> lock(mu_);
      std::erase_if(pending_, [](const auto& entry) { return entry.second.expired(); });
      auto it = pending_.find(key);
      if (it != pending_.end()) block = it->second.lock();
      if (block) {
        pending_.erase(it);
      } else {
        block = std::make_shared<HeapBlock>(pairBytes(ctx));
        pairInit(block->mem, ctx);
        pending_[key] = block;
      }
    }
    void* mem = block->mem;
    return pairConnection(ctx, peer, mem, "local", std::move(block), nullptr, RemoteMode::kDirect);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::weak_ptr<HeapBlock>> pending_;
};

}  // namespace

Transport* localTransport() {
  static LocalTransport t;
  return &t;
}

}  // namespace weft::transport
