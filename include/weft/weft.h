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
 * The unique id of a launched job, which every process derives alike from its environment, with
 * this process's rank and the number of processes: no id travels and no file is shared. The
 * process of rank 0 also serves the rendezvous, so call this once per process for one
 * communicator (of that size, or larger when each process then inits several ranks with the id).
 * Ranks come from WEFT_RANK/WEFT_WORLD_SIZE, else torchrun's RANK/WORLD_SIZE, else Open MPI's
 * OMPI_COMM_WORLD_RANK/SIZE, else MPICH's PMI_RANK/PMI_SIZE, else srun's
 * SLURM_PROCID/SLURM_STEP_NUM_TASKS. Rank 0 serves on MASTER_ADDR:MASTER_PORT (WEFT_MASTER_ADDR
 * and WEFT_MASTER_PORT take precedence; set WEFT_MASTER_PORT when torch.distributed already has a
 * store on MASTER_PORT). Under srun either may be left out: the address is then the step's first
 * node (SLURM_STEP_NODELIST, where task 0 runs unless the distribution is arbitrary) and the port
 * one in [61000, 65000) derived from SLURM_JOB_ID and SLURM_STEP_ID. An MPI launcher names no
 * address: set MASTER_ADDR and MASTER_PORT, or use weftCommInitFromMpi (weft/weft_mpi.h).
 * Set WEFT_JOB_SECRET to the same private string on every rank to keep strangers out; without
 * it, anyone who can reach the port and knows the job's size (under srun: its job and step ids)
 * may join, as with torchrun's store.
 */
ncclResult_t weftGetUniqueIdFromEnv(ncclUniqueId* id, int* rank, int* nranks);

/*
 * Creates this rank's communicator, one rank per process, from the environment a launcher
 * (torchrun, srun, mpirun with MASTER_ADDR set) gives it: weftGetUniqueIdFromEnv, then
 * ncclCommInitRank. LOCAL_RANK / WEFT_LOCAL_RANK (or the launcher's local rank) is checked and
 * logged.
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
