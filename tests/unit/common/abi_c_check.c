/* Compiled as C (never run): the public headers must be valid C, and the ABI facts that C can
 * check at compile time must hold. */
#include <stddef.h>

#include "nccl.h"
#include "weft/weft.h"

_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes");
_Static_assert(sizeof(ncclConfig_t) == 80, "ncclConfig_t layout of NCCL 2.28");
_Static_assert(offsetof(ncclConfig_t, nvlinkCentricSched) == 76, "last ncclConfig_t field");
_Static_assert(sizeof(ncclSimInfo_t) == 24, "ncclSimInfo_t layout");
_Static_assert(ncclMaxRedOp == 0x7fffffff, "ncclMaxRedOp with a 4-byte enum");
_Static_assert(NCCL_VERSION_CODE == NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),
               "version code");

/* The initializers must be usable as C initializers of file-scope objects. */
static ncclConfig_t gConfig = NCCL_CONFIG_INITIALIZER;
static ncclSimInfo_t gSimInfo = NCCL_SIM_INFO_INITIALIZER;

/* Function types of a few entry points, taken through pointers so the prototypes are used. */
typedef ncclResult_t (*AllReduceFn)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                    ncclComm_t, cudaStream_t);
typedef ncclResult_t (*StreamQueryFn)(cudaStream_t);

int weftAbiCCheck(void);
int weftAbiCCheck(void) {
  AllReduceFn allReduce = ncclAllReduce;
  AllReduceFn pAllReduce = pncclAllReduce;
  StreamQueryFn query = weftStreamQuery;
  return (allReduce != 0) + (pAllReduce != 0) + (query != 0) + (int)gConfig.magic +
         (int)gSimInfo.magic;
}
