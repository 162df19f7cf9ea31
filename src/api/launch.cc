// weftCommInitFromEnv: a communicator from a torchrun-style environment, without passing a unique
// id around. Every rank builds the same id from the environment (the root address is
// MASTER_ADDR:MASTER_PORT, the secret is derived from WEFT_JOB_SECRET or, failing that, from the
// job's address and size), and rank 0 serves the rendezvous there.
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "src/api/handle.h"
#include "src/bootstrap/root.h"
#include "src/bootstrap/secret.h"
#include "src/bootstrap/unique_id.h"
#include "src/common/env.h"
#include "weft/weft.h"

namespace weft::api {
namespace {

// The first of `names` that is set, else "".
std::string firstEnv(std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v && *v) {
      *which = n;
      return v;
    }
  *which = *names.begin();
  return "";
}

int parseInt(const std::string& text, const char* name, int lo, int hi) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || v < lo || v > hi)
    fail(Status::kInvalidArgument, std::string(name) + "=" + text + " is not an integer in [" +
                                       std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(v);
}

// 32 secret bytes every rank derives alike.
bootstrap::Secret deriveSecret(const std::string& material) {
  bootstrap::Secret s{};
  for (size_t i = 0; i < s.size(); i += 8) {
    uint64_t h = bootstrap::hashBytes(material.data(), material.size(), 0x5745465400ull + i);
    std::memcpy(s.data() + i, &h, 8);
  }
  return s;
}

bootstrap::SocketAddress anyAddress(int family, uint16_t port) {
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    len = sizeof(*a);
  }
  bootstrap::SocketAddress out(reinterpret_cast<sockaddr*>(&ss), len);
  out.setPort(port);
  return out;
}

}  // namespace
}  // namespace weft::api

using namespace weft;

WEFT_EXPORT ncclResult_t weftCommInitFromEnv(ncclComm_t* comm) {
  ncclUniqueId id;
  int rank = 0, size = 0;
  ncclResult_t r = api::guard("weftCommInitFromEnv", [&](std::string*) {
    if (!comm) fail(Status::kInvalidArgument, "comm pointer is NULL");
    const char *rankVar, *sizeVar, *addrVar, *portVar, *localVar;
    std::string rankText = api::firstEnv({"WEFT_RANK", "RANK"}, &rankVar);
    std::string sizeText = api::firstEnv({"WEFT_WORLD_SIZE", "WORLD_SIZE"}, &sizeVar);
    std::string addr = api::firstEnv({"WEFT_MASTER_ADDR", "MASTER_ADDR"}, &addrVar);
    std::string port = api::firstEnv({"WEFT_MASTER_PORT", "MASTER_PORT"}, &portVar);
    std::string local = api::firstEnv({"WEFT_LOCAL_RANK", "LOCAL_RANK"}, &localVar);
    std::string missing;
    for (auto [value, name] : {std::pair{&rankText, "RANK"},
                               {&sizeText, "WORLD_SIZE"},
                               {&addr, "MASTER_ADDR"},
                               {&port, "MASTER_PORT"}})
      if (value->empty()) missing += std::string(missing.empty() ? "" : ", ") + name;
    if (!missing.empty())
      fail(Status::kInvalidArgument,
           "weftCommInitFromEnv: " + missing +
               " not set (torchrun's variables, or WEFT_RANK, WEFT_WORLD_SIZE, "
               "WEFT_MASTER_ADDR, WEFT_MASTER_PORT)");
    size = api::parseInt(sizeText, sizeVar, 1, 1 << 24);
    rank = api::parseInt(rankText, rankVar, 0, size - 1);
    api::parseInt(port, portVar, 1, 65535);
    if (!local.empty()) api::parseInt(local, localVar, 0, size - 1);

    // "host:port", "1.2.3.4:port" or "[v6]:port"; a bare IPv6 address needs brackets.
    std::string hostPart =
        addr.find(':') != std::string::npos && addr.front() != '[' ? "[" + addr + "]" : addr;
    bootstrap::SocketAddress root = bootstrap::SocketAddress::parse(hostPart + ":" + port);
    // Not an env-registry knob on purpose: the registry prints every value at INFO.
    const char* jobSecret = std::getenv("WEFT_JOB_SECRET");
    std::string material = jobSecret ? jobSecret : "";
    if (material.empty()) {
      // Without a job secret anyone who knows the address and size can join, as with
      // torchrun's own store; WEFT_JOB_SECRET closes that.
      const char* run = std::getenv("TORCHELASTIC_RUN_ID");
      material = "weft-env/" + root.toString() + "/" + sizeText + "/" + (run ? run : "");
    }
    bootstrap::Secret secret = api::deriveSecret(material);
    bootstrap::UniqueIdBytes bytes = bootstrap::encodeUniqueId(root, secret);
    static_assert(sizeof(bytes.bytes) == sizeof(id.internal));
    std::memcpy(id.internal, bytes.bytes, sizeof(id.internal));
    if (rank == 0) {
      // Listen on MASTER_ADDR itself when it is one of ours, else on every address.
      bootstrap::Socket listen;
      try {
        listen = bootstrap::Socket::listen(root);
      } catch (const Error&) {
        listen = bootstrap::Socket::listen(api::anyAddress(root.family(), root.port()));
      }
      auto timeout =
          std::chrono::milliseconds(std::max<int64_t>(1, env::getInt("WEFT_BOOTSTRAP_TIMEOUT_MS")));
      bootstrap::startRoot(std::move(listen), secret, timeout);
    }
    WEFT_INFO(INIT, "weftCommInitFromEnv: rank %d of %d (%s, %s), local rank %s, root %s", rank,
              size, rankVar, sizeVar, local.empty() ? "-" : local.c_str(), root.toString().c_str());
    return Status::kSuccess;
  });
  if (r != ncclSuccess) return r;
  return ncclCommInitRank(comm, size, id, rank);
}
