// The ib progress thread of a process (transports/remote/progress_thread.h): it moves every ib
// connection on without waiting for the executor. It completes connection setups (reads the
// peer's queue pair numbers, connects the queue pairs), posts messages that were written before
// the setup finished or while the send queue was full, returns credits, drains completions, and
// reads the control sockets (poison, goodbye, a peer that died). It sleeps in poll() on the
// completion channels, the control sockets and the devices' async-event descriptors, with a
// timeout, and a connection that moved rings its owning rank's doorbell, so a rank asleep on its
// doorbell wakes at once. Device events fail the connections they concern: a port that goes
// down fails every connection on it, naming the peer.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "src/common/per_process.h"
#include "transports/ib/verbs.h"
#include "transports/remote/progress_thread.h"

namespace weft::ib {

// What the thread asks of a connection about the device it uses; every client of the ib thread
// is one.
class DeviceClient {
 public:
  virtual ~DeviceClient() = default;
  virtual ibv_context* deviceContext() const = 0;
  virtual int portNumber() const = 0;
  virtual bool ownsQp(const ibv_qp* qp) const = 0;
  virtual bool ownsCq(const ibv_cq* cq) const = 0;
  // A device event concerns the connection: it fails naming `why`.
  virtual void failFromDevice(const std::string& why) = 0;
};

class ProgressThread : public remote::ProgressThread {
 public:
  // The process's thread, started on first use (and again in a forked child, which inherits
  // the memory but not the thread); never stopped.
  static ProgressThread& get();

 private:
  friend ProgressThread& ::weft::perProcess<ProgressThread>();
  ProgressThread();
  void onAdd(remote::ProgressClient* c) override;
  void watchOwnFds(std::vector<pollfd>* fds) override;
  void onOwnFds(const pollfd* fds, size_t count) override;
  void drainAsyncEvents(ibv_context* context);

  std::vector<ibv_context*> contexts_;  // devices whose async events are watched; only grows
};

}  // namespace weft::ib
