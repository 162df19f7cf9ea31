// The net plugin progress thread of a process, NCCL's proxy thread in small: it calls the
// plugin for every plugin connection without waiting for the executor (setup, isend, test),
// since many plugins move data only inside their calls, and rings the owning rank's doorbell
// when a connection moved. It sleeps in poll() on the control sockets: briefly while a
// connection has just moved or waits on the plugin, longer while all are idle.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "src/common/per_process.h"

namespace weft::netplugin {

class PluginConnection;

class ProgressThread {
 public:
  // The process's thread, started on first use (and again in a forked child, which inherits
  // the memory but not the thread); never stopped.
  static ProgressThread& get();

  void add(PluginConnection* c);
  // Once this returns the thread no longer touches `c`.
  void remove(PluginConnection* c);
  // Gives every connection a turn soon (from any thread).
  void wake();

 private:
  friend ProgressThread& ::weft::perProcess<ProgressThread>();
  ProgressThread();
  void loop();

  std::mutex mu_;  // guards the list; held during a pass over the connections
  std::vector<PluginConnection*> conns_;
  int wake_ = -1;  // eventfd
  std::thread thread_;
};

}  // namespace weft::netplugin
