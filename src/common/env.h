// Environment knobs: the registry (knobs.h), and the reads that report through the logger. Every
// knob is declared once in knobs.cc with its default and meaning; `weft::env::dump()` prints
// them at INFO.
#pragma once
#include <cstdint>

#include "src/common/knobs.h"

namespace weft::env {

// The knob as an integer; a value that is not one is reported at WARN and the default is used.
int64_t getInt(const char* name);

// Prints every knob and its current value through the logger at INFO.
void dump();

}  // namespace weft::env
