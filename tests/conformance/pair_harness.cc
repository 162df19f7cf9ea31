#include "tests/conformance/pair_harness.h"

#include <gtest/gtest.h>

#include "src/bootstrap/secret.h"

namespace weft::test {

TransportPair::TransportPair(const std::string& name, uint32_t slots, size_t slotBytes,
                             const Tuning& tuning)
    : tuning_(tuning) {
  for (transport::Transport* t : transport::transports())
    if (name == t->name()) t_ = t;
  if (!t_) throw std::runtime_error("no transport named " + name);
  auto secret = bootstrap::randomSecret();
  const uint64_t commHash = bootstrap::hashBytes(secret.data(), secret.size());
  for (int r = 0; r < 2; ++r) {
    peers_.push_back(transport::localPeerInfo(r, tuning_));
    bells_.push_back(std::make_shared<Doorbell>());
  }
  for (int r = 0; r < 2; ++r) {
    auto& c = ctx_[r];
    c.commHash = commHash;
    c.rank = r;
    c.nranks = 2;
    c.peers = &peers_;
    c.bells = &bells_;
    c.slots = slots;
    c.slotBytes = slotBytes;
    c.timeout = std::chrono::milliseconds(30000);
    c.selfBell = bells_[r].get();
    c.tuning = &tuning_;
    t_->publish(&c, &peers_[r]);
  }
  if (!t_->canConnect(peers_[0], peers_[1]))
    throw std::runtime_error("transport " + name + " cannot link two ranks of one process");
}

TransportPair::~TransportPair() = default;

std::pair<TransportPair::Conn, TransportPair::Conn> TransportPair::connect(int channel) {
  Conn a = t_->connect(ctx_[0], 1, channel);
  Conn b = t_->connect(ctx_[1], 0, channel);
  return {std::move(a), std::move(b)};
}

}  // namespace weft::test
