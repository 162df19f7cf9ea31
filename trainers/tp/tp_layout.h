// Which part of every GPT tensor a tensor-parallel rank holds (Megatron-LM's split), and the
// table of those shards over the rank's own flat buffer.
//
// A rank's shard tensors keep the whole tensors' names, in the whole table's order and layers, so
// layer ranges, data-parallel buckets and optimizer ranges work on the shard buffer as on the
// whole one; checkpoints store whole tensors, assembled from the shards (TpLayout::place) and
// split again on loading (TpLayout::extract). The split, for tp ranks and rank r:
//
//   wte.weight, lm_head.weight [V, C]    rows of r's vocabulary range (vocab parallel; the ranges
//                                        differ by at most one row when tp does not divide V)
//   attn.qkv.weight [3C, C], bias [3C]   r's heads' rows of q, of k and of v, packed q | k | v as
//                                        the attention kernel expects for r's heads alone
//   attn.proj.weight [C, C]              r's heads' columns (row parallel)
//   mlp.fc.weight [4C, C], bias [4C]     rows of r's 4C/tp hidden units
//   mlp.proj.weight [C, 4C]              the same hidden units' columns (row parallel)
//   everything else                      replicated: LayerNorms, wpe, the row-parallel biases
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "trainers/common/gpt.h"
#include "trainers/common/tensor_table.h"

namespace weft::trainers {

// Part `part` of [0, n) split into `parts` contiguous ranges whose sizes differ by at most one.
std::pair<int64_t, int64_t> even_split(int64_t n, int parts, int part);

// A rectangle of a whole tensor viewed as [rows, cols] (a 1-D tensor of n as [n, 1]).
struct TpSlice {
  int64_t row_begin, row_end, col_begin, col_end;
};

// How one shard tensor maps onto its whole tensor: its elements are the slices' elements, slice
// after slice, each row-major.
struct TpShardMap {
  size_t whole_offset = 0;  // the whole tensor's offset in the whole table's buffer
  int64_t whole_cols = 1;   // columns of the whole tensor's [rows, cols] view
  std::vector<TpSlice> slices;
  bool replicated = false;  // every rank holds the whole tensor
};

class TpLayout {
 public:
  // Throws std::invalid_argument unless 0 <= tp_rank < tp, tp divides the heads and tp <= vocab.
  TpLayout(const GptConfig& config, int tp, int tp_rank);

  const GptConfig& config() const { return config_; }
  int tp() const { return tp_; }
  int tp_rank() const { return tp_rank_; }
  const TensorTable& whole() const { return whole_; }
  const TensorTable& shards() const { return shards_; }
  // One per tensor of shards(), in the same order.
  const std::vector<TpShardMap>& maps() const { return maps_; }

  int local_heads() const { return config_.heads / tp_; }
  int64_t vocab_begin() const { return vocab_.first; }
  int64_t vocab_end() const { return vocab_.second; }
  int local_vocab() const { return static_cast<int>(vocab_.second - vocab_.first); }
  int local_hidden() const { return static_cast<int>(hidden_.second - hidden_.first); }

  // shard[shards().total()] = this rank's part of whole[whole().total()].
  template <typename T>
  void extract(const T* whole, T* shard) const;
  // Writes this rank's shard elements into their places in whole; replicated tensors only when
  // with_replicated (so that assembling all ranks' shards writes each of them once).
  template <typename T>
  void place(const T* shard, T* whole, bool with_replicated) const;

 private:
  GptConfig config_;
  int tp_, tp_rank_;
  std::pair<int64_t, int64_t> vocab_, hidden_;
  TensorTable whole_, shards_;
  std::vector<TpShardMap> maps_;
};

}  // namespace weft::trainers
