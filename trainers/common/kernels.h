// The layers' forward and backward kernels, standalone: pointers and dimensions in, nothing tied
// to a model, so that a tensor-parallel rank can run a linear on its shard of the weight and
// attention on its share of the heads, and a pipeline stage can run any subset of layers.
//
// Conventions (as llm.c): row-major; N rows of C features; a linear's weight is [OC, C] like
// torch.nn.Linear. Every backward ADDS into its gradient outputs (parameter gradients and the
// input gradient alike), so gradients from several uses or micro-batches accumulate; callers
// zero them first. Templated on the scalar type, instantiated for float and double.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::trainers {

// C[M,N] = alpha * op(A) op(B) + beta * C, row-major, through OpenBLAS.
template <typename T>
void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, T alpha, const T* a, int lda,
          const T* b, int ldb, T beta, T* c, int ldc);

// The threads OpenBLAS uses (1 where several ranks share a host).
void set_blas_threads(int threads);

// out[B,T,C] = wte[tokens[b,t]] + wpe[t].
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int seq,
                       int C);
template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int seq,
                        int C);

// LayerNorm over the last dimension (eps 1e-5, as PyTorch); mean and rstd [N] kept for backward.
template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                       int N, int C);
template <typename T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                        const T* mean, const T* rstd, int N, int C);

// out[N,OC] = inp[N,C] weight[OC,C]^T + bias[OC] (bias may be null).
template <typename T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC);
// dinp may be null (no input gradient wanted), and dbias must be null where bias was.
template <typename T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     int N, int C, int OC);

// Causal multi-head attention. qkv[B,T,3*NH*HS] holds q, k and v side by side, head h at h*HS
// within each; att[B,NH,T,T] keeps the softmax probabilities; out[B,T,NH*HS].
template <typename T>
void attention_forward(T* out, T* att, const T* qkv, int B, int seq, int NH, int HS);
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int seq, int NH,
                        int HS);

// GELU, tanh approximation (GPT-2; torch's approximate="tanh").
template <typename T>
void gelu_forward(T* out, const T* inp, size_t n);
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n);

template <typename T>
void relu_forward(T* out, const T* inp, size_t n);
template <typename T>
void relu_backward(T* dinp, const T* inp, const T* dout, size_t n);

// out = a + b.
template <typename T>
void add_forward(T* out, const T* a, const T* b, size_t n);

// Softmax over each row of logits[N,V] into probs, and losses[n] = -log probs[n, targets[n]].
template <typename T>
void cross_entropy_forward(T* losses, T* probs, const T* logits, const int32_t* targets, int N,
                           int V);
// dlogits += scale * (probs - onehot(targets)); scale is dloss/dlosses[n] (1/N for a mean).
template <typename T>
void cross_entropy_backward(T* dlogits, const T* probs, const int32_t* targets, T scale, int N,
                            int V);

}  // namespace weft::trainers
