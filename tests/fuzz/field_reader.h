// Reads fixed-size fields off a fuzz input in order; what lies past the input's end reads as
// zeros, so that every input, however short, yields a full set of fields.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string_view>

namespace weft::fuzz {

class FieldReader {
 public:
  explicit FieldReader(std::string_view in) : in_(in) {}
  template <typename T>
  T next() {
    T v{};
    const size_t n = std::min(sizeof(T), in_.size() - std::min(at_, in_.size()));
    if (n) std::memcpy(&v, in_.data() + at_, n);
    at_ += sizeof(T);
    return v;
  }
  void bytes(void* out, size_t n) {
    std::memset(out, 0, n);
    const size_t have = std::min(n, in_.size() - std::min(at_, in_.size()));
    if (have) std::memcpy(out, in_.data() + at_, have);
    at_ += n;
  }
  // What is left after the fields read so far (empty once they reach the end).
  std::string_view rest() const { return at_ < in_.size() ? in_.substr(at_) : std::string_view(); }

 private:
  std::string_view in_;
  size_t at_ = 0;
};

}  // namespace weft::fuzz
