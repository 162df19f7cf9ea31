// Command-line options of weft-train. Parallel trainers extend TrainOptions and parse_options
// (one flag per field; parse_options rejects unknown flags).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::trainers {

struct TrainOptions {
  std::string model = "gpt";   // gpt | mlp
  int64_t steps = 20;          // total optimizer steps (a resumed run continues up to it)
  uint64_t seed = 1;           // initialisation and batches
  std::string dtype = "f32";   // f32 | f64
  std::string csv;             // per-step log: step,loss,val_loss,tokens_per_s,comm_s,compute_s
  std::string checkpoint_dir;  // written at the end of the run (and every checkpoint_every steps)
  int checkpoint_every = 0;    // 0: at the end only
  std::string resume_dir;      // read at the start
  int batch = 8;               // sequences (gpt) or images (mlp) per step
  int seq = 64;                // gpt: tokens per sequence (the context)
  int layers = 2, heads = 4, channels = 64;
  std::vector<int> hidden = {128, 64};  // mlp hidden widths
  double lr = 1e-3, weight_decay = 0.01, clip = 1.0;
  int eval_every = 0;       // validation every N steps (0: only at the end)
  int eval_batches = 4;     // gpt: validation batches per evaluation
  std::string text_cache;   // gpt: cache file of the KJV text (empty: run bible every time)
  std::string fashion_dir;  // mlp: Fashion-MNIST folder (empty: the package's)
  int blas_threads = 1;
  // Pipeline parallel (trainers/pp): stages, schedule and micro-batches per step; --pp > 1 runs
  // one process per stage (under weftrun -n pp).
  int pp = 1;
  std::string schedule = "1f1b";  // gpipe | 1f1b
  int microbatches = 1;
  int tp = 1;                      // tensor-parallel ranks (one process each, under a launcher)
  bool sequence_parallel = false;  // --sp: sequence parallelism within the tensor-parallel group
  int dp = 1;                      // data-parallel ranks
  int zero = 0;                    // ZeRO stage 0-3 (any layout)
  double bucket_mb = 25;           // gradient bucket cap
  bool overlap = true;             // reduce gradient buckets while backward runs
};

// Parses argv; throws std::invalid_argument with a message for a bad or unknown flag. Sets
// help to true for --help.
TrainOptions parse_options(int argc, char** argv, bool& help);
std::string usage();

}  // namespace weft::trainers
