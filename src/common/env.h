// The one registry of environment knobs. Every knob is declared once in env.cc
// with its default and meaning; `weft::env::dump()` prints them at INFO.
#pragma once
#include <cstdint>
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

// Raw value of a knob (environment, then alias, then default). Throws on an unregistered name.
std::string get(const char* name);
int64_t getInt(const char* name);
double getDouble(const char* name);
bool isSet(const char* name);

// Prints every knob and its current value through the logger at INFO.
void dump();

}  // namespace weft::env
