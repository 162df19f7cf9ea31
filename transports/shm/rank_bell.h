// Each rank's doorbell (src/common/doorbell.h) lives in shared memory, so peers of any transport
// on its host can ring it. Next to it lies the rank's failure word: a rank that fails or is
// aborted says so there, and its peers on the host read it while they wait on it, so they learn
// of the failure at once even on links the failed rank never opened.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "src/common/doorbell.h"

namespace weft::transport {

// What a rank's failure word holds: 0 while it is healthy, else the rank whose failure made it
// give up, plus one (itself, or a rank it learnt of through its links).
inline int failureCause(uint32_t word) { return word == 0 ? -1 : static_cast<int>(word) - 1; }
inline uint32_t failureWord(int causeRank) { return static_cast<uint32_t>(causeRank) + 1; }

// The shared block of one rank: its doorbell, then its failure word.
struct RankBellBlock {
  Doorbell bell;
  std::atomic<uint32_t> failure{0};
};
static_assert(std::is_standard_layout_v<RankBellBlock> && offsetof(RankBellBlock, bell) == 0,
              "a RankBellBlock is reached from its doorbell's address");

// The failure word next to a doorbell that RankBell or openPeerBell made (no other).
inline std::atomic<uint32_t>* failureWordOf(Doorbell* bell) {
  return &reinterpret_cast<RankBellBlock*>(bell)->failure;
}

class RankBell {
 public:
  // Removes what dead processes left in /dev/shm (segment_names.h), then creates the bell.
  RankBell(uint64_t commHash, int rank);
  // Removes what dead processes left, this communicator's peers among them (a rank killed
  // before it unlinked its bell).
  ~RankBell();
  Doorbell* bell() const { return bell_; }
  // Records that this rank failed because of `causeRank` (the first cause sticks).
  void markFailed(int causeRank);
  // Removes the name once every peer has mapped the bell, so nothing leaks if a process dies.
  void unlink();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Doorbell* bell_ = nullptr;
};

// Maps the doorbell of `rank` (process `pid`); the mapping lives as long as the returned shared
// pointer.
std::shared_ptr<Doorbell> openPeerBell(uint64_t commHash, int rank, int pid,
                                       std::chrono::milliseconds timeout);

}  // namespace weft::transport
