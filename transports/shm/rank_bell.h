// Each rank's doorbell (src/common/doorbell.h) lives in shared memory, so peers of any transport
// on its host can ring it.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "src/common/doorbell.h"

namespace weft::transport {

class RankBell {
 public:
  // Removes what dead processes left in /dev/shm (segment_names.h), then creates the bell.
  RankBell(uint64_t commHash, int rank);
  // Removes what dead processes left, this communicator's peers among them (a rank killed
  // before it unlinked its bell).
  ~RankBell();
  Doorbell* bell() const { return bell_; }
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
