// Ranks in different processes of one host: the pair's FIFOs live in a POSIX shared-memory
// segment created by whichever side connects first; the name is removed once both have it.
#include "src/common/log.h"
#include "transports/base/transport.h"
#include "transports/shm/pair_fifo.h"
#include "transports/shm/segment_names.h"
#include "transports/shm/shm_segment.h"

namespace weft::transport {
namespace {

class ShmTransport : public Transport {
 public:
  const char* name() const override { return "shm"; }
  bool enabled(const Tuning& t) const override { return !t.shmDisabled; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return self.hostHash == peer.hostHash;
  }

  std::unique_ptr<Connection> connect(const ConnectContext& ctx, int peer, int channel) override {
    std::string name = pairName(ctx, peer, channel);
    auto seg = std::make_shared<ShmSegment>(ShmSegment::createOrOpen(
        name, pairBytes(ctx), [&](void* mem) { pairInit(mem, ctx); }, ctx.timeout));
    if (!seg->created()) seg->unlink();  // both sides are attached now
    WEFT_TRACE(SHM, "rank %d connected to %d channel %d via %s", ctx.rank, peer, channel,
               name.c_str());
    const PeerInfo info = (*ctx.peers)[peer];
    auto health = [info](std::string* why) {
      if (processGone(info.pid)) {
        *why = "rank " + std::to_string(info.rank) + " (pid " + std::to_string(info.pid) +
               ") exited (shm transport)";
        return Status::kRemoteError;
      }
      return Status::kSuccess;
    };
    void* mem = seg->data();
    // Large slices of ncclMemAlloc'd buffers are read in place through a mapping of the
    // sender's memfd. process_vm_readv for any other memory measured slower than copying
    // through slots (see perf/README.md, "shm by reference (CMA) against slot copies"), so it
    // is opt-in.
    const Tuning& tuning = tuningOr(ctx.tuning);
    RemoteMode remote = RemoteMode::kNone;
    if (tuning.shmCma)
      remote = RemoteMode::kCma;
    else if (tuning.shmMap)
      remote = RemoteMode::kMapped;
    return pairConnection(ctx, peer, mem, "shm", std::move(seg), health, remote);
  }
};

}  // namespace

Transport* shmTransport() {
  static ShmTransport t;
  return &t;
}

}  // namespace weft::transport
