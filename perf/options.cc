#include "perf/options.h"

#include <getopt.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weft::perf {
namespace {

// getopt's values for the long-only --host and --hbm-gbs (outside the range of short options).
constexpr int kHostFlag = 256;
constexpr int kHbmFlag = 257;

// A size with an optional K/M/G suffix (binary units), as nccl-tests reads -b/-e.
bool parseSize(const char* s, size_t* out) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) return false;
  double unit = 1;
  if (*end) {
    switch (std::tolower(static_cast<unsigned char>(*end))) {
      case 'k':
        unit = 1024.0;
        break;
      case 'm':
        unit = 1024.0 * 1024;
        break;
      case 'g':
        unit = 1024.0 * 1024 * 1024;
        break;
      default:
        return false;
    }
    ++end;
    if (*end == 'b' || *end == 'B') ++end;
    if (*end) return false;
  }
  *out = static_cast<size_t>(v * unit);
  return true;
}

bool parseInt(const char* s, int* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 0);
  if (end == s || *end != '\0' || v < -1000000000L || v > 1000000000L) return false;
  *out = static_cast<int>(v);
  return true;
}

void usage(const char* program) {
  std::printf(
      "USAGE: %s\n"
      "\t[-t,--nthreads <threads per process>] (1)\n"
      "\t[-g,--ngpus <ranks per thread>] (1)\n"
      "\t[-b,--minbytes <min size in bytes, K/M/G suffix>] (32M)\n"
      "\t[-e,--maxbytes <max size in bytes>] (32M)\n"
      "\t[-i,--stepbytes <increment size>] (1M)\n"
      "\t[-f,--stepfactor <increment factor>] (disabled)\n"
      "\t[-n,--iters <iteration count>] (20)\n"
      "\t[-m,--agg_iters <calls aggregated in one group per iteration>] (1)\n"
      "\t[-w,--warmup_iters <warmup iteration count>] (1)\n"
      "\t[-N,--run_cycles <repeat the sweep, 0 = forever>] (1)\n"
      "\t[-p,--parallel_init <0/1>] (0)\n"
      "\t[-c,--check <checked iterations, 0 = no check>] (1)\n"
      "\t[-o,--op <sum/prod/min/max/avg/mulsum/all>] (sum)\n"
      "\t[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/"
      "f8e4m3/f8e5m2/all>] (float)\n"
      "\t[-r,--root <root rank/all>] (0)\n"
      "\t[-z,--blocking <0 async, 1 wait+barrier per call, 2 wait per call, 3 wait+barrier per "
      "iteration>] (0)\n"
      "\t[-y,--stream_null <0 a stream per rank (CUDA stream on device memory, else a Weft host\n"
      "\t                   stream), 1 NULL stream>] (0)\n"
      "\t[-T,--timeout <seconds before the test fails, 0 = none>] (0)\n"
      "\t[-C,--report_cputime <0/1>] (0)\n"
      "\t[-a,--average <0 rank0, 1 avg, 2 min, 3 max>] (1)\n"
      "\t[-R,--local_register <0 none, 1 ncclCommRegister, 2 symmetric window>] (0)\n"
      "\t[-u,--unalign <misalign buffers by N elements>] (0)\n"
      "\t[--host] host buffers and host timing even where a GPU is present (default: device\n"
      "\t         buffers and CUDA event timing when the CUDA driver sees a device; host\n"
      "\t         buffers otherwise; NCCL_TESTS_DEVICE picks the first rank's GPU)\n"
      "\t[--hbm-gbs <GB/s>] the GPU memory bandwidth of the roofline columns on device memory\n"
      "\t         (default: from the driver's memory clock and bus width; 0 = no roofline)\n"
      "\t[-G,--cudagraph <n>] accepted, ignored: the Weft perf tests capture no CUDA graphs\n"
      "\t[-D,--device_implementation <n>] accepted, ignored: no device API kernels\n"
      "\t[-h,--help]\n"
      "Processes: run under weftrun, srun or mpirun, or set RANK, WORLD_SIZE, MASTER_ADDR and\n"
      "MASTER_PORT as torchrun does (or WEFT_ID_FILE, a path all processes reach, for the id).\n",
      program);
}

}  // namespace

