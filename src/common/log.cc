#include "src/common/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "src/common/knobs.h"

namespace weft::log {
namespace {

struct Config {
  Level level = Level::kWarn;
  uint32_t subsys = INIT | ENV;
  FILE* out = stderr;
  char host[64] = {};
};

uint32_t parseSubsys(const std::string& text) {
  static const struct {
    const char* name;
    uint32_t bit;
  } kNames[] = {
      {"INIT", INIT},           {"COLL", COLL}, {"P2P", P2P},       {"SHM", SHM},     {"NET", NET},
      {"BOOTSTRAP", BOOTSTRAP}, {"ENV", ENV},   {"TUNING", TUNING}, {"ALLOC", ALLOC}, {"ALL", ALL}};
  bool invert = !text.empty() && text[0] == '^';
  uint32_t mask = 0;
  size_t pos = invert ? 1 : 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (const auto& n : kNames)
      if (strcasecmp(item.c_str(), n.name) == 0) mask |= n.bit;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

const Config& config() {
  static const Config cfg = [] {
    Config c;
    std::string lvl = env::get("NCCL_DEBUG");
    if (strcasecmp(lvl.c_str(), "NONE") == 0)
      c.level = Level::kNone;
    else if (strcasecmp(lvl.c_str(), "VERSION") == 0)
      c.level = Level::kVersion;
    else if (strcasecmp(lvl.c_str(), "INFO") == 0)
      c.level = Level::kInfo;
    else if (strcasecmp(lvl.c_str(), "TRACE") == 0)
      c.level = Level::kTrace;
    else
      c.level = Level::kWarn;
    c.subsys = parseSubsys(env::get("NCCL_DEBUG_SUBSYS"));
    if (c.level >= Level::kTrace && !env::isSet("NCCL_DEBUG_SUBSYS")) c.subsys = ALL;
    gethostname(c.host, sizeof(c.host) - 1);
    std::string file = env::get("NCCL_DEBUG_FILE");
    if (!file.empty()) {
      std::string path;
      for (size_t i = 0; i < file.size(); ++i) {
        if (file[i] == '%' && i + 1 < file.size()) {
          char f = file[++i];
          if (f == 'h')
            path += c.host;
          else if (f == 'p')
            path += std::to_string(getpid());
          else
            path += f;
        } else {
          path += file[i];
        }
      }
      // Appended to, not truncated: processes of one job that share the name (no %p) then
      // all keep their lines, where each opening it afresh would cut the others' off.
      if (FILE* fp = std::fopen(path.c_str(), "a")) c.out = fp;
    }
    return c;
  }();
  return cfg;
}

}  // namespace

bool enabled(Level level, uint32_t subsys) {
  const Config& c = config();
  if (level > c.level) return false;
  return level <= Level::kWarn || (c.subsys & subsys);
}

void write(Level level, uint32_t subsys, const char* file, int line, const char* fmt, ...) {
  const Config& c = config();
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const char* tag = level == Level::kWarn ? "WARN " : level == Level::kTrace ? "TRACE " : "INFO ";
  if (level == Level::kTrace)
    std::fprintf(c.out, "%s:%d:%d [weft] %s%s:%d %s\n", c.host, getpid(), gettid(), tag, file, line,
                 msg);
  else
    std::fprintf(c.out, "%s:%d:%d [weft] %s%s\n", c.host, getpid(), gettid(), tag, msg);
  std::fflush(c.out);
}

}  // namespace weft::log
