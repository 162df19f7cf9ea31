#include "trainers/dp/shard_layout.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace weft::trainers {

size_t LayerShard::owned_begin(int rank) const {
  return std::min(end, begin + static_cast<size_t>(rank) * slice);
}

size_t LayerShard::owned_end(int rank) const {
  return std::min(end, begin + static_cast<size_t>(rank + 1) * slice);
}

ShardLayout::ShardLayout(const TensorTable& table, int ranks, int rank, size_t bucket_bytes,
                         size_t element_bytes, int first_layer, int last_layer)
    : ranks_(ranks), rank_(rank), total_(table.total()) {
  if (ranks < 1 || rank < 0 || rank >= ranks) throw std::invalid_argument("shard layout: rank");
  table_layer_to_index_.assign(table.num_layers(), -1);
  const int end_layer = last_layer < 0 ? table.num_layers() : last_layer + 1;
  for (int l = std::max(first_layer, 0); l < std::min(end_layer, table.num_layers()); ++l) {
    const auto [begin, end] = table.layer_range(l);
    if (begin >= end) continue;
    LayerShard s;
    s.layer = l;
    s.begin = begin;
    s.end = end;
    s.slice = (end - begin + ranks - 1) / ranks;
    s.shard_offset = shard_size_;
    shard_size_ += s.slice;
    table_layer_to_index_[l] = static_cast<int>(layers_.size());
    layers_.push_back(s);
  }
  // Buckets from the last layer backwards, each as many whole layers as fit in the cap.
  bucket_of_layer_.assign(layers_.size(), -1);
  for (int i = static_cast<int>(layers_.size()) - 1; i >= 0;) {
    GradientBucket b;
    b.last_layer = i;
    b.first_layer = i;
    size_t bytes = (layers_[i].end - layers_[i].begin) * element_bytes;
    while (b.first_layer > 0) {
      const LayerShard& prev = layers_[b.first_layer - 1];
      const size_t more = (prev.end - prev.begin) * element_bytes;
      if (bytes + more > bucket_bytes) break;
      bytes += more;
      --b.first_layer;
    }
    b.begin = layers_[b.first_layer].begin;
    b.end = layers_[b.last_layer].end;
    b.shard_offset = layers_[b.first_layer].shard_offset;
    for (int j = b.first_layer; j <= b.last_layer; ++j) {
      b.chunk += layers_[j].slice;
      bucket_of_layer_[j] = static_cast<int>(buckets_.size());
    }
    buckets_.push_back(b);
    i = b.first_layer - 1;
  }
}

std::pair<size_t, size_t> ShardLayout::range() const {
  if (layers_.empty()) return {0, 0};
  return {layers_.front().begin, layers_.back().end};
}

int ShardLayout::layer_index(int table_layer) const {
  if (table_layer < 0 || table_layer >= static_cast<int>(table_layer_to_index_.size())) return -1;
  return table_layer_to_index_[table_layer];
}

TensorTable ShardLayout::shard_table(const TensorTable& table) const {
  TensorTable shard;
  for (const LayerShard& s : layers_) {
    const size_t lo = s.owned_begin(rank_), hi = s.owned_end(rank_);
    for (const TensorInfo& t : table.tensors()) {
      const size_t a = std::max(lo, t.offset), b = std::min(hi, t.offset + t.size);
      if (a >= b) continue;
      shard.add(
          t.name + "[" + std::to_string(a - t.offset) + ":" + std::to_string(b - t.offset) + "]",
          {static_cast<int64_t>(b - a)}, s.layer, t.decay, InitKind::kZeros);
    }
    if (hi - lo < s.slice)
      shard.add("pad." + std::to_string(s.layer), {static_cast<int64_t>(s.slice - (hi - lo))},
                s.layer, false, InitKind::kZeros);
  }
  return shard;
}

template <typename T>
void ShardLayout::pack(const GradientBucket& b, const T* flat, T* staging) const {
  T* out = staging;
  for (int q = 0; q < ranks_; ++q)
    for (int j = b.first_layer; j <= b.last_layer; ++j) {
      const LayerShard& s = layers_[j];
      const size_t lo = s.owned_begin(q), hi = s.owned_end(q);
      std::copy(flat + lo, flat + hi, out);
      std::fill(out + (hi - lo), out + s.slice, T(0));
      out += s.slice;
    }
}

template <typename T>
void ShardLayout::unpack(const GradientBucket& b, const T* staging, T* flat) const {
  const T* in = staging;
  for (int q = 0; q < ranks_; ++q)
    for (int j = b.first_layer; j <= b.last_layer; ++j) {
      const LayerShard& s = layers_[j];
      const size_t lo = s.owned_begin(q), hi = s.owned_end(q);
      std::copy(in, in + (hi - lo), flat + lo);
      in += s.slice;
    }
}

template <typename T>
void ShardLayout::flat_to_shard(const T* flat, T* shard) const {
  for (const LayerShard& s : layers_) {
    const size_t lo = s.owned_begin(rank_), hi = s.owned_end(rank_);
    T* out = shard + s.shard_offset;
    std::copy(flat + lo, flat + hi, out);
    std::fill(out + (hi - lo), out + s.slice, T(0));
  }
}

template <typename T>
void ShardLayout::shard_to_flat(const T* shard, T* flat) const {
  for (const LayerShard& s : layers_) {
    const size_t lo = s.owned_begin(rank_), hi = s.owned_end(rank_);
    std::copy(shard + s.shard_offset, shard + s.shard_offset + (hi - lo), flat + lo);
  }
}

template <typename T>
void ShardLayout::unpack_layer(const LayerShard& s, const T* gathered, T* flat) const {
  // Slice q sits at q * slice in both: the gathered layer is the padded layer.
  std::copy(gathered, gathered + (s.end - s.begin), flat + s.begin);
}

#define WEFT_SHARD_LAYOUT_INSTANTIATE(T)                                           \
  template void ShardLayout::pack<T>(const GradientBucket&, const T*, T*) const;   \
  template void ShardLayout::unpack<T>(const GradientBucket&, const T*, T*) const; \
  template void ShardLayout::flat_to_shard<T>(const T*, T*) const;                 \
  template void ShardLayout::shard_to_flat<T>(const T*, T*) const;                 \
  template void ShardLayout::unpack_layer<T>(const LayerShard&, const T*, T*) const;
WEFT_SHARD_LAYOUT_INSTANTIATE(float)
WEFT_SHARD_LAYOUT_INSTANTIATE(double)
#undef WEFT_SHARD_LAYOUT_INSTANTIATE

}  // namespace weft::trainers
