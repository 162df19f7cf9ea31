// Each layer kernel's backward against central finite differences, in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "trainers/common/kernels.h"
#include "trainers/common/rng.h"

namespace weft::trainers {
namespace {

std::vector<double> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<double> v(n);
  for (double& x : v) x = scale * rng.normal();
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// Compares analytic[i] with the central difference of objective() in x[i], for every i.
void expect_gradient(const char* what, std::vector<double>& x, const std::vector<double>& analytic,
                     const std::function<double()>& objective) {
  ASSERT_EQ(x.size(), analytic.size());
  const double h = 1e-5;
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = objective();
    x[i] = saved - h;
    const double minus = objective();
    x[i] = saved;
    const double numeric = (plus - minus) / (2 * h);
    EXPECT_NEAR(analytic[i], numeric, 1e-7 * std::max(1.0, std::abs(numeric)))
        << what << "[" << i << "]";
  }
}

TEST(TrainersKernels, LayerNormGradients) {
  const int N = 3, C = 6;
  auto x = random_vector(N * C, 1), w = random_vector(C, 2), b = random_vector(C, 3);
  const auto probe = random_vector(N * C, 4);  // objective = sum(probe * out)
  std::vector<double> out(N * C), mean(N), rstd(N);
  auto objective = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    return dot(out, probe);
  };
  objective();
  std::vector<double> dx(N * C, 0), dw(C, 0), db(C, 0);
  layernorm_backward(dx.data(), dw.data(), db.data(), probe.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  expect_gradient("dx", x, dx, objective);
  expect_gradient("dweight", w, dw, objective);
  expect_gradient("dbias", b, db, objective);
}

TEST(TrainersKernels, LinearGradients) {
  const int N = 4, C = 3, OC = 5;
  auto x = random_vector(N * C, 5), w = random_vector(OC * C, 6), b = random_vector(OC, 7);
  const auto probe = random_vector(N * OC, 8);
  std::vector<double> out(N * OC);
  auto objective = [&] {
    linear_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC);
    return dot(out, probe);
  };
  // Gradients accumulate: start from nonzero values and check the increments.
  std::vector<double> dx(N * C, 0.5), dw(OC * C, -0.25), db(OC, 1.0);
  linear_backward(dx.data(), dw.data(), db.data(), probe.data(), x.data(), w.data(), N, C, OC);
  for (double& v : dx) v -= 0.5;
  for (double& v : dw) v += 0.25;
  for (double& v : db) v -= 1.0;
  expect_gradient("dx", x, dx, objective);
  expect_gradient("dweight", w, dw, objective);
  expect_gradient("dbias", b, db, objective);
}

