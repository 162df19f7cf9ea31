// Gloo collectives for perf/compare, float32: allreduce (sum) with the algorithm classes a Gloo
// user picks from (-a ring | ring_chunked | halving_doubling: in place, built once per size as
// Gloo intends), and gloo::allgather, gloo::broadcast (root 0), gloo::alltoall.
//
// The binary forks -p N rank processes (before any thread exists); they rendezvous through a
// gloo FileStore in a temporary directory and connect over the TCP transport on 127.0.0.1. Each
// rank has two contexts on one device: one runs only the measured collective, the other the
// control traffic (barriers, max of times, sum of errors), so the two kinds of operation never
// share pairs (Gloo's unbound-buffer calls stall when mixed with bound-buffer algorithms on one
// context). Timing and checking as in mpi_bench.cc.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

using ContextPtr = std::shared_ptr<gloo::Context>;
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

constexpr uint32_t kBenchTag = 1;
constexpr uint32_t kBarrierTag = 2;
constexpr uint32_t kReduceTag = 3;

// The control context: barrier and reductions of one double.
class Control {
 public:
  explicit Control(ContextPtr ctx) : ctx_(std::move(ctx)) {}
  void barrier() {
    gloo::BarrierOptions opts(ctx_);
    opts.setTag(kBarrierTag);
    gloo::barrier(opts);
  }
  double max(double v) { return reduce(v, &gloo::max<double>); }
  double sum(double v) { return reduce(v, &gloo::sum<double>); }

 private:
  double reduce(double v, ReduceFn fn) {
    gloo::AllreduceOptions opts(ctx_);
    opts.setInput(&v, 1);
    opts.setOutput(&v, 1);
    opts.setReduceFunction(fn);
    opts.setTag(kReduceTag);
    gloo::allreduce(opts);
    return v;
  }
  ContextPtr ctx_;
};

// One size of one collective on the bench context.
class Case {
 public:
  Case(cmp::Coll c, const std::string& algo, size_t count, int rank, int n, ContextPtr ctx)
      : c_(c), count_(count), per_(count / n), rank_(rank), n_(n), ctx_(std::move(ctx)) {
    switch (c) {
      case cmp::Coll::allreduce:
        buf_.resize(count);
        break;
      case cmp::Coll::allgather:
        buf_.resize(per_);
        out_.resize(count);
        break;
      case cmp::Coll::broadcast:
        buf_.resize(count);
        break;
      case cmp::Coll::alltoall:
        buf_.resize(count);
        out_.resize(count);
        break;
      default:
        throw std::invalid_argument("gloo_bench: no reducescatter");
    }
    reset();
    if (c == cmp::Coll::allreduce) {
      std::vector<float*> ptrs{buf_.data()};
      int cnt = int(count);
      if (algo == "ring")
        allreduce_ = std::make_unique<gloo::AllreduceRing<float>>(ctx_, ptrs, cnt);
      else if (algo == "ring_chunked")
        allreduce_ = std::make_unique<gloo::AllreduceRingChunked<float>>(ctx_, ptrs, cnt);
      else if (algo == "halving_doubling")
        allreduce_ = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx_, ptrs, cnt);
      else
        throw std::invalid_argument(
            "gloo_bench: allreduce needs -a ring|ring_chunked|halving_doubling");
    }
  }

  void reset() {
    for (size_t i = 0; i < buf_.size(); i++) buf_[i] = cmp::inputValue(rank_, i);
    if (c_ == cmp::Coll::broadcast && rank_ != 0) std::fill(buf_.begin(), buf_.end(), -1.0f);
    std::fill(out_.begin(), out_.end(), -1.0f);
  }

  void run() {
    switch (c_) {
      case cmp::Coll::allreduce:
        allreduce_->run();
        break;
      case cmp::Coll::allgather: {
        gloo::AllgatherOptions opts(ctx_);
        opts.setInput(buf_.data(), per_);
        opts.setOutput(out_.data(), count_);
        opts.setTag(kBenchTag);
        gloo::allgather(opts);
        break;
      }
      case cmp::Coll::broadcast: {
        gloo::BroadcastOptions opts(ctx_);
        opts.setOutput(buf_.data(), count_);
        opts.setRoot(0);
        opts.setTag(kBenchTag);
        gloo::broadcast(opts);
        break;
      }
      case cmp::Coll::alltoall: {
        gloo::AlltoallOptions opts(ctx_);
        opts.setInput(buf_.data(), count_);
        opts.setOutput(out_.data(), count_);
        opts.setTag(kBenchTag);
        gloo::alltoall(opts);
        break;
      }
      default:
        break;
    }
  }

  long wrong() const {
    long bad = 0;
    const std::vector<float>& r = out_.empty() ? buf_ : out_;
    for (size_t k = 0; k < r.size(); k++) {
      float want = 0;
      switch (c_) {
        case cmp::Coll::allreduce:
          want = cmp::sumValue(n_, k);
          break;
        case cmp::Coll::allgather:
          want = cmp::inputValue(int(k / per_), k % per_);
          break;
        case cmp::Coll::broadcast:
          want = cmp::inputValue(0, k);
          break;
        case cmp::Coll::alltoall:
          want = cmp::inputValue(int(k / per_), rank_ * per_ + k % per_);
          break;
        default:
          break;
      }
      bad += r[k] != want;
    }
    return bad;
  }

 private:
  cmp::Coll c_;
  size_t count_, per_;
  int rank_, n_;
  ContextPtr ctx_;
  std::vector<float> buf_, out_;
  std::unique_ptr<gloo::Algorithm> allreduce_;
};

