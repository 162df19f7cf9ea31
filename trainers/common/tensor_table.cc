#include "trainers/common/tensor_table.h"

#include <stdexcept>

#include "trainers/common/rng.h"

namespace weft::trainers {

void TensorTable::add(std::string name, std::vector<int64_t> shape, int layer, bool decay,
                      InitKind init, double init_std) {
  if (!tensors_.empty() && layer < tensors_.back().layer)
    throw std::invalid_argument("tensor " + name + ": layers must be added in order");
  if (try_find(name) != nullptr) throw std::invalid_argument("tensor " + name + " added twice");
  TensorInfo info;
  info.size = 1;
  for (int64_t d : shape) {
    if (d <= 0) throw std::invalid_argument("tensor " + name + ": dimensions must be positive");
    info.size *= static_cast<size_t>(d);
  }
  info.name = std::move(name);
  info.shape = std::move(shape);
  info.offset = total_;
  info.layer = layer;
  info.decay = decay;
  info.init = init;
  info.init_std = init_std;
  total_ += info.size;
  tensors_.push_back(std::move(info));
}

const TensorInfo* TensorTable::try_find(std::string_view name) const {
  for (const TensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorInfo& TensorTable::find(std::string_view name) const {
  const TensorInfo* t = try_find(name);
  if (t == nullptr) throw std::out_of_range("no tensor named " + std::string(name));
  return *t;
}

std::pair<size_t, size_t> TensorTable::layer_range(int layer) const {
  size_t begin = total_, end = 0;
  for (const TensorInfo& t : tensors_) {
    if (t.layer != layer) continue;
    if (t.offset < begin) begin = t.offset;
    if (t.offset + t.size > end) end = t.offset + t.size;
  }
  if (end == 0) return {0, 0};
  return {begin, end};
}

template <typename T>
void initialize_tensors(const TensorTable& table, uint64_t seed, T* params) {
  for (const TensorInfo& t : table.tensors()) {
    T* out = params + t.offset;
    switch (t.init) {
      case InitKind::kZeros:
        for (size_t i = 0; i < t.size; ++i) out[i] = T(0);
        break;
      case InitKind::kOnes:
        for (size_t i = 0; i < t.size; ++i) out[i] = T(1);
        break;
      case InitKind::kNormal: {
        Rng rng(derive_seed(seed, fnv1a(t.name)));
        for (size_t i = 0; i < t.size; ++i) out[i] = static_cast<T>(t.init_std * rng.normal());
        break;
      }
    }
  }
}

template void initialize_tensors<float>(const TensorTable&, uint64_t, float*);
template void initialize_tensors<double>(const TensorTable&, uint64_t, double*);

}  // namespace weft::trainers
