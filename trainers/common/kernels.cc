#include "trainers/common/kernels.h"

#include <cblas.h>

#include <cmath>
#include <vector>

namespace weft::trainers {

template <>
void gemm<float>(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                 const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

template <>
void gemm<double>(bool transpose_a, bool transpose_b, int m, int n, int k, double alpha,
                  const double* a, int lda, const double* b, int ldb, double beta, double* c,
                  int ldc) {
  cblas_dgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

void set_blas_threads(int threads) { openblas_set_num_threads(threads); }

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int seq,
                       int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < seq; ++t) {
      T* o = out + (static_cast<size_t>(b) * seq + t) * C;
      const T* token_row = wte + static_cast<size_t>(tokens[b * seq + t]) * C;
      const T* position_row = wpe + static_cast<size_t>(t) * C;
      for (int i = 0; i < C; ++i) o[i] = token_row[i] + position_row[i];
    }
  }
}

template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int seq,
                        int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < seq; ++t) {
      const T* d = dout + (static_cast<size_t>(b) * seq + t) * C;
      T* token_row = dwte + static_cast<size_t>(tokens[b * seq + t]) * C;
      T* position_row = dwpe + static_cast<size_t>(t) * C;
      for (int i = 0; i < C; ++i) {
        token_row[i] += d[i];
        position_row[i] += d[i];
      }
    }
  }
}

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                       int N, int C) {
  const T eps = T(1e-5);
  for (int n = 0; n < N; ++n) {
    const T* x = inp + static_cast<size_t>(n) * C;
    T m = 0;
    for (int i = 0; i < C; ++i) m += x[i];
    m /= C;
    T v = 0;
    for (int i = 0; i < C; ++i) v += (x[i] - m) * (x[i] - m);
    v /= C;
    const T s = T(1) / std::sqrt(v + eps);
    T* o = out + static_cast<size_t>(n) * C;
    for (int i = 0; i < C; ++i) o[i] = (x[i] - m) * s * weight[i] + bias[i];
    mean[n] = m;
    rstd[n] = s;
  }
}

template <typename T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                        const T* mean, const T* rstd, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const T* d = dout + static_cast<size_t>(n) * C;
    const T* x = inp + static_cast<size_t>(n) * C;
    T* dx = dinp + static_cast<size_t>(n) * C;
    const T m = mean[n], s = rstd[n];
    // dL/dnorm = weight * dout; the input gradient removes its mean and its projection on norm.
    T dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int i = 0; i < C; ++i) {
      const T norm = (x[i] - m) * s;
      const T dnorm = weight[i] * d[i];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= C;
    dnorm_norm_mean /= C;
    for (int i = 0; i < C; ++i) {
      const T norm = (x[i] - m) * s;
      const T dnorm = weight[i] * d[i];
      dbias[i] += d[i];
      dweight[i] += norm * d[i];
      dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
}

template <typename T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC) {
  gemm<T>(false, true, N, OC, C, T(1), inp, C, weight, C, T(0), out, OC);
  if (bias == nullptr) return;
  for (int n = 0; n < N; ++n) {
    T* o = out + static_cast<size_t>(n) * OC;
    for (int j = 0; j < OC; ++j) o[j] += bias[j];
  }
}

template <typename T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     int N, int C, int OC) {
  if (dinp != nullptr) gemm<T>(false, false, N, C, OC, T(1), dout, OC, weight, C, T(1), dinp, C);
  gemm<T>(true, false, OC, C, N, T(1), dout, OC, inp, C, T(1), dweight, C);
  if (dbias == nullptr) return;
  for (int n = 0; n < N; ++n) {
    const T* d = dout + static_cast<size_t>(n) * OC;
    for (int j = 0; j < OC; ++j) dbias[j] += d[j];
  }
}

template <typename T>
void attention_forward(T* out, T* att, const T* qkv, int B, int seq, int NH, int HS) {
  const int C = NH * HS;
  const size_t row = 3 * static_cast<size_t>(C);
  const T scale = T(1) / std::sqrt(static_cast<T>(HS));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < seq; ++t) {
        const T* q = qkv + (static_cast<size_t>(b) * seq + t) * row + h * HS;
        T* a = att + ((static_cast<size_t>(b) * NH + h) * seq + t) * seq;
        T max_score = -INFINITY;
        for (int t2 = 0; t2 <= t; ++t2) {
          const T* k = qkv + (static_cast<size_t>(b) * seq + t2) * row + C + h * HS;
          T dot = 0;
          for (int i = 0; i < HS; ++i) dot += q[i] * k[i];
          a[t2] = dot * scale;
          if (a[t2] > max_score) max_score = a[t2];
        }
        T sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          a[t2] = std::exp(a[t2] - max_score);
          sum += a[t2];
        }
        for (int t2 = 0; t2 <= t; ++t2) a[t2] /= sum;
        for (int t2 = t + 1; t2 < seq; ++t2) a[t2] = 0;  // masked: the future is not attended
        T* o = out + (static_cast<size_t>(b) * seq + t) * C + h * HS;
        for (int i = 0; i < HS; ++i) o[i] = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const T* v = qkv + (static_cast<size_t>(b) * seq + t2) * row + 2 * C + h * HS;
          for (int i = 0; i < HS; ++i) o[i] += a[t2] * v[i];
        }
      }
    }
  }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int seq, int NH,
                        int HS) {
  const int C = NH * HS;
  const size_t row = 3 * static_cast<size_t>(C);
  const T scale = T(1) / std::sqrt(static_cast<T>(HS));
  std::vector<T> datt(seq);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < seq; ++t) {
        const T* a = att + ((static_cast<size_t>(b) * NH + h) * seq + t) * seq;
        const T* d = dout + (static_cast<size_t>(b) * seq + t) * C + h * HS;
        const T* q = qkv + (static_cast<size_t>(b) * seq + t) * row + h * HS;
        T* dq = dqkv + (static_cast<size_t>(b) * seq + t) * row + h * HS;
        // out = sum_t2 a[t2] v[t2]: gradients of the probabilities and of the values.
        for (int t2 = 0; t2 <= t; ++t2) {
          const size_t base = (static_cast<size_t>(b) * seq + t2) * row + 2 * C + h * HS;
          const T* v = qkv + base;
          T* dv = dqkv + base;
          T dot = 0;
          for (int i = 0; i < HS; ++i) {
            dot += d[i] * v[i];
            dv[i] += a[t2] * d[i];
          }
          datt[t2] = dot;
        }
        // Softmax: dscore[t2] = a[t2] (datt[t2] - sum a datt); score = scale q.k.
        T weighted = 0;
        for (int t2 = 0; t2 <= t; ++t2) weighted += a[t2] * datt[t2];
        for (int t2 = 0; t2 <= t; ++t2) {
          const T dscore = a[t2] * (datt[t2] - weighted) * scale;
          const size_t base = (static_cast<size_t>(b) * seq + t2) * row + C + h * HS;
          const T* k = qkv + base;
          T* dk = dqkv + base;
          for (int i = 0; i < HS; ++i) {
            dq[i] += dscore * k[i];
            dk[i] += dscore * q[i];
          }
        }
      }
    }
  }
}

