// What the replay programs that check generated seeds share: `--emit DIR` writing the seeds as
// libFuzzer's starting corpus, and a run of a fuzz property over every seed (which it must
// accept), deterministic malformed variants of it (every truncation, bit flips over a range of
// bytes) and hostile inputs (which it must refuse), counting the inputs run and the unexpected
// results.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::fuzz {

// With `--emit DIR` on the command line: writes `seeds` as DIR/seed0, DIR/seed1, ... and
// returns true (the program then exits 0). Otherwise returns false.
inline bool emitSeeds(int argc, char** argv, const std::vector<std::string>& seeds) {
  if (argc != 3 || std::string(argv[1]) != "--emit") return false;
  int i = 0;
  for (const std::string& s : seeds)
    std::ofstream(std::string(argv[2]) + "/seed" + std::to_string(i++), std::ios::binary) << s;
  return true;
}

class SeedReplay {
 public:
  using Property = std::function<bool(std::string_view)>;  // whether the input was accepted
  // `label` adds to a failure line what the input is (" (selector 1)"); may be empty.
  explicit SeedReplay(Property check, std::function<std::string(const std::string&)> label = {})
      : check_(std::move(check)), label_(std::move(label)) {}

  // Whether every truncation of a seed must be refused; otherwise it is only run.
  bool truncationsRefused = false;
  // The bits flipped in a seed: those of bytes [flipFromByte, flipToByte) that it has.
  size_t flipFromByte = 0;
  size_t flipToByte = SIZE_MAX;

  size_t runs = 0;   // inputs run
  int failures = 0;  // unexpected results

  void expect(bool accepted, bool want, const std::string& input, const char* what) {
    if (accepted == want) return;
    std::fprintf(stderr, "%s input of %zu bytes%s was %s\n", what, input.size(),
                 label_ ? label_(input).c_str() : "", accepted ? "accepted" : "refused");
    ++failures;
  }

  // Each seed must be accepted; then its truncations and bit flips.
  void seeds(const std::vector<std::string>& seeds) {
    for (const std::string& s : seeds) {
      expect(check_(s), true, s, "seed");
      ++runs;
      for (size_t len = 0; len < s.size(); ++len, ++runs) {
        const bool accepted = check_(s.substr(0, len));
        if (truncationsRefused) expect(accepted, false, s, "truncated");
      }
      const size_t flipEnd = std::min(s.size(), flipToByte) * 8;
      for (size_t bit = flipFromByte * 8; bit < flipEnd; ++bit, ++runs) {
        std::string v = s;
        v[bit / 8] = static_cast<char>(v[bit / 8] ^ (1 << (bit % 8)));
        check_(v);
      }
    }
  }

  // Each must be refused.
  void hostile(const std::vector<std::string>& inputs) {
    for (const std::string& s : inputs) {
      expect(check_(s), false, s, "hostile");
      ++runs;
    }
  }

  // Prints "N <what> inputs checked, F unexpected"; returns the program's exit status.
  int report(const char* what) const {
    std::printf("%zu %s inputs checked, %d unexpected\n", runs, what, failures);
    return failures == 0 ? 0 : 1;
  }

 private:
  Property check_;
  std::function<std::string(const std::string&)> label_;
};

}  // namespace weft::fuzz
