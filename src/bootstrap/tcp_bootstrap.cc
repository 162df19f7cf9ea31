#include "src/bootstrap/tcp_bootstrap.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>

#include "src/bootstrap/root.h"
#include "src/common/error.h"
#include "src/common/log.h"

namespace weft::bootstrap {
namespace {

constexpr uint32_t kUserChannel = 0;
constexpr uint32_t kInternalChannel = 1;
constexpr int kAllgatherTag = 1;
// Unauthenticated connections held at once, so a flood cannot exhaust fds. When full, the oldest
// one that has sent nothing is evicted: peers send their hello as soon as they connect, so idle
// strangers can never crowd them out.
constexpr size_t kMaxPending = 256;
// Connections accepted per pass, so a flood cannot starve the authenticated connections.
constexpr size_t kAcceptsPerPass = 512;
// Bytes read from one connection per pass, so one busy peer cannot starve the others.
constexpr size_t kReadBurst = 16u << 20;
// Frames up to this size go out in one send() with their header.
constexpr size_t kCoalesceBytes = 64u << 10;

std::string describeTag(uint32_t channel, int tag) {
  return channel == kUserChannel ? "tag " + std::to_string(tag) : "allgather data";
}

}  // namespace

TcpBootstrap::TcpBootstrap(int rank, int nranks, const Secret& secret, Socket listen,
                           std::vector<SocketAddress> addresses,
                           std::chrono::milliseconds callTimeout)
    : rank_(rank),
      nranks_(nranks),
      secret_(secret),
      commHash_(secretHash(secret)),
      name_("bootstrap rank " + std::to_string(rank) + "/" + std::to_string(nranks)),
      timeout_(callTimeout),
      listen_(std::move(listen)),
      addresses_(std::move(addresses)) {
  peers_.reserve(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) peers_.push_back(std::make_unique<Peer>());
  try {
    progress_ = std::thread(&TcpBootstrap::progressLoop, this);
  } catch (const std::system_error& e) {
    fail(Status::kSystemError, name_ + ": cannot start the progress thread: " + e.what());
  }
}

TcpBootstrap::~TcpBootstrap() {
  abortFd_.signal();
  if (progress_.joinable()) progress_.join();
  // Sockets close with their owners; peers read EOF and mark this rank gone.
}

uint64_t TcpBootstrap::key(uint32_t channel, int tag) {
  return static_cast<uint64_t>(channel) << 32 | static_cast<uint32_t>(tag);
}

std::string TcpBootstrap::who(int peer) const {
  return "rank " + std::to_string(peer) + " (" + addresses_[peer].toString() + ")";
}

void TcpBootstrap::throwAborted() const { fail(Status::kInternalError, name_ + ": aborted"); }

void TcpBootstrap::checkArgs(int peer, const void* data, size_t bytes, const char* op) const {
  if (peer < 0 || peer >= nranks_)
    fail(Status::kInvalidArgument,
         name_ + ": " + op + " peer " + std::to_string(peer) + " is out of range");
  if (!data && bytes > 0) fail(Status::kInvalidArgument, name_ + ": " + op + " of null data");
  if (bytes > wire::kMaxMessageBytes)
    fail(Status::kInvalidArgument, name_ + ": " + op + " of " + std::to_string(bytes) +
                                       " bytes exceeds the bootstrap limit of " +
                                       std::to_string(wire::kMaxMessageBytes));
}

// ---------------------------------------------------------------------------------------------
// Collectives and point-to-point

void TcpBootstrap::connectRing(const Deadline& deadline, std::chrono::milliseconds limit) {
  if (nranks_ == 1) return;
  // Every rank contributes (rank, hash of its table): equal hashes prove one consistent table,
  // and the exchange itself opens the ring connections and proves every rank alive.
  std::vector<uint8_t> table(addresses_.size() * wire::kAddressBytes);
  for (size_t r = 0; r < addresses_.size(); ++r)
    wire::encodeAddress(addresses_[r], table.data() + r * wire::kAddressBytes);
  uint64_t tableHash = hashBytes(table.data(), table.size());
  constexpr size_t kBlock = 12;
  std::vector<uint8_t> blocks(static_cast<size_t>(nranks_) * kBlock);
  wire::putU32(blocks.data() + rank_ * kBlock, static_cast<uint32_t>(rank_));
  wire::putU64(blocks.data() + rank_ * kBlock + 4, tableHash);
  allgatherWithin(blocks.data(), kBlock, Budget{deadline, limit});
  for (int r = 0; r < nranks_; ++r) {
    const uint8_t* b = blocks.data() + r * kBlock;
    if (wire::getU32(b) != static_cast<uint32_t>(r) || wire::getU64(b + 4) != tableHash)
      fail(Status::kInternalError,
           name_ + ": " + who(r) + " holds a different address table from the root");
  }
  WEFT_TRACE(BOOTSTRAP, "%s: ring connected (listening on %s)", name_.c_str(),
             listenAddress().toString().c_str());
}

void TcpBootstrap::allgather(void* data, size_t bytesPerRank) {
  if (!data && bytesPerRank > 0) fail(Status::kInvalidArgument, name_ + ": allgather of null data");
  allgatherWithin(data, bytesPerRank, budget());
}

void TcpBootstrap::barrier() {
  std::vector<char> bytes(static_cast<size_t>(nranks_));
  allgatherWithin(bytes.data(), 1, budget());
}

void TcpBootstrap::allgatherWithin(void* data, size_t bytesPerRank, const Budget& budget) {
  if (aborted_) throwAborted();
  if (bytesPerRank > wire::kMaxMessageBytes)
    fail(Status::kInvalidArgument, name_ + ": allgather of " + std::to_string(bytesPerRank) +
                                       " bytes per rank exceeds the bootstrap limit");
  if (nranks_ == 1) return;
  int next = (rank_ + 1) % nranks_;
  int prev = (rank_ + nranks_ - 1) % nranks_;
  auto* base = static_cast<char*>(data);
  // Ring: at step s forward the block received at step s-1 (first our own).
  for (int s = 0; s < nranks_ - 1; ++s) {
    size_t sendBlock = static_cast<size_t>((rank_ - s + nranks_) % nranks_);
    size_t recvBlock = static_cast<size_t>((rank_ - s - 1 + 2 * nranks_) % nranks_);
    sendFrame(next, kInternalChannel, kAllgatherTag, base + sendBlock * bytesPerRank, bytesPerRank,
              budget);
    Message m = recvFrame(prev, kInternalChannel, kAllgatherTag, budget);
    if (m.size != bytesPerRank)
      fail(Status::kInvalidUsage, name_ + ": allgather size mismatch: " + who(prev) + " sent " +
                                      std::to_string(m.size) + " bytes per rank, this rank uses " +
                                      std::to_string(bytesPerRank));
    if (bytesPerRank) std::memcpy(base + recvBlock * bytesPerRank, m.data.get(), bytesPerRank);
  }
}

void TcpBootstrap::send(int peer, int tag, const void* data, size_t bytes) {
  checkArgs(peer, data, bytes, "send to");
  sendFrame(peer, kUserChannel, tag, data, bytes, budget());
}

void TcpBootstrap::recv(int peer, int tag, void* data, size_t bytes) {
  checkArgs(peer, data, bytes, "recv from");
  Message m = recvFrame(peer, kUserChannel, tag, budget());
  if (m.size != bytes)
    fail(Status::kInvalidUsage, name_ + ": " + who(peer) + " sent " + std::to_string(m.size) +
                                    " bytes with tag " + std::to_string(tag) + ", expected " +
                                    std::to_string(bytes));
  if (bytes) std::memcpy(data, m.data.get(), bytes);
}

void TcpBootstrap::abort() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    // Wakes writers blocked on a full socket and tells the peers at once.
    for (auto& p : peers_)
      if (p->outFd >= 0) ::shutdown(p->outFd, SHUT_RDWR);
  }
  abortFd_.signal();
  cv_.notify_all();
}

