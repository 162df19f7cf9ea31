/* Broken network plugins for the loader's tests, built as separate libraries:
 * BAD_PLUGIN_OLD_ONLY exports only an ncclNet version Weft does not speak (v9);
 * BAD_PLUGIN_INIT_FAILS exports a v11 table whose init() fails;
 * BAD_PLUGIN_NO_TEST exports a v11 table without a test() function. */
#include <string.h>

#include "transports/net_plugin/nccl_net.h"

#if defined(BAD_PLUGIN_OLD_ONLY)
__attribute__((visibility("default"))) char ncclNetPlugin_v9[160];
#else
__attribute__((unused)) static ncclNetResult_t initFails(void** ctx, uint64_t commId,
                                                         ncclNetCommConfig_t* config,
                                                         ncclDebugLogger_t log,
                                                         ncclProfilerCallback_t prof) {
  (void)commId, (void)config, (void)prof;
  *ctx = 0;
  if (log)
    log(NCCL_LOG_WARN, NCCL_NET_LOG_SUBSYS_NET, __FILE__, __LINE__, "bad plugin: %s",
        "init refuses on purpose");
  return kNcclNetSystemError;
}
__attribute__((unused)) static ncclNetResult_t initOk(void** ctx, uint64_t commId,
                                                      ncclNetCommConfig_t* config,
                                                      ncclDebugLogger_t log,
                                                      ncclProfilerCallback_t prof) {
  (void)commId, (void)config, (void)log, (void)prof;
  *ctx = 0;
  return kNcclNetSuccess;
}
static ncclNetResult_t oneDevice(int* n) {
  *n = 1;
  return kNcclNetSuccess;
}
static ncclNetResult_t anything(void) { return kNcclNetSuccess; }
typedef ncclNetResult_t (*AnyFn)(void);

#if defined(BAD_PLUGIN_INIT_FAILS)
#define INIT initFails
#define TEST_FN (void*)anything
#else
#define INIT initOk
#define TEST_FN 0
#endif

__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = "Bad",
    .init = INIT,
    .devices = oneDevice,
    .getProperties = (void*)anything,
    .listen = (void*)anything,
    .connect = (void*)anything,
    .accept = (void*)anything,
    .regMr = (void*)anything,
    .deregMr = (void*)anything,
    .isend = (void*)anything,
    .irecv = (void*)anything,
    .test = TEST_FN,
    .closeSend = (void*)anything,
    .closeRecv = (void*)anything,
    .closeListen = (void*)anything,
};
#endif
