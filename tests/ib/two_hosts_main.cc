// The ib transport between two hosts (the QEMU guests of tests/vm), one process per host:
//   two_hosts pair RANK ID_FILE
//       rank 0 or 1 of a transport-level pair: ordered, zero-byte and odd-sized messages both
//       ways, a full FIFO drained later, many channels at once, a checked stream, 4 MiB landed in
//       place by reference, poison; then
//       rank 1 kills itself and rank 0 must see the connection fail within 5 s, naming rank 1.
//   two_hosts bench TRANSPORT RANK ID_FILE MIB
//       a checked stream of MIB MiB from rank 0 to rank 1 over TRANSPORT (ib or tcp), timed; over
//       ib then the same bytes by reference into a landing rank 1 offered (zero copy), timed
//   two_hosts kill INDEX PROCS RANKS_PER_PROC ID_FILE VICTIM
//       process INDEX of PROCS runs all-reduces on a communicator; process VICTIM kills itself
//       after a few, and every other rank must see its collective fail within 5 s with an error
//       that names one of the victim's ranks.
// Process 0 (rank 0) writes the unique id to ID_FILE; the others read it (the guests see each
// other's work folders through the host). Exit status 0 when every check passed.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "src/bootstrap/bootstrap.h"
#include "transports/ib/connection.h"
#include "transports/registry.h"

