// weft-train: trains the GPT on the KJV text or the MLP on Fashion-MNIST on a dp x tp x pp grid
// of processes (one per rank, under weftrun, mpirun or a torchrun-style environment; a plain
// start is the one-process 1 x 1 x 1 run), printing every step's loss, throughput and
// communication time, writing and resuming checkpoints of whole tensors (trainers/README.md).
#include <cstdio>
#include <stdexcept>

#include "trainers/common/kernels.h"
#include "trainers/compose/train_grid.h"
#include "trainers/options.h"

int main(int argc, char** argv) {
  using namespace weft::trainers;
  try {
    bool help = false;
    const TrainOptions o = parse_options(argc, argv, help);
    if (help) {
      std::printf("%s", usage().c_str());
      return 0;
    }
    set_blas_threads(o.blas_threads);
    // Every layout, 1 x 1 x 1 included, goes through the same step (trainers/compose); it exits
    // the process itself on errors, aborting its communicators.
    run_grid_training(o);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-train: %s\n", e.what());
    return 1;
  }
}
