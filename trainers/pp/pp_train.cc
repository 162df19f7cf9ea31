#include "trainers/pp/pp_train.h"

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <memory>
#include <stdexcept>
#include <vector>

#include "nccl.h"
#include "trainers/common/data.h"
#include "trainers/parallel/grid.h"
#include "trainers/pp/gpt_stage.h"
#include "trainers/pp/pp_step.h"
#include "weft/weft.h"

namespace weft::trainers {
namespace {

// The world communicator: from the environment weftrun sets, or a one-rank one for --pp 1.
ncclComm_t make_world(int pp) {
  ncclComm_t world = nullptr;
  if (pp > 1)
    check_nccl(weftCommInitFromEnv(&world), "weft-train --pp: weftCommInitFromEnv");
  else
    check_nccl(ncclCommInitAll(&world, 1, nullptr), "weft-train: ncclCommInitAll");
  return world;
}

template <typename T>
void train(const TrainOptions& o, ncclComm_t world) {
  const Grid grid(world, GridShape{1, 1, o.pp});
  const bool printer = grid.world_rank() == 0;
  const std::string text = load_kjv_text(o.text_cache);
  const CharVocab vocab(text);
  const TokenSplit split = split_tokens(vocab.encode(text), 0.1);
  const GptConfig config{vocab.size(), o.seq, o.layers, o.heads, o.channels};
  const StageLayers layers = split_gpt_layers(config.layers, o.pp, grid.coords().pp_rank);
  GptStage<T> stage(config, layers);
  stage.initialize(o.seed);
  AdamWConfig adamw;
  adamw.lr = o.lr;
  adamw.weight_decay = o.weight_decay;
  adamw.clip_norm = o.clip;
  const PipelineSchedule schedule = parse_pipeline_schedule(o.schedule);
  PipelineTrainer<T> trainer(stage, grid.pp(), schedule, adamw);
  const double ideal = ideal_bubble_fraction(o.pp, o.microbatches);
  if (printer)
    std::printf("gpt pipeline: %d stages, %s, %d micro-batches of %d rows, %zu parameters\n", o.pp,
                pipeline_schedule_name(schedule), o.microbatches, o.batch / o.microbatches,
                stage.table().total());
  std::printf("stage %d: layers %d..%d, %zu parameters\n", grid.coords().pp_rank, layers.first,
              layers.last, stage.range().second - stage.range().first);
  std::fflush(stdout);

  std::unique_ptr<std::ofstream> csv;
  if (printer && !o.csv.empty()) {
    csv = std::make_unique<std::ofstream>(o.csv);
    if (!*csv) throw std::runtime_error("cannot write " + o.csv);
    *csv << "step,loss,grad_norm,val_loss\n" << std::setprecision(9);
  }
  const TextBatcher batches(&split.train, o.seq, o.seed);
  const int rows = o.batch / o.microbatches;
  std::vector<int32_t> inputs(static_cast<size_t>(o.batch) * o.seq), targets(inputs.size());
  std::vector<MicroBatch> micros;
  for (int i = 0; i < o.microbatches; ++i)
    micros.push_back(MicroBatch{inputs.data() + static_cast<size_t>(i) * rows * o.seq,
                                targets.data() + static_cast<size_t>(i) * rows * o.seq, rows, o.seq,
                                1.0 / (static_cast<double>(o.batch) * o.seq)});
  double wait = 0, total = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    batches.batch(step, 0, o.batch, inputs.data(), targets.data());
    const PipelineStepStats stats = trainer.step(micros);
    wait += stats.wait_seconds;
    total += stats.step_seconds;
    if (!printer) continue;
    std::printf("step %lld loss %.6f grad_norm %.4f bubble %.3f (p-1)/(m+p-1) %.3f\n",
                static_cast<long long>(step), stats.loss, stats.grad_norm,
                stats.wait_seconds / stats.step_seconds, ideal);
    std::fflush(stdout);
    if (csv) *csv << step << ',' << stats.loss << ',' << stats.grad_norm << ",\n";
  }
  // Every stage's share of its time spent waiting for its neighbours, over the whole run.
  std::vector<double> mine = {wait, total}, all(2 * o.pp);
  check_nccl(ncclAllGather(mine.data(), all.data(), 2, ncclFloat64, grid.pp(), nullptr),
             "weft-train --pp: all-gather of the bubble", grid.pp());
  if (printer)
    for (int s = 0; s < o.pp; ++s)
      std::printf("stage %d bubble %.3f (waiting %.3f s of %.3f s), (p-1)/(m+p-1) %.3f\n", s,
                  all[2 * s] / all[2 * s + 1], all[2 * s], all[2 * s + 1], ideal);
}

}  // namespace

void run_gpt_pipeline(const TrainOptions& o) {
  if (o.model != "gpt") throw std::invalid_argument("--pp and --microbatches: --model gpt only");
  if (!o.checkpoint_dir.empty() || !o.resume_dir.empty())
    throw std::invalid_argument("--pp and --microbatches: no checkpoints yet");
  ncclComm_t world = make_world(o.pp);
  try {
    o.dtype == "f64" ? train<double>(o, world) : train<float>(o, world);
  } catch (...) {
    ncclCommDestroy(world);
    throw;
  }
  ncclCommDestroy(world);
}

}  // namespace weft::trainers
