#include "src/bootstrap/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "src/common/error.h"

namespace weft::bootstrap {
namespace {

int pollTimeoutMs(const Deadline& deadline) {
  auto ms = deadline.remaining().count();
  // remaining() truncates: wait at least 1 ms while the deadline has not passed, never spin.
  if (ms <= 0) return deadline.expired() ? 0 : 1;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

// Waits for `events` on fd; returns the revents. Throws on timeout or cancellation.
short waitFor(int fd, short events, const Deadline& deadline, int cancelFd,
              const std::string& what) {
  for (;;) {
    pollfd fds[2] = {{fd, events, 0}, {cancelFd, POLLIN, 0}};
    int n = ::poll(fds, cancelFd >= 0 ? 2 : 1, pollTimeoutMs(deadline));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(Status::kSystemError, sysError(what + ": poll", errno));
    }
    // Cancellation wins over readiness so an aborted object stops promptly.
    if (cancelFd >= 0 && fds[1].revents) fail(Status::kInternalError, what + ": aborted");
    if (fds[0].revents) return fds[0].revents;
    if (deadline.expired()) fail(Status::kSystemError, what + ": timed out");
  }
}

bool isPeerGone(int err) {
  return err == ECONNREFUSED || err == ECONNRESET || err == EPIPE || err == EHOSTUNREACH ||
         err == ENETUNREACH || err == ETIMEDOUT || err == ECONNABORTED || err == EHOSTDOWN;
}

void setNoDelay(int fd) {
  int one = 1;
  // Bootstrap messages are small request/response exchanges; Nagle would only add latency.
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Socket newSocket(int family, const std::string& what) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(Status::kSystemError, sysError(what + ": socket", errno));
  return Socket(fd);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// SocketAddress

SocketAddress::SocketAddress(const sockaddr* sa, socklen_t length) {
  length = std::min<socklen_t>(length, sizeof(storage_));
  std::memcpy(&storage_, sa, length);
  length_ = length;
}

SocketAddress SocketAddress::parse(const std::string& text) {
  auto bad = [&](const char* why) -> SocketAddress {
    fail(Status::kInvalidArgument, "bad socket address '" + text + "': " + why);
  };
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return bad("expected [ipv6]:port");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) return bad("expected ip:port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string::npos) return bad("IPv6 addresses need brackets");
  }
  if (host.empty()) return bad("empty host");
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoi(port) > 65535)
    return bad("port must be a number in 0..65535");

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* result = nullptr;
  int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0) return bad(gai_strerror(rc));
  SocketAddress out;
  for (addrinfo* ai = result; ai; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET || ai->ai_family == AF_INET6) {
      out = SocketAddress(ai->ai_addr, ai->ai_addrlen);
      break;
    }
  }
  ::freeaddrinfo(result);
  if (out.empty()) return bad("no IPv4 or IPv6 address");
  return out;
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

std::string SocketAddress::toString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    auto* sin = reinterpret_cast<const sockaddr_in*>(&storage_);
    ::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    ::inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof(buf));
    std::string host = buf;
    if (sin6->sin6_scope_id) host += "%" + std::to_string(sin6->sin6_scope_id);
    return "[" + host + "]:" + std::to_string(port());
  }
  return "<none>";
}

bool SocketAddress::operator==(const SocketAddress& other) const {
  if (family() != other.family() || port() != other.port()) return false;
  if (family() == AF_INET)
    return std::memcmp(&reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr,
                       &reinterpret_cast<const sockaddr_in*>(&other.storage_)->sin_addr,
                       sizeof(in_addr)) == 0;
  if (family() == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&storage_);
    auto* b = reinterpret_cast<const sockaddr_in6*>(&other.storage_);
    return std::memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(in6_addr)) == 0 &&
           a->sin6_scope_id == b->sin6_scope_id;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// EventFd

EventFd::EventFd() {
  fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd_ < 0) fail(Status::kSystemError, sysError("bootstrap: eventfd", errno));
}

EventFd::~EventFd() {
  if (fd_ >= 0) ::close(fd_);
}

