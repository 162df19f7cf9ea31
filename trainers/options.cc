#include "trainers/options.h"

#include <sstream>
#include <stdexcept>

namespace weft::trainers {

namespace {

long long parse_int(const std::string& flag, const std::string& value, long long min) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || v < min)
    throw std::invalid_argument(flag + " wants an integer >= " + std::to_string(min) + ", not '" +
                                value + "'");
  return v;
}

double parse_double(const std::string& flag, const std::string& value) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty())
    throw std::invalid_argument(flag + " wants a number, not '" + value + "'");
  return v;
}

std::vector<int> parse_widths(const std::string& flag, const std::string& value) {
  std::vector<int> widths;
  std::istringstream in(value);
  std::string item;
  while (std::getline(in, item, ',')) widths.push_back(static_cast<int>(parse_int(flag, item, 1)));
  return widths;
}

}  // namespace

std::string usage() {
  return "usage: weft-train [options]\n"
         "  --model gpt|mlp       the model (gpt: KJV characters; mlp: Fashion-MNIST)\n"
         "  --steps S             total optimizer steps (default 20)\n"
         "  --seed X              initialisation and batch seed (default 1)\n"
         "  --dtype f32|f64       scalar type (default f32)\n"
         "  --csv FILE            per-step log: step,loss,val_loss,tokens_per_s,comm_s,compute_s\n"
         "                        (samples_per_s for the mlp)\n"
         "  --checkpoint DIR      write DIR/checkpoint.weft at the end\n"
         "  --checkpoint-every K  also every K steps (default: at the end only)\n"
         "  --resume DIR          continue from DIR/checkpoint.weft (its seed is used)\n"
         "  --batch N             sequences or images per step (default 8)\n"
         "  --seq T               gpt context length (default 64)\n"
         "  --layers L --heads H --channels C   gpt size (default 2, 4, 64)\n"
         "  --hidden W1,W2        mlp hidden widths (default 128,64)\n"
         "  --lr --weight-decay --clip          AdamW (default 1e-3, 0.01, 1.0)\n"
         "  --eval-every N        validation every N steps (default: at the end only)\n"
         "  --eval-batches N      gpt validation batches (default 4)\n"
         "  --text-cache FILE     cache of the KJV text (default: run bible each time)\n"
         "  --fashion-dir DIR     Fashion-MNIST folder (default /usr/share/datasets/...)\n"
         "  --blas-threads N      OpenBLAS threads (default 1)\n"
         "  --dp N --tp N --pp N  the process grid: dp x tp x pp processes, one per rank\n"
         "                        (weftrun -n N, mpirun or torchrun; default 1 x 1 x 1)\n"
         "  --sp                  sequence parallelism within the tensor-parallel group\n"
         "  --schedule gpipe|1f1b pipeline schedule (default 1f1b)\n"
         "  --microbatches M      micro-batches per data-parallel rank and step (default 1)\n"
         "  --zero 0|1|2|3        ZeRO stage over the data-parallel ranks, any layout (default 0)\n"
         "  --bucket-mb X         gradient bucket cap (default 25)\n"
         "  --overlap 0|1         reduce gradient buckets during backward (1, default) or after\n";
}

TrainOptions parse_options(int argc, char** argv, bool& help) {
  TrainOptions o;
  help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      help = true;
      continue;
    }
    if (flag == "--sp") {
      o.sequence_parallel = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " wants a value (see --help)");
    const std::string value = argv[++i];
    if (flag == "--model") {
      if (value != "gpt" && value != "mlp") throw std::invalid_argument("--model gpt|mlp");
      o.model = value;
    } else if (flag == "--steps") {
      o.steps = parse_int(flag, value, 0);
    } else if (flag == "--seed") {
      o.seed = static_cast<uint64_t>(parse_int(flag, value, 0));
    } else if (flag == "--dtype") {
      if (value != "f32" && value != "f64") throw std::invalid_argument("--dtype f32|f64");
      o.dtype = value;
    } else if (flag == "--csv") {
      o.csv = value;
    } else if (flag == "--checkpoint") {
      o.checkpoint_dir = value;
    } else if (flag == "--checkpoint-every") {
      o.checkpoint_every = static_cast<int>(parse_int(flag, value, 0));
    } else if (flag == "--resume") {
      o.resume_dir = value;
    } else if (flag == "--batch") {
      o.batch = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--seq") {
      o.seq = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--layers") {
      o.layers = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--heads") {
      o.heads = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--channels") {
      o.channels = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--hidden") {
      o.hidden = parse_widths(flag, value);
    } else if (flag == "--lr") {
      o.lr = parse_double(flag, value);
    } else if (flag == "--weight-decay") {
      o.weight_decay = parse_double(flag, value);
    } else if (flag == "--clip") {
      o.clip = parse_double(flag, value);
    } else if (flag == "--eval-every") {
      o.eval_every = static_cast<int>(parse_int(flag, value, 0));
    } else if (flag == "--eval-batches") {
      o.eval_batches = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--text-cache") {
      o.text_cache = value;
    } else if (flag == "--fashion-dir") {
      o.fashion_dir = value;
    } else if (flag == "--dp") {
      o.dp = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--zero") {
      o.zero = static_cast<int>(parse_int(flag, value, 0));
      if (o.zero > 3) throw std::invalid_argument("--zero wants 0, 1, 2 or 3");
    } else if (flag == "--bucket-mb") {
      o.bucket_mb = parse_double(flag, value);
      if (!(o.bucket_mb >= 0)) throw std::invalid_argument("--bucket-mb wants a size >= 0");
    } else if (flag == "--overlap") {
      if (value != "0" && value != "1") throw std::invalid_argument("--overlap 0|1");
      o.overlap = value == "1";
    } else if (flag == "--blas-threads") {
      o.blas_threads = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--pp") {
      o.pp = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--schedule") {
      if (value != "gpipe" && value != "1f1b") throw std::invalid_argument("--schedule gpipe|1f1b");
      o.schedule = value;
    } else if (flag == "--microbatches") {
      o.microbatches = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--tp") {
      o.tp = static_cast<int>(parse_int(flag, value, 1));
    } else {
      throw std::invalid_argument("unknown option " + flag + " (see --help)");
    }
  }
  if (o.model == "gpt" && o.channels % o.heads != 0)
    throw std::invalid_argument("--channels must be a multiple of --heads");
  if (o.batch % (o.dp * o.microbatches) != 0)
    throw std::invalid_argument("--dp x --microbatches must divide --batch");
  return o;
}

}  // namespace weft::trainers
