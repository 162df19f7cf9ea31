#include "src/common/host_id.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace weft {

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 14695981039346656037ull;  // the FNV-1a 64-bit offset basis
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

namespace {

// Hostname and boot id: fixed for the life of the process.
std::string machineIdentity() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string id = host;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string bootId;
  if (boot >> bootId) id += bootId;
  return id;
}

}  // namespace

uint64_t hostHash(const std::string& hostId) {
  static const std::string base = machineIdentity();
  return fnv1a(hostId.empty() ? base : base + "/" + hostId);
}

}  // namespace weft