void TcpBootstrap::sendFrame(int peer, uint32_t channel, int tag, const void* data, size_t bytes,
                             const Budget& budget) {
  if (aborted_) throwAborted();
  if (peer == rank_) {
    Message m{std::unique_ptr<char[]>(new char[std::max<size_t>(bytes, 1)]), bytes};
    if (bytes) std::memcpy(m.data.get(), data, bytes);
    std::lock_guard<std::mutex> lock(mu_);
    peers_[peer]->inbox[key(channel, tag)].push_back(std::move(m));
    cv_.notify_all();
    return;
  }
  connectTo(peer, budget, /*forRecv=*/false);
  Peer& p = *peers_[peer];
  std::string what = name_ + ": sending " + describeTag(channel, tag) + " (" +
                     std::to_string(bytes) + " bytes) to " + who(peer) + " (timeout " +
                     std::to_string(budget.limit.count()) + " ms)";
  std::lock_guard<std::mutex> writing(p.writeMu);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (p.outgoingClosed) fail(Status::kRemoteError, what + ": " + p.reason);
  }
  uint8_t header[wire::kFrameHeaderBytes];
  wire::encodeFrameHeader({channel, tag, bytes}, header);
  try {
    if (bytes <= kCoalesceBytes) {
      std::vector<uint8_t> frame(sizeof(header) + bytes);
      std::memcpy(frame.data(), header, sizeof(header));
      if (bytes) std::memcpy(frame.data() + sizeof(header), data, bytes);
      p.out.sendAll(frame.data(), frame.size(), budget.deadline, abortFd_.fd(), what);
    } else {
      p.out.sendAll(header, sizeof(header), budget.deadline, abortFd_.fd(), what, MSG_MORE);
      p.out.sendAll(data, bytes, budget.deadline, abortFd_.fd(), what);
    }
  } catch (const Error& e) {
    if (aborted_) throwAborted();
    // A partial frame may be on the wire: the connection can never be used again.
    markOutgoingClosed(peer, e.what());
    throw;
  }
}

