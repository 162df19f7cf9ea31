// What a communicator is created with: its knob values and the rank's GPU. The knob values come
// from the environment in one place only, configFromEnv(), at init; everything else takes the
// Tuning it is given.
#pragma once
#include <string>

#include "src/common/tuning.h"

namespace weft::core {

struct CommConfig {
  bool blocking = true;
  std::string name;
  // Knob values as the environment gives them (configFromEnv()); init adds what it learns about
  // the host and rank 0's FIFO geometry, and the communicator's tuning() is that.
  Tuning tuning;
  // The rank's GPU (noteCudaDevice): its ordinal in this process (-1: none) and PCI bus id,
  // which names it across processes ("" where none). Children of a split inherit it.
  int cudaDevice = -1;
  std::string cudaBusId;
};

// The init-time config: the knobs as the environment gives them now. The library's one reader
// of the knob registry into a Tuning: communicator init, ncclGetUniqueId and the network
// plugin's init all start from it.
CommConfig configFromEnv();

}  // namespace weft::core