void EventFd::signal() {
  uint64_t one = 1;
  // EAGAIN only when the counter is saturated, which still leaves it readable.
  while (::write(fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void EventFd::drain() {
  uint64_t value;
  while (::read(fd_, &value, sizeof(value)) < 0 && errno == EINTR) {
  }
}

// ---------------------------------------------------------------------------------------------
// Socket

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::resetOnClose() {
  linger lg{1, 0};
  if (fd_ >= 0) (void)::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

Socket Socket::listen(const SocketAddress& addr, int backlog) {
  std::string what = "bootstrap: listen on " + addr.toString();
  Socket s = newSocket(addr.family(), what);
  int one = 1;
  if (::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
    fail(Status::kSystemError, sysError(what + ": SO_REUSEADDR", errno));
  if (::bind(s.fd(), addr.get(), addr.length()) != 0)
    fail(Status::kSystemError, sysError(what + ": bind", errno));
  if (::listen(s.fd(), backlog) != 0)
    fail(Status::kSystemError, sysError(what + ": listen", errno));
  return s;
}

Socket Socket::connect(const SocketAddress& addr, const Deadline& deadline, int cancelFd,
                       const std::string& what, bool retryRefused) {
  int backoffMs = 5;
  for (;;) {
    Socket s = newSocket(addr.family(), what);
    int err = 0;
    if (::connect(s.fd(), addr.get(), addr.length()) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) {
        waitFor(s.fd(), POLLOUT, deadline, cancelFd, what + ": connect");
        socklen_t len = sizeof(err);
        if (::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    // A loopback connect to a port nobody listens on can, rarely, connect the socket to itself.
    if (err == 0 && s.localAddress() == addr) err = ECONNREFUSED;
    if (err == 0) {
      setNoDelay(s.fd());
      return s;
    }
    if (retryRefused && err == ECONNREFUSED && !deadline.expired()) {
      pollfd pfd = {cancelFd, POLLIN, 0};
      int waitMs = std::min(backoffMs, pollTimeoutMs(deadline));
      if (::poll(&pfd, cancelFd >= 0 ? 1 : 0, waitMs) > 0)
        fail(Status::kInternalError, what + ": aborted");
      backoffMs = std::min(backoffMs * 2, 200);
      continue;
    }
    if (retryRefused && err == ECONNREFUSED) fail(Status::kSystemError, what + ": timed out");
    fail(isPeerGone(err) ? Status::kRemoteError : Status::kSystemError,
         sysError(what + ": connect", err));
  }
}

Socket Socket::tryAccept(SocketAddress* peer) const {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      setNoDelay(fd);
      if (peer) *peer = SocketAddress(reinterpret_cast<sockaddr*>(&ss), len);
      return Socket(fd);
    }
    // Connections that died in the backlog are skipped; anything else ends this round.
    if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
    return Socket();
  }
}

SocketAddress Socket::localAddress() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    fail(Status::kSystemError, sysError("bootstrap: getsockname", errno));
  return SocketAddress(reinterpret_cast<sockaddr*>(&ss), len);
}

void Socket::sendAll(const void* data, size_t bytes, const Deadline& deadline, int cancelFd,
                     const std::string& what, int flags) const {
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd_, p, bytes, MSG_NOSIGNAL | flags);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      waitFor(fd_, POLLOUT, deadline, cancelFd, what);
      continue;
    }
    int err = n < 0 ? errno : EPIPE;
    if (isPeerGone(err)) fail(Status::kRemoteError, what + ": connection closed by peer");
    fail(Status::kSystemError, sysError(what + ": send", err));
  }
}

void Socket::recvAll(void* data, size_t bytes, const Deadline& deadline, int cancelFd,
                     const std::string& what) const {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd_, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) fail(Status::kRemoteError, what + ": connection closed by peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      waitFor(fd_, POLLIN, deadline, cancelFd, what);
      continue;
    }
    if (isPeerGone(errno)) fail(Status::kRemoteError, sysError(what + ": connection lost", errno));
    fail(Status::kSystemError, sysError(what + ": recv", errno));
  }
}

Socket::Io Socket::readSome(void* data, size_t bytes, size_t* got, int* err) const {
  for (;;) {
    ssize_t n = ::recv(fd_, data, bytes, 0);
    if (n > 0) {
      *got += static_cast<size_t>(n);
      return Io::kProgress;
    }
    if (n == 0) return bytes == 0 ? Io::kProgress : Io::kEof;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kWouldBlock;
    if (err) *err = errno;
    return Io::kError;
  }
}

}  // namespace weft::bootstrap
