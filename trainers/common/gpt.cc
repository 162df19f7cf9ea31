#include "trainers/common/gpt.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "trainers/common/kernels.h"

namespace weft::trainers {

const char* const kGptBlockTensorNames[kGptBlockTensorCount] = {
    "ln1.weight",       "ln1.bias",       "attn.qkv.weight", "attn.qkv.bias",
    "attn.proj.weight", "attn.proj.bias", "ln2.weight",      "ln2.bias",
    "mlp.fc.weight",    "mlp.fc.bias",    "mlp.proj.weight", "mlp.proj.bias"};

namespace {

constexpr double kInitStd = 0.02;

void check_config(const GptConfig& c) {
  if (c.vocab <= 0 || c.context <= 0 || c.layers <= 0 || c.heads <= 0 || c.channels <= 0 ||
      c.channels % c.heads != 0)
    throw std::invalid_argument("GPT config: positive sizes and channels a multiple of heads");
}

template <typename T>
void zero(std::vector<T>& v) {
  std::fill(v.begin(), v.end(), T(0));
}

}  // namespace

std::string gpt_block_tensor_name(int block, int tensor) {
  return "blocks." + std::to_string(block) + "." + kGptBlockTensorNames[tensor];
}

TensorTable gpt_tensor_table(const GptConfig& c) {
  check_config(c);
  const int64_t V = c.vocab, C = c.channels;
  const double residual_std = kInitStd / std::sqrt(2.0 * c.layers);
  TensorTable table;
  table.add("wte.weight", {V, C}, 0, true, InitKind::kNormal, kInitStd);
  table.add("wpe.weight", {c.context, C}, 0, true, InitKind::kNormal, kInitStd);
  for (int l = 0; l < c.layers; ++l) {
    const int layer = l + 1;
    auto add = [&](int tensor, std::vector<int64_t> shape, bool decay, InitKind init,
                   double std = 0.0) {
      table.add(gpt_block_tensor_name(l, tensor), std::move(shape), layer, decay, init, std);
    };
    add(kLn1Weight, {C}, false, InitKind::kOnes);
    add(kLn1Bias, {C}, false, InitKind::kZeros);
    add(kQkvWeight, {3 * C, C}, true, InitKind::kNormal, kInitStd);
    add(kQkvBias, {3 * C}, false, InitKind::kZeros);
    add(kAttnProjWeight, {C, C}, true, InitKind::kNormal, residual_std);
    add(kAttnProjBias, {C}, false, InitKind::kZeros);
    add(kLn2Weight, {C}, false, InitKind::kOnes);
    add(kLn2Bias, {C}, false, InitKind::kZeros);
    add(kFcWeight, {4 * C, C}, true, InitKind::kNormal, kInitStd);
    add(kFcBias, {4 * C}, false, InitKind::kZeros);
    add(kFcProjWeight, {C, 4 * C}, true, InitKind::kNormal, residual_std);
    add(kFcProjBias, {C}, false, InitKind::kZeros);
  }
  const int head = c.layers + 1;
  table.add("lnf.weight", {C}, head, false, InitKind::kOnes);
  table.add("lnf.bias", {C}, head, false, InitKind::kZeros);
  table.add("lm_head.weight", {V, C}, head, true, InitKind::kNormal, kInitStd);
  return table;
}

GptOffsets gpt_offsets(const TensorTable& table, int layers) {
  GptOffsets offsets;
  offsets.blocks.resize(layers);
  for (int l = 0; l < layers; ++l)
    for (int t = 0; t < kGptBlockTensorCount; ++t)
      offsets.blocks[l][t] = table.find(gpt_block_tensor_name(l, t)).offset;
  offsets.wte = table.find("wte.weight").offset;
  offsets.wpe = table.find("wpe.weight").offset;
  offsets.lnf_weight = table.find("lnf.weight").offset;
  offsets.lnf_bias = table.find("lnf.bias").offset;
  offsets.lm_head = table.find("lm_head.weight").offset;
  return offsets;
}

template <typename T>
void GptBlockActivations<T>::resize(const GptConfig& c, int batch, int seq) {
  const size_t N = static_cast<size_t>(batch) * seq, C = c.channels;
  for (auto* v : {&ln1, &atty, &residual2, &ln2, &out}) v->assign(N * C, T(0));
  for (auto* v : {&ln1_mean, &ln1_rstd, &ln2_mean, &ln2_rstd}) v->assign(N, T(0));
  qkv.assign(N * 3 * C, T(0));
  att.assign(static_cast<size_t>(batch) * c.heads * seq * seq, T(0));
  fch.assign(N * 4 * C, T(0));
  fch_gelu.assign(N * 4 * C, T(0));
}

template <typename T>
void GptHeadActivations<T>::resize(const GptConfig& c, int batch, int seq) {
  const size_t N = static_cast<size_t>(batch) * seq;
  lnf.assign(N * c.channels, T(0));
  lnf_mean.assign(N, T(0));
  lnf_rstd.assign(N, T(0));
  logits.assign(N * c.vocab, T(0));
  probs.assign(N * c.vocab, T(0));
  losses.assign(N, T(0));
}

template <typename T>
void GptBlockScratch<T>::resize(const GptConfig& c, int batch, int seq) {
  const size_t N = static_cast<size_t>(batch) * seq, C = c.channels;
  for (auto* v : {&dresidual2, &dln2, &datty, &dln1}) v->assign(N * C, T(0));
  dfch_gelu.assign(N * 4 * C, T(0));
  dfch.assign(N * 4 * C, T(0));
  dqkv.assign(N * 3 * C, T(0));
}

template <typename T>
Gpt<T>::Gpt(const GptConfig& config)
    : config_(config),
      table_(gpt_tensor_table(config)),
      offsets_(gpt_offsets(table_, config.layers)) {
  params_.assign(table_.total(), T(0));
  grads_.assign(table_.total(), T(0));
}

template <typename T>
void Gpt<T>::zero_grads() {
  zero(grads_);
}

template <typename T>
void Gpt<T>::embed_forward(const int32_t* tokens, int batch, int seq, T* out) const {
  if (seq > config_.context) throw std::invalid_argument("sequence longer than the context");
  for (size_t i = 0; i < static_cast<size_t>(batch) * seq; ++i)
    if (tokens[i] < 0 || tokens[i] >= config_.vocab)
      throw std::invalid_argument("token outside the vocabulary");
  embedding_forward(out, tokens, param(offsets_.wte), param(offsets_.wpe), batch, seq,
                    config_.channels);
}

template <typename T>
void Gpt<T>::embed_backward(const int32_t* tokens, int batch, int seq, const T* dout) {
  embedding_backward(grad(offsets_.wte), grad(offsets_.wpe), dout, tokens, batch, seq,
                     config_.channels);
}

template <typename T>
void Gpt<T>::block_forward(int block, const T* x, int batch, int seq,
                           GptBlockActivations<T>& a) const {
  const int N = batch * seq, C = config_.channels, NH = config_.heads;
  const auto& o = offsets_.blocks[block];
  a.resize(config_, batch, seq);
  layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, param(o[kLn1Weight]),
                    param(o[kLn1Bias]), N, C);
  linear_forward(a.qkv.data(), a.ln1.data(), param(o[kQkvWeight]), param(o[kQkvBias]), N, C, 3 * C);
  attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), batch, seq, NH, C / NH);
  // The projection goes to residual2 first, then the residual is added in place.
  linear_forward(a.residual2.data(), a.atty.data(), param(o[kAttnProjWeight]),
                 param(o[kAttnProjBias]), N, C, C);
  add_forward(a.residual2.data(), a.residual2.data(), x, a.residual2.size());
  layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.residual2.data(),
                    param(o[kLn2Weight]), param(o[kLn2Bias]), N, C);
  linear_forward(a.fch.data(), a.ln2.data(), param(o[kFcWeight]), param(o[kFcBias]), N, C, 4 * C);
  gelu_forward(a.fch_gelu.data(), a.fch.data(), a.fch.size());
  linear_forward(a.out.data(), a.fch_gelu.data(), param(o[kFcProjWeight]), param(o[kFcProjBias]), N,
                 4 * C, C);
  add_forward(a.out.data(), a.out.data(), a.residual2.data(), a.out.size());
}

