// Memory registered as ncclMemAlloc does it: memfd pages a peer process may map (for
// transport tests of mapped, by-reference and landed messages).
#pragma once
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "src/common/shared_region.h"

namespace weft::test {

class MemfdRegion {
 public:
  explicit MemfdRegion(size_t bytes) : bytes_(bytes) {
    fd_ = memfd_create("weft-transport-test", MFD_CLOEXEC);
    EXPECT_GE(fd_, 0);
    EXPECT_EQ(ftruncate(fd_, static_cast<off_t>(bytes)), 0);
    base_ = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0));
    EXPECT_NE(base_, MAP_FAILED);
    struct stat st {};
    fstat(fd_, &st);
    addSharedRegion(SharedRegion{fd_, bytes, base_, static_cast<uint64_t>(st.st_ino)});
  }
  ~MemfdRegion() {
    SharedRegion r;
    removeSharedRegion(base_, &r);
    munmap(base_, bytes_);
    close(fd_);
  }
  MemfdRegion(const MemfdRegion&) = delete;
  MemfdRegion& operator=(const MemfdRegion&) = delete;
  char* data() { return base_; }

 private:
  size_t bytes_;
  int fd_ = -1;
  char* base_ = nullptr;
};

}  // namespace weft::test
