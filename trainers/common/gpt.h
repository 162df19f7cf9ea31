// A GPT-style character-level transformer (GPT-2 architecture, llm.c-style explicit backward):
// token and position embeddings, pre-LayerNorm blocks (causal multi-head attention, GELU MLP),
// final LayerNorm, an output head (not tied to the token embedding), mean cross-entropy.
//
// The forward and backward are split per layer: embed_*, block_* (one per transformer block),
// head_* (final LayerNorm, logits, loss). Activations live in per-layer structs that the caller
// owns, so a pipeline stage keeps one per micro-batch and runs only its layers; forward() and
// backward() below run the whole model on one batch for the single-process trainer, through the
// layer loops of trainers/common/layer_pass.h that the tensor-parallel GPT and the pipeline
// stages share.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "trainers/common/layer_pass.h"
#include "trainers/common/tensor_table.h"

namespace weft::trainers {

struct GptConfig {
  int vocab = 65;
  int context = 16;  // the longest sequence: rows of the position embedding
  int layers = 2;
  int heads = 2;
  int channels = 32;  // a multiple of heads
};

// The tensors of one block, in their order in the flat buffer (names "blocks.<l>.<name>").
enum GptBlockTensor {
  kLn1Weight,
  kLn1Bias,
  kQkvWeight,  // [3C, C]: rows of q, then k, then v
  kQkvBias,
  kAttnProjWeight,  // [C, C]
  kAttnProjBias,
  kLn2Weight,
  kLn2Bias,
  kFcWeight,  // [4C, C]
  kFcBias,
  kFcProjWeight,  // [C, 4C]
  kFcProjBias,
  kGptBlockTensorCount
};
extern const char* const kGptBlockTensorNames[kGptBlockTensorCount];
// "blocks.<block>.<name>": the table name of a block's tensor (blocks count from 0).
std::string gpt_block_tensor_name(int block, int tensor);

// The table, in this order: layer 0 "wte.weight" [V,C], "wpe.weight" [context,C]; layers 1..L the
// blocks; layer L+1 "lnf.weight", "lnf.bias" [C], "lm_head.weight" [V,C]. Initialisation as GPT-2:
// N(0, 0.02) for matrices and embeddings, N(0, 0.02/sqrt(2L)) for the two projections that feed
// the residual stream, zero biases, LayerNorm weight 1.
TensorTable gpt_tensor_table(const GptConfig& config);

// Where a GPT's tensors start in a flat buffer laid out by `table`: the whole table, or a
// tensor-parallel shard table (it keeps the names).
struct GptOffsets {
  std::vector<std::array<size_t, kGptBlockTensorCount>> blocks;  // [block][GptBlockTensor]
  size_t wte = 0, wpe = 0, lnf_weight = 0, lnf_bias = 0, lm_head = 0;
};
GptOffsets gpt_offsets(const TensorTable& table, int layers);

template <typename T>
struct GptBlockActivations {
  std::vector<T> ln1, ln1_mean, ln1_rstd;  // [BT,C], [BT], [BT]
  std::vector<T> qkv;                      // [BT,3C]
  std::vector<T> att;                      // [B,NH,T,T] softmax probabilities
  std::vector<T> atty;                     // [BT,C] attention output before projection
  std::vector<T> residual2;                // [BT,C] input + attention projection
  std::vector<T> ln2, ln2_mean, ln2_rstd;
  std::vector<T> fch, fch_gelu;  // [BT,4C]
  std::vector<T> out;            // [BT,C] residual2 + MLP projection: the block's output
  void resize(const GptConfig& config, int batch, int seq);
};

template <typename T>
struct GptHeadActivations {
  std::vector<T> lnf, lnf_mean, lnf_rstd;
  std::vector<T> logits, probs;  // [BT,V]
  std::vector<T> losses;         // [BT]
  void resize(const GptConfig& config, int batch, int seq);
};

// Gradient scratch for one block's backward (reused from block to block).
template <typename T>
struct GptBlockScratch {
  std::vector<T> dresidual2, dln2, dfch_gelu, dfch, datty, dqkv, dln1;
  void resize(const GptConfig& config, int batch, int seq);
};

template <typename T>
class Gpt {
 public:
  // The types of one pass's state (trainers/common/layer_pass.h).
  using PassTypes =
      LayerPassTypes<T, GptBlockActivations<T>, GptHeadActivations<T>, GptBlockScratch<T>>;

  explicit Gpt(const GptConfig& config);

  const GptConfig& config() const { return config_; }
  const TensorTable& table() const { return table_; }
  std::vector<T>& params() { return params_; }
  const std::vector<T>& params() const { return params_; }
  std::vector<T>& grads() { return grads_; }
  const std::vector<T>& grads() const { return grads_; }

  void initialize(uint64_t seed) { initialize_tensors(table_, seed, params_.data()); }
  void zero_grads();

  // The offset in the flat buffer of block l's tensor (l counts blocks from 0).
  size_t block_offset(int block, GptBlockTensor tensor) const {
    return offsets_.blocks[block][tensor];
  }
  // Rows of the residual stream per batch: all batch * seq of them (as TpGpt::local_rows).
  int local_rows(int batch, int seq) const { return batch * seq; }

  // Per-layer steps. x and out are [batch*seq, C]; backward adds into grads() and into dx.
  void embed_forward(const int32_t* tokens, int batch, int seq, T* out) const;
  void embed_backward(const int32_t* tokens, int batch, int seq, const T* dout);
  void block_forward(int block, const T* x, int batch, int seq, GptBlockActivations<T>& a) const;
  void block_backward(int block, const T* x, const GptBlockActivations<T>& a, const T* dout, T* dx,
                      int batch, int seq, GptBlockScratch<T>& scratch);
  // Final LayerNorm, logits and, with targets, the per-position losses; returns the mean loss
  // (0 without targets).
  T head_forward(const T* x, const int32_t* targets, int batch, int seq,
                 GptHeadActivations<T>& a) const;
  // loss_scale is dloss/dlosses[n]: 1/(batch*seq) for this batch's mean; a micro-batch of a
  // larger batch passes 1/(the larger batch's positions).
  void head_backward(const T* x, const GptHeadActivations<T>& a, const int32_t* targets,
                     T loss_scale, T* dx, int batch, int seq);

  // The whole model on one batch (tokens and targets [batch, seq]); returns the mean loss.
  T forward(const int32_t* tokens, const int32_t* targets, int batch, int seq) {
    return whole_.forward(*this, tokens, targets, batch, seq);
  }
  // After forward with targets: adds the mean loss's gradients into grads().
  void backward() { whole_.backward(*this); }

  const std::vector<T>& logits() const { return whole_.head().logits; }

 private:
  const T* param(size_t offset) const { return params_.data() + offset; }
  T* grad(size_t offset) { return grads_.data() + offset; }

  GptConfig config_;
  TensorTable table_;
  std::vector<T> params_, grads_;
  GptOffsets offsets_;
  // The state of the last forward(), for backward().
  typename PassTypes::Whole whole_;
};

}  // namespace weft::trainers
