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
// them apart: `hostId` is the knob as the caller's tuning gives it.
uint64_t hostHash(const std::string& hostId);

}  // namespace weft
