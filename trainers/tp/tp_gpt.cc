#include "trainers/tp/tp_gpt.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "trainers/common/adamw.h"
#include "trainers/common/kernels.h"
#include "trainers/parallel/grid.h"

namespace weft::trainers {

namespace {

template <typename T>
void zero(std::vector<T>& v, size_t n) {
  v.assign(n, T(0));
}

// out[rows, C] = (out + bias[C]) + residual, row by row, as Gpt's linear_forward (bias) then
// add_forward (residual) round it.
template <typename T>
void add_bias_and_residual(T* out, const T* bias, const T* residual, int rows, int C) {
  for (int n = 0; n < rows; ++n)
    for (int c = 0; c < C; ++c) {
      const size_t i = static_cast<size_t>(n) * C + c;
      out[i] = (out[i] + bias[c]) + residual[i];
    }
}

template <typename T>
void add_column_sums(T* dbias, const T* dout, int rows, int C) {
  for (int n = 0; n < rows; ++n)
    for (int c = 0; c < C; ++c) dbias[c] += dout[static_cast<size_t>(n) * C + c];
}

}  // namespace

template <typename T>
TpGpt<T>::TpGpt(const GptConfig& config, ncclComm_t comm, bool sequence_parallel)
    : layout_(config, comm_size(comm, "tensor parallel"), comm_rank(comm, "tensor parallel")),
      comm_(comm),
      sequence_parallel_(sequence_parallel),
      offsets_(gpt_offsets(layout_.shards(), config.layers)) {
  params_.assign(table().total(), T(0));
  grads_.assign(table().total(), T(0));
}

template <typename T>
void TpGpt<T>::initialize(uint64_t seed) {
  std::vector<T> whole(whole_table().total());
  initialize_tensors(whole_table(), seed, whole.data());
  load_whole(whole.data());
}

template <typename T>
void TpGpt<T>::zero_grads() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template <typename T>
void TpGpt<T>::gather_whole(const T* shard, T* whole) const {
  // Shard sizes differ when tp does not divide the vocabulary: gather padded buffers, then let
  // each rank's layout put its elements in place (replicated tensors from rank 0).
  std::vector<TpLayout> peers;
  size_t padded = 0;
  for (int r = 0; r < tp(); ++r) {
    peers.emplace_back(config(), tp(), r);
    padded = std::max(padded, peers.back().shards().total());
  }
  std::vector<T> send(padded, T(0)), received(padded * tp());
  std::copy(shard, shard + table().total(), send.begin());
  check_nccl(ncclAllGather(send.data(), received.data(), padded, nccl_type<T>(), comm_, nullptr),
             "tensor parallel: gather whole tensors", comm_);
  for (int r = 0; r < tp(); ++r) peers[r].place(received.data() + padded * r, whole, r == 0);
}

template <typename T>
int TpGpt<T>::local_rows(int batch, int seq) const {
  const int rows = batch * seq;
  if (!sequence_parallel_) return rows;
  if (rows % tp() != 0)
    throw std::invalid_argument("sequence parallel: tp must divide batch * seq");
  return rows / tp();
}

template <typename T>
void TpGpt<T>::allreduce(T* data, size_t count, ncclRedOp_t op) const {
  check_nccl(ncclAllReduce(data, data, count, nccl_type<T>(), op, comm_, nullptr),
             "tensor parallel: all-reduce", comm_);
}

template <typename T>
const T* TpGpt<T>::all_rows(const T* local, std::vector<T>& all, int rows) const {
  if (!sequence_parallel_) return local;
  const size_t C = config().channels;
  all.resize(rows * C);
  check_nccl(ncclAllGather(local, all.data(), rows / tp() * C, nccl_type<T>(), comm_, nullptr),
             "sequence parallel: all-gather", comm_);
  return all.data();
}

template <typename T>
void TpGpt<T>::sum_to_local_rows(const T* partial, T* local, int rows) const {
  const size_t C = config().channels;
  if (!sequence_parallel_) {
    check_nccl(ncclAllReduce(partial, local, rows * C, nccl_type<T>(), ncclSum, comm_, nullptr),
               "tensor parallel: all-reduce", comm_);
    return;
  }
  check_nccl(
      ncclReduceScatter(partial, local, rows / tp() * C, nccl_type<T>(), ncclSum, comm_, nullptr),
      "sequence parallel: reduce-scatter", comm_);
}

template <typename T>
void TpGpt<T>::embed_forward(const int32_t* tokens, int batch, int seq, T* out) const {
  const int N = batch * seq, C = config().channels, rows = local_rows(batch, seq);
  if (seq > config().context) throw std::invalid_argument("sequence longer than the context");
  // Vocab parallel: the rank's vocabulary rows, zero for other tokens, summed across ranks.
  const int64_t v0 = layout_.vocab_begin(), v1 = layout_.vocab_end();
  std::vector<T> partial(static_cast<size_t>(N) * C, T(0));
  for (int n = 0; n < N; ++n) {
    if (tokens[n] < 0 || tokens[n] >= config().vocab)
      throw std::invalid_argument("token outside the vocabulary");
    if (tokens[n] < v0 || tokens[n] >= v1) continue;
    const T* row = param(offsets_.wte) + (tokens[n] - v0) * C;
    std::copy(row, row + C, partial.begin() + static_cast<size_t>(n) * C);
  }
  sum_to_local_rows(partial.data(), out, N);
  const int row0 = first_row(N);
  for (int i = 0; i < rows; ++i) {
    const T* position = param(offsets_.wpe) + static_cast<size_t>((row0 + i) % seq) * C;
    for (int c = 0; c < C; ++c) out[static_cast<size_t>(i) * C + c] += position[c];
  }
}

template <typename T>
void TpGpt<T>::embed_backward(const int32_t* tokens, int batch, int seq, const T* dout) {
  const int N = batch * seq, C = config().channels, rows = local_rows(batch, seq);
  const int row0 = first_row(N);
  for (int i = 0; i < rows; ++i) {
    T* position = grad(offsets_.wpe) + static_cast<size_t>((row0 + i) % seq) * C;
    for (int c = 0; c < C; ++c) position[c] += dout[static_cast<size_t>(i) * C + c];
  }
  std::vector<T> gathered;
  const T* d = all_rows(dout, gathered, N);
  const int64_t v0 = layout_.vocab_begin(), v1 = layout_.vocab_end();
  for (int n = 0; n < N; ++n) {
    if (tokens[n] < v0 || tokens[n] >= v1) continue;
    T* row = grad(offsets_.wte) + (tokens[n] - v0) * C;
    for (int c = 0; c < C; ++c) row[c] += d[static_cast<size_t>(n) * C + c];
  }
}

template <typename T>
void TpGpt<T>::block_forward(int block, const T* x, int batch, int seq,
                             TpGptBlockActivations<T>& a) const {
  const int N = batch * seq, C = config().channels, rows = local_rows(batch, seq);
  const int NH = layout_.local_heads(), HS = C / config().heads, CL = NH * HS;
  const int H = layout_.local_hidden();
  const auto& o = offsets_.blocks[block];
  const size_t local = static_cast<size_t>(rows) * C, all = static_cast<size_t>(N) * C;
  for (auto* v : {&a.ln1, &a.residual2, &a.ln2, &a.out}) zero(*v, local);
  for (auto* v : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) zero(*v, rows);
  zero(a.qkv, static_cast<size_t>(N) * 3 * CL);
  zero(a.att, static_cast<size_t>(batch) * NH * seq * seq);
  zero(a.atty, static_cast<size_t>(N) * CL);
  zero(a.fch, static_cast<size_t>(N) * H);
  zero(a.fch_gelu, static_cast<size_t>(N) * H);
  std::vector<T> partial(all);

  layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, param(o[kLn1Weight]),
                    param(o[kLn1Bias]), rows, C);
  const T* ln1 = all_rows(a.ln1.data(), a.ln1_all, N);
  linear_forward(a.qkv.data(), ln1, param(o[kQkvWeight]), param(o[kQkvBias]), N, C, 3 * CL);
  attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), batch, seq, NH, HS);
  linear_forward<T>(partial.data(), a.atty.data(), param(o[kAttnProjWeight]), nullptr, N, CL, C);
  sum_to_local_rows(partial.data(), a.residual2.data(), N);
  add_bias_and_residual(a.residual2.data(), param(o[kAttnProjBias]), x, rows, C);

  layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.residual2.data(),
                    param(o[kLn2Weight]), param(o[kLn2Bias]), rows, C);
  const T* ln2 = all_rows(a.ln2.data(), a.ln2_all, N);
  linear_forward(a.fch.data(), ln2, param(o[kFcWeight]), param(o[kFcBias]), N, C, H);
  gelu_forward(a.fch_gelu.data(), a.fch.data(), a.fch.size());
  linear_forward<T>(partial.data(), a.fch_gelu.data(), param(o[kFcProjWeight]), nullptr, N, H, C);
  sum_to_local_rows(partial.data(), a.out.data(), N);
  add_bias_and_residual(a.out.data(), param(o[kFcProjBias]), a.residual2.data(), rows, C);
}

