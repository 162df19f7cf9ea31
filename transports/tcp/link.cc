#include "transports/tcp/link.h"

#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "src/common/clock.h"
#include "src/common/log.h"
#include "transports/shm/segment_names.h"

namespace weft::tcp {
namespace {

constexpr uint32_t kKick = 0;  // service() events for a turn that no epoll event asked for
constexpr int kMaxIov = 64;

// A link socket as the worker sees it.
class SocketHandler : public Handler {
 public:
  SocketHandler(std::shared_ptr<Link> link, int index) : link_(std::move(link)), index_(index) {}
  void onEvent(uint32_t events) override { link_->service(index_, events); }
  void onKick() override { link_->service(index_, kKick); }

 private:
  std::shared_ptr<Link> link_;
  int index_;
};

bool wouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

// Ends a socket of a link this side gave up on with a reset rather than a FIN: the peer reads
// a FIN at a frame boundary as a goodbye (a finished rank's destroy sends one), a reset as the
// failure it is. connect(AF_UNSPEC) disconnects the socket and sends the reset while the
// descriptor stays open for the worker that may be using it; shutdown is the fallback.
void abortSocket(int fd) {
  sockaddr unspec{};
  unspec.sa_family = AF_UNSPEC;
  if (::connect(fd, &unspec, sizeof(unspec)) != 0) ::shutdown(fd, SHUT_RDWR);
}

}  // namespace

Link::Link(const LinkParams& p) : p_(p) {
  executorReads_ = p.executorReads;
  p_.sockets = std::clamp<uint32_t>(p_.sockets, 1, kMaxSockets);
  sendBuf_.resize(p_.slots * p_.slotBytes);
  recvBuf_.resize(p_.slots * p_.slotBytes);
  partsLeft_ = std::make_unique<std::atomic<uint32_t>[]>(p_.slots);
  for (uint32_t i = 0; i < p_.slots; ++i) partsLeft_[i].store(0);
  meta_.resize(p_.slots);
  Engine& e = Engine::get();
  serial_ = e.nextLinkSerial();
  for (uint32_t i = 0; i < p_.sockets; ++i) {
    socks_.push_back(std::make_unique<Sock>());
    socks_.back()->worker = &e.worker(serial_ + i);
  }
}

Link::~Link() {
  for (auto& s : socks_)
    if (s->fd >= 0) {
      Engine::get().untrack(s->fd);
      ::close(s->fd);
    }
}

std::string Link::peerName() const {
  std::string name = "rank " + std::to_string(p_.peer);
  if (p_.active) name += " (" + p_.peerAddress.toString() + ")";
  return name + " channel " + std::to_string(p_.channel);
}

std::string Link::describe() {
  std::string out = peerName() + ": send tail " + std::to_string(sendTail_) + " done " +
                    std::to_string(sendDone_.load()) + ", recv head " +
                    std::to_string(recvHead_.load()) + " ready " +
                    std::to_string(recvReady_.load()) + " parked " +
                    std::to_string(parkedCount_.load());
  for (size_t i = 0; i < socks_.size(); ++i) {
    Sock& s = *socks_[i];
    size_t queued;
    {
      std::lock_guard<std::mutex> lock(s.sendMu);
      queued = s.queue.size();
    }
    out += "; sock " + std::to_string(i) + " fd " + std::to_string(s.fd) + " state " +
           std::to_string(s.state.load()) + " queued " + std::to_string(queued) + " hdr " +
           std::to_string(s.headerGot) + (s.inPayload ? " payload " : " idle ") +
           std::to_string(s.payloadGot) + "/" + std::to_string(s.frame.length) + " seq " +
           std::to_string(s.frame.seq) + (s.parked.load() ? " parked" : "");
  }
  return out;
}

void Link::start() {
  Hello h;
  h.commHash = p_.commHash;
  h.srcRank = p_.rank;
  h.dstRank = p_.peer;
  h.channel = static_cast<uint32_t>(p_.channel);
  h.sockets = p_.sockets;
  h.slots = p_.slots;
  h.slotBytes = p_.slotBytes;
  std::memcpy(h.token, p_.peerToken, kTokenBytes);
  for (uint32_t i = 0; i < p_.sockets; ++i) {
    Sock& s = *socks_[i];
    int fd = ::socket(p_.peerAddress.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      fail(sysError("tcp: socket for " + peerName(), errno));
      return;
    }
    Engine::get().track(fd);
    tuneSocket(fd, Engine::get().socketBuffer());
    h.socketIndex = i;
    {
      std::lock_guard<std::mutex> lock(s.sendMu);
      s.fd = fd;
      encodeHello(h, s.hello);
      s.helloLeft = kHelloBytes;
    }
    int r = ::connect(fd, p_.peerAddress.get(), p_.peerAddress.length());
    if (r != 0 && errno != EINPROGRESS && errno != EINTR) {
      fail(sysError("tcp: connect to " + peerName(), errno));
      return;
    }
    s.state.store(static_cast<int>(SockState::kConnecting));
    registerSocket(static_cast<int>(i));
  }
}

void Link::attach(const Hello& hello, int fd) {
  std::string bad;
  if (hello.sockets != p_.sockets)
    bad = "expects " + std::to_string(hello.sockets) + " sockets per connection, this side " +
          std::to_string(p_.sockets);
  else if (hello.slots != p_.slots || hello.slotBytes != p_.slotBytes)
    bad = "uses a FIFO of " + std::to_string(hello.slots) + " x " +
          std::to_string(hello.slotBytes) + " B, this side " + std::to_string(p_.slots) + " x " +
          std::to_string(p_.slotBytes) + " B";
  Sock* s = hello.socketIndex < socks_.size() ? socks_[hello.socketIndex].get() : nullptr;
  std::lock_guard<std::mutex> detach(detachMu_);
  if (detached_) {  // closed meanwhile: nobody reads this link any more
    Engine::get().untrack(fd);
    ::close(fd);
    return;
  }
  if (bad.empty() && (!s || s->fd >= 0))
    bad = "opened socket " + std::to_string(hello.socketIndex) + " twice";
  if (!bad.empty()) {
    Engine::get().untrack(fd);
    ::close(fd);
    fail("tcp: " + peerName() + " " + bad);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(s->sendMu);
    s->fd = fd;
    s->state.store(static_cast<int>(SockState::kReady));
  }
  registerSocket(static_cast<int>(hello.socketIndex));
  if (poisoned_.load()) abortSocket(fd);
  s->worker->kick(s->id);  // frames may have arrived before the socket was watched
}

void Link::registerSocket(int index) {
  Sock& s = *socks_[index];
  // SO_RCVLOWAT above a quarter of the receive buffer could wait for data that cannot fit.
  int rcvbuf = 0;
  socklen_t len = sizeof(rcvbuf);
  if (::getsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) == 0 && rcvbuf > 0)
    s.maxLowat = std::min<size_t>(256 << 10, static_cast<size_t>(rcvbuf) / 4);
  if (!p_.lowat) s.maxLowat = 1;
  try {
    s.id = s.worker->add(s.fd, std::make_shared<SocketHandler>(shared_from_this(), index));
  } catch (const Error& e) {
    fail(e.what());
  }
}

