// MPI collectives for perf/compare: MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block,
// MPI_Bcast, MPI_Alltoall on float32 (sum), out of place (Bcast: one buffer, root 0).
// One source, built with mpicxx.openmpi and mpicxx.mpich; the library names itself in the output.
//
// Per size: an untimed call, then bench_util.h's timeCalls (probe batches pick the iterations,
// warmup, the timed loop between a barrier and the end of the loop; time = max over ranks). Then
// one untimed call on fresh input is checked exactly; #wrong is summed over ranks. Before the
// first size and after each: the spell probe of bench_util.h (SpellTrack).
#include <mpi.h>

#include <string>
#include <vector>

#include "bench_util.h"

namespace {

#if defined(OPEN_MPI)
const char* kLib = "openmpi";
#elif defined(MPICH)
const char* kLib = "mpich";
#else
const char* kLib = "mpi";
#endif

double maxOverRanks(double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

struct Buffers {
  std::vector<float> send, recv;
};

// One size of one collective: buffers, the call, the input and the check.
class Case {
 public:
  Case(cmp::Coll c, size_t count, int rank, int n)
      : c_(c), count_(count), per_(count / n), rank_(rank), n_(n) {
    switch (c) {
      case cmp::Coll::allreduce:
        b_.send.resize(count);
        b_.recv.resize(count);
        break;
      case cmp::Coll::allgather:
        b_.send.resize(per_);
        b_.recv.resize(count);
        break;
      case cmp::Coll::reducescatter:
        b_.send.resize(count);
        b_.recv.resize(per_);
        break;
      case cmp::Coll::broadcast:
        b_.recv.resize(count);
        break;
      case cmp::Coll::alltoall:
        b_.send.resize(count);
        b_.recv.resize(count);
        break;
    }
    reset();
  }

  void reset() {
    for (size_t i = 0; i < b_.send.size(); i++) b_.send[i] = cmp::inputValue(rank_, i);
    if (c_ == cmp::Coll::broadcast && rank_ == 0)
      for (size_t i = 0; i < b_.recv.size(); i++) b_.recv[i] = cmp::inputValue(0, i);
    else
      std::fill(b_.recv.begin(), b_.recv.end(), -1.0f);
  }

  void run() {
    float* s = b_.send.data();
    float* r = b_.recv.data();
    int cnt = int(count_), per = int(per_);
    switch (c_) {
      case cmp::Coll::allreduce:
        MPI_Allreduce(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case cmp::Coll::allgather:
        MPI_Allgather(s, per, MPI_FLOAT, r, per, MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case cmp::Coll::reducescatter:
        MPI_Reduce_scatter_block(s, r, per, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case cmp::Coll::broadcast:
        MPI_Bcast(r, cnt, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
      case cmp::Coll::alltoall:
        MPI_Alltoall(s, per, MPI_FLOAT, r, per, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    }
  }

  long wrong() const {
    long bad = 0;
    const std::vector<float>& r = b_.recv;
    for (size_t k = 0; k < r.size(); k++) {
      float want = 0;
      switch (c_) {
        case cmp::Coll::allreduce:
          want = cmp::sumValue(n_, k);
          break;
        case cmp::Coll::allgather:
          want = cmp::inputValue(int(k / per_), k % per_);
          break;
        case cmp::Coll::reducescatter:
          want = cmp::sumValue(n_, rank_ * per_ + k);
          break;
        case cmp::Coll::broadcast:
          want = cmp::inputValue(0, k);
          break;
        case cmp::Coll::alltoall:
          want = cmp::inputValue(int(k / per_), rank_ * per_ + k % per_);
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
  Buffers b_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  cmp::Options o = cmp::parseOptions(argc, argv, false);
  cmp::Coll coll = cmp::parseColl(o.coll);
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string v(version, len);
    v = v.substr(0, v.find_first_of("\n,"));
    std::printf("# mpi_bench lib=%s coll=%s nranks=%d version=\"%s\"\n", kLib, o.coll.c_str(), n,
                v.c_str());
  }
  long wrongTotal = 0;
  auto barrier = [] { MPI_Barrier(MPI_COMM_WORLD); };
  cmp::SpellTrack spells(rank, barrier);
  for (size_t bytes : o.sizes) {
    size_t count = cmp::totalCount(coll, bytes, n);
    if (count == 0 || count > size_t(INT32_MAX)) continue;
    Case c(coll, count, rank, n);
    c.run();
    MPI_Barrier(MPI_COMM_WORLD);
    const cmp::Timed timed = cmp::timeCalls(
        o, [&] { c.run(); }, barrier, maxOverRanks);
    c.reset();
    MPI_Barrier(MPI_COMM_WORLD);
    c.run();
    long wrong = c.wrong(), wrongSum = 0;
    MPI_Allreduce(&wrong, &wrongSum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    wrongTotal += wrongSum;
    const cmp::Spell spell = spells.after(barrier);
    if (rank == 0)
      cmp::printRow(kLib, "", coll, n, count * sizeof(float), timed.secondsPerCall, wrongSum,
                    timed.iters, spell);
  }
  MPI_Finalize();
  return wrongTotal ? 1 : 0;
}