template <typename T>
void TpGpt<T>::block_backward(int block, const T* x, const TpGptBlockActivations<T>& a,
                              const T* dout, T* dx, int batch, int seq, TpGptScratch<T>& s) {
  const int N = batch * seq, C = config().channels, rows = local_rows(batch, seq);
  const int NH = layout_.local_heads(), HS = C / config().heads, CL = NH * HS;
  const int H = layout_.local_hidden();
  const auto& o = offsets_.blocks[block];
  const size_t local = static_cast<size_t>(rows) * C, all = static_cast<size_t>(N) * C;
  const T* ln1 = sequence_parallel_ ? a.ln1_all.data() : a.ln1.data();
  const T* ln2 = sequence_parallel_ ? a.ln2_all.data() : a.ln2.data();
  s.dresidual2.assign(dout, dout + local);
  s.dln.resize(local);

  // out = residual2 + proj(gelu(fc(ln2(residual2)))) + bias.
  add_column_sums(grad(o[kFcProjBias]), dout, rows, C);
  const T* dout_all = all_rows(dout, s.gathered, N);
  zero(s.dfch_gelu, static_cast<size_t>(N) * H);
  zero(s.dfch, static_cast<size_t>(N) * H);
  linear_backward<T>(s.dfch_gelu.data(), grad(o[kFcProjWeight]), nullptr, dout_all,
                     a.fch_gelu.data(), param(o[kFcProjWeight]), N, H, C);
  gelu_backward(s.dfch.data(), a.fch.data(), s.dfch_gelu.data(), s.dfch.size());
  zero(s.all_rows, all);
  linear_backward(s.all_rows.data(), grad(o[kFcWeight]), grad(o[kFcBias]), s.dfch.data(), ln2,
                  param(o[kFcWeight]), N, C, H);
  sum_to_local_rows(s.all_rows.data(), s.dln.data(), N);
  layernorm_backward(s.dresidual2.data(), grad(o[kLn2Weight]), grad(o[kLn2Bias]), s.dln.data(),
                     a.residual2.data(), param(o[kLn2Weight]), a.ln2_mean.data(), a.ln2_rstd.data(),
                     rows, C);

  // residual2 = x + proj(attention(qkv(ln1(x)))) + bias.
  for (size_t i = 0; i < local; ++i) dx[i] += s.dresidual2[i];
  add_column_sums(grad(o[kAttnProjBias]), s.dresidual2.data(), rows, C);
  const T* dresidual2_all = all_rows(s.dresidual2.data(), s.gathered, N);
  zero(s.datty, static_cast<size_t>(N) * CL);
  zero(s.dqkv, static_cast<size_t>(N) * 3 * CL);
  linear_backward<T>(s.datty.data(), grad(o[kAttnProjWeight]), nullptr, dresidual2_all,
                     a.atty.data(), param(o[kAttnProjWeight]), N, CL, C);
  attention_backward(s.dqkv.data(), s.datty.data(), a.qkv.data(), a.att.data(), batch, seq, NH, HS);
  zero(s.all_rows, all);
  linear_backward(s.all_rows.data(), grad(o[kQkvWeight]), grad(o[kQkvBias]), s.dqkv.data(), ln1,
                  param(o[kQkvWeight]), N, C, 3 * CL);
  sum_to_local_rows(s.all_rows.data(), s.dln.data(), N);
  layernorm_backward(dx, grad(o[kLn1Weight]), grad(o[kLn1Bias]), s.dln.data(), x,
                     param(o[kLn1Weight]), a.ln1_mean.data(), a.ln1_rstd.data(), rows, C);
}

