#include "transports/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "src/common/clock.h"
#include "src/common/error.h"

namespace weft::transport {

namespace {
constexpr size_t kHeader = 4096;  // ready word lives in its own page ahead of the data
constexpr uint64_t kReady = 0x5745465452454459ull;  // "WEFTREDY"

std::atomic<uint64_t>* readyWord(void* base) { return static_cast<std::atomic<uint64_t>*>(base); }

void* mapFd(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail(Status::kSystemError, sysError("mmap of shared memory " + name, errno));
  return p;
}
}  // namespace

ShmSegment::ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    this->~ShmSegment();
    base_ = o.base_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    mapped_ = o.mapped_;
    created_ = o.created_;
    linked_ = o.linked_;
    name_ = std::move(o.name_);
    o.base_ = o.data_ = nullptr;
    o.linked_ = false;
  }
  return *this;
}

ShmSegment::~ShmSegment() {
  if (linked_ && created_) shm_unlink(name_.c_str());
  if (base_) munmap(base_, mapped_);
  base_ = data_ = nullptr;
}

// Creates `name` exclusively into *out; false if it already exists.
bool ShmSegment::createExclusive(const std::string& name, size_t bytes, ShmSegment* out) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) return false;
  if (fd < 0) fail(Status::kSystemError, sysError("shm_open(create) " + name, errno));
  ShmSegment s;
  s.name_ = name;
  s.bytes_ = bytes;
  s.mapped_ = kHeader + bytes;
  s.created_ = true;
  s.linked_ = true;
  if (ftruncate(fd, static_cast<off_t>(s.mapped_)) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(name.c_str());
    fail(Status::kSystemError, sysError("ftruncate of shared memory " + name, e));
  }
  s.base_ = mapFd(fd, s.mapped_, name);
  close(fd);
  s.data_ = static_cast<char*>(s.base_) + kHeader;
  *out = std::move(s);
  return true;
}

ShmSegment ShmSegment::create(const std::string& name, size_t bytes) {
  ShmSegment s;
  if (!createExclusive(name, bytes, &s))
    fail(Status::kSystemError, "shared memory " + name + " already exists");
  return s;
}

void ShmSegment::markReady() { readyWord(base_)->store(kReady, std::memory_order_release); }

void ShmSegment::unlink() {
  if (linked_ || !created_) shm_unlink(name_.c_str());
  linked_ = false;
}

ShmSegment ShmSegment::open(const std::string& name, size_t bytes,
                            std::chrono::milliseconds timeout) {
  Deadline deadline(timeout);
  ShmSegment s;
  s.name_ = name;
  s.bytes_ = bytes;
  s.mapped_ = kHeader + bytes;
  int fd = -1;
  for (;;) {
    fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) {
      struct stat st {};
      if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= s.mapped_) break;
      close(fd);
      fd = -1;
    } else if (errno != ENOENT) {
      fail(Status::kSystemError, sysError("shm_open " + name, errno));
    }
    if (deadline.expired())
      fail(Status::kRemoteError, "timed out waiting for peer's shared memory " + name);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  s.base_ = mapFd(fd, s.mapped_, name);
  close(fd);
  s.data_ = static_cast<char*>(s.base_) + kHeader;
  while (readyWord(s.base_)->load(std::memory_order_acquire) != kReady) {
    if (deadline.expired())
      fail(Status::kRemoteError, "timed out waiting for peer to initialise " + name);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return s;
}

ShmSegment ShmSegment::createOrOpenImpl(const std::string& name, size_t bytes,
                                        void (*init)(void*, void*), void* ctx,
                                        std::chrono::milliseconds timeout) {
  ShmSegment s;
  if (!createExclusive(name, bytes, &s)) return open(name, bytes, timeout);
  init(s.data_, ctx);
  s.markReady();
  return s;
}

}  // namespace weft::transport
