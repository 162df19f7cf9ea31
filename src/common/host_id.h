// The identity of this host, shared by the transports (which pair ranks on one host) and the
// topology (which tells hosts apart in a multi-host description).
#pragma once
#include <cstdint>
#include <string_view>

namespace weft {

// 64-bit FNV-1a of `text`.
uint64_t fnv1a(std::string_view text);

// fnv1a(hostname + boot id), with "/" + WEFT_HOST_ID appended to the text when that knob is set:
// network-namespace "hosts" share hostname and boot id, and WEFT_HOST_ID tells them apart. The
// knob is read on every call, since a forked test process may set it after its parent's first
// call.
uint64_t hostHash();

}  // namespace weft
