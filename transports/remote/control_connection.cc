#include "transports/remote/control_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "src/common/error.h"
#include "src/common/log.h"
#include "transports/tcp/published.h"

namespace weft::remote {

// Where the tcp engine leaves the control socket the peer opened (passive side) until the
// connection takes it on its next turn; closes it if the connection is gone by then.
class ControlDrop : public tcp::SocketSink {
 public:
  explicit ControlDrop(ProgressThread& thread) : thread_(thread) {}
  ~ControlDrop() override {
    if (fd_ >= 0) {
      tcp::Engine::get().untrack(fd_);
      ::close(fd_);
    }
  }

  void attach(const tcp::Hello&, int fd) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ >= 0) {  // the peer opens one control socket per connection
      tcp::Engine::get().untrack(fd);
      ::close(fd);
      return;
    }
    fd_ = fd;
    thread_.wake();  // the connection takes it on the progress thread
  }

  // The socket, or -1 while none has arrived.
  int take() {
    std::lock_guard<std::mutex> lock(mu_);
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  ProgressThread& thread_;
  std::mutex mu_;
  int fd_ = -1;
};

ConnectionParams connectionParamsFor(const transport::ConnectContext& ctx, int peer, int channel) {
  ConnectionParams p;
  p.commHash = ctx.commHash;
  p.rank = ctx.rank;
  p.peer = peer;
  p.channel = channel;
  p.slots = ctx.slots;
  p.slotBytes = ctx.slotBytes;
  p.timeout = ctx.timeout.count() > 0 ? ctx.timeout : std::chrono::milliseconds(30000);
  p.bell = ctx.selfBell;
  return p;
}

ControlConnection::ControlConnection(const ConnectionParams& params, ControlProtocol protocol,
                                     ProgressThread& thread)
    : params_(params),
      protocol_(std::move(protocol)),
      thread_(thread),
      peerSetup_(protocol_.setupBytes),
      setupDeadline_(std::chrono::steady_clock::now() + params.timeout) {}

ControlConnection::~ControlConnection() {
  leaveProgressThread();  // already left by the transport's destructor; kept for its safety
  if (fd_ >= 0) {
    tcp::Engine::get().untrack(fd_);
    ::close(fd_);
  }
}

std::string ControlConnection::peerName() const {
  return "rank " + std::to_string(params_.peer) + " (" + protocol_.link + ", channel " +
         std::to_string(params_.channel) + ")";
}

void ControlConnection::fail(const std::string& why) {
  if (failed_.exchange(true)) return;
  error_ = std::string(protocol_.transport) + ": " + peerName() + ": " + why;
  ++events_;
  WEFT_WARN(NET, "%s", error_.c_str());
}

bool ControlConnection::failIfSetupLate() {
  if (std::chrono::steady_clock::now() <= setupDeadline_) return false;
  fail("did not complete the connection setup within " + std::to_string(params_.timeout.count()) +
       " ms (is the peer alive?)");
  return true;
}

void ControlConnection::start(const bootstrap::SocketAddress& peerAddress,
                              const uint8_t* peerToken) {
  bool helloSent = false;
  const int fd = tcp::openControlSocket(
      peerAddress, params_, peerToken, params_.timeout,
      std::string(protocol_.transport) + ": control connection to " + peerName(), &helloSent);
  std::lock_guard<std::mutex> lock(mu_);
  fd_ = fd;
  if (!helloSent) fail("could not send the hello");
  sendSetup();
}

std::shared_ptr<tcp::SocketSink> ControlConnection::awaitPeer() {
  auto drop = std::make_shared<ControlDrop>(thread_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    drop_ = drop;
  }
  thread_.wake();
  return drop;
}

void ControlConnection::join(const transport::ConnectContext& ctx, int peer, int channel) {
  const tcp::Published theirs = tcp::publishedBy((*ctx.peers)[peer]);
  if (ctx.rank < peer) {
    start(bootstrap::SocketAddress(reinterpret_cast<const sockaddr*>(theirs.addr), theirs.addrLen),
          theirs.token);
    return;
  }
  auto endpoint = tcp::Engine::get().findEndpoint(ctx.commHash, ctx.rank);
  if (!endpoint)
    weft::fail(Status::kInternalError, std::string(protocol_.transport) + ": rank " +
                                           std::to_string(ctx.rank) +
                                           " has no tcp endpoint (publish() was not called)");
  endpoint->claim(peer, channel, awaitPeer());
}

void ControlConnection::sendSetup() {
  if (setupSent_ || fd_ < 0) return;
  const std::vector<uint8_t> message = ownSetup();
  if (!tcp::writeAllWithin(fd_, message.data(), message.size(), params_.timeout))
    fail("could not send " + std::string(protocol_.setupWhat) + ": " + std::strerror(errno));
  setupSent_ = true;
}

