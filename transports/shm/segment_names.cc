#include "transports/shm/segment_names.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "src/common/log.h"

namespace weft::transport {
namespace {

constexpr char kPrefix[] = "weft.";
constexpr unsigned kPfExiting = 0x4;  // PF_EXITING in /proc/<pid>/stat's flags field

// Digits only, at most `maxDigits` of them, into *out; false otherwise.
bool parseDecimal(const std::string& s, size_t maxDigits, uint64_t* out) {
  if (s.empty() || s.size() > maxDigits) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// A line of /proc/<pid>/task/<tid>/stat: whether that thread is a zombie, dead or exiting.
bool taskExiting(const std::string& line) {
  // After the command name's closing parenthesis: state, ppid, pgrp, session, tty, tpgid, flags.
  size_t paren = line.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream fields(line.substr(paren + 1));
  std::string state;
  long long skip = 0;
  unsigned long long flags = 0;
  if (!(fields >> state >> skip >> skip >> skip >> skip >> skip >> flags)) return false;
  return state == "Z" || state == "X" || (flags & kPfExiting) != 0;
}

}  // namespace

uint64_t pidNamespaceId() {
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

std::string segmentName(uint64_t commHash, const std::string& what, const std::vector<int>& pids) {
  char head[64];
  std::snprintf(head, sizeof(head), "/weft.%016llx.", static_cast<unsigned long long>(commHash));
  std::string name = head + what + ".ns" + std::to_string(pidNamespaceId());
  for (int pid : pids) name += ".pid" + std::to_string(pid);
  return name;
}

SegmentOwners parseSegmentName(const std::string& entry) {
  SegmentOwners owners;
  if (!startsWith(entry, kPrefix) || entry.size() > NAME_MAX) return owners;
  std::vector<std::string> fields;
  std::stringstream in(entry.substr(sizeof(kPrefix) - 1));
  for (std::string f; std::getline(in, f, '.');) fields.push_back(f);
  if (fields.empty() || fields[0].size() != 16 ||
      fields[0].find_first_not_of("0123456789abcdef") != std::string::npos)
    return owners;
  bool haveNamespace = false;
  for (size_t i = 1; i < fields.size(); ++i) {
    uint64_t v = 0;
    if (startsWith(fields[i], "ns") && parseDecimal(fields[i].substr(2), 20, &v)) {
      if (haveNamespace) return {};  // one namespace per name
      haveNamespace = true;
      owners.pidNamespace = v;
    } else if (startsWith(fields[i], "pid") && parseDecimal(fields[i].substr(3), 10, &v)) {
      if (!haveNamespace || v == 0 || v > INT_MAX) return {};  // pids follow the namespace
      owners.pids.push_back(static_cast<int>(v));
    } else if (haveNamespace) {
      return {};  // nothing but pids after the namespace
    }
  }
  owners.valid = haveNamespace && !owners.pids.empty();
  if (!owners.valid) owners.pids.clear();
  return owners;
}

bool processGone(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  // Gone once every thread is a zombie or exiting (the group leader alone may be a zombie while
  // other threads run on).
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(tasks.c_str());
  if (!dir) return kill(pid, 0) != 0 && errno == ESRCH;
  bool anyAlive = false, anySeen = false;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream stat(tasks + "/" + e->d_name + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;  // the thread left meanwhile
    anySeen = true;
    if (!taskExiting(line)) {
      anyAlive = true;
      break;
    }
  }
  closedir(dir);
  return anySeen ? !anyAlive : kill(pid, 0) != 0 && errno == ESRCH;
}

int removeStaleSegments() {
  const uint64_t ns = pidNamespaceId();
  DIR* dir = opendir("/dev/shm");
  if (!dir) return 0;
  std::vector<std::string> stale;
  while (dirent* e = readdir(dir)) {
    const std::string entry = e->d_name;
    SegmentOwners owners = parseSegmentName(entry);
    if (!owners.valid || owners.pidNamespace != ns) continue;
    for (int pid : owners.pids)
      if (processGone(pid)) {
        stale.push_back(entry);
        break;
      }
  }
  closedir(dir);
  int removed = 0;
  for (const std::string& entry : stale)
    if (shm_unlink(("/" + entry).c_str()) == 0) {
      ++removed;
      WEFT_TRACE(SHM, "removed /dev/shm/%s: a process using it is gone", entry.c_str());
    }
  return removed;
}

}  // namespace weft::transport
