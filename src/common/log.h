// Logging controlled by NCCL_DEBUG / WEFT_DEBUG and NCCL_DEBUG_SUBSYS.
#pragma once
#include <cstdint>

namespace weft::log {

enum class Level : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

enum Subsys : uint32_t {
  INIT = 1u << 0,
  COLL = 1u << 1,
  P2P = 1u << 2,
  SHM = 1u << 3,
  NET = 1u << 4,
  BOOTSTRAP = 1u << 5,
  ENV = 1u << 6,
  TUNING = 1u << 7,
  ALLOC = 1u << 8,
  ALL = ~0u,
};

bool enabled(Level level, uint32_t subsys);
void write(Level level, uint32_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace weft::log

#define WEFT_LOG_AT(lvl, sub, ...)                                                \
  do {                                                                            \
    if (::weft::log::enabled(lvl, ::weft::log::sub))                              \
      ::weft::log::write(lvl, ::weft::log::sub, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define WEFT_WARN(sub, ...) WEFT_LOG_AT(::weft::log::Level::kWarn, sub, __VA_ARGS__)
#define WEFT_INFO(sub, ...) WEFT_LOG_AT(::weft::log::Level::kInfo, sub, __VA_ARGS__)
#define WEFT_TRACE(sub, ...) WEFT_LOG_AT(::weft::log::Level::kTrace, sub, __VA_ARGS__)
