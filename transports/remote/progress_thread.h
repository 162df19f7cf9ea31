// The progress thread of a transport that sets up over a control socket (ib, a network plugin):
// one per transport and process, it moves every connection of that transport on without waiting
// for the executor, since setups, credits and plugins' own transfers move only when called. It
// sleeps in poll() on what the connections and the transport name (control sockets, completion
// channels, device events) and on a wake descriptor, with a timeout, and gives each connection a
// turn after every sleep. A connection that moved rings its owner's doorbell itself.
//
// Pacing: while a connection waits on something that moves only when called, or moved within
// the last busyAfterMove, the thread sleeps at most busyPoll; otherwise at most idlePoll (which
// bounds how late a setup deadline is seen).
#pragma once
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace weft::remote {

// What a progress thread drives. Its calls come under the thread's lock, one client at a time.
class ProgressClient {
 public:
  virtual ~ProgressClient() = default;
  // One turn; true if anything moved.
  virtual bool backgroundPass() = 0;
  // Whether it waits on something that moves only when called: the thread then comes back soon.
  virtual bool busy() = 0;
  // The descriptors whose input should end the thread's sleep.
  virtual void watchedFds(std::vector<int>* fds) = 0;
};

struct ProgressPacing {
  std::chrono::milliseconds busyPoll{100};
  std::chrono::milliseconds idlePoll{100};
  std::chrono::milliseconds busyAfterMove{0};
};

class ProgressThread {
 public:
  void add(ProgressClient* c);
  // Once this returns the thread no longer touches `c`.
  void remove(ProgressClient* c);
  // Gives every client a turn soon (from any thread).
  void wake();
  // Tests: while held, the thread gives no client a turn (the pass under way finishes).
  void holdForTesting(bool hold) {
    held_.store(hold);
    wake();
  }

 protected:
  // `transport` names it in errors. The thread starts in start(), which the transport's
  // constructor calls last, so that the hooks below never run on a half-made object.
  ProgressThread(const char* transport, ProgressPacing pacing);
  // Never destroyed (its transport's instance lives per process, src/common/per_process.h).
  virtual ~ProgressThread() = default;
  void start();

  // Hooks of the transport, called with the lock held. onAdd: a client joined. watchOwnFds:
  // before each sleep, the transport's own descriptors to watch. onOwnFds: after it, those same
  // entries with what poll() returned, before the clients' turns.
  virtual void onAdd(ProgressClient*) {}
  virtual void watchOwnFds(std::vector<pollfd>*) {}
  virtual void onOwnFds(const pollfd*, size_t) {}
  // The clients, for the hooks.
  const std::vector<ProgressClient*>& clients() const { return clients_; }

 private:
  void loop();

  const char* transport_;
  const ProgressPacing pacing_;
  std::mutex mu_;  // guards the list; held during a pass over the clients
  std::vector<ProgressClient*> clients_;
  std::atomic<bool> held_{false};
  int wake_ = -1;  // eventfd
  std::thread thread_;
};

}  // namespace weft::remote
