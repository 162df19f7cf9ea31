// The GPT of trainers/common/gpt.h split over the ranks of a tensor-parallel communicator
// (Megatron-LM), optionally with sequence parallelism.
//
// Each rank holds the shards TpLayout describes in its own flat buffer (params(), grads()) with
// the shard table (table()). Per block: LayerNorm, then the column-parallel qkv linear (the rank's
// heads), attention on those heads, the row-parallel projection whose partial sums are summed
// across the ranks, the residual; the same for the MLP (fc column parallel over the hidden units,
// proj row parallel). The token embedding is vocab parallel (each rank looks up its vocabulary
// range, zero elsewhere, summed across ranks) and so is the output head: logits of the rank's
// vocabulary only, with the cross-entropy's max, sum of exponentials and target logit each
// reduced across ranks.
//
// Without sequence parallelism the residual stream is replicated: every rank holds all rows of
// it, the row-parallel outputs are all-reduced, and the column-parallel inputs' gradients too.
// With it, each rank holds rows [tp_rank * N/tp, ...) of the N = batch * seq rows; LayerNorms,
// biases, residuals and position embeddings run on those rows; an all-gather builds the full
// input of each column-parallel region and a reduce-scatter replaces the all-reduce after each
// row-parallel one (and the reverse in backward). The replicated tensors' gradients are then sums
// over the rank's rows only, so reduce_replicated_grads() adds them up across ranks.
//
// The per-layer steps mirror Gpt's (embed_*, block_*, head_* with caller-owned activations) so a
// pipeline stage can run a range of TP-sharded layers; x, out, dout and dx have local_rows() rows.
// Every step is collective over the tp communicator: all its ranks call it with the same batch.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "nccl.h"
#include "trainers/common/gpt.h"
#include "trainers/common/layer_pass.h"
#include "trainers/tp/tp_layout.h"

namespace weft::trainers {

template <typename T>
struct TpGptBlockActivations {
  std::vector<T> ln1, ln1_mean, ln1_rstd;  // [local rows, C]
  std::vector<T> ln1_all;                  // sequence parallel: ln1 of all rows [N, C]
  std::vector<T> qkv;                      // [N, 3C/tp]: the rank's heads' q | k | v
  std::vector<T> att;                      // [B, NH/tp, T, T]
  std::vector<T> atty;                     // [N, C/tp]
  std::vector<T> residual2;                // [local rows, C]
  std::vector<T> ln2, ln2_mean, ln2_rstd, ln2_all;
  std::vector<T> fch, fch_gelu;  // [N, 4C/tp]
  std::vector<T> out;            // [local rows, C]
};

template <typename T>
struct TpGptHeadActivations {
  std::vector<T> lnf, lnf_mean, lnf_rstd, lnf_all;
  std::vector<T> logits, probs;  // [N, local vocab]
  std::vector<T> losses;         // [N], on every rank
};

// Backward scratch (reused from layer to layer).
template <typename T>
struct TpGptScratch {
  std::vector<T> all_rows;    // [N, C]: a gathered gradient, or partial sums before reduction
  std::vector<T> gathered;    // [N, C]
  std::vector<T> dresidual2;  // [local rows, C]
  std::vector<T> dln;         // [local rows, C]
  std::vector<T> dfch_gelu, dfch, datty, dqkv;
};

template <typename T>
class TpGpt {
 public:
  // The types of one pass's state (trainers/common/layer_pass.h).
  using PassTypes =
      LayerPassTypes<T, TpGptBlockActivations<T>, TpGptHeadActivations<T>, TpGptScratch<T>>;

  // comm: the tensor-parallel communicator (Grid::tp()); not owned. Collective: every rank of
  // comm constructs its TpGpt with the same arguments.
  TpGpt(const GptConfig& config, ncclComm_t comm, bool sequence_parallel);

