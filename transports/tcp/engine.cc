#include "transports/tcp/engine.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>

#include "src/bootstrap/interfaces.h"
#include "src/bootstrap/secret.h"
#include "src/common/clock.h"
#include "src/common/error.h"
#include "src/common/log.h"

namespace weft::tcp {
namespace {

constexpr uint64_t kWakeId = 0;
// Unauthenticated sockets waiting for a hello. When full, the oldest that has sent nothing is
// evicted: a link sends its hello as soon as it connects, so idle strangers never crowd it out.
constexpr size_t kMaxHandshakes = 512;
constexpr size_t kMaxParked = 4096;  // authenticated sockets waiting for connect()
constexpr uint64_t kHandshakeNs = 10ull * 1000 * 1000 * 1000;
// How long Worker::remove waits for a handler's turn to end. A turn is non-blocking socket work
// and a few short locks; one that outlasts this is stuck, and the caller goes on regardless.
constexpr auto kRemoveWait = std::chrono::seconds(10);

bool tokensEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (uint32_t i = 0; i < kTokenBytes; ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

std::atomic<size_t> gHandshakes{0};

// An accepted socket until its hello is read (exactly kHelloBytes, nothing more: frames that
// follow stay in the kernel for the link).
class HandshakeHandler : public Handler {
 public:
  HandshakeHandler(Worker& w, int fd) : w_(w), fd_(fd), deadline_(nowNs() + kHandshakeNs) {
    ++gHandshakes;
  }
  ~HandshakeHandler() override {
    --gHandshakes;
    if (fd_ >= 0) {
      Engine::get().untrack(fd_);
      ::close(fd_);
    }
  }
  void setId(uint64_t id) { id_ = id; }
  bool waiting() const { return fd_ >= 0; }
  bool silent() const { return got_ == 0; }
  void evict() { drop("evicted: too many connections wait for their hello"); }

  void onEvent(uint32_t events) override {
    while (fd_ >= 0 && got_ < kHelloBytes) {
      ssize_t n = ::recv(fd_, buf_ + got_, kHelloBytes - got_, 0);
      if (n > 0) {
        got_ += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        drop("closed before its hello");
        return;
      }
    }
    if (fd_ < 0) return;
    Hello h;
    std::string why;
    if (!decodeHello(buf_, &h, &why)) {
      drop(why);
      return;
    }
    w_.remove(id_, fd_);
    int fd = fd_;
    fd_ = -1;
    Engine::get().offer(h, fd);
  }
  void onTick(uint64_t now) override {
    if (fd_ >= 0 && now > deadline_) drop("sent no hello in time");
  }

 private:
  void drop(const std::string& why) {
    WEFT_INFO(NET, "tcp: dropped an incoming connection: %s", why.c_str());
    w_.remove(id_, fd_);
    Engine::get().untrack(fd_);
    ::close(fd_);
    fd_ = -1;
  }

  Worker& w_;
  int fd_;
  uint64_t id_ = 0;
  uint64_t deadline_;
  uint8_t buf_[kHelloBytes] = {};
  size_t got_ = 0;
};

class ListenHandler : public Handler {
 public:
  ListenHandler(Worker& w, int fd) : w_(w), fd_(fd) {}
  void onEvent(uint32_t) override {
    while (true) {
      int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          WEFT_WARN(NET, "tcp: accept failed: %s", std::strerror(errno));
        return;
      }
      // A flood of strangers: make room rather than run out of descriptors or refuse peers.
      if (gHandshakes.load() >= kMaxHandshakes) evictOne();
      tuneSocket(fd, Engine::get().socketBuffer());
      Engine::get().track(fd);
      auto h = std::make_shared<HandshakeHandler>(w_, fd);
      h->setId(w_.add(fd, h, /*ticks=*/true));
      while (!handshakes_.empty() && [&] {
        auto front = handshakes_.front().lock();
        return !front || !front->waiting();
      }())
        handshakes_.pop_front();
      handshakes_.push_back(h);
    }
  }

 private:
  // Handshakes run on this worker, like this handler: no other thread touches them.
  void evictOne() {
    std::shared_ptr<HandshakeHandler> oldest;
    for (auto it = handshakes_.begin(); it != handshakes_.end();) {
      auto h = it->lock();
      if (!h || !h->waiting()) {
        it = handshakes_.erase(it);
        continue;
      }
      if (!oldest) oldest = h;
      if (h->silent()) {
        oldest = h;
        break;
      }
      ++it;
    }
    if (oldest) oldest->evict();
  }

  Worker& w_;
  int fd_;
  std::deque<std::weak_ptr<HandshakeHandler>> handshakes_;  // in arrival order
};

bootstrap::SocketAddress loopback(int family) {
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
    s6->sin6_family = AF_INET6;
    s6->sin6_addr = in6addr_loopback;
    len = sizeof(sockaddr_in6);
  } else {
    auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
    s4->sin_family = AF_INET;
    s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof(sockaddr_in);
  }
  return bootstrap::SocketAddress(reinterpret_cast<sockaddr*>(&ss), len);
}

// NCCL_SOCKET_IFNAME picks the interface (bootstrap rules); NCCL_SOCKET_FAMILY narrows the
// addresses to one family first.
bootstrap::SocketAddress chooseAddress(const Tuning& t) {
  const std::string& spec = t.socketIfname;
  const std::string& fam = t.socketFamily;
  int family = AF_UNSPEC;
  if (fam == "AF_INET" || fam == "4" || fam == "ipv4")
    family = AF_INET;
  else if (fam == "AF_INET6" || fam == "6" || fam == "ipv6")
    family = AF_INET6;
  else if (!fam.empty())
    fail(Status::kInvalidArgument, "NCCL_SOCKET_FAMILY=" + fam + ": expected AF_INET or AF_INET6");
  auto all = bootstrap::listInterfaces();
  if (family == AF_UNSPEC) return bootstrap::pickAddress(all, spec);
  std::vector<bootstrap::Interface> some;
  for (auto& i : all)
    if (i.address.family() == family) some.push_back(i);
  if (!spec.empty()) return bootstrap::pickAddress(some, spec);
  if (family == AF_INET) return bootstrap::pickAddress(some, "");
  // IPv6 without an interface name: a global address if any, else loopback.
  for (const auto& i : some) {
    auto* s6 = reinterpret_cast<const sockaddr_in6*>(i.address.get());
    if (!i.loopback && !IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) return i.address;
  }
  return loopback(AF_INET6);
}

}  // namespace

