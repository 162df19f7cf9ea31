// The rendezvous secret carried by a unique id: 32 random bytes that every bootstrap connection
// presents before anything else is read from it.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace weft::bootstrap {

inline constexpr size_t kSecretBytes = 32;
using Secret = std::array<uint8_t, kSecretBytes>;

// 32 bytes from getrandom(); throws Error(kSystemError) if the kernel cannot provide them.
Secret randomSecret();

// Compares in time independent of where the first difference is, so a stranger probing the
// bootstrap port learns nothing from response timing.
bool secretsEqual(const uint8_t* a, const uint8_t* b);

// 64-bit FNV-1a with a final avalanche mix; not cryptographic, used for ids and checksums.
uint64_t hashBytes(const void* data, size_t bytes, uint64_t seed = 0);

// The communicator hash derived from a secret (equal on all ranks; safe to print or put in
// shared-memory names: 64 bits of a hash do not reveal the 256-bit secret).
uint64_t secretHash(const Secret& secret);

}  // namespace weft::bootstrap