ContextPtr connect(int rank, int n, gloo::rendezvous::Store& root, const std::string& prefix,
                   std::shared_ptr<gloo::transport::Device> dev) {
  gloo::rendezvous::PrefixStore store(prefix, root);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(std::chrono::seconds(60));
  ctx->connectFullMesh(store, dev);
  return ctx;
}

int rankMain(int rank, const cmp::Options& o, const std::string& storeDir) {
  const int n = o.nranks;
  const cmp::Coll coll = cmp::parseColl(o.coll);
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  attr.ai_family = AF_INET;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore fileStore(storeDir);
  ContextPtr bench = connect(rank, n, fileStore, "bench", dev);
  Control control(connect(rank, n, fileStore, "control", dev));
  const std::string algo = coll == cmp::Coll::allreduce ? o.algo : "";
  if (rank == 0)
    std::printf("# gloo_bench coll=%s algo=%s nranks=%d transport=tcp(127.0.0.1) store=FileStore\n",
                o.coll.c_str(), algo.empty() ? "default" : algo.c_str(), n);
  long wrongTotal = 0;
  auto barrier = [&] { control.barrier(); };
  cmp::SpellTrack spells(rank, barrier);
  for (size_t bytes : o.sizes) {
    size_t count = cmp::totalCount(coll, bytes, n);
    if (count == 0 || count > size_t(INT32_MAX)) continue;
    Case c(coll, algo, count, rank, n, bench);
    c.run();
    control.barrier();
    const cmp::Timed timed = cmp::timeCalls(
        o, [&] { c.run(); }, barrier, [&](double v) { return control.max(v); });
    c.reset();
    control.barrier();
    c.run();
    long wrong = long(control.sum(double(c.wrong())));
    wrongTotal += wrong;
    const cmp::Spell spell = spells.after(barrier);
    if (rank == 0)
      cmp::printRow("gloo", algo, coll, n, count * sizeof(float), timed.secondsPerCall, wrong,
                    timed.iters, spell);
  }
  return wrongTotal ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  cmp::Options o = cmp::parseOptions(argc, argv, true);
  if (o.nranks < 1) {
    std::fprintf(stderr, "gloo_bench: -p must be >= 1\n");
    return 2;
  }
  if (cmp::parseColl(o.coll) == cmp::Coll::reducescatter) {
    std::fprintf(stderr,
                 "gloo_bench: reducescatter is not measured (no gloo::reduce_scatter call)\n");
    return 2;
  }
  char dirTemplate[] = "/tmp/weft_cmp_gloo_XXXXXX";
  if (!mkdtemp(dirTemplate)) {
    std::perror("mkdtemp");
    return 2;
  }
  const std::string storeDir = dirTemplate;
  std::fflush(stdout);
  const pid_t parent = getpid();
  std::vector<pid_t> ranks;
  for (int r = 0; r < o.nranks; r++) {
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      break;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // the ranks die with the launcher (e.g. on a timeout)
      if (getppid() != parent) _exit(3);
      int rc = 3;
      try {
        rc = rankMain(r, o, storeDir);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gloo_bench rank %d: %s\n", r, e.what());
      }
      std::fflush(stdout);
      _exit(rc);
    }
    ranks.push_back(pid);
  }
  int rc = int(ranks.size()) == o.nranks ? 0 : 2;
  for (pid_t pid : ranks) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  std::error_code ec;
  std::filesystem::remove_all(storeDir, ec);
  return rc;
}