// ---- executor side ----

void* Link::sendSlot() {
  if (sendTail_ - sendDone_.load(std::memory_order_acquire) >= p_.slots) return nullptr;
  return sendBuf_.data() + (sendTail_ % p_.slots) * p_.slotBytes;
}

void Link::postFrom(const void* from, uint32_t bytes, uint32_t tag) {
  const uint64_t seq = sendTail_;
  const uint32_t idx = static_cast<uint32_t>(seq % p_.slots);
  const char* data = from ? static_cast<const char*>(from) : sendBuf_.data() + idx * p_.slotBytes;
  const uint32_t parts = partCount(bytes, p_.sockets, p_.minPart);
  partsLeft_[idx].store(parts, std::memory_order_relaxed);
  ++sendTail_;
  sendPosted_.store(sendTail_, std::memory_order_release);
  for (uint32_t i = 0; i < parts; ++i) {
    FrameHeader f;
    f.part = static_cast<uint8_t>(i);
    f.parts = static_cast<uint8_t>(parts);
    f.tag = tag;
    f.total = bytes;
    f.offset = static_cast<uint32_t>(partOffset(bytes, parts, i));
    f.length = static_cast<uint32_t>(partOffset(bytes, parts, i + 1)) - f.offset;
    f.seq = seq;
    Sock& s = *socks_[(seq + i) % p_.sockets];
    std::lock_guard<std::mutex> lock(s.sendMu);
    bool idle = s.queue.empty();
    s.queue.emplace_back();
    OutPart& op = s.queue.back();
    encodeFrame(f, op.header);
    op.data = data + f.offset;
    op.length = f.length;
    op.seq = seq;
    // Write inline when nothing is queued ahead: the worker is not needed for a message that
    // fits the socket buffer. Otherwise the worker drains the queue when the socket has room.
    if (idle) writeSome(s);
  }
}

