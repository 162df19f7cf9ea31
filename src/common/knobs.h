// The one registry of environment knobs. Every knob is declared once in knobs.cc with its default
// and meaning. This is the raw registry, below the logger (whose own settings are knobs); typed
// reads that report bad values, and the dump at INFO, are in env.h.
#pragma once
#include <string>
#include <vector>

namespace weft::env {

struct Knob {
  const char* name;      // primary name (NCCL_* where NCCL has the same meaning)
  const char* alias;     // WEFT_* alias or nullptr
  const char* fallback;  // default value as text
  const char* help;      // one line
};

// All registered knobs, in declaration order.
const std::vector<Knob>& knobs();

// The registered knob `name`; throws weft::Error(kInternalError) on an unregistered name.
const Knob& knob(const char* name);

// Raw value of a knob (environment, then alias, then default). Throws on an unregistered name.
std::string get(const char* name);
double getDouble(const char* name);
bool isSet(const char* name);

}  // namespace weft::env
