#include "tests/trainers/support/harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <exception>
#include <string>
#include <thread>

#include "nccl.h"
#include "trainers/common/kernels.h"
#include "trainers/common/rng.h"

namespace weft::trainers {

void run_grid_ranks(const GridShape& shape, const std::function<void(Grid&)>& body) {
  const int n = shape.size();
  std::vector<ncclComm_t> world(n);
  ASSERT_EQ(ncclCommInitAll(world.data(), n, nullptr), ncclSuccess);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        Grid grid(world[r], shape);
        body(grid);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (ncclComm_t c : world) ncclCommDestroy(c);
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

std::vector<int32_t> repeating_text(int vocab, uint64_t seed, size_t length) {
  Rng rng(seed);
  std::vector<int32_t> text(length);
  for (size_t i = 0; i < text.size(); ++i)
    text[i] = i % 3 == 0 ? static_cast<int32_t>(rng.below(vocab)) : text[i - 1];
  return text;
}

AdamWConfig clipping_adamw() {
  AdamWConfig c;
  c.lr = 3e-3;
  c.weight_decay = 0.1;
  c.clip_norm = 0.5;
  return c;
}

template <typename T>
double clip_and_step(std::vector<T>& params, std::vector<T>& grads, AdamW<T>& optimizer) {
  const double norm = std::sqrt(grad_square_sum(grads.data(), grads.size()));
  scale_grads(grads.data(), grads.size(), clip_coefficient(norm, optimizer.config().clip_norm));
  optimizer.step(params.data(), grads.data());
  return norm;
}

template <typename T>
OneProcessRun<T> train_gpt_one_process(const GptConfig& config, const AdamWConfig& adamw,
                                       uint64_t seed, const TextBatcher& batcher, int rows, int seq,
                                       int steps) {
  Gpt<T> model(config);
  model.initialize(seed);
  AdamW<T> optimizer(adamw, model.table());
  std::vector<int32_t> inputs(static_cast<size_t>(rows) * seq), targets(inputs.size());
  OneProcessRun<T> run;
  for (int step = 0; step < steps; ++step) {
    batcher.batch(step, 0, rows, inputs.data(), targets.data());
    model.zero_grads();
    run.losses.push_back(model.forward(inputs.data(), targets.data(), rows, seq));
    model.backward();
    if (step == 0) run.first_grads = model.grads();
    run.norms.push_back(clip_and_step(model.params(), model.grads(), optimizer));
  }
  run.params = model.params();
  return run;
}

#define WEFT_TRAINER_HARNESS_TYPE(T)                                                       \
  template double clip_and_step<T>(std::vector<T>&, std::vector<T>&, AdamW<T>&);           \
  template OneProcessRun<T> train_gpt_one_process<T>(const GptConfig&, const AdamWConfig&, \
                                                     uint64_t, const TextBatcher&, int, int, int);
WEFT_TRAINER_HARNESS_TYPE(float)
WEFT_TRAINER_HARNESS_TYPE(double)

}  // namespace weft::trainers
