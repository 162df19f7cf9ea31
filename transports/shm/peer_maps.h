// Mappings of other processes' shared regions (their ncclMemAlloc'd memfds), opened through
// /proc/<pid>/fd and kept for reuse: a rendezvous message naming such memory is then read in
// place, with no copy into a slot and no system call per message.
#pragma once
#include <cstdint>

namespace weft::transport {

// What a sender says about the region holding a message's bytes (fits SlotInfo::inlineData).
struct MappedRef {
  uint64_t inode = 0;
  uint64_t base = 0;   // region start in the sender's address space
  uint64_t bytes = 0;  // region length
  int32_t fd = -1;     // the sender's descriptor of the memfd
  int32_t reserved = 0;
};

// This process's address of the peer's region, mapping it on first use, and a token that keeps
// the mapping alive until releasePeerRegion(token); nullptr when it cannot be opened
// (permissions, the file was replaced): the caller then falls back to a copy.
// `writable`: mapped for writing too (a sender helping its receiver copy writes into the
// receiver's region).
char* acquirePeerRegion(int pid, const MappedRef& ref, void** token, bool writable = false);
void releasePeerRegion(void* token);

}  // namespace weft::transport