template <typename T>
void Gpt<T>::block_backward(int block, const T* x, const GptBlockActivations<T>& a, const T* dout,
                            T* dx, int batch, int seq, GptBlockScratch<T>& s) {
  const int N = batch * seq, C = config_.channels, NH = config_.heads;
  const auto& o = offsets_.blocks[block];
  s.resize(config_, batch, seq);
  // out = residual2 + proj(gelu(fc(ln2(residual2)))).
  std::copy(dout, dout + static_cast<size_t>(N) * C, s.dresidual2.begin());
  linear_backward(s.dfch_gelu.data(), grad(o[kFcProjWeight]), grad(o[kFcProjBias]), dout,
                  a.fch_gelu.data(), param(o[kFcProjWeight]), N, 4 * C, C);
  gelu_backward(s.dfch.data(), a.fch.data(), s.dfch_gelu.data(), s.dfch.size());
  linear_backward(s.dln2.data(), grad(o[kFcWeight]), grad(o[kFcBias]), s.dfch.data(), a.ln2.data(),
                  param(o[kFcWeight]), N, C, 4 * C);
  layernorm_backward(s.dresidual2.data(), grad(o[kLn2Weight]), grad(o[kLn2Bias]), s.dln2.data(),
                     a.residual2.data(), param(o[kLn2Weight]), a.ln2_mean.data(), a.ln2_rstd.data(),
                     N, C);
  // residual2 = x + proj(attention(qkv(ln1(x)))).
  for (size_t i = 0; i < s.dresidual2.size(); ++i) dx[i] += s.dresidual2[i];
  linear_backward(s.datty.data(), grad(o[kAttnProjWeight]), grad(o[kAttnProjBias]),
                  s.dresidual2.data(), a.atty.data(), param(o[kAttnProjWeight]), N, C, C);
  attention_backward(s.dqkv.data(), s.datty.data(), a.qkv.data(), a.att.data(), batch, seq, NH,
                     C / NH);
  linear_backward(s.dln1.data(), grad(o[kQkvWeight]), grad(o[kQkvBias]), s.dqkv.data(),
                  a.ln1.data(), param(o[kQkvWeight]), N, C, 3 * C);
  layernorm_backward(dx, grad(o[kLn1Weight]), grad(o[kLn1Bias]), s.dln1.data(), x,
                     param(o[kLn1Weight]), a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
}

template <typename T>
T Gpt<T>::head_forward(const T* x, const int32_t* targets, int batch, int seq,
                       GptHeadActivations<T>& a) const {
  const int N = batch * seq, C = config_.channels, V = config_.vocab;
  a.resize(config_, batch, seq);
  layernorm_forward(a.lnf.data(), a.lnf_mean.data(), a.lnf_rstd.data(), x,
                    param(offsets_.lnf_weight), param(offsets_.lnf_bias), N, C);
  linear_forward<T>(a.logits.data(), a.lnf.data(), param(offsets_.lm_head), nullptr, N, C, V);
  if (targets == nullptr) return T(0);
  for (int n = 0; n < N; ++n)
    if (targets[n] < 0 || targets[n] >= V) throw std::invalid_argument("target outside vocab");
  cross_entropy_forward(a.losses.data(), a.probs.data(), a.logits.data(), targets, N, V);
  double sum = 0;
  for (T loss : a.losses) sum += loss;
  return static_cast<T>(sum / N);
}

template <typename T>
void Gpt<T>::head_backward(const T* x, const GptHeadActivations<T>& a, const int32_t* targets,
                           T loss_scale, T* dx, int batch, int seq) {
  const int N = batch * seq, C = config_.channels, V = config_.vocab;
  std::vector<T> dlogits(static_cast<size_t>(N) * V, T(0)), dlnf(static_cast<size_t>(N) * C, T(0));
  cross_entropy_backward(dlogits.data(), a.probs.data(), targets, loss_scale, N, V);
  linear_backward<T>(dlnf.data(), grad(offsets_.lm_head), nullptr, dlogits.data(), a.lnf.data(),
                     param(offsets_.lm_head), N, C, V);
  layernorm_backward(dx, grad(offsets_.lnf_weight), grad(offsets_.lnf_bias), dlnf.data(), x,
                     param(offsets_.lnf_weight), a.lnf_mean.data(), a.lnf_rstd.data(), N, C);
}

template struct GptBlockActivations<float>;
template struct GptBlockActivations<double>;
template struct GptHeadActivations<float>;
template struct GptHeadActivations<double>;
template struct GptBlockScratch<float>;
template struct GptBlockScratch<double>;
template class Gpt<float>;
template class Gpt<double>;

}  // namespace weft::trainers
