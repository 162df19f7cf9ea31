// Small RAII wrappers over TCP sockets for the bootstrap. Every socket is non-blocking and
// close-on-exec; every blocking operation is a poll() loop bounded by a Deadline and interruptible
// through a cancel descriptor (an EventFd), so no bootstrap wait can hang.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "src/common/clock.h"

namespace weft::bootstrap {

// An IPv4 or IPv6 socket address.
class SocketAddress {
 public:
  SocketAddress() = default;
  SocketAddress(const sockaddr* sa, socklen_t length);

  // Parses "ip:port", "[ipv6]:port" (an IPv6 scope may follow '%') or "host:port".
  // Throws Error(kInvalidArgument) on malformed text or an unresolvable host.
  static SocketAddress parse(const std::string& text);

  bool empty() const { return length_ == 0; }
  int family() const { return empty() ? AF_UNSPEC : storage_.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t length() const { return length_; }

  // "1.2.3.4:5", "[::1]:5" or "[fe80::1%2]:5".
  std::string toString() const;

  bool operator==(const SocketAddress& other) const;

 private:
  sockaddr_storage storage_{};
  socklen_t length_ = 0;
};

// A counter eventfd. Used two ways: as a latch that is signalled once and never drained (every
// poll() that includes it wakes, now and later), or as a drained wake-up for one poller.
class EventFd {
 public:
  EventFd();
  ~EventFd();
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;

  int fd() const { return fd_; }
  void signal();
  void drain();

 private:
  int fd_ = -1;
};

class Socket {
 public:
  enum class Io { kProgress, kWouldBlock, kEof, kError };

  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void close();
  // Shuts both directions down but keeps the descriptor, so pollers and writers wake safely.
  void shutdown();
  // Makes close() reset the connection (SO_LINGER 0): no TIME_WAIT is left behind, and data
  // not yet delivered is dropped.
  void resetOnClose();

  // A listening socket on `addr` (port 0 picks an ephemeral port) with SO_REUSEADDR.
  // Throws Error(kSystemError) naming the address.
  static Socket listen(const SocketAddress& addr, int backlog = 512);

  // Connects within `deadline` and sets TCP_NODELAY. `what` names the peer in messages. With
  // retryRefused, a refused connection is retried until the deadline (the listener may not exist
  // yet). Throws kRemoteError when the peer refuses or is unreachable, kSystemError on timeout,
  // kInternalError when `cancelFd` is signalled.
  static Socket connect(const SocketAddress& addr, const Deadline& deadline, int cancelFd,
                        const std::string& what, bool retryRefused = false);

  // Accepts one pending connection (non-blocking, close-on-exec, TCP_NODELAY), or returns an
  // invalid socket when none is pending.
  Socket tryAccept(SocketAddress* peer) const;

  SocketAddress localAddress() const;

  // Write/read exactly `bytes` within `deadline`. Throw kRemoteError when the peer closes or
  // resets the connection, kSystemError on timeout or a failed syscall, kInternalError when
  // `cancelFd` is signalled; the message starts with `what`. `flags` adds e.g. MSG_MORE.
  void sendAll(const void* data, size_t bytes, const Deadline& deadline, int cancelFd,
               const std::string& what, int flags = 0) const;
  void recvAll(void* data, size_t bytes, const Deadline& deadline, int cancelFd,
               const std::string& what) const;

  // One non-blocking read of at most `bytes`; adds the count read to *got. On kError, *err holds
  // errno.
  Io readSome(void* data, size_t bytes, size_t* got, int* err) const;

 private:
  int fd_ = -1;
};

}  // namespace weft::bootstrap