const void* Link::recvSlot(uint32_t* bytes, uint32_t* tag) {
  const uint64_t h = recvHead_.load(std::memory_order_relaxed);
  if (h >= recvReady_.load(std::memory_order_acquire)) {
    // Read the sockets from this thread rather than wait for a worker to wake up, read and wake
    // us: on a busy machine the two hand-offs cost more than the reads.
    if (!executorReads_ || failed_.load(std::memory_order_relaxed)) return nullptr;
    for (size_t i = 0; i < socks_.size(); ++i) {
      Sock& s = *socks_[i];
      if (s.state.load(std::memory_order_relaxed) == static_cast<int>(SockState::kReady) &&
          !s.eof && !s.parked.load(std::memory_order_relaxed))
        drive(static_cast<int>(i));
    }
    if (h >= recvReady_.load(std::memory_order_acquire)) return nullptr;
  }
  const RecvMeta& m = meta_[h % p_.slots];
  *bytes = m.total;
  *tag = m.tag;
  return recvBuf_.data() + (h % p_.slots) * p_.slotBytes;
}

void Link::release() {
  recvHead_.store(recvHead_.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
  // Pairs with the worker's park-then-recheck: one of the two sees the other.
  if (parkedCount_.load(std::memory_order_seq_cst) > 0) kickParked();
}

void Link::kickParked() {
  for (auto& s : socks_)
    if (s->parked.load() && s->id) s->worker->kick(s->id);
}

Status Link::health(std::string* why) {
  if (failed_.load()) {
    std::lock_guard<std::mutex> lock(whyMu_);
    *why = why_;
    return Status::kRemoteError;
  }
  if (peerClosed_.load()) {
    *why = "tcp: " + peerName() + " closed the connection (the peer exited or gave up)";
    return Status::kRemoteError;
  }
  if (p_.peerPid > 0 && p_.peerPid != ::getpid() && transport::processGone(p_.peerPid)) {
    *why = "tcp: " + peerName() + " (pid " + std::to_string(p_.peerPid) + ") exited";
    return Status::kRemoteError;
  }
  return Status::kSuccess;
}

void Link::poison() {
  poisoned_.store(true);
  for (auto& s : socks_) {
    std::lock_guard<std::mutex> lock(s->sendMu);
    // The peer reads a reset and gives up. A socket still connecting or sending its hello is
    // reset once the hello is out (writeSome): before that the peer's engine would drop it
    // unread, and the peer would wait on a link that never reaches it.
    if (s->fd >= 0 && s->state.load() == static_cast<int>(SockState::kReady) && s->helloLeft == 0)
      abortSocket(s->fd);
  }
  ring();
}

// A peer that ended every socket at a frame boundary is not a poisoned link: it may have
// finished its part and said goodbye, and what it sent before is in the slots or still in the
// sockets ahead of the EOF. peerEnded() reports it; the executor then fails only a lane that
// the link holds nothing more for, and health() names the end to a waiter it leaves stuck.
bool Link::poisoned() const {
  return poisoned_.load() || failed_.load() ||
         (p_.peerFailure && p_.peerFailure->load(std::memory_order_acquire) != 0);
}

int Link::poisonCause() const {
  const uint32_t word = p_.peerFailure ? p_.peerFailure->load(std::memory_order_acquire) : 0;
  return word != 0 ? static_cast<int>(word) - 1 : -1;
}

bool Link::peerEnded() const { return peerClosed_.load(); }

void Link::close(std::chrono::milliseconds timeout) {
  closing_.store(true);
  // Let what the executor posted reach the kernel: the peer may still be reading it.
  const uint64_t end = nowNs() + static_cast<uint64_t>(timeout.count()) * 1000000ull;
  uint64_t napNs = 20000;
  while (sendDone_.load() < sendPosted_.load() && !failed_.load() && !poisoned_.load() &&
         !peerClosed_.load() && nowNs() < end) {
    timespec ts{0, static_cast<long>(napNs)};
    nanosleep(&ts, nullptr);
    napNs = std::min<uint64_t>(napNs * 2, 1000000);
  }
  {
    std::lock_guard<std::mutex> lock(detachMu_);
    detached_ = true;
  }
  // remove() also waits for a worker's turn on the socket in progress (Worker::remove).
  for (auto& s : socks_)
    if (s->id) s->worker->remove(s->id, s->fd);
}

// ---- worker side ----

void Link::service(int index, uint32_t events) {
  Sock& s = *socks_[index];
  if (s.state.load() == static_cast<int>(SockState::kConnecting)) {
    if (events == kKick || !(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    finishConnect(s);
  }
  if (s.state.load() != static_cast<int>(SockState::kReady)) return;
  {
    std::lock_guard<std::mutex> lock(s.sendMu);
    if (!writeSome(s)) return;
  }
  drive(index);
}

void Link::drive(int index) {
  Sock& s = *socks_[index];
  s.wantRead.store(true, std::memory_order_seq_cst);
  while (s.wantRead.load(std::memory_order_seq_cst) &&
         !s.reading.exchange(true, std::memory_order_acquire)) {
    s.wantRead.store(false, std::memory_order_seq_cst);
    readSome(index);
    s.reading.store(false, std::memory_order_release);
  }
}

void Link::finishConnect(Sock& s) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    s.state.store(static_cast<int>(SockState::kDead));
    fail(sysError("tcp: connect to " + peerName(), err));
    return;
  }
  std::lock_guard<std::mutex> lock(s.sendMu);
  s.state.store(static_cast<int>(SockState::kReady));
  WEFT_TRACE(NET, "tcp: rank %d connected to %s", p_.rank, peerName().c_str());
}

bool Link::writeSome(Sock& s) {
  if (s.state.load(std::memory_order_relaxed) != static_cast<int>(SockState::kReady) ||
      failed_.load(std::memory_order_relaxed))
    return !failed_.load(std::memory_order_relaxed);
  while (s.helloLeft > 0) {
    ssize_t n = ::send(s.fd, s.hello + (kHelloBytes - s.helloLeft), s.helloLeft, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (wouldBlock(errno)) return true;
      fail(sysError("tcp: send to " + peerName(), errno));
      return false;
    }
    s.helloLeft -= static_cast<size_t>(n);
    if (s.helloLeft == 0 && poisoned_.load()) {
      abortSocket(s.fd);  // poisoned while the hello was on its way (poison())
      return true;
    }
  }
  while (!s.queue.empty()) {
    iovec iov[kMaxIov];
    int n = 0;
    for (auto it = s.queue.begin(); it != s.queue.end() && n + 2 <= kMaxIov; ++it) {
      if (it->sent < kFrameHeaderBytes) {
        iov[n++] = {it->header + it->sent, kFrameHeaderBytes - it->sent};
        if (it->length) iov[n++] = {const_cast<char*>(it->data), it->length};
      } else {
        size_t done = it->sent - kFrameHeaderBytes;
        iov[n++] = {const_cast<char*>(it->data) + done, it->length - done};
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = ::sendmsg(s.fd, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (wouldBlock(errno)) return true;
      fail(sysError("tcp: send to " + peerName(), errno));
      return false;
    }
    size_t left = static_cast<size_t>(w);
    while (left > 0 || (!s.queue.empty() &&
                        s.queue.front().sent == kFrameHeaderBytes + s.queue.front().length)) {
      OutPart& op = s.queue.front();
      size_t need = kFrameHeaderBytes + op.length - op.sent;
      size_t take = std::min(need, left);
      op.sent += take;
      left -= take;
      if (op.sent < kFrameHeaderBytes + op.length) break;
      uint64_t seq = op.seq;
      s.queue.pop_front();
      partSent(seq);
      if (s.queue.empty()) break;
    }
  }
  return true;
}

void Link::partSent(uint64_t seq) {
  if (partsLeft_[seq % p_.slots].fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  bool advanced = false;
  {
    std::lock_guard<std::mutex> lock(doneMu_);
    uint64_t d = sendDone_.load(std::memory_order_relaxed);
    const uint64_t posted = sendPosted_.load(std::memory_order_acquire);
    while (d < posted && partsLeft_[d % p_.slots].load(std::memory_order_acquire) == 0) ++d;
    if (d != sendDone_.load(std::memory_order_relaxed)) {
      sendDone_.store(d, std::memory_order_release);
      advanced = true;
    }
  }
  if (advanced) ring();
}

void Link::fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(whyMu_);
    if (failed_.load()) return;
    why_ = why;
    failed_.store(true);
  }
  // After this side closed or gave up, a failing socket is expected, not news.
  if (!closing_.load() && !poisoned_.load())
    WEFT_WARN(NET, "rank %d: %s", p_.rank, why.c_str());
  else
    WEFT_INFO(NET, "rank %d: %s", p_.rank, why.c_str());
  // Tell the peer too: it reads a reset on every socket of this connection.
  for (auto& s : socks_)
    if (s->fd >= 0) abortSocket(s->fd);
  ring();
}

void Link::ring() {
  if (p_.bell) p_.bell->ring();
}

}  // namespace weft::tcp
