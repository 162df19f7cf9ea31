// Names of the shared-memory segments Weft creates under /dev/shm, and the sweep that removes
// those a dead process left behind.
//
// A name carries every process that uses the segment: "/weft.<comm hash>.<what>.ns<pid namespace
// inode>.pid<pid>[.pid<pid>]". A segment any of whose processes has died is of no use to anyone
// (a rank's doorbell is its own, a pair block serves exactly its two ranks), so any process of
// the same pid namespace may remove it. The names are unlinked as soon as every user has mapped
// them; the sweep covers a process killed before that point.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace weft::transport {

// "/weft.<hash>.<what>.ns<this process's pid namespace>.pid<p>..." for the processes `pids`.
std::string segmentName(uint64_t commHash, const std::string& what, const std::vector<int>& pids);

// What a segment name says about its users; `valid` false for names Weft did not make.
struct SegmentOwners {
  bool valid = false;
  uint64_t pidNamespace = 0;
  std::vector<int> pids;
};
// Parses a directory entry of /dev/shm (no leading slash). Any bytes may come in.
SegmentOwners parseSegmentName(const std::string& entry);

// This process's pid namespace (the inode of /proc/self/ns/pid), 0 when unknown.
uint64_t pidNamespaceId();

// True when `pid` has exited or is exiting (a zombie, or past the start of its exit: its
// sockets may already be closed while /proc still lists it).
bool processGone(int pid);

// Unlinks every Weft segment in /dev/shm of this pid namespace one of whose processes is gone;
// returns how many it removed.
int removeStaleSegments();

}  // namespace weft::transport