void tuneSocket(int fd, int buf) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (buf > 0) {
    (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  }
}

// ---- Worker ----

Worker::Worker(int index) : index_(index) {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_ < 0) fail(Status::kSystemError, sysError("tcp: epoll_create1", errno));
  wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_ < 0) fail(Status::kSystemError, sysError("tcp: eventfd", errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev) != 0)
    fail(Status::kSystemError, sysError("tcp: epoll_ctl", errno));
  thread_ = std::thread([this] { loop(); });
  threadId_ = thread_.get_id();
  thread_.detach();  // the engine lives as long as the process
}

uint64_t Worker::add(int fd, std::shared_ptr<Handler> h, bool ticks) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = nextId_++;
    handlers_[id] = std::move(h);
    if (ticks) ticking_.push_back(id);
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    int err = errno;
    std::lock_guard<std::mutex> lock(mu_);
    handlers_.erase(id);
    fail(Status::kSystemError, sysError("tcp: epoll_ctl add", err));
  }
  return id;
}

void Worker::remove(uint64_t id, int fd) {
  std::shared_ptr<Handler> dead;  // destroyed outside the lock
  std::unique_lock<std::mutex> lock(mu_);
  auto it = handlers_.find(id);
  if (it != handlers_.end()) {
    dead = std::move(it->second);
    handlers_.erase(it);
  }
  ticking_.erase(std::remove(ticking_.begin(), ticking_.end(), id), ticking_.end());
  // The worker may be inside this handler right now (it took a reference before the erase):
  // wait for that turn to end, unless this is the handler itself removing its own id.
  if (std::this_thread::get_id() != threadId_ &&
      !idle_.wait_for(lock, kRemoveWait, [&] { return running_ != id; }))
    WEFT_WARN(NET, "tcp: worker %d: a handler's turn outlasted its removal", index_);
  lock.unlock();
  // Deregistered after the handler's last turn: that turn may still have been using the socket
  // (a failing link resets it), and no turn can start once the handler is erased.
  if (fd >= 0) (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
}

template <class Fn>
void Worker::runHandler(uint64_t id, Fn&& fn) {
  std::shared_ptr<Handler> h;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = handlers_.find(id);
    if (it == handlers_.end()) return;
    h = it->second;
    running_ = id;
  }
  struct EndTurn {
    Worker* w;
    ~EndTurn() {
      {
        std::lock_guard<std::mutex> lock(w->mu_);
        w->running_ = 0;
      }
      w->idle_.notify_all();
    }
  } endTurn{this};
  fn(*h);
}