TEST(TrainersKernels, AttentionGradientsAndCausality) {
  const int B = 2, T = 4, NH = 2, HS = 3, C = NH * HS;
  auto qkv = random_vector(B * T * 3 * C, 9);
  const auto probe = random_vector(B * T * C, 10);
  std::vector<double> out(B * T * C), att(B * NH * T * T);
  auto objective = [&] {
    attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, HS);
    return dot(out, probe);
  };
  objective();
  std::vector<double> dqkv(qkv.size(), 0);
  attention_backward(dqkv.data(), probe.data(), qkv.data(), att.data(), B, T, NH, HS);
  expect_gradient("dqkv", qkv, dqkv, objective);
  // Each row of probabilities sums to one over the past and is zero over the future.
  for (int row = 0; row < B * NH * T; ++row) {
    const int t = row % T;
    double sum = 0;
    for (int t2 = 0; t2 < T; ++t2) {
      if (t2 > t) {
        EXPECT_EQ(att[row * T + t2], 0.0);
      }
      sum += att[row * T + t2];
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  // Position 0 attends only to itself: its output is its own value vector.
  for (int h = 0; h < NH; ++h)
    for (int i = 0; i < HS; ++i) EXPECT_NEAR(out[h * HS + i], qkv[2 * C + h * HS + i], 1e-12);
}

TEST(TrainersKernels, GeluAndReluGradients) {
  const size_t n = 16;
  auto x = random_vector(n, 11, 2.0);
  const auto probe = random_vector(n, 12);
  std::vector<double> out(n);
  auto gelu = [&] {
    gelu_forward(out.data(), x.data(), n);
    return dot(out, probe);
  };
  std::vector<double> dx(n, 0);
  gelu_backward(dx.data(), x.data(), probe.data(), n);
  expect_gradient("gelu dx", x, dx, gelu);
  // The tanh approximation at a known point: gelu(1) = 0.5 (1 + tanh(sqrt(2/pi) 1.044715)).
  double one = 1.0, g = 0;
  gelu_forward(&g, &one, 1);
  EXPECT_NEAR(g, 0.5 * (1 + std::tanh(std::sqrt(2 / M_PI) * 1.044715)), 1e-15);

  for (double& v : x)
    if (std::abs(v) < 0.01) v = 0.5;  // away from the kink
  auto relu = [&] {
    relu_forward(out.data(), x.data(), n);
    return dot(out, probe);
  };
  std::fill(dx.begin(), dx.end(), 0.0);
  relu_backward(dx.data(), x.data(), probe.data(), n);
  expect_gradient("relu dx", x, dx, relu);
}

TEST(TrainersKernels, EmbeddingGradients) {
  const int B = 2, T = 3, C = 4, V = 5;
  const std::vector<int32_t> tokens = {1, 4, 1, 0, 2, 1};  // token 1 repeats: gradients add
  auto wte = random_vector(V * C, 13), wpe = random_vector(T * C, 14);
  const auto probe = random_vector(B * T * C, 15);
  std::vector<double> out(B * T * C);
  auto objective = [&] {
    embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    return dot(out, probe);
  };
  std::vector<double> dwte(V * C, 0), dwpe(T * C, 0);
  embedding_backward(dwte.data(), dwpe.data(), probe.data(), tokens.data(), B, T, C);
  expect_gradient("dwte", wte, dwte, objective);
  expect_gradient("dwpe", wpe, dwpe, objective);
}

TEST(TrainersKernels, CrossEntropyGradientsAndValues) {
  const int N = 3, V = 5;
  auto logits = random_vector(N * V, 16, 3.0);
  const std::vector<int32_t> targets = {0, 4, 2};
  std::vector<double> losses(N), probs(N * V);
  const double scale = 1.0 / N;
  auto objective = [&] {
    cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), N, V);
    double sum = 0;
    for (double l : losses) sum += scale * l;
    return sum;
  };
  objective();
  std::vector<double> dlogits(N * V, 0);
  cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), scale, N, V);
  expect_gradient("dlogits", logits, dlogits, objective);
  objective();  // the losses at the unperturbed logits
  for (int n = 0; n < N; ++n) {
    double z = 0;
    for (int j = 0; j < V; ++j) z += std::exp(logits[n * V + j]);
    EXPECT_NEAR(losses[n], std::log(z) - logits[n * V + targets[n]], 1e-12);
  }
}

TEST(TrainersKernels, FloatAndDoubleGemmAgree) {
  const int M = 7, N = 5, K = 9;
  const auto a = random_vector(M * K, 17), b = random_vector(K * N, 18);
  std::vector<double> c(M * N, 0);
  gemm<double>(false, false, M, N, K, 1.0, a.data(), K, b.data(), N, 0.0, c.data(), N);
  std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), cf(M * N, 0);
  gemm<float>(false, false, M, N, K, 1.0f, af.data(), K, bf.data(), N, 0.0f, cf.data(), N);
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double expected = 0;
      for (int k = 0; k < K; ++k) expected += a[i * K + k] * b[k * N + j];
      EXPECT_NEAR(c[i * N + j], expected, 1e-12);
      EXPECT_NEAR(cf[i * N + j], expected, 1e-4);
    }
  }
}

}  // namespace
}  // namespace weft::trainers
