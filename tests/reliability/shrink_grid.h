/* A collective correctness grid in C for the shrink tests: every collective (allreduce in and
 * out of place with sum and max, broadcast, reduce, allgather, reducescatter, alltoall, and a
 * send/recv ring) over four types and several counts, each result checked against closed-form
 * values (small integers, exact in every type). Header-only: each test program includes it. */
#ifndef WEFT_TESTS_RELIABILITY_SHRINK_GRID_H
#define WEFT_TESTS_RELIABILITY_SHRINK_GRID_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

static size_t gridTypeSize(ncclDataType_t t) { return t == ncclInt64 || t == ncclFloat64 ? 8 : 4; }

static void gridSet(void* buf, ncclDataType_t t, size_t i, double v) {
  switch (t) {
    case ncclInt32:
      ((int32_t*)buf)[i] = (int32_t)v;
      break;
    case ncclInt64:
      ((int64_t*)buf)[i] = (int64_t)v;
      break;
    case ncclFloat32:
      ((float*)buf)[i] = (float)v;
      break;
    default:
      ((double*)buf)[i] = v;
      break;
  }
}

static double gridGet(const void* buf, ncclDataType_t t, size_t i) {
  switch (t) {
    case ncclInt32:
      return ((const int32_t*)buf)[i];
    case ncclInt64:
      return (double)((const int64_t*)buf)[i];
    case ncclFloat32:
      return ((const float*)buf)[i];
    default:
      return ((const double*)buf)[i];
  }
}

/* Rank r's element i of a contribution: small, distinct per rank, exact in every type. */
static double gridValue(int r, size_t i) { return (double)((r + 1) * (int)(i % 13 + 1)); }

struct GridCase {
  const char* name;
  ncclDataType_t type;
  size_t count;
};

static int gridCheck(const struct GridCase* c, const void* out, size_t n,
                     double (*expect)(size_t, const void*), const void* ctx, int rank) {
  for (size_t i = 0; i < n; ++i) {
    const double want = expect(i, ctx), got = gridGet(out, c->type, i);
    if (want != got) {
      fprintf(stderr, "rank %d: %s type %d count %zu: element %zu is %g, expected %g\n", rank,
              c->name, (int)c->type, c->count, i, got, want);
      return 1;
    }
  }
  return 0;
}

/* Shared context of the expectation callbacks. */
struct GridCtx {
  int nranks, rank, root;
  size_t count;
};

static double expectSum(size_t i, const void* p) {
  const struct GridCtx* c = p;
  return (double)(c->nranks * (c->nranks + 1) / 2) * (double)(i % 13 + 1);
}
static double expectMax(size_t i, const void* p) {
  const struct GridCtx* c = p;
  return gridValue(c->nranks - 1, i);
}
static double expectRoot(size_t i, const void* p) {
  const struct GridCtx* c = p;
  return gridValue(c->root, i);
}
static double expectGathered(size_t i, const void* p) {
  const struct GridCtx* c = p;
  return gridValue((int)(i / c->count), i % c->count);
}
static double expectScattered(size_t i, const void* p) {
  const struct GridCtx* c = p;
  return expectSum(c->rank * c->count + i, p);
}
/* Alltoall: rank r sends block p element i = 1000*r + 10*p + i%7 (as gridValue-style small ints).
 */
static double alltoallValue(int from, int to, size_t i) {
  return (double)(1000 * from + 10 * to + (int)(i % 7));
}
static double expectAlltoall(size_t i, const void* p) {
  const struct GridCtx* c = p;
  return alltoallValue((int)(i / c->count), c->rank, i % c->count);
}
static double expectFromPrev(size_t i, const void* p) {
  const struct GridCtx* c = p;
  return gridValue((c->rank + c->nranks - 1) % c->nranks, i);
}

static int gridResult(ncclResult_t r, const char* what, int rank, ncclComm_t comm) {
  if (r == ncclSuccess) return 0;
  fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, what, ncclGetErrorString(r),
          ncclGetLastError(comm));
  return 1;
}

