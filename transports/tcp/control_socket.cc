#include "transports/tcp/control_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/common/error.h"
#include "transports/tcp/engine.h"
#include "transports/tcp/wire.h"

namespace weft::tcp {

bool writeAllWithin(int fd, const void* data, size_t bytes, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLOUT, 0};
    ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
  }
  return true;
}

int openControlSocket(const bootstrap::SocketAddress& address, const ControlParams& params,
                      const uint8_t* token, std::chrono::milliseconds timeout,
                      const std::string& who, bool* helloSent) {
  const int fd = ::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(Status::kSystemError, who + ": socket: " + std::strerror(errno));
  timeval tv{};
  tv.tv_sec = std::max<int64_t>(1, timeout.count() / 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));  // bounds the blocking connect
  if (::connect(fd, address.get(), address.length()) != 0) {
    const int err = errno;
    ::close(fd);
    fail(Status::kRemoteError, who + " at " + address.toString() + ": " + std::strerror(err));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  Engine::get().track(fd);
  Hello h;
  h.commHash = params.commHash;
  h.srcRank = params.rank;
  h.dstRank = params.peer;
  h.channel = static_cast<uint32_t>(params.channel);
  h.sockets = 1;
  h.slots = params.slots;
  h.slotBytes = params.slotBytes;
  std::memcpy(h.token, token, kTokenBytes);
  uint8_t bytes[kHelloBytes];
  encodeHello(h, bytes);
  *helloSent = writeAllWithin(fd, bytes, sizeof(bytes), timeout);
  return fd;
}

}  // namespace weft::tcp
