// weft-dp-bench: the benchmark driver of the data-parallel MLP (trainers/dp/mlp_train.h), until
// weft-train runs `--model mlp --dp N` itself. It takes weft-train's options (--model mlp is
// implied) and two of its own:
//
//   --no-overlap        reduce every gradient bucket after backward instead of during it
//   --warmup-steps N    steps left out of the closing timing line (default 2)
//
//   build/perf/weftrun -n 2 build/trainers/weft-dp-bench --dp 2 --steps 300 --batch 128
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainers/common/kernels.h"
#include "trainers/dp/mlp_train.h"
#include "trainers/options.h"

int main(int argc, char** argv) {
  using namespace weft::trainers;
  try {
    MlpDataParallelControls controls;
    // weft-train's parser rejects flags it does not know: take ours out first.
    std::vector<char*> rest = {argv[0]};
    std::string model_flag = "--model", model_value = "mlp";
    rest.push_back(model_flag.data());
    rest.push_back(model_value.data());
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--no-overlap") {
        controls.overlap = false;
      } else if (flag == "--warmup-steps") {
        if (i + 1 >= argc) throw std::invalid_argument("--warmup-steps wants a value");
        controls.warmup_steps = std::stoi(argv[++i]);
        if (controls.warmup_steps < 0) throw std::invalid_argument("--warmup-steps wants N >= 0");
      } else {
        rest.push_back(argv[i]);
      }
    }
    bool help = false;
    const TrainOptions o = parse_options(static_cast<int>(rest.size()), rest.data(), help);
    if (help) {
      std::printf(
          "weft-dp-bench: the data-parallel MLP (weft-train's options, --model mlp)\n"
          "  --no-overlap          reduce the gradient buckets after backward\n"
          "  --warmup-steps N      steps left out of the timing line (default 2)\n%s",
          usage().c_str());
      return 0;
    }
    if (o.model != "mlp") throw std::invalid_argument("weft-dp-bench trains the mlp only");
    set_blas_threads(o.blas_threads);
    run_mlp_data_parallel(o, controls);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-dp-bench: %s\n", e.what());
    return 1;
  }
}
