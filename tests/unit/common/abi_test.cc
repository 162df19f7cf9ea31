// The public header's ABI against NCCL 2.28.9. The numbers below were computed once by compiling
// a small program against NVIDIA's nccl.h 2.28.9 on x86-64 (sizeof / offsetof of each field).
#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "nccl.h"
#include "weft/weft.h"

namespace {

static_assert(sizeof(ncclUniqueId) == 128);
static_assert(NCCL_UNIQUE_ID_BYTES == 128);
static_assert(sizeof(ncclConfig_t) == 80);
static_assert(alignof(ncclConfig_t) == 8);
static_assert(std::is_same_v<ncclConfig_t, struct ncclConfig_v22800>);
static_assert(std::is_same_v<ncclSimInfo_t, struct ncclSimInfo_v22200>);
static_assert(std::is_same_v<ncclComm_t, struct ncclComm*>);
static_assert(std::is_same_v<ncclWindow_t, struct ncclWindow_vidmem*>);
static_assert(sizeof(ncclResult_t) == 4 && sizeof(ncclRedOp_t) == 4 &&
              sizeof(ncclDataType_t) == 4 && sizeof(ncclScalarResidence_t) == 4);

TEST(AbiTest, ConfigFieldOffsets) {
  EXPECT_EQ(offsetof(ncclConfig_t, size), 0u);
  EXPECT_EQ(offsetof(ncclConfig_t, magic), 8u);
  EXPECT_EQ(offsetof(ncclConfig_t, version), 12u);
  EXPECT_EQ(offsetof(ncclConfig_t, blocking), 16u);
  EXPECT_EQ(offsetof(ncclConfig_t, cgaClusterSize), 20u);
  EXPECT_EQ(offsetof(ncclConfig_t, minCTAs), 24u);
  EXPECT_EQ(offsetof(ncclConfig_t, maxCTAs), 28u);
  EXPECT_EQ(offsetof(ncclConfig_t, netName), 32u);
  EXPECT_EQ(offsetof(ncclConfig_t, splitShare), 40u);
  EXPECT_EQ(offsetof(ncclConfig_t, trafficClass), 44u);
  EXPECT_EQ(offsetof(ncclConfig_t, commName), 48u);
  EXPECT_EQ(offsetof(ncclConfig_t, collnetEnable), 56u);
  EXPECT_EQ(offsetof(ncclConfig_t, CTAPolicy), 60u);
  EXPECT_EQ(offsetof(ncclConfig_t, shrinkShare), 64u);
  EXPECT_EQ(offsetof(ncclConfig_t, nvlsCTAs), 68u);
  EXPECT_EQ(offsetof(ncclConfig_t, nChannelsPerNetPeer), 72u);
  EXPECT_EQ(offsetof(ncclConfig_t, nvlinkCentricSched), 76u);
}

TEST(AbiTest, ConfigInitializer) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(c.size, sizeof(ncclConfig_t));
  EXPECT_EQ(c.magic, 0xcafebeefu);
  EXPECT_EQ(c.version, 22809u);
  for (int v : {c.blocking, c.cgaClusterSize, c.minCTAs, c.maxCTAs, c.splitShare, c.trafficClass,
                c.collnetEnable, c.CTAPolicy, c.shrinkShare, c.nvlsCTAs, c.nChannelsPerNetPeer,
                c.nvlinkCentricSched})
    EXPECT_EQ(v, INT_MIN);
  EXPECT_EQ(c.netName, nullptr);
  EXPECT_EQ(c.commName, nullptr);
}

TEST(AbiTest, SimInfoInitializer) {
  static_assert(sizeof(ncclSimInfo_t) == 24);
  static_assert(offsetof(ncclSimInfo_t, estimatedTime) == 16);
  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(s.size, sizeof(ncclSimInfo_t));
  EXPECT_EQ(s.magic, 0x74685283u);
  EXPECT_EQ(s.version, 22809u);
  EXPECT_EQ(s.estimatedTime, -1.0f);
}

TEST(AbiTest, VersionMacros) {
  EXPECT_EQ(NCCL_MAJOR, 2);
  EXPECT_EQ(NCCL_MINOR, 28);
  EXPECT_EQ(NCCL_PATCH, 9);
  EXPECT_STREQ(NCCL_SUFFIX, "");
  EXPECT_EQ(NCCL_VERSION_CODE, 22809);
  EXPECT_EQ(NCCL_VERSION(2, 28, 9), 22809);
  EXPECT_EQ(NCCL_VERSION(2, 8, 4), 2804);  // old encoding up to 2.8
  EXPECT_EQ(NCCL_VERSION(2, 9, 6), 20906);
  EXPECT_EQ(NCCL_VERSION(3, 0, 0), 30000);
}