void Worker::kick(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    kicks_.push_back(id);
  }
  if (!wakePending_.exchange(true)) {
    uint64_t one = 1;
    ssize_t r = ::write(wake_, &one, sizeof(one));
    (void)r;
  }
}

void Worker::abandon() {
  ::close(epoll_);
  ::close(wake_);
}

void Worker::loop() {
  epoll_event events[64];
  uint64_t lastTick = nowNs();
  std::vector<uint64_t> kicks;
  while (true) {
    int n = ::epoll_wait(epoll_, events, 64, 100);
    if (n < 0 && errno != EINTR) {
      WEFT_WARN(NET, "tcp: epoll_wait failed: %s", std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        // Drain first, then clear the flag: a kick that sees the flag still set was pushed
        // before the swap below, so it is not lost.
        uint64_t v;
        ssize_t r = ::read(wake_, &v, sizeof(v));
        (void)r;
        wakePending_.store(false);
        continue;
      }
      const uint32_t ev = events[i].events;
      runHandler(id, [ev](Handler& h) { h.onEvent(ev); });
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      kicks.swap(kicks_);
    }
    for (uint64_t k : kicks) runHandler(k, [](Handler& h) { h.onKick(); });
    kicks.clear();
    uint64_t now = nowNs();
    if (now - lastTick > 100000000ull) {
      lastTick = now;
      std::vector<uint64_t> tick;
      {
        std::lock_guard<std::mutex> lock(mu_);
        tick = ticking_;
      }
      for (uint64_t id : tick) runHandler(id, [now](Handler& h) { h.onTick(now); });
    }
  }
}

// ---- Endpoint ----

Endpoint::Endpoint(uint64_t commHash, int rank) : commHash_(commHash), rank_(rank) {
  auto secret = bootstrap::randomSecret();
  std::memcpy(token_, secret.data(), kTokenBytes);
}

Endpoint::~Endpoint() {
  Engine::get().closeEndpoint(this);
  for (auto& [key, list] : parked_)
    for (auto& p : list) {
      Engine::get().untrack(p.fd);
      ::close(p.fd);
    }
}

void Endpoint::offer(const Hello& hello, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(hello.srcRank, static_cast<int>(hello.channel));
  auto it = links_.find(key);
  if (it != links_.end()) {
    if (auto link = it->second.lock()) {
      link->attach(hello, fd);
      return;
    }
  }
  if (parkedCount_ >= kMaxParked) {
    WEFT_WARN(NET, "tcp: rank %d has too many connections waiting; dropping one from rank %d",
              rank_, hello.srcRank);
    Engine::get().untrack(fd);
    ::close(fd);
    return;
  }
  parked_[key].push_back({hello, fd});
  ++parkedCount_;
}

