// Which transport links two ranks: local in one process, shm on one host, tcp between hosts, and
// the NCCL switches that change it (NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_NET).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "src/common/error.h"
#include "src/common/tuning.h"
#include "tests/conformance/pair_harness.h"
#include "transports/registry.h"
#include "transports/tcp/published.h"

namespace weft::test {
namespace {

class TransportChoice : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* v :
         {"NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "WEFT_LOCAL_DISABLE", "NCCL_NET", "WEFT_HOST_ID"})
      unsetenv(v);
  }
  // Two ranks of this process; `otherHost` gives the second a different host identity.
  std::string pick(bool otherHost = false) {
    transport::PeerInfo a = transport::localPeerInfo(0, Tuning::fromEnvironment());
    if (otherHost) setenv("WEFT_HOST_ID", "elsewhere", 1);
    transport::PeerInfo b = transport::localPeerInfo(1, Tuning::fromEnvironment());
    unsetenv("WEFT_HOST_ID");
    if (otherHost) b.processHash ^= 1;  // and, of course, another process
    // Both published a tcp address, as communicator init does.
    for (auto* p : {&a, &b}) {
      tcp::Published e{};
      e.addrLen = 16;
      e.sockets = 1;
      tcp::publishInto(p, e);
    }
    // The switches as a communicator's init reads them.
    return transport::pickTransport(a, b, Tuning::fromEnvironment()).name();
  }
};

TEST_F(TransportChoice, LocalThenShmThenTcp) {
  EXPECT_EQ(pick(), "local");
  setenv("NCCL_P2P_DISABLE", "1", 1);  // NCCL: no P2P -> SHM
  EXPECT_EQ(pick(), "shm");
  setenv("NCCL_SHM_DISABLE", "1", 1);
  EXPECT_EQ(pick(), "tcp");
  unsetenv("NCCL_P2P_DISABLE");
  EXPECT_EQ(pick(), "local");
  setenv("WEFT_LOCAL_DISABLE", "1", 1);
  EXPECT_EQ(pick(), "tcp");
}

TEST_F(TransportChoice, OtherHostsUseTheNetwork) {
  const uint64_t here = transport::localPeerInfo(0, Tuning::fromEnvironment()).hostHash;
  setenv("WEFT_HOST_ID", "x", 1);
  EXPECT_NE(transport::localPeerInfo(0, Tuning::fromEnvironment()).hostHash, here);
  unsetenv("WEFT_HOST_ID");
  EXPECT_EQ(transport::localPeerInfo(0, Tuning::fromEnvironment()).hostHash, here);
  EXPECT_EQ(pick(true), "tcp");
  setenv("NCCL_NET", "Socket", 1);
  EXPECT_EQ(pick(true), "tcp");
  setenv("NCCL_NET", "IB", 1);  // no such network here: an error that says why, not a hang
  try {
    pick(true);
    ADD_FAILURE() << "NCCL_NET=IB found a transport";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL_NET"), std::string::npos) << e.what();
  }
  // Inside one host NCCL_NET does not matter.
  EXPECT_EQ(pick(false), "local");
}

}  // namespace
}  // namespace weft::test
