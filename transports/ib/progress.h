// The ib progress thread of a process: it moves every ib connection on without waiting for the
// executor. It completes connection setups (reads the peer's queue pair numbers, connects the
// queue pairs), posts messages that were written before the setup finished or while the send
// queue was full, returns credits, drains completions, and reads the control sockets (poison,
// goodbye, a peer that died). It sleeps in poll() on the completion channels, the control
// sockets and the devices' async-event descriptors, with a timeout, and rings the owning rank's
// doorbell when a connection moved, so a rank asleep on its doorbell wakes at once. Device
// events fail the connections they concern: a port that goes down fails every connection on it,
// naming the peer.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "src/common/per_process.h"
#include "transports/ib/verbs.h"

namespace weft::ib {

class IbConnection;

class ProgressThread {
 public:
  // The process's thread, started on first use (and again in a forked child, which inherits
  // the memory but not the thread); never stopped.
  static ProgressThread& get();

  void add(IbConnection* c);
  // Once this returns the thread no longer touches `c`.
  void remove(IbConnection* c);
  // Gives every connection a turn soon (from any thread).
  void wake();
  // Tests: while held, the thread gives no connection a turn (the pass under way finishes).
  void holdForTesting(bool hold) {
    held_.store(hold);
    wake();
  }

 private:
  friend ProgressThread& ::weft::perProcess<ProgressThread>();
  ProgressThread();
  void loop();
  void drainAsyncEvents(ibv_context* context);

  std::mutex mu_;  // guards the lists; held during a pass over the connections
  std::vector<IbConnection*> conns_;
  std::vector<ibv_context*> contexts_;  // devices whose async events are watched
  std::atomic<bool> held_{false};
  int wake_ = -1;  // eventfd
  std::thread thread_;
};

}  // namespace weft::ib
