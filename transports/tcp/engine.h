// The tcp progress engine of one process: worker threads, each with an epoll set, that move
// bytes between sockets and connection slots; one listening socket that every communicator of
// the process shares; and the table of endpoints (one per communicator rank) that accepted
// sockets are handed to once their hello checks out. Created on first use, re-created in a
// forked child (which inherits the memory but not the threads), never destroyed.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "src/bootstrap/socket.h"
#include "src/common/tuning.h"
#include "transports/tcp/wire.h"

namespace weft::tcp {

// What takes the sockets that peers open to an endpoint (a Link): the engine accepts them and
// hands each over, without knowing more of the link.
class SocketSink {
 public:
  virtual ~SocketSink() = default;
  // A socket whose hello named this sink's (peer, channel); the sink owns `fd` from now on.
  virtual void attach(const Hello& hello, int fd) = 0;
};

// Something a worker drives: called on the worker's thread only.
class Handler {
 public:
  virtual ~Handler() = default;
  virtual void onEvent(uint32_t events) = 0;  // epoll events of its descriptor
  virtual void onKick() {}                    // Worker::kick() asked for a turn
  virtual void onTick(uint64_t nowNs) {}      // about every 100 ms, if registered with ticks
};

class Worker {
 public:
  explicit Worker(int index);
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Watches `fd` (edge-triggered in, out, hang-up) for `h`; returns the handler's id.
  uint64_t add(int fd, std::shared_ptr<Handler> h, bool ticks = false);
  // Stops watching; events already collected for the id are dropped. The descriptor stays open.
  // Called from another thread, it also waits (up to kRemoveWait) until the handler's turn in
  // progress, if any, is over: once it returns the handler never runs again, so the caller may
  // free what the handler touches (a link's rank doorbell).
  void remove(uint64_t id, int fd);
  // Gives handler `id` a turn on the worker thread soon (from any thread).
  void kick(uint64_t id);

  int index() const { return index_; }
  // After fork: closes this copy's descriptors without touching locks or threads.
  void abandon();

 private:
  void loop();
  // Runs `fn` on the handler `id` (worker thread only), marking it busy for remove().
  template <class Fn>
  void runHandler(uint64_t id, Fn&& fn);

  int index_;
  int epoll_ = -1;
  int wake_ = -1;  // eventfd
  std::mutex mu_;
  uint64_t nextId_ = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Handler>> handlers_;
  std::vector<uint64_t> ticking_;
  std::vector<uint64_t> kicks_;
  std::atomic<bool> wakePending_{false};
  uint64_t running_ = 0;          // the handler whose turn is in progress (0: none), under mu_
  std::condition_variable idle_;  // notified when a turn ends
  std::thread thread_;
  std::thread::id threadId_;
};

// One rank of one communicator, as seen by peers that connect to it.
class Endpoint {
 public:
  Endpoint(uint64_t commHash, int rank);
  ~Endpoint();
  uint64_t commHash() const { return commHash_; }
  int rank() const { return rank_; }
  const uint8_t* token() const { return token_; }

  // A socket whose hello named this endpoint and carried its token. Attaches it to the link of
  // (srcRank, channel) if this side already connected, else keeps it for claim().
  void offer(const Hello& hello, int fd);
  // This side's connect() of (peer, channel): takes the sockets that arrived first.
  void claim(int peer, int channel, const std::shared_ptr<SocketSink>& link);

 private:
  uint64_t commHash_;
  int rank_;
  uint8_t token_[kTokenBytes];
  std::mutex mu_;
  std::map<std::pair<int, int>, std::weak_ptr<SocketSink>> links_;
  struct Parked {
    Hello hello;
    int fd;
  };
  std::map<std::pair<int, int>, std::vector<Parked>> parked_;
  size_t parkedCount_ = 0;
};

class Engine {
 public:
  // The engine of this process (a new one in a forked child).
  static Engine& get();

  size_t workerCount() const { return workers_.size(); }
  Worker& worker(size_t i) { return *workers_[i % workers_.size()]; }

  // The address every communicator of this process publishes. The first call starts the
  // listener and the progress threads with the calling communicator's settings (interface,
  // address family, threads, socket buffers): the engine is one per process, like its port.
  // Throws Error on failure.
  bootstrap::SocketAddress listenAddress(const Tuning& tuning);
  // SO_SNDBUF / SO_RCVBUF of the engine's sockets (0: the kernel's autotuning).
  int socketBuffer() const { return sockBuf_; }

  std::shared_ptr<Endpoint> openEndpoint(uint64_t commHash, int rank);
  std::shared_ptr<Endpoint> findEndpoint(uint64_t commHash, int rank);
  void closeEndpoint(const Endpoint* e);

  // A hello arrived on an accepted socket: hands `fd` to its endpoint or closes it.
  void offer(const Hello& hello, int fd);

  // Descriptors this process opened for tcp (closed in a forked child).
  void track(int fd);
  void untrack(int fd);

  // A serial number for spreading links over workers.
  uint64_t nextLinkSerial() { return linkSerial_.fetch_add(1); }

 private:
  Engine();
  void abandon();

  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<int> sockBuf_{0};
  std::mutex mu_;
  int listenFd_ = -1;
  bootstrap::SocketAddress listenAddress_;
  std::map<std::pair<uint64_t, int>, std::weak_ptr<Endpoint>> endpoints_;
  std::mutex fdMu_;
  std::vector<int> fds_;
  std::atomic<uint64_t> linkSerial_{0};
};

// Sets TCP_NODELAY, and the socket buffers to `bufferBytes` where it is positive.
void tuneSocket(int fd, int bufferBytes);

}  // namespace weft::tcp