template <typename T>
T TpGpt<T>::head_forward(const T* x, const int32_t* targets, int batch, int seq,
                         TpGptHeadActivations<T>& a) const {
  const int N = batch * seq, C = config().channels, rows = local_rows(batch, seq);
  const int V = layout_.local_vocab();
  const int64_t v0 = layout_.vocab_begin(), v1 = layout_.vocab_end();
  zero(a.lnf, static_cast<size_t>(rows) * C);
  zero(a.lnf_mean, rows);
  zero(a.lnf_rstd, rows);
  zero(a.logits, static_cast<size_t>(N) * V);
  zero(a.probs, static_cast<size_t>(N) * V);
  zero(a.losses, N);
  layernorm_forward(a.lnf.data(), a.lnf_mean.data(), a.lnf_rstd.data(), x,
                    param(offsets_.lnf_weight), param(offsets_.lnf_bias), rows, C);
  const T* lnf = all_rows(a.lnf.data(), a.lnf_all, N);
  linear_forward<T>(a.logits.data(), lnf, param(offsets_.lm_head), nullptr, N, C, V);
  if (targets == nullptr) return T(0);
  for (int n = 0; n < N; ++n)
    if (targets[n] < 0 || targets[n] >= config().vocab)
      throw std::invalid_argument("target outside vocab");
  // Vocab-parallel cross-entropy: the row maximum, then the sums of exponentials and the target
  // logits (zero on the ranks that do not hold the target), each reduced across ranks.
  std::vector<T> maxima(N), sums(2 * static_cast<size_t>(N), T(0));
  for (int n = 0; n < N; ++n) {
    const T* z = a.logits.data() + static_cast<size_t>(n) * V;
    maxima[n] = *std::max_element(z, z + V);
  }
  allreduce(maxima.data(), maxima.size(), ncclMax);
  for (int n = 0; n < N; ++n) {
    const T* z = a.logits.data() + static_cast<size_t>(n) * V;
    T* p = a.probs.data() + static_cast<size_t>(n) * V;
    for (int j = 0; j < V; ++j) {
      p[j] = std::exp(z[j] - maxima[n]);
      sums[n] += p[j];
    }
    if (targets[n] >= v0 && targets[n] < v1) sums[N + n] = z[targets[n] - v0];
  }
  allreduce(sums.data(), sums.size(), ncclSum);
  double total = 0;
  for (int n = 0; n < N; ++n) {
    T* p = a.probs.data() + static_cast<size_t>(n) * V;
    for (int j = 0; j < V; ++j) p[j] /= sums[n];
    a.losses[n] = std::log(sums[n]) + maxima[n] - sums[N + n];
    total += a.losses[n];
  }
  return static_cast<T>(total / N);
}

