// A file of named tensors with string metadata: the format of checkpoints and of the PyTorch
// reference's debug state (trainers/README.md, "File format", documents it byte by byte).
//
// Tensors are stored whole, by name, with their shape and element type, in the order they were
// added; loading and saving again writes the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace weft::trainers {

enum class DType : uint32_t { kFloat32 = 1, kFloat64 = 2, kInt32 = 3, kInt64 = 4 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);

template <typename T>
DType dtype_of();

struct NamedTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian elements, row-major

  size_t elements() const;
  // Elements [begin, begin + count) converted to T (float and integer types both convert).
  template <typename T>
  void read(size_t begin, size_t count, T* out) const;
  template <typename T>
  std::vector<T> values() const {
    std::vector<T> out(elements());
    read(0, out.size(), out.data());
    return out;
  }
};

class TensorFile {
 public:
  static constexpr char kMagic[9] = "WEFTTENS";
  static constexpr uint32_t kVersion = 1;

  void set_meta(const std::string& key, const std::string& value);
  // The value of key, or null.
  const std::string* meta(const std::string& key) const;
  // The value of key; throws std::runtime_error naming the key when it is absent.
  const std::string& require_meta(const std::string& key) const;
  const std::vector<std::pair<std::string, std::string>>& all_meta() const { return meta_; }

  template <typename T>
  void add(const std::string& name, std::vector<int64_t> shape, const T* data);
  const NamedTensor* try_find(const std::string& name) const;
  // Throws std::runtime_error naming the tensor when it is absent.
  const NamedTensor& find(const std::string& name) const;
  const std::vector<NamedTensor>& tensors() const { return tensors_; }

  // Writes path + ".tmp" and renames it over path, so a reader never sees half a file.
  void save(const std::string& path) const;
  static TensorFile load(const std::string& path);

 private:
  std::vector<std::pair<std::string, std::string>> meta_;
  std::vector<NamedTensor> tensors_;
};

}  // namespace weft::trainers
