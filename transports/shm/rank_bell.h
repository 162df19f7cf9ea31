// Each rank's doorbell (src/common/doorbell.h) lives in shared memory, so peers of any transport
// on its host can ring it; and the names of a communicator's shared-memory segments.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "src/common/doorbell.h"

namespace weft::transport {

class RankBell {
 public:
  RankBell(uint64_t commHash, int rank);
  ~RankBell();
  Doorbell* bell() const { return bell_; }
  // Removes the name once every peer has mapped the bell, so nothing leaks if a process dies.
  void unlink();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Doorbell* bell_ = nullptr;
};

// Maps the doorbell of `rank`; the mapping lives as long as the returned shared pointer.
std::shared_ptr<Doorbell> openPeerBell(uint64_t commHash, int rank,
                                       std::chrono::milliseconds timeout);

// Segment names for a communicator: "/weft.<hash>.<what>".
std::string segmentName(uint64_t commHash, const std::string& what);

}  // namespace weft::transport