namespace weft::test {
namespace {

using Clock = std::chrono::steady_clock;
using Conn = std::unique_ptr<transport::Connection>;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "two_hosts: FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

bool shareBytes(bool writer, const std::string& path, void* data, size_t bytes) {
  if (writer) {
    std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(static_cast<char*>(data), bytes);
    return std::rename(tmp.c_str(), path.c_str()) == 0;
  }
  auto end = Clock::now() + std::chrono::seconds(120);
  while (Clock::now() < end) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(static_cast<char*>(data), bytes)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

uint8_t patternByte(uint64_t m, uint64_t i) {
  return static_cast<uint8_t>(m * 131 + i * 7 + (i >> 8));
}

void checkHealth(transport::Connection& c, const char* what) {
  std::string why;
  if (c.health(&why) != Status::kSuccess) die(std::string(what) + ": " + why);
}

void sendAll(transport::Connection& c, const std::vector<uint32_t>& sizes, const char* what) {
  auto deadline = Clock::now() + std::chrono::seconds(120);
  for (size_t m = 0; m < sizes.size(); ++m) {
    void* slot = nullptr;
    while (!(slot = c.sendSlot())) {
      checkHealth(c, what);
      if (Clock::now() > deadline)
        die(std::string(what) + ": stalled sending " + std::to_string(m));
      std::this_thread::yield();
    }
    auto* p = static_cast<uint8_t*>(slot);
    for (uint32_t i = 0; i < sizes[m]; ++i) p[i] = patternByte(m, i);
    c.post(sizes[m], static_cast<uint32_t>(m));
  }
}

// Receives (and checks) one message; false when the connection failed (*why).
const uint8_t* recvOne(transport::Connection& c, uint32_t* bytes, uint32_t* tag,
                       std::chrono::seconds limit, std::string* why) {
  auto deadline = Clock::now() + limit;
  auto nextHealth = Clock::now();
  for (;;) {
    if (const void* p = c.recvSlot(bytes, tag)) return static_cast<const uint8_t*>(p);
    if (Clock::now() >= nextHealth) {  // as the executor's slow path: every 100 ms
      nextHealth += std::chrono::milliseconds(100);
      if (c.health(why) != Status::kSuccess) return nullptr;
    }
    if (Clock::now() > deadline) {
      *why = "timed out";
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void recvAll(transport::Connection& c, const std::vector<uint32_t>& sizes, const char* what) {
  for (size_t m = 0; m < sizes.size(); ++m) {
    uint32_t bytes = 0, tag = 0;
    std::string why;
    const uint8_t* p = recvOne(c, &bytes, &tag, std::chrono::seconds(120), &why);
    if (!p) die(std::string(what) + ": message " + std::to_string(m) + ": " + why);
    if (tag != m || bytes != sizes[m])
      die(std::string(what) + ": message " + std::to_string(m) + " has tag " + std::to_string(tag) +
          ", " + std::to_string(bytes) + " B");
    for (uint32_t i = 0; i < bytes; ++i)
      if (p[i] != patternByte(m, i))
        die(std::string(what) + ": message " + std::to_string(m) + " byte " + std::to_string(i));
    c.release();
  }
}

// A stream of `total` bytes on `c` whose 8-byte words hold their offset, checked by rank 1;
// returns the seconds it took.
double checkedStream(transport::Connection& c, int rank, uint64_t total, uint32_t s) {
  const auto start = Clock::now();
  uint64_t at = 0, seq = 0;
  while (at < total) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(s, total - at));
    if (rank == 0) {
      void* p = nullptr;
      while (!(p = c.sendSlot())) checkHealth(c, "stream");
      auto* w = static_cast<uint64_t*>(p);
      for (uint32_t i = 0; i < n / 8; ++i) w[i] = at + 8ull * i;
      c.post(n, static_cast<uint32_t>(seq++));
    } else {
      uint32_t bytes = 0, tag = 0;
      std::string why;
      const uint8_t* p = recvOne(c, &bytes, &tag, std::chrono::seconds(60), &why);
      if (!p || bytes != n || tag != seq++) die("stream at " + std::to_string(at) + ": " + why);
      const auto* w = reinterpret_cast<const uint64_t*>(p);
      for (uint32_t i = 0; i < n / 8; ++i)
        if (w[i] != at + 8ull * i) die("stream: wrong word at " + std::to_string(at + 8 * i));
      c.release();
    }
    at += n;
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Zero copy: rank 1 offers a buffer of `total` bytes, rank 0 sends into it by reference from a
// buffer registered as ncclCommRegister does, `s` bytes a message; every message must land in
// place, holding its offsets. Returns the seconds from the offer to the last message (rank 1).
double landedStream(ib::IbConnection& c, bootstrap::Bootstrap& boot, int rank, uint64_t total,
                    uint32_t s) {
  std::vector<uint64_t> buf(total / 8, 0);
  const auto deadline = Clock::now() + std::chrono::seconds(240);
  Clock::time_point start;
  if (rank == 1) {
    boot.barrier();  // the sender's buffer is registered
    start = Clock::now();
    while (!c.offerLanding(buf.data(), total, 77)) {
      checkHealth(c, "landing offer");
      if (Clock::now() > deadline) die("landing: the offer could not be made");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (uint64_t at = 0; at < total; at += s) {
      uint32_t bytes = 0, tag = 0;
      std::string why;
      const uint8_t* p = recvOne(c, &bytes, &tag, std::chrono::seconds(60), &why);
      if (p != reinterpret_cast<const uint8_t*>(buf.data()) + at || bytes != s || tag != 77)
        die("landing: the message at " + std::to_string(at) + " did not land in place " + why);
      c.release();
    }
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    for (uint64_t w = 0; w < buf.size(); ++w)
      if (buf[w] != w * 8) die("landing: wrong word at " + std::to_string(w * 8));
    boot.barrier();
    return secs;
  }
  for (uint64_t w = 0; w < buf.size(); ++w) buf[w] = w * 8;
  std::string why;
  int owner = 0;
  if (!c.registerMemory(&owner, buf.data(), total, &why)) die("landing: registration: " + why);
  boot.barrier();
  while (!c.peerOfferActiveForTesting()) {
    checkHealth(c, "landing offer");
    if (Clock::now() > deadline) die("landing: the offer never arrived");
  }
  for (uint64_t at = 0; at < total; at += s) {
    while (!c.sendSlot()) {
      checkHealth(c, "landing");
      if (Clock::now() > deadline) die("landing: stalled at " + std::to_string(at));
    }
    c.postReference(reinterpret_cast<uint8_t*>(buf.data()) + at, s, 77);
  }
  while (!c.consumed(c.postedCount())) {
    checkHealth(c, "landing");
    if (Clock::now() > deadline) die("landing: the writes never completed");
  }
  c.deregisterMemory(&owner, buf.data(), total);
  boot.barrier();
  return 0;
}

// `name`: the transport ("ib", or "tcp" to compare); `benchMiB` > 0 runs only a checked stream
// of that size and reports its rate.
int runPair(int rank, const std::string& idFile, const std::string& name, int benchMiB) {
  bootstrap::UniqueIdBytes id{};
  if (rank == 0) id = bootstrap::generateUniqueId(Tuning::fromEnvironment());
  if (!shareBytes(rank == 0, idFile, &id, sizeof(id))) die("no unique id at " + idFile);
  auto boot = bootstrap::Bootstrap::create(id, rank, 2, std::chrono::seconds(120),
                                           std::chrono::seconds(120));
  transport::Transport* ib = nullptr;
  for (transport::Transport* t : transport::transports())
    if (t->name() == name) ib = t;
  if (!ib) die("this build has no " + name + " transport");
  Tuning tuning = Tuning::fromEnvironment();
  std::vector<transport::PeerInfo> peers(2);
  std::vector<std::shared_ptr<Doorbell>> bells = {std::make_shared<Doorbell>(),
                                                  std::make_shared<Doorbell>()};
  transport::ConnectContext ctx;
  ctx.commHash = boot->commHash();
  ctx.rank = rank;
  ctx.nranks = 2;
  ctx.peers = &peers;
  ctx.bells = &bells;
  ctx.slots = 8;
  ctx.slotBytes = 128 << 10;
  ctx.timeout = std::chrono::seconds(60);
  ctx.tuning = &tuning;
  ctx.selfBell = bells[rank].get();
  peers[rank] = transport::localPeerInfo(rank, tuning);
  ib->publish(&ctx, &peers[rank]);
  boot->allgather(peers.data(), sizeof(transport::PeerInfo));
  if (!ib->canConnect(peers[0], peers[1])) die(name + " cannot link the two hosts");
  const int peer = 1 - rank;
  if (benchMiB > 0) {
    auto c = ib->connect(ctx, peer, 0);
    checkedStream(*c, rank, 8ull << 20, static_cast<uint32_t>(ctx.slotBytes));  // warm-up
    const uint64_t total = static_cast<uint64_t>(benchMiB) << 20;
    const double secs = checkedStream(*c, rank, total, static_cast<uint32_t>(ctx.slotBytes));
    boot->barrier();
    std::printf("rank %d: %s: %d MiB in slots of %zu B: %.1f MB/s\n", rank, name.c_str(), benchMiB,
                ctx.slotBytes, total / secs / 1e6);
    if (name == "ib") {
      // Zero copy: written from the sender's registered buffer straight into the receiver's.
      auto& ibc = dynamic_cast<ib::IbConnection&>(*c);
      const double landed =
          landedStream(ibc, *boot, rank, total, static_cast<uint32_t>(ctx.slotBytes));
      if (rank == 1)
        std::printf("rank 1: ib: %d MiB landed by reference in messages of %zu B: %.1f MB/s\n",
                    benchMiB, ctx.slotBytes, total / landed / 1e6);
    }
    return 0;
  }
  std::vector<Conn> conns;
  for (int ch = 0; ch < 14; ++ch) conns.push_back(ib->connect(ctx, peer, ch));
  const uint32_t s = static_cast<uint32_t>(ctx.slotBytes);

  // Ordered, zero-byte and odd-sized messages, both ways on one connection.
  std::mt19937 rng(11);
  std::vector<uint32_t> sizes = {0, 0, 1, 2, 3, 7, 13, 63, 65, 4095, 4097, 65537, s - 1, s, 0};
  for (int i = 0; i < 200; ++i) sizes.push_back(rng() % (s + 1));
  for (int dir = 0; dir < 2; ++dir) {
    if (rank == dir)
      sendAll(*conns[0], sizes, "order and content");
    else
      recvAll(*conns[0], sizes, "order and content");
  }
  std::printf("rank %d: order, zero-byte and odd sizes both ways: ok\n", rank);

  // A full FIFO: the sender sees "full" after exactly `slots` messages, the receiver then drains.
  uint32_t filled = 0;
  if (rank == 0) {
    auto until = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < until && filled <= ctx.slots) {
      if (void* slot = conns[1]->sendSlot()) {
        std::memset(slot, static_cast<int>(filled), 1000);
        conns[1]->post(1000, filled++);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    boot->send(1, 1, &filled, sizeof(filled));
  } else {
    boot->recv(0, 1, &filled, sizeof(filled));
    for (uint32_t m = 0; m < filled; ++m) {
      uint32_t bytes = 0, tag = 0;
      std::string why;
      const uint8_t* p = recvOne(*conns[1], &bytes, &tag, std::chrono::seconds(30), &why);
      if (!p || tag != m || bytes != 1000 || p[999] != static_cast<uint8_t>(m))
        die("full FIFO: message " + std::to_string(m) + " " + why);
      conns[1]->release();
    }
  }
  if (filled != ctx.slots)
    die("full FIFO: " + std::to_string(filled) + " messages fit, the FIFO has " +
        std::to_string(ctx.slots) + " slots");
  std::printf("rank %d: full FIFO of %u then drained: ok\n", rank, filled);

  // Eight channels at once in both directions, received in reverse order of the channels.
  {
    const int kPer = 30;
    std::vector<int> sent(8, 0), got(8, 0);
    int done = 0;
    auto deadline = Clock::now() + std::chrono::seconds(120);
    // Until every message is received AND sent: a rank that received all of its peer's messages
    // may still hold some of its own, waiting for credits (leaving then stranded the peer here
    // while this rank waited for the next phase's data: the flake of vm.ib_two_hosts).
    auto allSent = [&] {
      return std::all_of(sent.begin(), sent.end(), [](int n) { return n == kPer; });
    };
    while (done < 8 || !allSent()) {
      for (int ch = 0; ch < 8; ++ch)
        while (sent[ch] < kPer) {
          transport::Connection& c = *conns[2 + ch];
          const uint32_t n = (ch * 977 + sent[ch] * 131 + rank) % s;
          void* p = c.sendSlot();
          if (!p) break;
          std::memset(p, ch + sent[ch], n);
          c.post(n, static_cast<uint32_t>(sent[ch]++));
        }
      for (int ch = 7; ch >= 0; --ch) {
        transport::Connection& c = *conns[2 + ch];
        uint32_t bytes = 0, tag = 0;
        while (const void* p = c.recvSlot(&bytes, &tag)) {
          const uint32_t n = (ch * 977 + got[ch] * 131 + peer) % s;
          if (tag != static_cast<uint32_t>(got[ch]) || bytes != n ||
              (n && static_cast<const uint8_t*>(p)[n - 1] != static_cast<uint8_t>(ch + got[ch])))
            die("many channels: channel " + std::to_string(ch) + " message " +
                std::to_string(got[ch]));
          c.release();
          if (++got[ch] == kPer) ++done;
        }
        checkHealth(c, "many channels");
      }
      if (Clock::now() > deadline) die("many channels: stalled");
      std::this_thread::yield();
    }
  }
  std::printf("rank %d: 8 channels both ways at once: ok\n", rank);

  // A stream of 32 MiB whose 8-byte words hold their offset.
  const double streamSecs = checkedStream(*conns[10], rank, 32ull << 20, s);
  std::printf("rank %d: 32 MiB checked stream: ok (%.1f MB/s under emulation)\n", rank,
              (32 << 20) / streamSecs / 1e6);

  // Zero copy across the hosts.
  landedStream(dynamic_cast<ib::IbConnection&>(*conns[13]), *boot, rank, 4ull << 20, s);
  std::printf("rank %d: 4 MiB landed in place by reference: ok\n", rank);

  // Poison from rank 1 reaches rank 0.
  boot->barrier();
  if (rank == 1) {
    conns[11]->poison();
  } else {
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!conns[11]->poisoned())
      if (Clock::now() > deadline)
        die("poison never arrived");
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("rank %d: poison: ok\n", rank);

  // Rank 1 dies; rank 0, waiting for data on channel 12, must fail within 5 s naming it.
  boot->barrier();
  if (rank == 1) {
    std::fflush(stdout);
    ::kill(::getpid(), SIGKILL);
  }
  const auto start = Clock::now();
  uint32_t bytes = 0, tag = 0;
  std::string why;
  if (recvOne(*conns[12], &bytes, &tag, std::chrono::seconds(30), &why)) die("data from the dead");
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  if (secs > 5 || why.find("rank 1") == std::string::npos)
    die("after the peer was killed: '" + why + "' after " + std::to_string(secs) + " s");
  std::printf("rank 0: peer killed: failed after %.2f s: %s\n", secs, why.c_str());
  std::printf("pair passed\n");
  std::fflush(stdout);
  std::_Exit(0);  // the dead peer's bootstrap and connections need no orderly teardown
}

int runKill(int index, int procs, int perProc, const std::string& idFile, int victim) {
  ncclUniqueId id;
  if (index == 0 && ncclGetUniqueId(&id) != ncclSuccess) die("ncclGetUniqueId");
  if (!shareBytes(index == 0, idFile, id.internal, sizeof(id.internal))) die("no unique id");
  const int n = procs * perProc;
  std::vector<ncclComm_t> comms(perProc);
  ncclGroupStart();
  for (int j = 0; j < perProc; ++j)
    if (ncclCommInitRank(&comms[j], n, id, index * perProc + j) != ncclSuccess) die("init");
  if (ncclGroupEnd() != ncclSuccess) die("init");
  const size_t count = 1 << 14;
  std::vector<std::vector<float>> bufs(perProc, std::vector<float>(count, 1.0f));
  // Registered as applications do (every ib connection registers them as it is made).
  for (int j = 0; j < perProc; ++j) {
    void* handle = nullptr;
    if (ncclCommRegister(comms[j], bufs[j].data(), count * sizeof(float), &handle) != ncclSuccess)
      die("ncclCommRegister");
  }
  for (int iter = 0; iter < 1000; ++iter) {
    if (index == victim && iter == 3) {
      std::printf("process %d: killing itself\n", index);
      std::fflush(stdout);
      ::kill(::getpid(), SIGKILL);
    }
    const auto start = Clock::now();
    ncclGroupStart();
    for (int j = 0; j < perProc; ++j)
      ncclAllReduce(bufs[j].data(), bufs[j].data(), count, ncclFloat, ncclSum, comms[j], nullptr);
    const ncclResult_t r = ncclGroupEnd();
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    if (r == ncclSuccess) continue;
    for (int j = 0; j < perProc; ++j) {
      const std::string why = ncclGetLastError(comms[j]);
      bool named = false;
      for (int k = 0; k < perProc; ++k)
        named |= why.find("rank " + std::to_string(victim * perProc + k)) != std::string::npos;
      std::printf("process %d rank %d: %s after %.2f s: %s\n", index, index * perProc + j,
                  ncclGetErrorString(r), secs, why.c_str());
      if (!named || secs > 5) die("the failure came late or does not name the killed rank");
    }
    std::printf("process %d: kill seen: ok\n", index);
    std::fflush(stdout);
    std::_Exit(0);  // the communicators hold a dead peer: no orderly teardown
  }
  die("the killed process was never noticed");
}

}  // namespace
}  // namespace weft::test

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "pair" && argc == 4) return weft::test::runPair(std::atoi(argv[2]), argv[3], "ib", 0);
  if (mode == "bench" && argc == 6)
    return weft::test::runPair(std::atoi(argv[3]), argv[4], argv[2], std::atoi(argv[5]));
  if (mode == "kill" && argc == 7)
    return weft::test::runKill(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), argv[5],
                               std::atoi(argv[6]));
  std::fprintf(stderr,
               "usage: two_hosts pair RANK ID_FILE | kill INDEX PROCS RANKS_PER_PROC ID_FILE "
               "VICTIM | bench TRANSPORT RANK ID_FILE MIB\n");
  return 2;
}