namespace {
// sqrt(2 / pi), the tanh GELU's constant.
constexpr double kGeluScale = 0.7978845608028654;
}  // namespace

template <typename T>
void gelu_forward(T* out, const T* inp, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const T x = inp[i];
    const T cube = T(0.044715) * x * x * x;
    out[i] = T(0.5) * x * (T(1) + std::tanh(T(kGeluScale) * (x + cube)));
  }
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const T x = inp[i];
    const T cube = T(0.044715) * x * x * x;
    const T tanh_arg = T(kGeluScale) * (x + cube);
    const T tanh_out = std::tanh(tanh_arg);
    const T sech2 = T(1) - tanh_out * tanh_out;
    const T local = T(0.5) * (T(1) + tanh_out) +
                    x * T(0.5) * sech2 * T(kGeluScale) * (T(1) + T(3 * 0.044715) * x * x);
    dinp[i] += local * dout[i];
  }
}

template <typename T>
void relu_forward(T* out, const T* inp, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = inp[i] > T(0) ? inp[i] : T(0);
}

template <typename T>
void relu_backward(T* dinp, const T* inp, const T* dout, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (inp[i] > T(0)) dinp[i] += dout[i];
}

template <typename T>
void add_forward(T* out, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void cross_entropy_forward(T* losses, T* probs, const T* logits, const int32_t* targets, int N,
                           int V) {
  for (int n = 0; n < N; ++n) {
    const T* z = logits + static_cast<size_t>(n) * V;
    T* p = probs + static_cast<size_t>(n) * V;
    T max_logit = z[0];
    for (int j = 1; j < V; ++j)
      if (z[j] > max_logit) max_logit = z[j];
    T sum = 0;
    for (int j = 0; j < V; ++j) {
      p[j] = std::exp(z[j] - max_logit);
      sum += p[j];
    }
    for (int j = 0; j < V; ++j) p[j] /= sum;
    // -log softmax computed from the logits (not from a rounded probability).
    losses[n] = std::log(sum) + max_logit - z[targets[n]];
  }
}

template <typename T>
void cross_entropy_backward(T* dlogits, const T* probs, const int32_t* targets, T scale, int N,
                            int V) {
  for (int n = 0; n < N; ++n) {
    T* d = dlogits + static_cast<size_t>(n) * V;
    const T* p = probs + static_cast<size_t>(n) * V;
    for (int j = 0; j < V; ++j) d[j] += scale * (p[j] - (j == targets[n] ? T(1) : T(0)));
  }
}

#define WEFT_TRAINERS_KERNELS(T)                                                             \
  template void embedding_forward<T>(T*, const int32_t*, const T*, const T*, int, int, int); \
  template void embedding_backward<T>(T*, T*, const T*, const int32_t*, int, int, int);      \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int, int);    \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,    \
                                      const T*, int, int);                                   \
  template void linear_forward<T>(T*, const T*, const T*, const T*, int, int, int);          \
  template void linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, int); \
  template void attention_forward<T>(T*, T*, const T*, int, int, int, int);                  \
  template void attention_backward<T>(T*, const T*, const T*, const T*, int, int, int, int); \
  template void gelu_forward<T>(T*, const T*, size_t);                                       \
  template void gelu_backward<T>(T*, const T*, const T*, size_t);                            \
  template void relu_forward<T>(T*, const T*, size_t);                                       \
  template void relu_backward<T>(T*, const T*, const T*, size_t);                            \
  template void add_forward<T>(T*, const T*, const T*, size_t);                              \
  template void cross_entropy_forward<T>(T*, T*, const T*, const int32_t*, int, int);        \
  template void cross_entropy_backward<T>(T*, const T*, const int32_t*, T, int, int);

WEFT_TRAINERS_KERNELS(float)
WEFT_TRAINERS_KERNELS(double)

}  // namespace weft::trainers