TcpBootstrap::Message TcpBootstrap::recvFrame(int peer, uint32_t channel, int tag,
                                              const Budget& budget) {
  if (aborted_) throwAborted();
  // Holding a connection to the peer is how a silent peer's death becomes visible (EOF).
  if (peer != rank_) connectTo(peer, budget, /*forRecv=*/true);
  Peer& p = *peers_[peer];
  uint64_t k = key(channel, tag);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (aborted_) throwAborted();
    auto it = p.inbox.find(k);
    if (it != p.inbox.end() && !it->second.empty()) {
      Message m = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) p.inbox.erase(it);
      return m;
    }
    if (p.dead)
      fail(Status::kRemoteError, name_ + ": " + who(peer) + " is gone while this rank waits for " +
                                     describeTag(channel, tag) + " from it: " + p.reason);
    if (budget.deadline.expired())
      fail(Status::kSystemError, name_ + ": timed out after " +
                                     std::to_string(budget.limit.count()) + " ms waiting for " +
                                     describeTag(channel, tag) + " from " + who(peer));
    cv_.wait_for(lock, std::max(budget.deadline.remaining(), std::chrono::milliseconds(1)));
  }
}

bool TcpBootstrap::connectTo(int peer, const Budget& budget, bool forRecv) {
  Peer& p = *peers_[peer];
  std::lock_guard<std::mutex> connecting(p.connectMu);
  if (p.out.valid()) return true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (p.outgoingClosed) {
      if (forRecv) return false;
      fail(Status::kRemoteError, name_ + ": " + who(peer) + " is gone: " + p.reason);
    }
  }
  std::string what = name_ + ": connecting to " + who(peer) + " (timeout " +
                     std::to_string(budget.limit.count()) + " ms)";
  try {
    Socket s = Socket::connect(addresses_[peer], budget.deadline, abortFd_.fd(), what);
    uint8_t hello[wire::kPeerHelloBytes];
    wire::encodePeerHello(secret_, rank_, hello);
    s.sendAll(hello, sizeof(hello), budget.deadline, abortFd_.fd(), what);
    p.out = std::move(s);
  } catch (const Error& e) {
    if (aborted_) throwAborted();
    if (e.code() == Status::kRemoteError) {
      markOutgoingClosed(peer, e.what());
      if (forRecv) return false;
    }
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    p.outFd = p.out.fd();
    if (aborted_) p.out.shutdown();  // abort() ran while we connected
  }
  wakeFd_.signal();
  return true;
}

