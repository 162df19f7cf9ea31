// A named POSIX shared-memory segment, created by whichever side arrives first and opened by
// the other; the opener waits (bounded) until the creator has initialised it.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

namespace weft::transport {

class ShmSegment {
 public:
  // Creates `name` (exclusive) with `bytes`, calls init(mem) and marks it ready, or - if it
  // already exists - maps it and waits until ready. `created()` says which happened.
  template <typename Init>
  static ShmSegment createOrOpen(const std::string& name, size_t bytes, Init&& init,
                                 std::chrono::milliseconds timeout);
  // Creates a fresh segment (fails if it exists).
  static ShmSegment create(const std::string& name, size_t bytes);
  // Opens an existing segment, waiting up to `timeout` for it to appear and be ready.
  static ShmSegment open(const std::string& name, size_t bytes, std::chrono::milliseconds timeout);

  ShmSegment() = default;
  ShmSegment(ShmSegment&& o) noexcept;
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ~ShmSegment();

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  bool created() const { return created_; }
  const std::string& name() const { return name_; }
  void markReady();
  void unlink();  // removes the name; mappings stay valid

 private:
  static bool createExclusive(const std::string& name, size_t bytes, ShmSegment* out);
  static ShmSegment createOrOpenImpl(const std::string& name, size_t bytes,
                                     void (*init)(void*, void*), void* ctx,
                                     std::chrono::milliseconds timeout);
  void* base_ = nullptr;  // mapping start (a ready word precedes data)
  void* data_ = nullptr;
  size_t bytes_ = 0;
  size_t mapped_ = 0;
  bool created_ = false;
  bool linked_ = false;
  std::string name_;
};

template <typename Init>
ShmSegment ShmSegment::createOrOpen(const std::string& name, size_t bytes, Init&& init,
                                    std::chrono::milliseconds timeout) {
  return createOrOpenImpl(
      name, bytes, [](void* mem, void* ctx) { (*static_cast<Init*>(ctx))(mem); }, &init, timeout);
}

}  // namespace weft::transport