bool ControlConnection::takeControlSocket() {
  if (fd_ < 0 && drop_) {
    fd_ = drop_->take();
    if (fd_ >= 0) sendSetup();
  }
  return fd_ >= 0;
}

void ControlConnection::readControl() {
  if (fd_ < 0 || controlClosed_) return;
  for (;;) {
    // The setup message first (never read past it), then control bytes.
    uint8_t buf[256];
    const size_t setupLeft = protocol_.setupBytes - peerSetupGot_;
    const ssize_t n = ::recv(fd_, buf, setupLeft > 0 ? setupLeft : sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      ++events_;
      if (setupLeft > 0) {
        std::memcpy(peerSetup_.data() + peerSetupGot_, buf, static_cast<size_t>(n));
        peerSetupGot_ += static_cast<size_t>(n);
        if (peerSetupIn() && !onPeerSetup(peerSetup_.data())) return;
      } else {
        control_.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
        if (!parseControl()) return;
      }
      continue;
    }
    if (n == 0) controlClosed_ = true;  // nothing more to read: the thread stops watching
    if (n == 0 && !goodbye_.load())
      fail(peerSetupIn() ? "closed its connection (process exited?)"
                         : "closed the control connection during setup (process exited?)");
    else if (n < 0 && errno != EAGAIN && errno != EINTR)
      fail("control connection: " + std::string(std::strerror(errno)));
    return;
  }
}

bool ControlConnection::parseControl() {
  while (!control_.empty()) {
    const char c = control_[0];
    if (c == kPoisoned) {
      poisoned_.store(true, std::memory_order_release);
      control_.erase(0, 1);
    } else if (c == kGoodbye) {
      if (control_.size() < 1 + protocol_.goodbyeCountBytes) break;
      uint64_t count = 0;
      std::memcpy(&count, control_.data() + 1, protocol_.goodbyeCountBytes);
      peerTotal_.store(count, std::memory_order_release);
      goodbye_.store(true, std::memory_order_release);
      control_.erase(0, 1 + protocol_.goodbyeCountBytes);
    } else if (onControlByte(c)) {
      control_.erase(0, 1);
    } else {
      fail("sent a garbage control byte");
      return false;
    }
  }
  return true;
}

bool ControlConnection::sendControlByte(char what) {
  return fd_ < 0 || tcp::writeAllWithin(fd_, &what, 1, std::chrono::milliseconds(1000));
}

void ControlConnection::closeControl(uint64_t count, std::chrono::milliseconds timeout) {
  if (fd_ < 0) return;
  char bye[1 + sizeof(uint64_t)] = {kGoodbye};
  std::memcpy(bye + 1, &count, protocol_.goodbyeCountBytes);
  (void)tcp::writeAllWithin(fd_, bye, 1 + protocol_.goodbyeCountBytes, timeout);
  tcp::Engine::get().untrack(fd_);
  ::close(fd_);
  fd_ = -1;
}

Status ControlConnection::health(std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  progress();
  if (failed_.load()) {
    *why = error_;
    return Status::kRemoteError;
  }
  if (poisoned_.load()) {
    *why = std::string(protocol_.transport) + ": " + peerName() + " poisoned the connection";
    return Status::kRemoteError;
  }
  return Status::kSuccess;
}

bool ControlConnection::poisoned() const {
  if (poisoned_.load(std::memory_order_acquire)) return true;
  // The peer's poison arrives on the control socket: read it now rather than wait for the
  // progress thread's next turn. Only once the peer's setup message is in: the transport acts
  // on that message where it moves its setup on, never inside this check.
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (lock.owns_lock() && peerSetupIn()) const_cast<ControlConnection*>(this)->readControl();
  return poisoned_.load(std::memory_order_acquire);
}

void ControlConnection::poison() {
  std::lock_guard<std::mutex> lock(mu_);
  if (poisoned_.exchange(true)) return;
  if (!sendControlByte(kPoisoned)) fail("control socket write failed");
}

bool ControlConnection::backgroundPass() {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.load()) return false;
  const uint64_t before = events_;
  backgroundTurn();
  const bool moved = events_ != before;
  if (moved && params_.bell) params_.bell->ring();
  return moved;
}

void ControlConnection::watchedFds(std::vector<int>* fds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.load()) return;
  transportFds(fds);
  if (fd_ >= 0 && !controlClosed_) fds->push_back(fd_);
}

void ControlConnection::sendControlBytesForTesting(const std::string& bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) (void)!::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
}

}  // namespace weft::remote
