// Deterministic random numbers for the soak: every rank of a job derives the same values from the
// same seeds, in threads and in separate processes alike.
#pragma once
#include <cmath>
#include <cstdint>

namespace soak {

// SplitMix64's finalizer: a well-mixed 64-bit value from two.
inline uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9E3779B97F4A7C15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix(state_++, 0x736f616bull); }
  // Uniform in [0, n), n > 0.
  uint64_t below(uint64_t n) { return next() % n; }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  bool chance(double p) { return uniform() < p; }
  // Log-uniform integer in [lo, hi], 1 <= lo <= hi.
  uint64_t logUniform(uint64_t lo, uint64_t hi) {
    double x = std::exp(
        std::log(static_cast<double>(lo)) +
        uniform() * (std::log(static_cast<double>(hi) + 1) - std::log(static_cast<double>(lo))));
    uint64_t v = static_cast<uint64_t>(x);
    return v < lo ? lo : v > hi ? hi : v;
  }

 private:
  uint64_t state_;
};

}  // namespace soak