TEST(AbiTest, Constants) {
  EXPECT_EQ(NCCL_CONFIG_UNDEF_INT, INT_MIN);
  EXPECT_TRUE(NCCL_CONFIG_UNDEF_PTR == nullptr);
  EXPECT_EQ(NCCL_SPLIT_NOCOLOR, -1);
  EXPECT_EQ(NCCL_UNDEF_FLOAT, -1.0f);
  EXPECT_EQ(NCCL_WIN_DEFAULT, 0x00);
  EXPECT_EQ(NCCL_WIN_COLL_SYMMETRIC, 0x01);
  EXPECT_EQ(NCCL_WIN_REQUIRED_ALIGNMENT, 4096);
  EXPECT_EQ(NCCL_CTA_POLICY_DEFAULT, 0x00);
  EXPECT_EQ(NCCL_CTA_POLICY_EFFICIENCY, 0x01);
  EXPECT_EQ(NCCL_CTA_POLICY_ZERO, 0x02);
  EXPECT_EQ(NCCL_SHRINK_DEFAULT, 0x00);
  EXPECT_EQ(NCCL_SHRINK_ABORT, 0x01);
  EXPECT_EQ(NCCL_REVOKE_DEFAULT, 0x00);
  EXPECT_TRUE(NCCL_COMM_NULL == nullptr);
}

TEST(AbiTest, EnumValues) {
  EXPECT_EQ(ncclSuccess, 0);
  EXPECT_EQ(ncclUnhandledCudaError, 1);
  EXPECT_EQ(ncclSystemError, 2);
  EXPECT_EQ(ncclInternalError, 3);
  EXPECT_EQ(ncclInvalidArgument, 4);
  EXPECT_EQ(ncclInvalidUsage, 5);
  EXPECT_EQ(ncclRemoteError, 6);
  EXPECT_EQ(ncclInProgress, 7);
  EXPECT_EQ(ncclNumResults, 8);

  EXPECT_EQ(ncclSum, 0);
  EXPECT_EQ(ncclProd, 1);
  EXPECT_EQ(ncclMax, 2);
  EXPECT_EQ(ncclMin, 3);
  EXPECT_EQ(ncclAvg, 4);
  EXPECT_EQ(ncclNumOps, 5);
  EXPECT_EQ(ncclNumOps_dummy, 5);
  EXPECT_EQ(static_cast<long long>(ncclMaxRedOp), 0x7fffffffLL);

  EXPECT_EQ(ncclInt8, 0);
  EXPECT_EQ(ncclChar, 0);
  EXPECT_EQ(ncclUint8, 1);
  EXPECT_EQ(ncclInt32, 2);
  EXPECT_EQ(ncclInt, 2);
  EXPECT_EQ(ncclUint32, 3);
  EXPECT_EQ(ncclInt64, 4);
  EXPECT_EQ(ncclUint64, 5);
  EXPECT_EQ(ncclFloat16, 6);
  EXPECT_EQ(ncclHalf, 6);
  EXPECT_EQ(ncclFloat32, 7);
  EXPECT_EQ(ncclFloat, 7);
  EXPECT_EQ(ncclFloat64, 8);
  EXPECT_EQ(ncclDouble, 8);
  EXPECT_EQ(ncclBfloat16, 9);
  EXPECT_EQ(ncclFloat8e4m3, 10);
  EXPECT_EQ(ncclFloat8e5m2, 11);
  EXPECT_EQ(ncclNumTypes, 12);

  EXPECT_EQ(ncclScalarDevice, 0);
  EXPECT_EQ(ncclScalarHostImmediate, 1);
}

