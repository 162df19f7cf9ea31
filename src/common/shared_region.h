// Registry of this process's memory that other processes on the host may map: ncclMemAlloc
// returns memfd-backed pages, and a peer maps the same file to read them in place (zero-copy).
#pragma once
#include <cstddef>
#include <cstdint>

namespace weft {

struct SharedRegion {
  int fd = -1;  // the memfd, open for the region's lifetime
  size_t bytes = 0;
  void* base = nullptr;
  uint64_t inode = 0;  // identifies the file to a peer that opens it through /proc
};

void addSharedRegion(const SharedRegion& region);
// Removes the region starting at `base`; false if there is none.
bool removeSharedRegion(const void* base, SharedRegion* out);
// The region containing [ptr, ptr+bytes), if any.
bool findSharedRegion(const void* ptr, size_t bytes, SharedRegion* out);

// Accesses every page of a new mapping once. Populated page-table entries are not yet used
// ones: under a hypervisor that shadows the guest's page tables the first access through each
// traps, and a collective reading a fresh window of a peer's region would pay those traps inside
// the call, several times its own cost (see perf/README.md, "First touches").
// A writable mapping is touched with an atomic add of zero: it marks the page written without
// changing a byte, whatever another process writes there meanwhile.
void touchPages(void* p, size_t bytes, bool writable);

}  // namespace weft
