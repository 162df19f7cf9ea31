#include "perf/world.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace weft::perf {
namespace {

bool readInt(const char* name, int* out) {
  const char* s = std::getenv(name);
  if (!s || !*s) return false;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (*end != '\0' || v < 0 || v > 1 << 24)
    throw std::runtime_error(std::string("bad value '") + s + "' in " + name);
  *out = static_cast<int>(v);
  return true;
}

std::string errnoText(const std::string& what, int e) { return what + ": " + std::strerror(e); }

// Writes all of buf to fd, retrying short writes.
bool writeAll(int fd, const char* buf, size_t len) {
  while (len > 0) {
    ssize_t w = ::write(fd, buf, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    buf += w;
    len -= static_cast<size_t>(w);
  }
  return true;
}

void publish(const std::string& path, const ncclUniqueId& id) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(errnoText("open(" + tmp + ")", errno));
  bool ok = writeAll(fd, id.internal, sizeof id.internal);
  int e = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(errnoText("write(" + tmp + ")", e));
  }
  // rename is atomic: readers see either no file or all 128 bytes.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(errnoText("rename(" + tmp + ", " + path + ")", e));
  }
}

bool tryRead(const std::string& path, ncclUniqueId* id) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    throw std::runtime_error(errnoText("open(" + path + ")", errno));
  }
  size_t got = 0;
  while (got < sizeof id->internal) {
    ssize_t r = ::read(fd, id->internal + got, sizeof id->internal - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  if (got != sizeof id->internal)
    throw std::runtime_error("unique id file " + path + " holds " + std::to_string(got) +
                             " bytes, expected " + std::to_string(sizeof id->internal));
  return true;
}

}  // namespace

ProcessWorld discoverWorld() {
  static const struct {
    const char* rank;
    const char* size;
    bool bothOrNone;  // one without the other is an error, not "not this launcher"
  } kSources[] = {{"WEFT_RANK", "WEFT_WORLD_SIZE", true},
                  {"RANK", "WORLD_SIZE", true},
                  {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", true},
                  {"PMI_RANK", "PMI_SIZE", true},
                  // Only srun sets SLURM_STEP_NUM_TASKS: a batch script's own process has
                  // SLURM_PROCID=0 and is one process.
                  {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", false}};
  ProcessWorld w;
  for (const auto& s : kSources) {
    int rank = 0, size = 0;
    bool hasRank = readInt(s.rank, &rank), hasSize = readInt(s.size, &size);
    if (!hasRank && !hasSize) continue;
    if (!s.bothOrNone && !(hasRank && hasSize)) continue;
    if (!hasRank || !hasSize)
      throw std::runtime_error(std::string(hasRank ? s.size : s.rank) + " is missing while " +
                               (hasRank ? s.rank : s.size) + " is set");
    if (size < 1 || rank >= size)
      throw std::runtime_error(std::string(s.rank) + "=" + std::to_string(rank) +
                               " is not in [0, " + s.size + "=" + std::to_string(size) + ")");
    w.index = rank;
    w.count = size;
    w.source = std::string(s.rank) + "/" + s.size;
    return w;
  }
  return w;
}

ncclUniqueId shareUniqueId(const ProcessWorld& world, const std::string& path, double timeoutSec) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (world.index == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      throw std::runtime_error(std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r));
    if (world.count > 1) publish(path, id);
    return id;
  }
  auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::milliseconds(1);
  while (!tryRead(path, &id)) {
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeoutSec)
      throw std::runtime_error("timed out after " + std::to_string(static_cast<int>(timeoutSec)) +
                               " s waiting for process 0 to write the unique id to " + path);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return id;
}

ncclUniqueId deriveUniqueId(const ProcessWorld& world) {
  ncclUniqueId id;
  int rank = -1, count = 0;
  if (ncclResult_t r = weftGetUniqueIdFromEnv(&id, &rank, &count); r != ncclSuccess)
    throw std::runtime_error(std::string("this is process ") + std::to_string(world.index) +
                             " of " + std::to_string(world.count) + " (from " + world.source +
                             ") without WEFT_ID_FILE, and the rendezvous cannot be derived: " +
                             ncclGetLastError(nullptr));
  if (rank != world.index || count != world.count)
    throw std::runtime_error("weftGetUniqueIdFromEnv says process " + std::to_string(rank) +
                             " of " + std::to_string(count) + ", " + world.source + " says " +
                             std::to_string(world.index) + " of " + std::to_string(world.count));
  return id;
}

}  // namespace weft::perf
