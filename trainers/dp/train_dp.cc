#include "trainers/dp/train_dp.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainers/common/data.h"
#include "trainers/common/gpt.h"
#include "trainers/dp/data_parallel.h"
#include "trainers/dp/gpt_step.h"
#include "trainers/parallel/grid.h"
#include "weft/weft.h"

namespace weft::trainers {
namespace {

template <typename T>
void train(const TrainOptions& o, ncclComm_t world) {
  Grid grid(world, GridShape{o.dp, 1, 1});
  const int rank = grid.coords().dp_rank;
  const std::string text = load_kjv_text(o.text_cache);
  const CharVocab vocab(text);
  const TokenSplit split = split_tokens(vocab.encode(text), 0.1);
  const GptConfig config{vocab.size(), o.seq, o.layers, o.heads, o.channels};
  Gpt<T> model(config);
  model.initialize(o.seed);
  AdamWConfig adamw;
  adamw.lr = o.lr;
  adamw.weight_decay = o.weight_decay;
  adamw.clip_norm = o.clip;
  DataParallelConfig dp_config;
  dp_config.zero_stage = o.zero;
  dp_config.bucket_bytes = static_cast<size_t>(o.bucket_mb * (1 << 20));
  DataParallel<T> dp(dp_config, adamw, model.table(), model.params().data(), model.grads().data(),
                     grid.dp());
  if (rank == 0)
    std::printf("gpt: %zu parameters, vocab %d, dp %d, ZeRO-%d, %zu gradient buckets\n",
                model.table().total(), vocab.size(), o.dp, o.zero, dp.layout().buckets().size());
  std::unique_ptr<std::ofstream> csv;
  if (rank == 0 && !o.csv.empty()) {
    csv = std::make_unique<std::ofstream>(o.csv);
    if (!*csv) throw std::runtime_error("cannot write " + o.csv);
    *csv << "step,loss,val_loss,tokens_per_s,comm_s,compute_s\n" << std::setprecision(17);
  }
  const TextBatcher batches(&split.train, o.seq, o.seed);
  const int rows = o.batch / o.dp;
  std::vector<int32_t> inputs(static_cast<size_t>(rows) * o.seq), targets(inputs.size());
  GptDataParallelStep<T> runner;
  for (int64_t step = 0; step < o.steps; ++step) {
    batches.batch(step, rank * rows, rows, inputs.data(), targets.data());
    const double local =
        runner.forward_backward(model, dp, inputs.data(), targets.data(), rows, o.seq, o.batch);
    const DataParallelStep s = dp.finish_step();
    const double loss = dp.sum_over_ranks(local) / (static_cast<double>(o.batch) * o.seq);
    if (rank != 0) continue;
    std::printf(
        "step %lld loss %.6f grad_norm %.4f compute_ms %.3f comm_wait_ms %.3f "
        "optimizer_ms %.3f\n",
        static_cast<long long>(step), loss, s.grad_norm, 1e3 * s.compute_s, 1e3 * s.comm_wait_s,
        1e3 * s.optimizer_s);
    std::fflush(stdout);
    if (csv) {
      const double seconds = s.compute_s + s.comm_wait_s + s.optimizer_s;
      *csv << step << ',' << loss << ",," << static_cast<double>(o.batch) * o.seq / seconds << ','
           << s.comm_wait_s << ',' << s.compute_s + s.optimizer_s << '\n';
    }
  }
  const std::string memory = dp.memory().describe();
  std::printf("rank %d memory: %s\n", rank, memory.c_str());
  // Validation on rank 0 with the whole parameters (ZeRO-3 gathers them first).
  std::vector<T> params(model.table().total());
  dp.gather_params(params.data());
  if (rank == 0) {
    model.params() = params;
    const TextBatcher val_batches(&split.validation, o.seq, o.seed);
    std::vector<int32_t> vin(static_cast<size_t>(o.batch) * o.seq), vtarget(vin.size());
    double sum = 0;
    for (int b = 0; b < o.eval_batches; ++b) {
      val_batches.batch(b, 0, o.batch, vin.data(), vtarget.data());
      sum += model.forward(vin.data(), vtarget.data(), o.batch, o.seq);
    }
    std::printf("val_loss %.6f\n", sum / o.eval_batches);
  }
}

}  // namespace

void run_gpt_data_parallel(const TrainOptions& o) {
  if (o.model != "gpt") throw std::invalid_argument("--dp trains the gpt only");
  if (!o.checkpoint_dir.empty() || !o.resume_dir.empty())
    throw std::invalid_argument("--dp does not write or resume checkpoints yet");
  if (o.batch % o.dp != 0) throw std::invalid_argument("--batch must be a multiple of --dp");
  ncclComm_t world = nullptr;
  check_nccl(weftCommInitFromEnv(&world), "weftCommInitFromEnv (run under weftrun -n N)");
  int size = 0;
  check_nccl(ncclCommCount(world, &size), "ncclCommCount", world);
  if (size != o.dp) {
    ncclCommDestroy(world);
    throw std::invalid_argument("--dp " + std::to_string(o.dp) + " but the world has " +
                                std::to_string(size) + " ranks");
  }
  try {
    o.dtype == "f64" ? train<double>(o, world) : train<float>(o, world);
  } catch (...) {
    ncclCommDestroy(world);
    throw;
  }
  ncclCommDestroy(world);
}

}  // namespace weft::trainers
