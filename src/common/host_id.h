// The identity of this host, shared by the transports (which pair ranks on one host) and the
// topology (which tells hosts apart in a multi-host description).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "src/common/tuning.h"

namespace weft {

// 64-bit FNV-1a of `text`.
uint64_t fnv1a(std::string_view text);

// fnv1a(hostname + boot id), with "/" + hostId appended to the text when it is not empty:
// network-namespace "hosts" share hostname and boot id, and WEFT_HOST_ID (Tuning::hostId) tells
// them apart. By default the knob as the environment gives it now, since a forked test process
// may set it after its parent's first call.
uint64_t hostHash(const std::string& hostId = Tuning::fromEnvironment().hostId);

}  // namespace weft
