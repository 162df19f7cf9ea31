// What weftGetUniqueIdFromEnv derives from a Slurm job step's environment, as plain functions of
// strings (no Weft types, so that tests compile them alone).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace weft::api::launchenv {

// Derived ports lie in [kSlurmPortBase, kSlurmPortBase + kSlurmPortSpan): above Linux's default
// ephemeral range (32768-60999), so that outgoing connections on the node rarely hold the port.
inline constexpr uint16_t kSlurmPortBase = 61000;
inline constexpr uint16_t kSlurmPortSpan = 4000;

// The first host a Slurm hostlist expression names: "node[07-09,12],gpu1" -> "node07",
// "rack[2-3]n[5,8]" -> "rack2n5", "login" -> "login". "" when the expression is malformed. Slurm
// places task 0 of a step on the first node of the step's list (block, cyclic and plane
// distributions), which is where rank 0 serves the rendezvous.
inline std::string firstSlurmHost(std::string_view list) {
  std::string host;
  size_t i = 0;
  while (i < list.size() && list[i] != ',') {
    if (list[i] == ']') return "";
    if (list[i] != '[') {
      host += list[i++];
      continue;
    }
    size_t close = list.find(']', i);
    if (close == std::string_view::npos) return "";
    std::string_view inside = list.substr(i + 1, close - i - 1);
    std::string_view first = inside.substr(0, inside.find_first_of(",-:"));
    if (first.empty() || first.find_first_not_of("0123456789") != std::string_view::npos) return "";
    host += first;  // keeps the zero padding: "[01-04]" -> "01"
    i = close + 1;
  }
  return host;
}

// The port every task of job `job`, step `step` derives alike (FNV-1a of "job.step"): concurrent
// steps on one node get different ports unless their hashes collide, and the port is free again
// for the next step since the root listens only until the rendezvous ends.
inline uint16_t slurmPort(std::string_view job, std::string_view step) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  };
  mix(job);
  mix(".");
  mix(step);
  return static_cast<uint16_t>(kSlurmPortBase + h % kSlurmPortSpan);
}

}  // namespace weft::api::launchenv
