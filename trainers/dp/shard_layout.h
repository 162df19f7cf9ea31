// How data parallelism cuts a rank's flat buffer: per-layer shards and gradient buckets.
//
// Shards. Each layer's range [a, b) of the flat buffer (TensorTable::layer_range) is padded to a
// multiple of the dp ranks and cut into dp equal slices; rank r owns slice r of every layer. A
// rank's shard buffer is its slices, layer after layer (padding included, zero), so ZeRO-3 can
// all-gather one layer just before it is used: the slices of one layer, in rank order, are the
// padded layer.
//
// Buckets. Consecutive layers grouped from the last layer backwards (backward finishes layers in
// reverse order) while the bucket stays within the byte cap; a layer larger than the cap is a
// bucket alone. A bucket's staging buffer holds, rank after rank, that rank's slices of the
// bucket's layers, so that chunk r of one reduce-scatter over the staging buffer is exactly rank
// r's part of its shard buffer for those layers. Plain DP and every ZeRO stage reduce gradients
// with the same reduce-scatter calls over the same staging layout (plain DP then all-gathers),
// which is what makes their sums, and so their parameters, bitwise equal.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "trainers/common/tensor_table.h"

namespace weft::trainers {

struct LayerShard {
  int layer = 0;
  size_t begin = 0, end = 0;  // the layer's range of the flat buffer
  size_t slice = 0;           // elements per rank: ceil((end - begin) / ranks)
  size_t shard_offset = 0;    // where this layer's slice starts in the shard buffer
  // The flat range rank r owns: [begin + r*slice, begin + (r+1)*slice) clipped to [begin, end).
  size_t owned_begin(int rank) const;
  size_t owned_end(int rank) const;
};

struct GradientBucket {
  int first_layer = 0, last_layer = 0;  // indexes into ShardLayout::layers(), inclusive
  size_t begin = 0, end = 0;            // flat range covered (layers first..last)
  size_t chunk = 0;         // elements per rank in the staging buffer (sum of the slices)
  size_t shard_offset = 0;  // where the chunk goes in the shard buffer
};

class ShardLayout {
 public:
  // bucket_bytes: the cap of a bucket's gradient bytes (elements * element_bytes). Only the
  // table layers [first_layer, last_layer] are sharded (a pipeline stage's; last_layer < 0: up
  // to the table's last).
  ShardLayout(const TensorTable& table, int ranks, int rank, size_t bucket_bytes,
              size_t element_bytes, int first_layer = 0, int last_layer = -1);

  int ranks() const { return ranks_; }
  int rank() const { return rank_; }
  size_t total() const { return total_; }                // elements of the flat buffer
  size_t shard_elements() const { return shard_size_; }  // elements of one shard buffer
  // The flat range the layers cover (empty when they hold no tensors).
  std::pair<size_t, size_t> range() const;
  // The layers that hold tensors, in forward order (of the layer range given).
  const std::vector<LayerShard>& layers() const { return layers_; }
  // Buckets in the order backward completes them (the last layers first).
  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  // Index into layers() of a table layer number; -1 when that layer holds no tensors.
  int layer_index(int table_layer) const;
  // Index into buckets() of the bucket holding layers()[index].
  int bucket_of(int layer_index) const { return bucket_of_layer_[layer_index]; }

  // The table of this rank's shard buffer: its pieces of the model's tensors (named
  // "<tensor>[lo:hi]", same layer and decay) and each layer's padding ("pad.<layer>", no decay),
  // laid out as the shard buffer is. An AdamW over it updates exactly the owned elements.
  TensorTable shard_table(const TensorTable& table) const;

  // flat -> staging buffer of bucket b (dp * chunk elements, padding zeroed).
  template <typename T>
  void pack(const GradientBucket& b, const T* flat, T* staging) const;
  // staging buffer of bucket b -> flat (every rank's slices).
  template <typename T>
  void unpack(const GradientBucket& b, const T* staging, T* flat) const;
  // Owned elements: flat <-> shard buffer (padding of the shard left as it is / zeroed).
  template <typename T>
  void flat_to_shard(const T* flat, T* shard) const;
  template <typename T>
  void shard_to_flat(const T* shard, T* flat) const;
  // One layer's slices gathered in rank order (dp * slice elements) -> its flat range.
  template <typename T>
  void unpack_layer(const LayerShard& layer, const T* gathered, T* flat) const;

 private:
  int ranks_, rank_;
  size_t total_ = 0, shard_size_ = 0;
  std::vector<LayerShard> layers_;
  std::vector<GradientBucket> buckets_;
  std::vector<int> bucket_of_layer_;
  std::vector<int> table_layer_to_index_;
};

}  // namespace weft::trainers