template <typename T>
void TpGpt<T>::head_backward(const T* x, const TpGptHeadActivations<T>& a, const int32_t* targets,
                             T loss_scale, T* dx, int batch, int seq, TpGptScratch<T>& s) {
  const int N = batch * seq, C = config().channels, rows = local_rows(batch, seq);
  const int V = layout_.local_vocab();
  const int64_t v0 = layout_.vocab_begin();
  std::vector<T> dlogits(static_cast<size_t>(N) * V);
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < V; ++j) {
      const size_t i = static_cast<size_t>(n) * V + j;
      dlogits[i] = loss_scale * (a.probs[i] - (j + v0 == targets[n] ? T(1) : T(0)));
    }
  const T* lnf = sequence_parallel_ ? a.lnf_all.data() : a.lnf.data();
  zero(s.all_rows, static_cast<size_t>(N) * C);
  linear_backward<T>(s.all_rows.data(), grad(offsets_.lm_head), nullptr, dlogits.data(), lnf,
                     param(offsets_.lm_head), N, C, V);
  s.dln.resize(static_cast<size_t>(rows) * C);
  sum_to_local_rows(s.all_rows.data(), s.dln.data(), N);
  layernorm_backward(dx, grad(offsets_.lnf_weight), grad(offsets_.lnf_bias), s.dln.data(), x,
                     param(offsets_.lnf_weight), a.lnf_mean.data(), a.lnf_rstd.data(), rows, C);
}

template <typename T>
void TpGpt<T>::reduce_replicated_grads() {
  if (!sequence_parallel_) return;
  const auto& tensors = table().tensors();
  const auto& maps = layout_.maps();
  std::vector<T> packed;
  for (size_t i = 0; i < maps.size(); ++i)
    if (maps[i].replicated)
      packed.insert(packed.end(), grads_.begin() + tensors[i].offset,
                    grads_.begin() + tensors[i].offset + tensors[i].size);
  allreduce(packed.data(), packed.size(), ncclSum);
  auto next = packed.begin();
  for (size_t i = 0; i < maps.size(); ++i)
    if (maps[i].replicated) {
      std::copy(next, next + tensors[i].size, grads_.begin() + tensors[i].offset);
      next += tensors[i].size;
    }
}

template <typename T>
double TpGpt<T>::local_grad_square_sum() const {
  const auto& tensors = table().tensors();
  const auto& maps = layout_.maps();
  double sum = 0;
  for (size_t i = 0; i < maps.size(); ++i)
    if (!maps[i].replicated || tp_rank() == 0)
      sum += trainers::grad_square_sum(grads_.data() + tensors[i].offset, tensors[i].size);
  return sum;
}

template <typename T>
double TpGpt<T>::grad_square_sum() const {
  double sum = local_grad_square_sum();
  check_nccl(ncclAllReduce(&sum, &sum, 1, ncclFloat64, ncclSum, comm_, nullptr),
             "tensor parallel: gradient norm", comm_);
  return sum;
}

template struct TpGptBlockActivations<float>;
template struct TpGptBlockActivations<double>;
template struct TpGptHeadActivations<float>;
template struct TpGptHeadActivations<double>;
template struct TpGptScratch<float>;
template struct TpGptScratch<double>;
template class TpGpt<float>;
template class TpGpt<double>;

}  // namespace weft::trainers