void TcpBootstrap::markOutgoingClosed(int peer, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer& p = *peers_[peer];
    if (!p.outgoingClosed) {
      p.outgoingClosed = true;
      p.outgoingClosedAt = iteration_;
      if (p.reason.empty()) p.reason = reason;
    }
  }
  wakeFd_.signal();
}

// ---------------------------------------------------------------------------------------------
// Progress thread

void TcpBootstrap::progressLoop() {
  std::vector<pollfd> fds;
  std::vector<std::pair<int, int>> watched;  // (peer, fd) of outgoing connections
  bool again = false;
  for (;;) {
    uint64_t iteration;
    watched.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      iteration = ++iteration_;
      for (int r = 0; r < nranks_; ++r)
        if (peers_[r]->outFd >= 0 && !peers_[r]->outgoingClosed)
          watched.emplace_back(r, peers_[r]->outFd);
    }
    fds.clear();
    fds.push_back({abortFd_.fd(), POLLIN, 0});
    fds.push_back({wakeFd_.fd(), POLLIN, 0});
    fds.push_back({listen_.fd(), POLLIN, 0});
    size_t incomingAtPoll = incoming_.size();
    for (const auto& in : incoming_) fds.push_back({in.sock.fd(), POLLIN, 0});
    for (const auto& w : watched) fds.push_back({w.second, POLLIN, 0});
    for (const auto& p : pending_) fds.push_back({p.sock.fd(), POLLIN, 0});

    int timeoutMs = -1;
    if (again) {
      timeoutMs = 0;
    } else if (!pending_.empty()) {
      auto now = Clock::now();
      auto next = pending_.front().deadline;
      for (const auto& p : pending_) next = std::min(next, p.deadline);
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(
                    std::max(next - now, Clock::duration::zero()))
                    .count();
      timeoutMs = static_cast<int>(std::min<long long>(ms, INT_MAX));
    }
    if (::poll(fds.data(), fds.size(), timeoutMs) < 0 && errno != EINTR) {
      WEFT_WARN(BOOTSTRAP, "%s", sysError(name_ + ": progress poll", errno).c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // never spin on a failing poll
      continue;
    }
    if (fds[0].revents) break;
    if (fds[1].revents) wakeFd_.drain();

    for (size_t i = 0; i < incomingAtPoll; ++i)
      if (fds[3 + i].revents) readIncoming(incoming_[i]);
    for (size_t k = 0; k < watched.size(); ++k)
      if (fds[3 + incomingAtPoll + k].revents)
        checkOutgoing(watched[k].first, watched[k].second, iteration);
    auto now = Clock::now();
    for (size_t i = 0; i < pending_.size();) {
      bool finished =
          advancePending(pending_[i]) ||
          (now >= pending_[i].deadline &&
           dropPending(pending_[i], "no complete hello within " +
                                        std::to_string(kHandshakeTimeout.count()) + " ms"));
      if (finished)
        pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
      else
        ++i;
    }
    // Drained every pass, not only on POLLIN: updateLiveness relies on it.
    acceptAll();
    incoming_.erase(std::remove_if(incoming_.begin(), incoming_.end(),
                                   [](const Incoming& in) { return in.closed; }),
                    incoming_.end());
    again = updateLiveness(iteration);
  }
  // Aborted or destroyed: peers see the end at once, and late connections are refused instead
  // of waiting in a backlog nobody serves. Incoming connections are reset rather than closed:
  // this side only ever reads them, and an orderly close by the accepting side would leave
  // TIME_WAIT on the listen port, where a host running many short jobs runs out of ports.
  for (auto& in : incoming_) {
    if (!in.closed) in.sock.resetOnClose();
    in.sock.shutdown();
  }
  pending_.clear();
  listen_.close();
}

