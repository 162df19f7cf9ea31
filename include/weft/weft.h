/*
 * Weft's C extensions to the NCCL API. Host streams let host-mode callers queue collectives
 * asynchronously the way CUDA streams do on a GPU: pass one as the cudaStream_t of any call.
 */
#ifndef WEFT_WEFT_H_
#define WEFT_WEFT_H_

#include <stdint.h>

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Weft's own version, e.g. "0.1.0" (ncclGetVersion reports the NCCL version it mimics). */
const char* weftVersionString(void);

/* Creates a host stream: calls queued on it run in order on a Weft progress thread. */
ncclResult_t weftStreamCreate(cudaStream_t* stream);

/* Waits for the stream's pending work, then frees it. */
ncclResult_t weftStreamDestroy(cudaStream_t stream);

/* Blocks until every call queued on the stream has completed; returns the first error. */
ncclResult_t weftStreamSynchronize(cudaStream_t stream);

/* ncclSuccess when the stream is idle, ncclInProgress while work is pending, else an error. */
ncclResult_t weftStreamQuery(cudaStream_t stream);

/*
 * Creates this rank's communicator from a torchrun-style environment: RANK, WORLD_SIZE,
 * MASTER_ADDR and MASTER_PORT (WEFT_RANK, WEFT_WORLD_SIZE, WEFT_MASTER_ADDR and WEFT_MASTER_PORT
 * take precedence; LOCAL_RANK / WEFT_LOCAL_RANK is checked and logged). No unique id travels:
 * rank 0 serves the rendezvous on MASTER_ADDR:MASTER_PORT (set WEFT_MASTER_PORT when
 * torch.distributed already has a store on MASTER_PORT) and every rank derives the same id.
 * Set WEFT_JOB_SECRET to the same private string on every rank to keep strangers out; without
 * it, anyone who can reach the port and knows the job's size may join, as with torchrun's store.
 */
ncclResult_t weftCommInitFromEnv(ncclComm_t* comm);

/*
 * Slices this process has stored straight into a receiving rank's buffer so far: a receiver
 * offers its output (same process, or ncclMemAlloc'd memory), and a rank that reduces or
 * forwards data for it writes there as it goes, so nobody copies the data again
 * (WEFT_LANDING_BYTES). For diagnostics: whether a workload takes that path.
 */
uint64_t weftLandedSlices(void);

/*
 * Calls on `comm` that went straight through: a blocking call outside a group that repeats the
 * calling thread's previous one (same communicator, buffers, count, type, op and root) and in
 * which this rank sends or receives one small message (up to 8 KiB: a broadcast, reduce, gather
 * or scatter, say) or exchanges one with a peer (up to 2 KiB: a 2-rank allreduce, allgather,
 * reduce-scatter or alltoall) runs its steps without the executor when the peer is ready. For
 * diagnostics and tests: 0 for a bad handle.
 */
uint64_t weftStraightCalls(ncclComm_t comm);

/*
 * What decides how `comm` moves data, as NCCL_DEBUG=INFO prints it at init: its ranks on this
 * host and whether they share cores, FIFO geometry, the by-reference, landing and streaming
 * thresholds, the waiting budgets and the timeout. Writes at most `bytes` bytes (NUL included)
 * to `out`; returns the length of the whole text, 0 for a bad handle.
 */
size_t weftCommTuning(ncclComm_t comm, char* out, size_t bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WEFT_WEFT_H_ */
