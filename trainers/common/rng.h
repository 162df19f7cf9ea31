// Deterministic random numbers for initialisation and batch sampling.
//
// The generator is xoshiro256** (Blackman and Vigna) seeded by SplitMix64; normals come from the
// Box–Muller transform, one normal per two uniforms (the second of the pair is not kept, so every
// normal costs exactly two draws and a stream is easy to reproduce elsewhere). Independent streams
// are derived from a base seed and keys (a tensor's name, a step and a row) with derive_seed, so
// a rank that owns only part of a model or of a batch computes its part without the rest.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace weft::trainers {

// SplitMix64: advances state and returns the next well-mixed word.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// FNV-1a, 64-bit: a tensor name as a stream key.
inline uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// The seed of the stream (seed, a, b): each key is folded in through one SplitMix64 round.
inline uint64_t derive_seed(uint64_t seed, uint64_t a, uint64_t b = 0) {
  uint64_t state = seed;
  state = splitmix64(state) ^ a;
  state = splitmix64(state) ^ b;
  return splitmix64(state);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t state = seed;
    for (uint64_t& word : s_) word = splitmix64(state);
  }

  // xoshiro256**.
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n) by the multiply-high method (bias below 2^-64 * n, negligible).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

  // Standard normal: u1 in (0, 1], u2 in [0, 1), sqrt(-2 ln u1) * cos(2 pi u2).
  double normal() {
    const double u1 = 1.0 - uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace weft::trainers