// Every entry point and its pncclX twin have NCCL 2.28.9's exact signature (checked at compile
// time, so the test needs no definitions).
#define WEFT_CHECK_SIGNATURE(name, ...)                       \
  static_assert(std::is_same_v<decltype(name), __VA_ARGS__>); \
  static_assert(std::is_same_v<decltype(p##name), __VA_ARGS__>)

WEFT_CHECK_SIGNATURE(ncclMemAlloc, ncclResult_t(void**, size_t));
WEFT_CHECK_SIGNATURE(ncclMemFree, ncclResult_t(void*));
WEFT_CHECK_SIGNATURE(ncclGetVersion, ncclResult_t(int*));
WEFT_CHECK_SIGNATURE(ncclGetUniqueId, ncclResult_t(ncclUniqueId*));
WEFT_CHECK_SIGNATURE(ncclCommInitRankConfig,
                     ncclResult_t(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*));
WEFT_CHECK_SIGNATURE(ncclCommInitRank, ncclResult_t(ncclComm_t*, int, ncclUniqueId, int));
WEFT_CHECK_SIGNATURE(ncclCommInitAll, ncclResult_t(ncclComm_t*, int, const int*));
WEFT_CHECK_SIGNATURE(ncclCommFinalize, ncclResult_t(ncclComm_t));
WEFT_CHECK_SIGNATURE(ncclCommDestroy, ncclResult_t(ncclComm_t));
WEFT_CHECK_SIGNATURE(ncclCommAbort, ncclResult_t(ncclComm_t));
WEFT_CHECK_SIGNATURE(ncclCommRevoke, ncclResult_t(ncclComm_t, int));
WEFT_CHECK_SIGNATURE(ncclCommSplit, ncclResult_t(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*));
WEFT_CHECK_SIGNATURE(ncclCommShrink,
                     ncclResult_t(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int));
WEFT_CHECK_SIGNATURE(ncclCommInitRankScalable,
                     ncclResult_t(ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*));
WEFT_CHECK_SIGNATURE(ncclGetErrorString, const char*(ncclResult_t));
WEFT_CHECK_SIGNATURE(ncclGetLastError, const char*(ncclComm_t));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
WEFT_CHECK_SIGNATURE(ncclResetDebugInit, void());
#pragma GCC diagnostic pop
WEFT_CHECK_SIGNATURE(ncclCommGetAsyncError, ncclResult_t(ncclComm_t, ncclResult_t*));
WEFT_CHECK_SIGNATURE(ncclCommCount, ncclResult_t(const ncclComm_t, int*));
WEFT_CHECK_SIGNATURE(ncclCommCuDevice, ncclResult_t(const ncclComm_t, int*));
WEFT_CHECK_SIGNATURE(ncclCommUserRank, ncclResult_t(const ncclComm_t, int*));
WEFT_CHECK_SIGNATURE(ncclCommRegister, ncclResult_t(const ncclComm_t, void*, size_t, void**));
WEFT_CHECK_SIGNATURE(ncclCommDeregister, ncclResult_t(const ncclComm_t, void*));
WEFT_CHECK_SIGNATURE(ncclCommWindowRegister,
                     ncclResult_t(ncclComm_t, void*, size_t, ncclWindow_t*, int));
WEFT_CHECK_SIGNATURE(ncclCommWindowDeregister, ncclResult_t(ncclComm_t, ncclWindow_t));
WEFT_CHECK_SIGNATURE(ncclRedOpCreatePreMulSum, ncclResult_t(ncclRedOp_t*, void*, ncclDataType_t,
                                                            ncclScalarResidence_t, ncclComm_t));
WEFT_CHECK_SIGNATURE(ncclRedOpDestroy, ncclResult_t(ncclRedOp_t, ncclComm_t));
WEFT_CHECK_SIGNATURE(ncclReduce, ncclResult_t(const void*, void*, size_t, ncclDataType_t,
                                              ncclRedOp_t, int, ncclComm_t, cudaStream_t));
WEFT_CHECK_SIGNATURE(ncclBcast,
                     ncclResult_t(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
WEFT_CHECK_SIGNATURE(ncclBroadcast, ncclResult_t(const void*, void*, size_t, ncclDataType_t, int,
                                                 ncclComm_t, cudaStream_t));
WEFT_CHECK_SIGNATURE(ncclAllReduce, ncclResult_t(const void*, void*, size_t, ncclDataType_t,
                                                 ncclRedOp_t, ncclComm_t, cudaStream_t));
WEFT_CHECK_SIGNATURE(ncclReduceScatter, ncclResult_t(const void*, void*, size_t, ncclDataType_t,
                                                     ncclRedOp_t, ncclComm_t, cudaStream_t));
WEFT_CHECK_SIGNATURE(ncclAllGather, ncclResult_t(const void*, void*, size_t, ncclDataType_t,
                                                 ncclComm_t, cudaStream_t));
WEFT_CHECK_SIGNATURE(ncclAlltoAll, ncclResult_t(const void*, void*, size_t, ncclDataType_t,
                                                ncclComm_t, cudaStream_t));
WEFT_CHECK_SIGNATURE(ncclGather, ncclResult_t(const void*, void*, size_t, ncclDataType_t, int,
                                              ncclComm_t, cudaStream_t));
WEFT_CHECK_SIGNATURE(ncclScatter, ncclResult_t(const void*, void*, size_t, ncclDataType_t, int,
                                               ncclComm_t, cudaStream_t));
WEFT_CHECK_SIGNATURE(ncclSend, ncclResult_t(const void*, size_t, ncclDataType_t, int, ncclComm_t,
                                            cudaStream_t));
WEFT_CHECK_SIGNATURE(ncclRecv,
                     ncclResult_t(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
WEFT_CHECK_SIGNATURE(ncclGroupStart, ncclResult_t());
WEFT_CHECK_SIGNATURE(ncclGroupEnd, ncclResult_t());
WEFT_CHECK_SIGNATURE(ncclGroupSimulateEnd, ncclResult_t(ncclSimInfo_t*));

static_assert(std::is_same_v<decltype(weftVersionString), const char*()>);
static_assert(std::is_same_v<decltype(weftStreamCreate), ncclResult_t(cudaStream_t*)>);
static_assert(std::is_same_v<decltype(weftStreamDestroy), ncclResult_t(cudaStream_t)>);
static_assert(std::is_same_v<decltype(weftStreamSynchronize), ncclResult_t(cudaStream_t)>);
static_assert(std::is_same_v<decltype(weftStreamQuery), ncclResult_t(cudaStream_t)>);
static_assert(std::is_same_v<cudaStream_t, struct CUstream_st*>);

}  // namespace
