#include "src/bootstrap/secret.h"

#include <sys/random.h>

#include <cerrno>

#include "src/common/error.h"

namespace weft::bootstrap {

Secret randomSecret() {
  Secret s{};
  size_t got = 0;
  while (got < s.size()) {
    ssize_t n = ::getrandom(s.data() + got, s.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(Status::kSystemError, sysError("bootstrap: getrandom", errno));
    }
    got += static_cast<size_t>(n);
  }
  return s;
}

bool secretsEqual(const uint8_t* a, const uint8_t* b) {
  // Accumulate every difference; the volatile keeps the compiler from exiting early.
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < kSecretBytes; ++i) diff = diff | static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

uint64_t hashBytes(const void* data, size_t bytes, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  // splitmix64 finalizer: FNV alone mixes the last bytes poorly.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

uint64_t secretHash(const Secret& secret) {
  // A fixed seed separates this use from the id checksum.
  return hashBytes(secret.data(), secret.size(), 0x7765667463686173ull);  // "weftchas"
}

}  // namespace weft::bootstrap