void Endpoint::claim(int peer, int channel, const std::shared_ptr<SocketSink>& link) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(peer, channel);
  links_[key] = link;
  auto it = parked_.find(key);
  if (it == parked_.end()) return;
  for (auto& p : it->second) {
    link->attach(p.hello, p.fd);
    --parkedCount_;
  }
  parked_.erase(it);
}

// ---- Engine ----

Engine& Engine::get() {
  static std::mutex mu;
  static Engine* engine = nullptr;
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (!engine || owner != ::getpid()) {
    if (engine) engine->abandon();  // a forked child: the parent's threads are not here
    owner = ::getpid();
    engine = new Engine();
  }
  return *engine;
}

Engine::Engine() = default;

void Engine::abandon() {
  for (auto& w : workers_) w->abandon();
  if (listenFd_ >= 0) ::close(listenFd_);
  for (int fd : fds_) ::close(fd);
  // Leaked on purpose: their mutexes may have been held by threads that do not exist here.
  for (auto& w : workers_) (void)w.release();
  workers_.clear();
}

bootstrap::SocketAddress Engine::listenAddress(const Tuning& tuning) {
  std::lock_guard<std::mutex> lock(mu_);
  if (listenFd_ >= 0) return listenAddress_;
  bootstrap::SocketAddress addr = chooseAddress(tuning);
  sockBuf_.store(tuning.tcpSockBuf);
  if (workers_.empty())
    for (int i = 0; i < std::clamp(tuning.socketThreads, 1, 16); ++i)
      workers_.push_back(std::make_unique<Worker>(i));
  int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(Status::kSystemError, sysError("tcp: socket", errno));
  int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, addr.get(), addr.length()) != 0 || ::listen(fd, 1024) != 0) {
    int err = errno;
    ::close(fd);
    fail(Status::kSystemError, sysError("tcp: listen on " + addr.toString(), err));
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  listenAddress_ = bootstrap::SocketAddress(reinterpret_cast<sockaddr*>(&ss), len);
  listenFd_ = fd;
  worker(0).add(fd, std::make_shared<ListenHandler>(worker(0), fd));
  WEFT_INFO(NET, "tcp: listening on %s", listenAddress_.toString().c_str());
  return listenAddress_;
}

std::shared_ptr<Endpoint> Engine::openEndpoint(uint64_t commHash, int rank) {
  auto e = std::make_shared<Endpoint>(commHash, rank);
  std::lock_guard<std::mutex> lock(mu_);
  endpoints_[{commHash, rank}] = e;
  return e;
}

std::shared_ptr<Endpoint> Engine::findEndpoint(uint64_t commHash, int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = endpoints_.find({commHash, rank});
  return it == endpoints_.end() ? nullptr : it->second.lock();
}

void Engine::closeEndpoint(const Endpoint* e) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = endpoints_.find({e->commHash(), e->rank()});
  if (it != endpoints_.end() && (it->second.expired() || it->second.lock().get() == e))
    endpoints_.erase(it);
}

void Engine::offer(const Hello& hello, int fd) {
  auto e = findEndpoint(hello.commHash, hello.dstRank);
  if (!e || !tokensEqual(e->token(), hello.token)) {
    WEFT_WARN(NET, "tcp: refused a connection claiming to be rank %d of communicator %llx: %s",
              hello.srcRank, static_cast<unsigned long long>(hello.commHash),
              e ? "wrong token" : "no such communicator rank here");
    untrack(fd);
    ::close(fd);
    return;
  }
  e->offer(hello, fd);
}

void Engine::track(int fd) {
  std::lock_guard<std::mutex> lock(fdMu_);
  fds_.push_back(fd);
}

void Engine::untrack(int fd) {
  std::lock_guard<std::mutex> lock(fdMu_);
  auto it = std::find(fds_.begin(), fds_.end(), fd);
  if (it != fds_.end()) {
    *it = fds_.back();
    fds_.pop_back();
  }
}

}  // namespace weft::tcp
