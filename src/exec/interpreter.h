// The interpreter: runs one rank's lowered Work as a non-blocking state machine. poll() moves
// every lane as far as its links allow and returns; it never waits (waiting is wait.cc's).
// Each lane is at one step; a step begins once its dependencies are done, then moves its range
// a slice at a time through its links in the transfer mode lowering allowed (lower.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/exec/lower.h"

namespace weft::exec {

// Why a poll could not continue; filled only when a step stalls.
struct Stall {
  int lane = -1;
  transport::Connection* waitingOn = nullptr;
  int peer = -1;
};

struct LaneState {
  size_t step = 0;
  uint64_t done = 0;  // elements of the current step already processed
  bool begun = false;
  size_t landingEnd = 0;  // steps before this one were considered for a landing offer
  uint64_t msgAt = 0;     // bytes of the message being received taken by earlier slices
  transport::Connection* send = nullptr;
  transport::Connection* recv = nullptr;
};

class Interpreter {
 public:
  // Starts on `w`, lowering it unless it was lowered under the same stamp. The interpreter and
  // its buffers are reused from run to run.
  void start(Work& w);
  // Advances every lane as far as it can; returns true if anything moved. On an error returns
  // with *st set; on a stall fills *stall.
  bool poll(Status* st, std::string* why, Stall* stall);
  // Done when every lane finished and every peer finished reading this rank's memory.
  bool complete() { return remaining_ == 0 && drained(); }
  // Whether this Work lets its rank keep a shared core while it waits (wait.cc).
  bool holdsCore() const { return lowered_.holdsCore; }

  // Calls f(connection, peer, receiving) for every link a lane's begun step waits on and every
  // peer still reading our messages, until f returns false; returns whether all passed. A
  // stalled poll names one of them only, and a peer that died on another must not go unnoticed.
  template <class F>
  bool everyAwaitedLink(F&& f) const {
    for (size_t l = 0; l < lanes_.size(); ++l) {
      const LaneState& ls = lanes_[l];
      if (!ls.begun) continue;
      const plan::Step& s = w_->program->lanes[l].steps[ls.step];
      if (ls.send && !f(ls.send, s.sendPeer, false)) return false;
      if (ls.recv && !f(ls.recv, s.recvPeer, true)) return false;
    }
    for (const auto& o : outstanding_)
      if (!f(o.conn, o.peer, false)) return false;
    return true;
  }

 private:
  // A by-reference message still being read by its receiver: the memory must not change
  // meanwhile.
  struct Outstanding {
    transport::Connection* conn;
    transport::ReferenceSends* refs;  // conn's
    transport::PeerMemory* memory;    // conn's, or null
    uint64_t count;                   // consumed(count) means the receiver is done
    const char* begin;
    const char* end;
    int peer;
  };

  char* ptr(const plan::Ref& ref, uint64_t extra) const {
    return w_->buffers[ref.buffer] + (ref.offset + extra) * lowered_.elemSize;
  }
  const Scalar* scale(const LoweredStep& l) const { return l.scaled ? &w_->scalar : nullptr; }
  bool depsDone(const plan::Step& s) const;
  bool drained();
  bool assistReaders();
  bool busy(const char* b, const char* e);
  void sendByReference(LaneState& ls, const LoweredStep& low, int peer, const char* p, size_t bytes,
                       uint32_t tag);
  int advance(int lane, LaneState& ls, const plan::Step& s, Status* st, std::string* why,
              Stall* stall);
  void beginStep(int lane, LaneState& ls, const plan::Step& s);
  int localStep(LaneState& ls, const plan::Step& s, const LoweredStep& low);
  int moveSlice(int lane, LaneState& ls, const plan::Step& s, const LoweredStep& low, Status* st,
                std::string* why, Stall* stall);
  void offerLanding(int lane, LaneState& ls);
  void* bounceFor(size_t bytes);
  static int finishStep(LaneState& ls);

  Work* w_ = nullptr;
  Lowered lowered_;
  std::vector<LaneState> lanes_;
  std::vector<Outstanding> outstanding_;
  std::vector<char> bounce_;
  size_t remaining_ = 0;  // lanes not yet finished
};

// Slices this process's runs have stored straight into a receiver's landing so far (for tests
// and diagnostics: whether offers are taken up).
uint64_t landedSlices();

}  // namespace weft::exec