/* Runs the grid on `comm`; 0 when every result is right. */
static int runShrinkGrid(ncclComm_t comm) {
  int n = 0, me = 0;
  if (ncclCommCount(comm, &n) != ncclSuccess || ncclCommUserRank(comm, &me) != ncclSuccess)
    return 1;
  const ncclDataType_t types[] = {ncclInt32, ncclFloat32, ncclInt64, ncclFloat64};
  const size_t counts[] = {0, 1, 7, 40009, 1 << 20};
  for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ++ti)
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ++ci) {
      const ncclDataType_t t = types[ti];
      const size_t count = counts[ci], es = gridTypeSize(t);
      if (count > 40009 && t != ncclFloat32) continue;
      char* in = malloc((count * n + 1) * es);
      char* out = malloc((count * n + 1) * es);
      if (!in || !out) return 1;
      struct GridCtx ctx = {n, me, (int)(ci % n), count};
      struct GridCase c = {"allreduce", t, count};
      int bad = 0;
      /* allreduce sum, out of place and in place; max */
      for (size_t i = 0; i < count; ++i) gridSet(in, t, i, gridValue(me, i));
      bad |=
          gridResult(ncclAllReduce(in, out, count, t, ncclSum, comm, NULL), "allreduce", me, comm);
      bad |= bad || gridCheck(&c, out, count, expectSum, &ctx, me);
      c.name = "allreduce in place";
      for (size_t i = 0; i < count; ++i) gridSet(out, t, i, gridValue(me, i));
      bad |= bad ||
             gridResult(ncclAllReduce(out, out, count, t, ncclSum, comm, NULL), c.name, me, comm);
      bad |= bad || gridCheck(&c, out, count, expectSum, &ctx, me);
      c.name = "allreduce max";
      bad |= bad ||
             gridResult(ncclAllReduce(in, out, count, t, ncclMax, comm, NULL), c.name, me, comm);
      bad |= bad || gridCheck(&c, out, count, expectMax, &ctx, me);
      /* broadcast from root */
      c.name = "broadcast";
      bad |= bad ||
             gridResult(ncclBroadcast(in, out, count, t, ctx.root, comm, NULL), c.name, me, comm);
      bad |= bad || gridCheck(&c, out, count, expectRoot, &ctx, me);
      /* reduce to root */
      c.name = "reduce";
      bad |= bad || gridResult(ncclReduce(in, out, count, t, ncclSum, ctx.root, comm, NULL), c.name,
                               me, comm);
      if (me == ctx.root) bad |= bad || gridCheck(&c, out, count, expectSum, &ctx, me);
      /* allgather */
      c.name = "allgather";
      bad |= bad || gridResult(ncclAllGather(in, out, count, t, comm, NULL), c.name, me, comm);
      bad |= bad || gridCheck(&c, out, count * n, expectGathered, &ctx, me);
      /* reducescatter: rank r contributes gridValue(r, j) for every j of n*count */
      c.name = "reducescatter";
      for (size_t i = 0; i < count * n; ++i) gridSet(in, t, i, gridValue(me, i));
      bad |= bad || gridResult(ncclReduceScatter(in, out, count, t, ncclSum, comm, NULL), c.name,
                               me, comm);
      bad |= bad || gridCheck(&c, out, count, expectScattered, &ctx, me);
      /* alltoall */
      c.name = "alltoall";
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i) gridSet(in, t, p * count + i, alltoallValue(me, p, i));
      bad |= bad || gridResult(ncclAlltoAll(in, out, count, t, comm, NULL), c.name, me, comm);
      bad |= bad || gridCheck(&c, out, count * n, expectAlltoall, &ctx, me);
      /* send/recv around the ring */
      c.name = "send/recv";
      for (size_t i = 0; i < count; ++i) gridSet(in, t, i, gridValue(me, i));
      if (!bad) {
        ncclGroupStart();
        ncclSend(in, count, t, (me + 1) % n, comm, NULL);
        ncclRecv(out, count, t, (me + n - 1) % n, comm, NULL);
        bad |= gridResult(ncclGroupEnd(), c.name, me, comm);
        bad |= bad || gridCheck(&c, out, count, expectFromPrev, &ctx, me);
      }
      free(in);
      free(out);
      if (bad) return 1;
    }
  return 0;
}

#endif