void TcpBootstrap::acceptAll() {
  for (size_t accepted = 0; accepted < kAcceptsPerPass; ++accepted) {
    SocketAddress peer;
    Socket s = listen_.tryAccept(&peer);
    if (!s.valid()) return;
    if (pending_.size() >= kMaxPending) {
      // pending_ is in arrival order: the oldest silent connection goes, else the oldest.
      auto victim = std::find_if(pending_.begin(), pending_.end(),
                                 [](const Pending& p) { return p.got == 0; });
      if (victim == pending_.end()) victim = pending_.begin();
      dropPending(*victim, std::to_string(pending_.size()) +
                               " connections wait to authenticate, the oldest make way");
      pending_.erase(victim);
    }
    Pending p;
    p.sock = std::move(s);
    p.peer = peer;
    p.deadline = Clock::now() + kHandshakeTimeout;
    pending_.push_back(std::move(p));
    if (advancePending(pending_.back())) pending_.pop_back();
  }
}

bool TcpBootstrap::dropPending(Pending& p, const std::string& why) {
  ++dropped_;
  drops_.note(name_ + ": dropped connection from " + p.peer.toString() + ": " + why);
  return true;
}

bool TcpBootstrap::advancePending(Pending& p) {
  while (p.got < wire::kPeerHelloBytes) {
    // The secret is read alone and checked before anything else is looked at.
    size_t want = (p.got < kSecretBytes ? kSecretBytes : wire::kPeerHelloBytes) - p.got;
    size_t before = p.got;
    int err = 0;
    Socket::Io io = p.sock.readSome(p.hello + p.got, want, &p.got, &err);
    if (io == Socket::Io::kWouldBlock) return false;
    if (io == Socket::Io::kEof)
      return dropPending(p, "closed after " + std::to_string(p.got) + " of " +
                                std::to_string(wire::kPeerHelloBytes) + " hello bytes");
    if (io == Socket::Io::kError) return dropPending(p, sysError("read failed", err));
    if (before < kSecretBytes && p.got == kSecretBytes && !secretsEqual(p.hello, secret_.data()))
      return dropPending(p, "wrong secret");
  }
  uint32_t version = wire::getU32(p.hello + kSecretBytes);
  int from = static_cast<int32_t>(wire::getU32(p.hello + kSecretBytes + 4));
  if (version != wire::kPeerHelloVersion) return dropPending(p, "unknown hello version");
  if (from < 0 || from >= nranks_ || from == rank_)
    return dropPending(p, "hello claims invalid rank " + std::to_string(from));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (peers_[from]->incoming)
      return dropPending(p, "a second connection claiming rank " + std::to_string(from));
    peers_[from]->incoming = true;
  }
  WEFT_TRACE(BOOTSTRAP, "%s: accepted %s from %s", name_.c_str(), who(from).c_str(),
             p.peer.toString().c_str());
  Incoming in;
  in.sock = std::move(p.sock);
  in.from = from;
  incoming_.push_back(std::move(in));
  readIncoming(incoming_.back());  // frames often arrive with the hello
  return true;
}

