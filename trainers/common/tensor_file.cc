#include "trainers/common/tensor_file.h"

#include <bit>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace weft::trainers {

static_assert(std::endian::native == std::endian::little, "the file format is little-endian");

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
  }
  throw std::runtime_error("unknown tensor element type");
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
  }
  return "unknown";
}

template <>
DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
DType dtype_of<double>() {
  return DType::kFloat64;
}
template <>
DType dtype_of<int32_t>() {
  return DType::kInt32;
}
template <>
DType dtype_of<int64_t>() {
  return DType::kInt64;
}

size_t NamedTensor::elements() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

namespace {

template <typename From, typename To>
void convert(const uint8_t* bytes, size_t begin, size_t count, To* out) {
  for (size_t i = 0; i < count; ++i) {
    From value;
    std::memcpy(&value, bytes + (begin + i) * sizeof(From), sizeof(From));
    out[i] = static_cast<To>(value);
  }
}

}  // namespace

template <typename T>
void NamedTensor::read(size_t begin, size_t count, T* out) const {
  if (begin + count > elements())
    throw std::out_of_range("tensor " + name + ": read past its elements");
  switch (dtype) {
    case DType::kFloat32:
      return convert<float>(bytes.data(), begin, count, out);
    case DType::kFloat64:
      return convert<double>(bytes.data(), begin, count, out);
    case DType::kInt32:
      return convert<int32_t>(bytes.data(), begin, count, out);
    case DType::kInt64:
      return convert<int64_t>(bytes.data(), begin, count, out);
  }
}

void TensorFile::set_meta(const std::string& key, const std::string& value) {
  for (auto& [k, v] : meta_) {
    if (k == key) {
      v = value;
      return;
    }
  }
  meta_.emplace_back(key, value);
}

const std::string* TensorFile::meta(const std::string& key) const {
  for (const auto& [k, v] : meta_)
    if (k == key) return &v;
  return nullptr;
}

const std::string& TensorFile::require_meta(const std::string& key) const {
  const std::string* value = meta(key);
  if (value == nullptr) throw std::runtime_error("tensor file has no metadata " + key);
  return *value;
}

template <typename T>
void TensorFile::add(const std::string& name, std::vector<int64_t> shape, const T* data) {
  if (try_find(name) != nullptr) throw std::invalid_argument("tensor " + name + " added twice");
  NamedTensor t;
  t.name = name;
  t.dtype = dtype_of<T>();
  t.shape = std::move(shape);
  t.bytes.resize(t.elements() * sizeof(T));
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
  tensors_.push_back(std::move(t));
}

const NamedTensor* TensorFile::try_find(const std::string& name) const {
  for (const NamedTensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const NamedTensor& TensorFile::find(const std::string& name) const {
  const NamedTensor* t = try_find(name);
  if (t == nullptr) throw std::runtime_error("tensor file has no tensor " + name);
  return *t;
}

namespace {

class Writer {
 public:
  explicit Writer(std::ofstream& out) : out_(out) {}
  template <typename U>
  void scalar(U value) {
    out_.write(reinterpret_cast<const char*>(&value), sizeof(value));
  }
  void text(const std::string& s) {
    scalar<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.write(s.data(), static_cast<std::streamsize>(s.size()));
  }

 private:
  std::ofstream& out_;
};

class Reader {
 public:
  Reader(std::ifstream& in, const std::string& path) : in_(in), path_(path) {}
  void bytes(void* out, size_t n) {
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
    if (static_cast<size_t>(in_.gcount()) != n)
      throw std::runtime_error(path_ + ": truncated tensor file");
  }
  template <typename U>
  U scalar() {
    U value;
    bytes(&value, sizeof(value));
    return value;
  }
  std::string text() {
    const uint32_t n = scalar<uint32_t>();
    if (n > (1u << 20)) throw std::runtime_error(path_ + ": implausible string length");
    std::string s(n, '\0');
    bytes(s.data(), n);
    return s;
  }

 private:
  std::ifstream& in_;
  const std::string& path_;
};

}  // namespace

void TensorFile::save(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp);
    Writer w(out);
    out.write(kMagic, 8);
    w.scalar<uint32_t>(kVersion);
    w.scalar<uint32_t>(static_cast<uint32_t>(meta_.size()));
    for (const auto& [k, v] : meta_) {
      w.text(k);
      w.text(v);
    }
    w.scalar<uint32_t>(static_cast<uint32_t>(tensors_.size()));
    for (const NamedTensor& t : tensors_) {
      w.text(t.name);
      w.scalar<uint32_t>(static_cast<uint32_t>(t.dtype));
      w.scalar<uint32_t>(static_cast<uint32_t>(t.shape.size()));
      for (int64_t d : t.shape) w.scalar<int64_t>(d);
      out.write(reinterpret_cast<const char*>(t.bytes.data()),
                static_cast<std::streamsize>(t.bytes.size()));
    }
    out.flush();
    if (!out) throw std::runtime_error("writing " + tmp + " failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + tmp + " to " + path);
}

TensorFile TensorFile::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  Reader r(in, path);
  char magic[8];
  r.bytes(magic, 8);
  if (std::memcmp(magic, kMagic, 8) != 0) throw std::runtime_error(path + ": not a tensor file");
  const uint32_t version = r.scalar<uint32_t>();
  if (version != kVersion)
    throw std::runtime_error(path + ": tensor file version " + std::to_string(version));
  TensorFile file;
  const uint32_t meta_count = r.scalar<uint32_t>();
  for (uint32_t i = 0; i < meta_count; ++i) {
    std::string key = r.text();
    file.meta_.emplace_back(std::move(key), r.text());
  }
  const uint32_t count = r.scalar<uint32_t>();
  for (uint32_t i = 0; i < count; ++i) {
    NamedTensor t;
    t.name = r.text();
    t.dtype = static_cast<DType>(r.scalar<uint32_t>());
    const size_t size = dtype_size(t.dtype);
    const uint32_t ndim = r.scalar<uint32_t>();
    if (ndim > 8) throw std::runtime_error(path + ": tensor " + t.name + " has too many dims");
    for (uint32_t d = 0; d < ndim; ++d) {
      const int64_t dim = r.scalar<int64_t>();
      if (dim < 0 || dim > (int64_t{1} << 40))
        throw std::runtime_error(path + ": tensor " + t.name + " has a bad dimension");
      t.shape.push_back(dim);
    }
    t.bytes.resize(t.elements() * size);
    r.bytes(t.bytes.data(), t.bytes.size());
    file.tensors_.push_back(std::move(t));
  }
  if (in.peek() != std::ifstream::traits_type::eof())
    throw std::runtime_error(path + ": bytes after the last tensor");
  return file;
}

#define WEFT_TENSOR_FILE_TYPE(T)                                \
  template void NamedTensor::read<T>(size_t, size_t, T*) const; \
  template void TensorFile::add<T>(const std::string&, std::vector<int64_t>, const T*);
WEFT_TENSOR_FILE_TYPE(float)
WEFT_TENSOR_FILE_TYPE(double)
WEFT_TENSOR_FILE_TYPE(int32_t)
WEFT_TENSOR_FILE_TYPE(int64_t)

}  // namespace weft::trainers
