// Runs the bootstrap wire property (bootstrap_wire_check.h) over generated seeds (valid root
// hellos, replies, peer hellos with frames, unique ids) and deterministic malformed variants of
// them (truncations, single-byte flips, hostile lengths), plus any files or directories given.
// Then the same root-port and rank-port bytes go over real sockets to a live root and to a live
// rank, which must drop them and still complete a rendezvous and an allgather.
// `--emit DIR` writes the seeds as the fuzzer's starting corpus instead.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/tcp_bootstrap.h"
#include "src/bootstrap/unique_id.h"
#include "tests/fuzz/bootstrap_wire_check.h"

namespace {

namespace bs = weft::bootstrap;
namespace wire = weft::bootstrap::wire;
using Bytes = std::string;

Bytes tagged(char target, const uint8_t* p, size_t n) {
  return Bytes(1, target) + Bytes(reinterpret_cast<const char*>(p), n);
}

std::vector<Bytes> seeds(const bs::Secret& secret, const bs::SocketAddress& addr) {
  std::vector<Bytes> v;
  uint8_t hello[wire::kRootHelloBytes];
  wire::encodeRootHello(secret, {wire::kRootHelloVersion, 1, 4, addr}, hello);
  v.push_back(tagged(0, hello, sizeof(hello)));
  uint8_t reply[wire::kRootReplyHeaderBytes];
  wire::encodeRootReply({0, 4, 4}, reply);
  v.push_back(tagged(0, reply, sizeof(reply)));
  uint8_t peer[wire::kPeerHelloBytes];
  wire::encodePeerHello(secret, 1, peer);
  Bytes stream(reinterpret_cast<char*>(peer), sizeof(peer));
  for (uint32_t channel = 0; channel < 3; ++channel) {
    uint8_t header[wire::kFrameHeaderBytes];
    wire::encodeFrameHeader({channel, 7, 5}, header);
    stream += Bytes(reinterpret_cast<char*>(header), sizeof(header)) + "abcde";
  }
  v.push_back(Bytes(1, 1) + stream);
  bs::UniqueIdBytes id = bs::encodeUniqueId(addr, secret);
  v.push_back(tagged(2, reinterpret_cast<uint8_t*>(id.bytes), sizeof(id.bytes)));
  return v;
}

std::vector<Bytes> variants(const std::vector<Bytes>& base) {
  std::vector<Bytes> v = base;
  for (const Bytes& b : base) {
    for (size_t n = 0; n < b.size(); n += 3) v.push_back(b.substr(0, n));
    for (size_t i = 1; i < b.size(); ++i)
      for (uint8_t flip : {0x01, 0x80, 0xff}) {
        Bytes c = b;
        c[i] = static_cast<char>(c[i] ^ flip);
        v.push_back(c);
      }
    v.push_back(b + Bytes(64, '\xff'));
  }
  // Hostile frame lengths after a valid-looking peer hello.
  for (uint64_t length :
       {uint64_t{wire::kMaxMessageBytes}, uint64_t{wire::kMaxMessageBytes + 1}, ~uint64_t{0}}) {
    Bytes s = base[2].substr(0, 1 + wire::kPeerHelloBytes);
    uint8_t header[wire::kFrameHeaderBytes];
    wire::encodeFrameHeader({0, 1, length}, header);
    v.push_back(s + Bytes(reinterpret_cast<char*>(header), sizeof(header)));
  }
  return v;
}

std::vector<Bytes> readInputs(const std::string& path) {
  std::vector<std::string> files;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {};
  if (!S_ISDIR(st.st_mode)) {
    files.push_back(path);
  } else if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') files.push_back(path + "/" + e->d_name);
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  std::vector<Bytes> out;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return out;
}

// Sends `bytes` on a fresh connection to `to` and closes it.
void sendStranger(const bs::SocketAddress& to, const Bytes& bytes) {
  bs::Socket s = bs::Socket::connect(to, weft::Deadline(std::chrono::seconds(10)), -1, "stranger");
  if (!bytes.empty())
    s.sendAll(bytes.data(), bytes.size(), weft::Deadline(std::chrono::seconds(10)), -1, "stranger");
}

// The bytes of every root-port (target 0) or rank-port (target 1) input, with the real secret
// in front where the input carries one, so they reach past the secret check.
std::vector<Bytes> wireBytes(const std::vector<Bytes>& inputs, char target,
                             const bs::Secret& secret) {
  std::vector<Bytes> out;
  for (const Bytes& in : inputs) {
    if (in.empty() || in[0] != target) continue;
    Bytes b = in.substr(1);
    wire::RootHello hello;
    // A hello that decodes with the real secret is a rank, not a stranger: it would join.
    if (target == 0 && b.size() >= wire::kRootHelloBytes &&
        wire::decodeRootHello(reinterpret_cast<const uint8_t*>(b.data()), &hello) &&
        hello.version == wire::kRootHelloVersion)
      continue;
    out.push_back(b);
    if (b.size() >= bs::kSecretBytes)
      out.push_back(Bytes(reinterpret_cast<const char*>(secret.data()), secret.size()) +
                    b.substr(bs::kSecretBytes));
  }
  return out;
}

int liveCheck(const std::vector<Bytes>& inputs) {
  weft::Tuning tuning = weft::Tuning::fromEnvironment();
  tuning.commId = "127.0.0.1:0";
  bs::UniqueIdBytes id = bs::generateUniqueId(tuning);
  bs::DecodedId d = bs::decodeUniqueId(id);
  size_t sent = 0;
  for (const Bytes& b : wireBytes(inputs, 0, d.secret)) {
    sendStranger(d.root, b);
    ++sent;
  }
  constexpr int kRanks = 3;
  std::vector<std::unique_ptr<bs::Bootstrap>> ranks(kRanks);
  std::vector<std::string> errors(kRanks);
  auto join = [&](auto body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        try {
          body(r);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r)
      if (!errors[r].empty()) {
        std::fprintf(stderr, "rank %d: %s\n", r, errors[r].c_str());
        return 1;
      }
    return 0;
  };
  if (join([&](int r) {
        ranks[r] = bs::Bootstrap::create(id, r, kRanks, std::chrono::seconds(30),
                                         std::chrono::seconds(30));
      }))
    return 1;
  // Rank 0 hears from rank 2 only (the ring), so a stranger's hello as rank 1 goes through
  // authentication and frame decoding once; the others are dropped before.
  auto* rank0 = dynamic_cast<bs::TcpBootstrap*>(ranks[0].get());
  for (const Bytes& b : wireBytes(inputs, 1, d.secret)) {
    if (b.size() >= wire::kPeerHelloBytes &&
        wire::getU32(reinterpret_cast<const uint8_t*>(b.data()) + bs::kSecretBytes + 4) == 1)
      continue;  // rank 1's slot stays with rank 1
    sendStranger(rank0->listenAddress(), b);
    ++sent;
  }
  int failed = join([&](int r) {
    std::vector<int> all(kRanks);
    all[r] = r * 10 + 1;
    ranks[r]->allgather(all.data(), sizeof(int));
    for (int k = 0; k < kRanks; ++k)
      if (all[k] != k * 10 + 1) throw std::runtime_error("allgather returned wrong data");
    ranks[r]->barrier();
  });
  std::printf("live root and rank: %zu stranger connections, then rendezvous and allgather %s\n",
              sent, failed ? "FAILED" : "ok");
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  bs::Secret secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 37 + 1);
  std::vector<Bytes> base = seeds(secret, bs::SocketAddress::parse("127.0.0.1:29500"));
  auto v6 = seeds(secret, bs::SocketAddress::parse("[::1]:29500"));
  base.insert(base.end(), v6.begin(), v6.end());
  if (argc == 3 && std::string(argv[1]) == "--emit") {
    ::mkdir(argv[2], 0755);
    for (size_t i = 0; i < base.size(); ++i) {
      std::ofstream out(std::string(argv[2]) + "/seed" + std::to_string(i), std::ios::binary);
      out << base[i];
    }
    return 0;
  }
  std::vector<Bytes> inputs = variants(base);
  for (int i = 1; i < argc; ++i) {
    auto more = readInputs(argv[i]);
    inputs.insert(inputs.end(), more.begin(), more.end());
  }
  for (const Bytes& in : inputs) weft::fuzz::checkBootstrapBytes(in);
  std::printf("bootstrap wire property held for %zu inputs\n", inputs.size());
  return liveCheck(inputs);
}