void TcpBootstrap::readIncoming(Incoming& in) {
  size_t budget = kReadBurst;
  while (!in.closed && budget > 0) {
    int err = 0;
    size_t got = 0;
    Socket::Io io;
    if (!in.inBody) {
      io = in.sock.readSome(in.header + in.headerGot, wire::kFrameHeaderBytes - in.headerGot, &got,
                            &err);
      in.headerGot += got;
      if (io == Socket::Io::kProgress && in.headerGot == wire::kFrameHeaderBytes) {
        wire::FrameHeader h = wire::decodeFrameHeader(in.header);
        in.headerGot = 0;
        if (h.channel > kInternalChannel || h.length > wire::kMaxMessageBytes) {
          WEFT_WARN(BOOTSTRAP, "%s: %s sent a malformed frame (channel %u, %llu bytes)",
                    name_.c_str(), who(in.from).c_str(), h.channel,
                    static_cast<unsigned long long>(h.length));
          return closeIncoming(in, "it sent a malformed frame");
        }
        in.key = key(h.channel, h.tag);
        in.body.size = h.length;
        in.body.data.reset(new (std::nothrow) char[std::max<uint64_t>(h.length, 1)]);
        if (!in.body.data)
          return closeIncoming(
              in, "cannot allocate " + std::to_string(h.length) + " bytes for its message");
        in.bodyGot = 0;
        in.inBody = true;
        if (h.length == 0) deliver(in);
      }
    } else {
      io = in.sock.readSome(in.body.data.get() + in.bodyGot, in.body.size - in.bodyGot, &got, &err);
      in.bodyGot += got;
      if (io == Socket::Io::kProgress && in.bodyGot == in.body.size) deliver(in);
    }
    if (io == Socket::Io::kWouldBlock) return;
    if (io == Socket::Io::kEof)
      return closeIncoming(in, in.inBody || in.headerGot
                                   ? "it closed the connection in the middle of a message"
                                   : "it closed the connection");
    if (io == Socket::Io::kError) return closeIncoming(in, sysError("connection failed", err));
    budget -= std::min(budget, std::max<size_t>(got, 1));
  }
}

void TcpBootstrap::deliver(Incoming& in) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    peers_[in.from]->inbox[in.key].push_back(std::move(in.body));
  }
  cv_.notify_all();
  in.body = Message{};
  in.inBody = false;
}

void TcpBootstrap::closeIncoming(Incoming& in, const std::string& why) {
  WEFT_TRACE(BOOTSTRAP, "%s: connection from %s ended: %s", name_.c_str(), who(in.from).c_str(),
             why.c_str());
  in.closed = true;
  std::lock_guard<std::mutex> lock(mu_);
  Peer& p = *peers_[in.from];
  p.incomingClosed = true;
  if (p.reason.empty()) p.reason = why;
}

void TcpBootstrap::checkOutgoing(int peer, int fd, uint64_t iteration) {
  // Peers never write on connections we opened: readable means EOF, a reset, or a violation.
  char buf[64];
  ssize_t n;
  do {
    n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  std::string why = n == 0  ? "it closed its bootstrap connections"
                    : n > 0 ? "it wrote on a send-only connection"
                            : sysError("connection failed", errno);
  if (n > 0) WEFT_WARN(BOOTSTRAP, "%s: %s %s", name_.c_str(), who(peer).c_str(), why.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  Peer& p = *peers_[peer];
  if (!p.outgoingClosed) {
    p.outgoingClosed = true;
    p.outgoingClosedAt = iteration;
    if (p.reason.empty()) p.reason = why;
  }
}

bool TcpBootstrap::updateLiveness(uint64_t iteration) {
  bool changed = false;
  bool again = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& pp : peers_) {
      Peer& p = *pp;
      if (p.dead) continue;
      if (p.incomingClosed) {
        p.dead = true;
        changed = true;
      } else if (p.outgoingClosed && !p.incoming && pending_.empty()) {
        // The peer's last connection may still sit in our backlog: only a pass that started
        // after the close was seen (and drained the backlog) may declare the peer gone.
        if (iteration > p.outgoingClosedAt) {
          p.dead = true;
          changed = true;
        } else {
          again = true;
        }
      }
    }
  }
  if (changed) cv_.notify_all();
  return again;
}

}  // namespace weft::bootstrap
