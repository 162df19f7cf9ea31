/* Two ranks in one process (ncclCommInitAll) sum-reduce host buffers and check every element.
 * Usage: allreduce_consumer [LIBDIR]: with LIBDIR, the Weft library the process loaded must be
 * a file in LIBDIR (the installed tree under test, not a build tree or a system copy).
 * Built with WEFT_EXPECTED_VERSION, weftVersionString() must equal it. */
#define _GNU_SOURCE
#include <limits.h>
#include <link.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

#define CHECK(cmd)                                                                           \
  do {                                                                                       \
    ncclResult_t r_ = (cmd);                                                                 \
    if (r_ != ncclSuccess) {                                                                 \
      fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #cmd, ncclGetErrorString(r_)); \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)

enum { kRanks = 2, kCount = 65537 };

/* Every libnccl.so* and libweft.so* the process has loaded must be a file in `libdir`. */
struct LibrarySearch {
  char dir[PATH_MAX];
  int found;
  int elsewhere;
};

static int checkObject(struct dl_phdr_info* object, size_t size, void* data) {
  struct LibrarySearch* search = data;
  const char* base = strrchr(object->dlpi_name, '/');
  if (!base || (strncmp(base, "/libnccl.so", 11) != 0 && strncmp(base, "/libweft.so", 11) != 0))
    return 0;
  char path[PATH_MAX];
  size_t n = strlen(search->dir);
  int inside = realpath(object->dlpi_name, path) && strncmp(path, search->dir, n) == 0 &&
               path[n] == '/' && !strchr(path + n + 1, '/');
  printf("loaded %s\n", object->dlpi_name);
  ++search->found;
  search->elsewhere += !inside;
  return 0;
}

static int loadedFrom(const char* libdir) {
  struct LibrarySearch search = {.found = 0, .elsewhere = 0};
  if (!realpath(libdir, search.dir)) return 0;
  dl_iterate_phdr(checkObject, &search);
  return search.found > 0 && search.elsewhere == 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && !loadedFrom(argv[1])) {
    fprintf(stderr, "the NCCL library in use is not the one in %s\n", argv[1]);
    return 2;
  }
  int version = 0;
  CHECK(ncclGetVersion(&version));
  printf("weft %s, ncclGetVersion %d\n", weftVersionString(), version);
  if (version != NCCL_VERSION_CODE) {
    fprintf(stderr, "library reports NCCL %d, header says %d\n", version, NCCL_VERSION_CODE);
    return 1;
  }
#ifdef WEFT_EXPECTED_VERSION
  if (strcmp(weftVersionString(), WEFT_EXPECTED_VERSION) != 0) {
    fprintf(stderr, "library is weft %s, package says %s\n", weftVersionString(),
            WEFT_EXPECTED_VERSION);
    return 1;
  }
#endif

  ncclComm_t comms[kRanks];
  CHECK(ncclCommInitAll(comms, kRanks, NULL));
  float* send[kRanks];
  float* recv[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    send[r] = malloc(sizeof(float) * kCount);
    recv[r] = malloc(sizeof(float) * kCount);
    for (int i = 0; i < kCount; ++i) send[r][i] = (float)((r + 1) * (i % 101));
  }
  CHECK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r)
    CHECK(ncclAllReduce(send[r], recv[r], kCount, ncclFloat, ncclSum, comms[r], NULL));
  CHECK(ncclGroupEnd());

  int wrong = 0;
  for (int r = 0; r < kRanks; ++r) {
    /* Rank r contributes (r + 1) * (i % 101): the sum over two ranks is 3 * (i % 101). */
    for (int i = 0; i < kCount; ++i) wrong += recv[r][i] != (float)(3 * (i % 101));
    free(send[r]);
    free(recv[r]);
  }
  for (int r = 0; r < kRanks; ++r) CHECK(ncclCommDestroy(comms[r]));
  if (wrong) {
    fprintf(stderr, "allreduce: %d wrong elements\n", wrong);
    return 1;
  }
  printf("allreduce over %d ranks: OK\n", kRanks);
  return 0;
}
