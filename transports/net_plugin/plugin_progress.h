// The net plugin progress thread of a process (transports/remote/progress_thread.h), NCCL's
// proxy thread in small: it calls the plugin for every plugin connection without waiting for the
// executor (setup, isend, test), since many plugins move data only inside their calls, and a
// connection that moved rings its owning rank's doorbell. It sleeps in poll() on the control
// sockets: briefly while a connection has just moved or waits on the plugin, longer while all
// are idle.
#pragma once
#include "src/common/per_process.h"
#include "transports/remote/progress_thread.h"

namespace weft::netplugin {

class ProgressThread : public remote::ProgressThread {
 public:
  // The process's thread, started on first use (and again in a forked child, which inherits
  // the memory but not the thread); never stopped.
  static ProgressThread& get();

 private:
  friend ProgressThread& ::weft::perProcess<ProgressThread>();
  ProgressThread();
};

}  // namespace weft::netplugin
