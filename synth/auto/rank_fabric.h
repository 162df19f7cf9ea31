// The Fabric of a communicator's ranks, from its system topology.
#pragma once
#include <optional>
#include <string>

#include "src/topo/system.h"
#include "synth/model/fabric.h"

namespace weft::synth {

// Ranks placed on GPUs are those GPUs. Ranks on a machine whose topology has GPUs but whose
// ranks run on CPUs (host mode with an NCCL_TOPO_FILE of a GPU machine) take the GPUs in order,
// host by host: rank i drives GPU i. Without GPUs, ranks are host ranks: every host must hold the
// same number of ranks, numbered host by host. nullopt (and *why) when no such mapping exists.
std::optional<Fabric> fabricForRanks(const topo::SystemTopology& system, std::string* why);

// Whether the system has GPUs or ranks on several hosts (what makes synthesis worth its time).
bool worthSynthesizing(const topo::SystemTopology& system);

}  // namespace weft::synth
