#include "src/common/env.h"

#include <cstdlib>
#include <string>

#include "src/common/log.h"

namespace weft::env {

int64_t getInt(const char* name) {
  std::string v = get(name);
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 0);
  if (v.empty() || *end != '\0') {
    WEFT_WARN(ENV, "%s=%s is not an integer; using default %s", name, v.c_str(),
              knob(name).fallback);
    return std::strtoll(knob(name).fallback, nullptr, 0);
  }
  return x;
}

void dump() {
  for (const auto& k : knobs()) {
    WEFT_INFO(ENV, "%-26s = %-10s %s  (%s)", k.name, get(k.name).c_str(),
              isSet(k.name) ? "[set]" : "", k.help);
  }
}

}  // namespace weft::env