int parseOptions(int argc, char** argv, const char* program, Options* o) {
  static const option kLong[] = {{"nthreads", required_argument, nullptr, 't'},
                                 {"ngpus", required_argument, nullptr, 'g'},
                                 {"minbytes", required_argument, nullptr, 'b'},
                                 {"maxbytes", required_argument, nullptr, 'e'},
                                 {"stepbytes", required_argument, nullptr, 'i'},
                                 {"stepfactor", required_argument, nullptr, 'f'},
                                 {"iters", required_argument, nullptr, 'n'},
                                 {"agg_iters", required_argument, nullptr, 'm'},
                                 {"warmup_iters", required_argument, nullptr, 'w'},
                                 {"run_cycles", required_argument, nullptr, 'N'},
                                 {"parallel_init", required_argument, nullptr, 'p'},
                                 {"check", required_argument, nullptr, 'c'},
                                 {"op", required_argument, nullptr, 'o'},
                                 {"datatype", required_argument, nullptr, 'd'},
                                 {"root", required_argument, nullptr, 'r'},
                                 {"blocking", required_argument, nullptr, 'z'},
                                 {"stream_null", required_argument, nullptr, 'y'},
                                 {"timeout", required_argument, nullptr, 'T'},
                                 {"cudagraph", required_argument, nullptr, 'G'},
                                 {"report_cputime", required_argument, nullptr, 'C'},
                                 {"average", required_argument, nullptr, 'a'},
                                 {"local_register", required_argument, nullptr, 'R'},
                                 {"unalign", required_argument, nullptr, 'u'},
                                 {"device_implementation", required_argument, nullptr, 'D'},
                                 {"cta_policy", required_argument, nullptr, 'x'},
                                 {"device_cta_count", required_argument, nullptr, 'V'},
                                 {"memory", required_argument, nullptr, 'M'},
                                 {"per_iter_timing", required_argument, nullptr, 'I'},
                                 {"per_iter_skip", required_argument, nullptr, 'K'},
                                 {"output_file", required_argument, nullptr, 'J'},
                                 {"report_timestamps", required_argument, nullptr, 'S'},
                                 {"host", no_argument, nullptr, kHostFlag},
                                 {"hbm-gbs", required_argument, nullptr, kHbmFlag},
                                 {"help", no_argument, nullptr, 'h'},
                                 {nullptr, 0, nullptr, 0}};
  auto bad = [&](const char* what, const char* value) {
    std::fprintf(stderr, "%s: invalid value '%s' for %s\n", program, value, what);
    return 1;
  };
  int c;
  while ((c = getopt_long(argc, argv,
                          "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:a:R:u:D:x:V:M:I:K:J:S:h", kLong,
                          nullptr)) != -1) {
    int v = 0;
    switch (c) {
      case 't':
        if (!parseInt(optarg, &o->nThreads) || o->nThreads < 1) return bad("-t", optarg);
        break;
      case 'g':
        if (!parseInt(optarg, &o->nGpus) || o->nGpus < 1) return bad("-g", optarg);
        break;
      case 'b':
        if (!parseSize(optarg, &o->minBytes)) return bad("-b (minbytes)", optarg);
        break;
      case 'e':
        if (!parseSize(optarg, &o->maxBytes)) return bad("-e (maxbytes)", optarg);
        break;
      case 'i':
        if (!parseSize(optarg, &o->stepBytes)) return bad("-i (stepbytes)", optarg);
        break;
      case 'f':
        if (!parseSize(optarg, &o->stepFactor)) return bad("-f (stepfactor)", optarg);
        break;
      case 'n':
        if (!parseInt(optarg, &o->iters) || o->iters < 1) return bad("-n", optarg);
        break;
      case 'm':
        if (!parseInt(optarg, &o->aggIters) || o->aggIters < 1) return bad("-m", optarg);
        break;
      case 'w':
        if (!parseInt(optarg, &o->warmupIters) || o->warmupIters < 0) return bad("-w", optarg);
        break;
      case 'N':
        if (!parseInt(optarg, &o->runCycles) || o->runCycles < 0) return bad("-N", optarg);
        break;
      case 'p':
        if (!parseInt(optarg, &o->parallelInit)) return bad("-p", optarg);
        break;
      case 'c':
        if (!parseInt(optarg, &o->check) || o->check < 0) return bad("-c", optarg);
        break;
      case 'o':
        if (std::strcmp(optarg, "all") == 0) {
          o->allOps = true;
        } else if (!parseOp(optarg, &o->op)) {
          return bad("-o (sum, prod, min, max, avg, mulsum, all)", optarg);
        }
        break;
      case 'd':
        if (std::strcmp(optarg, "all") == 0) {
          o->allTypes = true;
        } else if (!parseType(optarg, &o->type)) {
          return bad(
              "-d (int8, uint8, int32, uint32, int64, uint64, half, float, double, "
              "bfloat16, f8e4m3, f8e5m2, all)",
              optarg);
        }
        break;
      case 'r':
        if (std::strcmp(optarg, "all") == 0) {
          o->root = -1;
        } else if (!parseInt(optarg, &o->root) || o->root < -1) {
          return bad("-r", optarg);
        }
        break;
      case 'z':
        if (!parseInt(optarg, &o->blocking) || o->blocking < 0 || o->blocking > 3)
          return bad("-z (0..3)", optarg);
        break;
      case 'y':
        if (!parseInt(optarg, &o->streamNull)) return bad("-y", optarg);
        break;
      case 'T':
        if (!parseInt(optarg, &o->timeout) || o->timeout < 0) return bad("-T", optarg);
        break;
      case 'C':
        if (!parseInt(optarg, &o->reportCpu)) return bad("-C", optarg);
        break;
      case 'a':
        if (!parseInt(optarg, &o->average) || o->average < 0 || o->average > 3)
          return bad("-a (0..3)", optarg);
        break;
      case 'R':
        if (!parseInt(optarg, &o->registerMode) || o->registerMode < 0 || o->registerMode > 2)
          return bad("-R (0..2)", optarg);
        break;
      case 'u':
        if (!parseInt(optarg, &o->unalign) || o->unalign < 0 || o->unalign > 4096)
          return bad("-u", optarg);
        break;
      case 'G':
        if (!parseInt(optarg, &v)) return bad("-G", optarg);
        if (v)
          o->notes.push_back("-G " + std::string(optarg) +
                             " ignored: the Weft perf tests capture no CUDA graphs");
        break;
      case 'D':
        if (!parseInt(optarg, &v)) return bad("-D", optarg);
        if (v)
          o->notes.push_back("-D " + std::string(optarg) +
                             " ignored: the Weft perf tests have no device API kernels");
        break;
      case 'x':
      case 'V':
      case 'M':
      case 'I':
      case 'K':
      case 'J':
      case 'S':
        o->notes.push_back(std::string("-") + static_cast<char>(c) + " " + optarg +
                           " ignored: not supported by the Weft perf tests");
        break;
      case kHostFlag:
        o->hostMemory = true;
        break;
      case kHbmFlag: {
        char* end = nullptr;
        o->hbmGBps = std::strtod(optarg, &end);
        if (end == optarg || *end != '\0' || !(o->hbmGBps >= 0) || o->hbmGBps > 1e6)
          return bad("--hbm-gbs (GB/s, 0 = no roofline)", optarg);
        break;
      }
      case 'h':
        usage(program);
        return 0;
      default:
        usage(program);
        return 1;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "%s: unexpected argument '%s'\n", program, argv[optind]);
    return 1;
  }
  if (o->minBytes > o->maxBytes) {
    std::fprintf(stderr, "%s: minbytes %zu is larger than maxbytes %zu\n", program, o->minBytes,
                 o->maxBytes);
    return 1;
  }
  if (o->stepFactor <= 1 && o->stepBytes == 0 && o->minBytes != o->maxBytes) {
    std::fprintf(stderr, "%s: the step (-i or -f) must make the size grow\n", program);
    return 1;
  }
  return -1;
}

}  // namespace weft::perf
