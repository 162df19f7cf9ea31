#include "trainers/dp/mlp_train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainers/common/data.h"
#include "trainers/common/mlp.h"
#include "trainers/dp/data_parallel.h"
#include "trainers/dp/mlp_step.h"
#include "trainers/parallel/grid.h"
#include "weft/weft.h"

namespace weft::trainers {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Evaluation {
  double loss = 0, accuracy = 0;
};

// Mean loss and accuracy over the whole test set, in chunks so the activations stay small.
template <typename T>
Evaluation evaluate(Mlp<T>& model, const ImageBatcher<T>& test_images, int count) {
  const int chunk = 1000, inputs = model.config().inputs;
  std::vector<T> x(static_cast<size_t>(chunk) * inputs);
  std::vector<int32_t> labels(chunk);
  double loss_sum = 0;
  int correct = 0;
  for (int first = 0; first < count; first += chunk) {
    const int rows = std::min(chunk, count - first);
    test_images.range(first, rows, x.data(), labels.data());
    loss_sum += static_cast<double>(model.forward(x.data(), labels.data(), rows)) * rows;
    correct += model.correct();
  }
  return {loss_sum / count, static_cast<double>(correct) / count};
}

struct TimingSums {
  int steps = 0;
  double step_s = 0, compute_s = 0, comm_wait_s = 0, optimizer_s = 0;
};

template <typename T>
void train(const TrainOptions& o, const MlpDataParallelControls& controls, ncclComm_t world) {
  Grid grid(world, GridShape{o.dp, 1, 1});
  const int rank = grid.coords().dp_rank;
  const std::string dir = o.fashion_dir.empty() ? kFashionMnistDir : o.fashion_dir;
  const ImageSet train_set = load_fashion_mnist(true, dir);
  const ImageSet test_set = load_fashion_mnist(false, dir);
  const MlpConfig config{train_set.rows * train_set.cols, o.hidden, 10};
  Mlp<T> model(config);
  model.initialize(o.seed);
  AdamWConfig adamw;
  adamw.lr = o.lr;
  adamw.weight_decay = o.weight_decay;
  adamw.clip_norm = o.clip;
  DataParallelConfig dp_config;
  dp_config.zero_stage = o.zero;
  dp_config.bucket_bytes = static_cast<size_t>(o.bucket_mb * (1 << 20));
  dp_config.overlap = controls.overlap;
  DataParallel<T> dp(dp_config, adamw, model.table(), model.params().data(), model.grads().data(),
                     grid.dp());
  if (rank == 0)
    std::printf("mlp: %zu parameters, dp %d, ZeRO-%d, %zu gradient buckets, overlap %s\n",
                model.table().total(), o.dp, o.zero, dp.layout().buckets().size(),
                controls.overlap ? "on" : "off");
  std::unique_ptr<std::ofstream> csv;
  if (rank == 0 && !o.csv.empty()) {
    csv = std::make_unique<std::ofstream>(o.csv);
    if (!*csv) throw std::runtime_error("cannot write " + o.csv);
    *csv << "step,loss,val_loss,tokens_per_s,comm_s,compute_s,step_s,test_accuracy\n"
         << std::setprecision(9);
  }
  const ImageBatcher<T> train_batches(&train_set, o.seed);
  const ImageBatcher<T> test_images(&test_set, o.seed);
  const int rows = o.batch / o.dp;
  std::vector<T> inputs(static_cast<size_t>(rows) * config.inputs);
  std::vector<int32_t> labels(rows);
  MlpDataParallelStep<T> runner;
  Mlp<T> eval_model(config);  // whole parameters for evaluation (ZeRO-3 gathers them)
  TimingSums sums;
  for (int64_t step = 0; step < o.steps; ++step) {
    train_batches.batch(step, rank * rows, rows, inputs.data(), labels.data());
    const double start = now_s();  // the step: forward, backward, reductions, AdamW
    const double local =
        runner.forward_backward(model, dp, inputs.data(), labels.data(), rows, o.batch);
    const DataParallelStep s = dp.finish_step();
    const double step_s = now_s() - start;
    const double loss = dp.sum_over_ranks(local) / o.batch;
    if (step >= controls.warmup_steps) {
      ++sums.steps;
      sums.step_s += step_s;
      sums.compute_s += s.compute_s;
      sums.comm_wait_s += s.comm_wait_s;
      sums.optimizer_s += s.optimizer_s;
    }
    const bool eval = step + 1 == o.steps || (o.eval_every > 0 && (step + 1) % o.eval_every == 0);
    Evaluation e;
    if (eval) {
      dp.gather_params(eval_model.params().data());
      if (rank == 0) e = evaluate(eval_model, test_images, test_set.count);
    }
    if (rank != 0) continue;
    std::printf(
        "step %lld loss %.6f grad_norm %.4f step_ms %.3f compute_ms %.3f comm_wait_ms %.3f "
        "optimizer_ms %.3f",
        static_cast<long long>(step), loss, s.grad_norm, 1e3 * step_s, 1e3 * s.compute_s,
        1e3 * s.comm_wait_s, 1e3 * s.optimizer_s);
    if (eval) std::printf(" test_loss %.6f test_accuracy %.4f", e.loss, e.accuracy);
    std::printf("\n");
    std::fflush(stdout);
    if (csv) {
      *csv << step << ',' << loss << ',';
      if (eval) *csv << e.loss;
      *csv << ',' << o.batch / step_s << ',' << s.comm_wait_s << ',' << s.compute_s << ',' << step_s
           << ',';
      if (eval) *csv << e.accuracy;
      *csv << '\n';
    }
  }
  if (rank == 0 && sums.steps > 0) {
    const double n = sums.steps;
    // One line for scripts (trainers/bench/overlap.sh reads it).
    std::printf(
        "timing steps %d step_ms %.3f compute_ms %.3f comm_wait_ms %.3f optimizer_ms %.3f\n",
        sums.steps, 1e3 * sums.step_s / n, 1e3 * sums.compute_s / n, 1e3 * sums.comm_wait_s / n,
        1e3 * sums.optimizer_s / n);
  }
  const std::string memory = dp.memory().describe();
  std::printf("rank %d memory: %s\n", rank, memory.c_str());
}

}  // namespace

void run_mlp_data_parallel(const TrainOptions& o, const MlpDataParallelControls& controls) {
  if (o.model != "mlp") throw std::invalid_argument("run_mlp_data_parallel trains the mlp only");
  if (!o.checkpoint_dir.empty() || !o.resume_dir.empty())
    throw std::invalid_argument("the data-parallel mlp does not write or resume checkpoints");
  if (o.batch % o.dp != 0) throw std::invalid_argument("--batch must be a multiple of --dp");
  ncclComm_t world = nullptr;
  if (o.dp == 1)
    check_nccl(ncclCommInitAll(&world, 1, nullptr), "ncclCommInitAll (one rank)");
  else
    check_nccl(weftCommInitFromEnv(&world), "weftCommInitFromEnv (run under weftrun -n N)");
  int size = 0;
  check_nccl(ncclCommCount(world, &size), "ncclCommCount", world);
  if (size != o.dp) {
    ncclCommDestroy(world);
    throw std::invalid_argument("--dp " + std::to_string(o.dp) + " but the world has " +
                                std::to_string(size) + " ranks");
  }
  try {
    o.dtype == "f64" ? train<double>(o, controls, world) : train<float>(o, controls, world);
  } catch (...) {
    ncclCommDestroy(world);
    throw;
  }
  ncclCommDestroy(world);
}

}  // namespace weft::trainers
