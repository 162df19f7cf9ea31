#include "src/common/env.h"

#include <cstdlib>
#include <cstring>

#include "src/common/error.h"
#include "src/common/log.h"

namespace weft::env {

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> kKnobs = {
      {"NCCL_DEBUG", "WEFT_DEBUG", "WARN", "log level: NONE, VERSION, WARN, INFO, TRACE"},
      {"NCCL_DEBUG_SUBSYS", "WEFT_DEBUG_SUBSYS", "INIT,ENV", "comma list of subsystems (INIT, COLL, P2P, SHM, NET, BOOTSTRAP, ENV, TUNING, ALL; ^ negates)"},
      {"NCCL_DEBUG_FILE", "WEFT_DEBUG_FILE", "", "log file pattern (%h host, %p pid)"},
      {"NCCL_ALGO", "WEFT_ALGO", "", "algorithm override: ring, tree, rhd, direct; '^x' excludes; 'allreduce:tree;broadcast:ring' per collective"},
      {"NCCL_COMM_ID", "WEFT_COMM_ID", "", "ip:port of the bootstrap root instead of a random id"},
      {"NCCL_SOCKET_IFNAME", "WEFT_SOCKET_IFNAME", "", "interfaces for bootstrap sockets (prefix, ^exclude, =exact)"},
      {"WEFT_TIMEOUT_MS", nullptr, "300000", "timeout of every blocking wait, in milliseconds"},
      {"WEFT_BOOTSTRAP_TIMEOUT_MS", nullptr, "120000", "timeout of bootstrap rendezvous, in milliseconds"},
      {"WEFT_SLOT_BYTES", nullptr, "131072", "bytes per FIFO slot (pipelining slice)"},
      {"WEFT_SLOTS", nullptr, "8", "slots per connection FIFO and direction"},
      {"WEFT_SPIN_US", nullptr, "20", "microseconds a waiting rank spins before it yields and sleeps"},
      {"NCCL_SHM_DISABLE", "WEFT_SHM_DISABLE", "0", "1 disables the shared-memory transport"},
      {"WEFT_LOCAL_DISABLE", nullptr, "0", "1 disables the in-process transport (ranks in one process then use shm)"},
      {"WEFT_TREE_CHUNK_BYTES", nullptr, "131072", "pipelining chunk of tree algorithms"},
      {"WEFT_THREAD_AFFINITY", nullptr, "0", "1 pins executor threads with hwloc"},
      {"WEFT_SIMD", nullptr, "", "force kernel ISA: scalar, avx2, avx512"},
  };
  return kKnobs;
}

static const Knob& find(const char* name) {
  for (const auto& k : knobs())
    if (std::strcmp(k.name, name) == 0) return k;
  fail(Status::kInternalError, std::string("unregistered environment knob ") + name);
}

bool isSet(const char* name) {
  const Knob& k = find(name);
  return std::getenv(k.name) || (k.alias && std::getenv(k.alias));
}

std::string get(const char* name) {
  const Knob& k = find(name);
  if (const char* v = std::getenv(k.name)) return v;
  if (k.alias)
    if (const char* v = std::getenv(k.alias)) return v;
  return k.fallback;
}

int64_t getInt(const char* name) {
  std::string v = get(name);
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 0);
  if (v.empty() || *end != '\0') {
    WEFT_WARN(ENV, "%s=%s is not an integer; using default %s", name, v.c_str(), find(name).fallback);
    return std::strtoll(find(name).fallback, nullptr, 0);
  }
  return x;
}

double getDouble(const char* name) { return std::strtod(get(name).c_str(), nullptr); }

void dump() {
  for (const auto& k : knobs()) {
    bool set = std::getenv(k.name) || (k.alias && std::getenv(k.alias));
    WEFT_INFO(ENV, "%-26s = %-10s %s  (%s)", k.name, get(k.name).c_str(), set ? "[set]" : "", k.help);
  }
}

}  // namespace weft::env
