// What a communicator's device path sees of the communicator it serves: its ranks, where they
// live, its bootstrap, its tuning and the plans of its calls. The device code depends on this
// interface, not on the communicator, so the communicator can own its device path without the
// two including each other. The Works it hands out are the ones the host executor would run
// (one lowering for both paths).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "src/common/datatype.h"
#include "src/common/tuning.h"
#include "src/core/call.h"
#include "src/exec/work.h"

namespace weft::bootstrap {
class Bootstrap;
}

namespace weft::core {

class CommView {
 public:
  virtual ~CommView() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual uint64_t commHash() const = 0;
  virtual const Tuning& tuning() const = 0;
  // Whether every rank lives on this host; whether rank `r` lives in this process.
  virtual bool allRanksOnThisHost() const = 0;
  virtual bool peerInThisProcess(int r) const = 0;
  virtual bootstrap::Bootstrap& bootstrap() = 0;
  // The Work of a group's point-to-point calls; the Work of a collective call, its operator
  // lowered as the host executor's is (Communicator::p2pWork, workForDevice). The device path
  // encodes these Works and lowers nothing itself.
  virtual exec::Work p2pWork(const std::vector<Call>& calls) = 0;
  virtual exec::Work workForDevice(const Call& call) = 0;
};

}  // namespace weft::core
