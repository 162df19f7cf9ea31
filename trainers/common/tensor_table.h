// The table of a model's named tensors over one flat buffer.
//
// Every parameter lives in one contiguous buffer (and its gradient, AdamW's m and v in buffers of
// the same layout); the table says, in a fixed order, each tensor's name, shape, offset and layer.
// Layers are contiguous ranges of the buffer, in forward order, so a pipeline stage owns one range,
// a data-parallel bucket is a range and ZeRO shards are ranges. Names are layout-independent: a
// checkpoint stores tensors whole by name, whatever range or shard a rank holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::trainers {

// How a tensor's initial values are drawn.
enum class InitKind { kZeros, kOnes, kNormal };

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;   // in elements, into the flat buffer
  size_t size = 0;     // elements
  int layer = 0;       // model-defined: GPT 0 = embeddings, 1..L = blocks, L+1 = final LN + head
  bool decay = false;  // AdamW weight decay applies (matrices and embeddings, not biases or LN)
  InitKind init = InitKind::kZeros;
  double init_std = 0.0;  // for kNormal
};

class TensorTable {
 public:
  // Appends a tensor after the last one; layers must be added in non-decreasing order.
  void add(std::string name, std::vector<int64_t> shape, int layer, bool decay, InitKind init,
           double init_std = 0.0);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  size_t total() const { return total_; }
  int num_layers() const { return tensors_.empty() ? 0 : tensors_.back().layer + 1; }

  // The tensor called name; throws std::out_of_range when there is none.
  const TensorInfo& find(std::string_view name) const;
  const TensorInfo* try_find(std::string_view name) const;

  // The [begin, end) element range of one layer's tensors (empty when the layer has none).
  std::pair<size_t, size_t> layer_range(int layer) const;

 private:
  std::vector<TensorInfo> tensors_;
  size_t total_ = 0;
};

// Fills params (table.total() elements) with each tensor's initial values. Tensor t draws from
// the stream derive_seed(seed, fnv1a(t.name)) in row-major order, so its values do not depend on
// which other tensors exist or on the scalar type (float gets the double values rounded).
template <typename T>
void initialize_tensors(const TensorTable& table, uint64_t seed, T* params);

}  // namespace weft::trainers
