#include "trainers/tp/tp_layout.h"

#include <stdexcept>
#include <string>

namespace weft::trainers {

std::pair<int64_t, int64_t> even_split(int64_t n, int parts, int part) {
  return {n * part / parts, n * (part + 1) / parts};
}

namespace {

// The block tensor a name refers to ("blocks.<l>.<tensor>"), or -1 for a non-block tensor.
int block_tensor_of(const std::string& name) {
  if (name.rfind("blocks.", 0) != 0) return -1;
  const size_t dot = name.find('.', 7);
  const std::string rest = name.substr(dot + 1);
  for (int t = 0; t < kGptBlockTensorCount; ++t)
    if (rest == kGptBlockTensorNames[t]) return t;
  return -1;
}

int64_t rows_of(const TensorInfo& t) { return t.shape[0]; }
int64_t cols_of(const TensorInfo& t) { return t.shape.size() == 2 ? t.shape[1] : 1; }

}  // namespace

TpLayout::TpLayout(const GptConfig& config, int tp, int tp_rank)
    : config_(config), tp_(tp), tp_rank_(tp_rank), whole_(gpt_tensor_table(config)) {
  if (tp < 1 || tp_rank < 0 || tp_rank >= tp)
    throw std::invalid_argument("tensor parallel: rank outside [0, tp)");
  if (config.heads % tp != 0 || config.vocab < tp)
    throw std::invalid_argument("tensor parallel: tp must divide the heads and not exceed vocab");
  const int64_t C = config.channels;
  const int64_t local_channels = C / tp;
  const int64_t head_cols_begin = local_channels * tp_rank;
  vocab_ = even_split(config.vocab, tp, tp_rank);
  hidden_ = even_split(4 * C, tp, tp_rank);
  const int64_t H = hidden_.second - hidden_.first;
  for (const TensorInfo& t : whole_.tensors()) {
    TpShardMap map;
    map.whole_offset = t.offset;
    map.whole_cols = cols_of(t);
    const int64_t rows = rows_of(t), cols = cols_of(t);
    std::vector<int64_t> shape = t.shape;
    const int block_tensor = block_tensor_of(t.name);
    if (t.name == "wte.weight" || t.name == "lm_head.weight") {
      map.slices.push_back({vocab_.first, vocab_.second, 0, cols});
      shape[0] = vocab_.second - vocab_.first;
    } else if (block_tensor == kQkvWeight || block_tensor == kQkvBias) {
      for (int64_t part = 0; part < 3; ++part)
        map.slices.push_back(
            {part * C + head_cols_begin, part * C + head_cols_begin + local_channels, 0, cols});
      shape[0] = 3 * local_channels;
    } else if (block_tensor == kAttnProjWeight) {
      map.slices.push_back({0, rows, head_cols_begin, head_cols_begin + local_channels});
      shape[1] = local_channels;
    } else if (block_tensor == kFcWeight || block_tensor == kFcBias) {
      map.slices.push_back({hidden_.first, hidden_.second, 0, cols});
      shape[0] = H;
    } else if (block_tensor == kFcProjWeight) {
      map.slices.push_back({0, rows, hidden_.first, hidden_.second});
      shape[1] = H;
    } else {
      map.slices.push_back({0, rows, 0, cols});
      map.replicated = true;
    }
    // The shard table's init fields are the whole tensor's; shards are initialised by extracting
    // from the whole initialisation (a shard drawn alone would take another part of the stream).
    shards_.add(t.name, shape, t.layer, t.decay, t.init, t.init_std);
    maps_.push_back(std::move(map));
  }
}

template <typename T>
void TpLayout::extract(const T* whole, T* shard) const {
  for (size_t i = 0; i < maps_.size(); ++i) {
    const TpShardMap& map = maps_[i];
    T* out = shard + shards_.tensors()[i].offset;
    for (const TpSlice& s : map.slices)
      for (int64_t r = s.row_begin; r < s.row_end; ++r) {
        const T* row = whole + map.whole_offset + r * map.whole_cols;
        for (int64_t c = s.col_begin; c < s.col_end; ++c) *out++ = row[c];
      }
  }
}

template <typename T>
void TpLayout::place(const T* shard, T* whole, bool with_replicated) const {
  for (size_t i = 0; i < maps_.size(); ++i) {
    const TpShardMap& map = maps_[i];
    if (map.replicated && !with_replicated) continue;
    const T* in = shard + shards_.tensors()[i].offset;
    for (const TpSlice& s : map.slices)
      for (int64_t r = s.row_begin; r < s.row_end; ++r) {
        T* row = whole + map.whole_offset + r * map.whole_cols;
        for (int64_t c = s.col_begin; c < s.col_end; ++c) row[c] = *in++;
      }
  }
}

template void TpLayout::extract<float>(const float*, float*) const;
template void TpLayout::extract<double>(const double*, double*) const;
template void TpLayout::place<float>(const float*, float*, bool) const;
template void TpLayout::place<double>(const double*, double*, bool) const;

}  // namespace weft::trainers
