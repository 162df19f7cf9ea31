// Two ranks of one process linked by one named transport, for transport-level tests.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/common/doorbell.h"
#include "src/common/tuning.h"
#include "transports/base/transport.h"
#include "transports/registry.h"

namespace weft::test {

class TransportPair {
 public:
  using Conn = std::unique_ptr<transport::Connection>;

  // `name` is a registered transport ("local", "shm", "tcp"); fails the test if it cannot link
  // two ranks of this process.
  // `tuning` is what a communicator would pass its transports (by default, from the
  // environment as init reads it).
  explicit TransportPair(const std::string& name, uint32_t slots = 8, size_t slotBytes = 128 << 10,
                         const Tuning& tuning = Tuning::fromEnvironment());
  ~TransportPair();

  // Rank 0's and rank 1's ends of one channel.
  std::pair<Conn, Conn> connect(int channel);

  size_t slotBytes() const { return ctx_[0].slotBytes; }
  transport::ConnectContext& ctx(int r) { return ctx_[r]; }
  const transport::PeerInfo& peer(int r) const { return peers_[r]; }
  transport::Transport& transport() { return *t_; }

 private:
  Tuning tuning_;
  transport::Transport* t_ = nullptr;
  std::vector<transport::PeerInfo> peers_;
  std::vector<std::shared_ptr<Doorbell>> bells_;
  transport::ConnectContext ctx_[2];
};

}  // namespace weft::test