  const GptConfig& config() const { return layout_.config(); }
  const TpLayout& layout() const { return layout_; }
  const TensorTable& table() const { return layout_.shards(); }
  const TensorTable& whole_table() const { return layout_.whole(); }
  int tp() const { return layout_.tp(); }
  int tp_rank() const { return layout_.tp_rank(); }
  bool sequence_parallel() const { return sequence_parallel_; }
  ncclComm_t comm() const { return comm_; }
  std::vector<T>& params() { return params_; }
  const std::vector<T>& params() const { return params_; }
  std::vector<T>& grads() { return grads_; }
  const std::vector<T>& grads() const { return grads_; }

  // Draws the whole model as Gpt<T>::initialize does and keeps this rank's shards, so every
  // layout starts from the one-process run's weights.
  void initialize(uint64_t seed);
  void zero_grads();
  // params() = this rank's shards of whole (laid out by whole_table()). Local.
  void load_whole(const T* whole) { layout_.extract(whole, params_.data()); }
  // whole (whole_table().total() elements, on every rank) = all ranks' shard buffers (params,
  // grads, or optimizer moments laid out by table()) assembled; bit-exact. Collective.
  void gather_whole(const T* shard, T* whole) const;

  // Rows of the residual stream this rank holds: batch * seq, or that over tp (which must divide
  // it) under sequence parallelism.
  int local_rows(int batch, int seq) const;

  // tokens and targets: the whole batch [batch, seq] on every rank.
  void embed_forward(const int32_t* tokens, int batch, int seq, T* out) const;
  void embed_backward(const int32_t* tokens, int batch, int seq, const T* dout);
  void block_forward(int block, const T* x, int batch, int seq, TpGptBlockActivations<T>& a) const;
  // Adds into grads() and into dx.
  void block_backward(int block, const T* x, const TpGptBlockActivations<T>& a, const T* dout,
                      T* dx, int batch, int seq, TpGptScratch<T>& scratch);
  // Returns the mean loss over all batch * seq positions (0 without targets), on every rank.
  T head_forward(const T* x, const int32_t* targets, int batch, int seq,
                 TpGptHeadActivations<T>& a) const;
  void head_backward(const T* x, const TpGptHeadActivations<T>& a, const int32_t* targets,
                     T loss_scale, T* dx, int batch, int seq, TpGptScratch<T>& scratch);

  // After the last backward of a step (all micro-batches): under sequence parallelism sums the
  // replicated tensors' gradients across ranks, so that every rank holds the same whole
  // gradient; nothing otherwise (they are the same on every rank already). Collective.
  void reduce_replicated_grads();
  // The squares of the gradients this rank answers for: its shards, and the replicated tensors
  // on tp rank 0 only, so that the sum over the tp ranks counts every element once.
  double local_grad_square_sum() const;
  // That sum over the tp ranks: the whole model's squared gradient norm. Collective.
  double grad_square_sum() const;

  // The whole model on one batch; backward() then adds the mean loss's gradients (call
  // reduce_replicated_grads() after it).
  T forward(const int32_t* tokens, const int32_t* targets, int batch, int seq) {
    return whole_.forward(*this, tokens, targets, batch, seq);
  }
  void backward() { whole_.backward(*this); }

 private:
  const T* param(size_t offset) const { return params_.data() + offset; }
  T* grad(size_t offset) { return grads_.data() + offset; }
  // The all-rows version of a local-rows buffer: itself, or gathered into `all` (sequence
  // parallel). Collective.
  const T* all_rows(const T* local, std::vector<T>& all, int rows) const;
  // local[local rows, C] = the sum over ranks of partial[N, C] (all-reduce, or reduce-scatter
  // under sequence parallelism). Collective.
  void sum_to_local_rows(const T* partial, T* local, int rows) const;
  void allreduce(T* data, size_t count, ncclRedOp_t op) const;
  int first_row(int rows) const { return sequence_parallel_ ? tp_rank() * rows / tp() : 0; }

  TpLayout layout_;
  ncclComm_t comm_;
  bool sequence_parallel_;
  std::vector<T> params_, grads_;
  GptOffsets offsets_;  // into the shard buffers
  // The state of the last forward(), for backward().
  typename PassTypes::Whole whole_;
};

}  // namespace weft::trainers
