#include "src/topo/probes/probe.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace weft::topo::probe {

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  size_t start = 0;
  while (start < line.size() && std::isspace(static_cast<unsigned char>(line[start]))) ++start;
  return line.substr(start);
}

static bool isBdf(const std::string& s) {
  // dddd:bb:dd.f (domain may be longer than 4 hex digits)
  size_t c1 = s.find(':');
  if (c1 == std::string::npos || c1 < 4) return false;
  if (s.size() != c1 + 8 || s[c1 + 3] != ':' || s[c1 + 6] != '.') return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == c1 || i == c1 + 3 || i == c1 + 6) continue;
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

std::string busIdFromDevicePath(const std::string& path) {
  std::string last;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    std::string part =
        path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    if (isBdf(part)) last = part;
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return last.empty() ? "" : normalizeBusId(last);
}

std::string cpuMaskText(const std::vector<int>& cpus) {
  int maxCpu = 0;
  for (int c : cpus) maxCpu = std::max(maxCpu, c);
  int words = maxCpu / 32 + 1;
  std::vector<uint32_t> w(words, 0);
  for (int c : cpus)
    if (c >= 0) w[c / 32] |= 1u << (c % 32);
  std::string out;
  for (int i = words - 1; i >= 0; --i) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%08x", w[i]);
    out += buf;
    if (i) out += ",";
  }
  return out;
}

std::vector<int> parseCpuMask(const std::string& text) {
  std::vector<uint32_t> words;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string w = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (w.rfind("0x", 0) == 0) w = w.substr(2);
    // Malformed words (from a hand-written file) count as empty rather than failing.
    uint32_t v = 0;
    if (w.size() <= 8) {
      char* end = nullptr;
      unsigned long x = std::strtoul(w.c_str(), &end, 16);
      if (end && *end == '\0') v = static_cast<uint32_t>(x);
    }
    words.push_back(v);
    if (words.size() > 4096) break;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::vector<int> cpus;
  for (size_t i = 0; i < words.size(); ++i) {
    uint32_t v = words[words.size() - 1 - i];
    for (int b = 0; b < 32; ++b)
      if (v & (1u << b)) cpus.push_back(static_cast<int>(i * 32 + b));
  }
  return cpus;
}

}  // namespace weft::topo::probe
