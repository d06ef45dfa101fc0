/* tutti.h: Tutti's additions to NCCL's API. Everything here is an extension that NVIDIA's NCCL
 * does not have, and every name starts with `tutti`; a program that uses only nccl.h stays
 * portable between NCCL and Tutti. The same result codes (ncclResult_t) and the same
 * communicator handle (ncclComm_t) are used, so extensions and NCCL calls mix freely. */
#ifndef TUTTI_H_
#define TUTTI_H_

#include <stdint.h>

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates this process's communicator from the variables its launcher set, so that a program
 * needs no code of its own to share a unique id. Rank and size come from the first launcher
 * found, in this order:
 *   - tutti-run and torchrun: RANK and WORLD_SIZE;
 *   - Open MPI's mpirun: OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE;
 *   - MPICH's and Intel MPI's Hydra: PMI_RANK and PMI_SIZE;
 *   - Slurm's srun: SLURM_PROCID and SLURM_NTASKS;
 *   - none of them: a job of one rank.
 * The ranks meet at NCCL_COMM_ID=host:port (set by tutti-run), else at torchrun's MASTER_ADDR
 * and MASTER_PORT; a single-host mpirun or srun job that names neither meets through a
 * rendezvous file. docs/launch.md lists every variable. All ranks must call it; it returns
 * once all have joined, like ncclCommInitRank. A value that does not parse, a rank not below
 * the size, or a job of several hosts without an address fails with ncclInvalidArgument
 * naming the variable to set. */
ncclResult_t tuttiCommInitFromEnv(ncclComm_t *comm);

/* The library's version as text, e.g. "0.1.0". The NCCL API version it implements is the one
 * ncclGetVersion reports. */
const char *tuttiVersionString(void);

/* Host streams: in-order queues of operations executed by Tutti's progress engine (a
 * background thread), so that communication on host buffers overlaps the caller's computation.
 * A host stream is passed wherever NCCL takes a cudaStream_t: an operation issued on it returns
 * at once (ncclSuccess once queued) and runs after everything issued on that stream before it.
 * Different streams, and different communicators, progress independently. The buffers of a
 * queued operation must stay valid and untouched until the stream is synchronised. Operations
 * of one communicator must still be issued in the same order on every rank, whatever stream
 * they use. An operation's failure is latched on its communicator (ncclCommGetAsyncError) and
 * reported by the next tuttiStreamSynchronize/Query of its stream. Thread-safe: a stream may be
 * used from any thread; a stream must not be destroyed while another thread uses it. */
ncclResult_t tuttiStreamCreate(cudaStream_t *stream);
/* Waits for the stream's queued operations, then frees it. */
ncclResult_t tuttiStreamDestroy(cudaStream_t stream);
/* Waits until every operation queued so far has completed; returns the first error of those
 * operations (and forgets it), else ncclSuccess. */
ncclResult_t tuttiStreamSynchronize(cudaStream_t stream);
/* ncclSuccess when every queued operation has completed, ncclInProgress while some have not,
 * or the first error of the completed ones (forgotten once reported). Never blocks. */
ncclResult_t tuttiStreamQuery(cudaStream_t stream);

/* Who is stuck: logs at WARN (NCCL_DEBUG=WARN, the default, shows it) the communicator's
 * operations that are stalled right now, each with its sequence number, collective, count,
 * how long it has waited and the rank and resource it waits for. The same dump is printed when
 * an operation times out, and for every communicator of the process on SIGUSR1 when
 * TUTTI_DUMP_SIGNAL=1. Safe to call from any thread, while other threads are blocked. */
ncclResult_t tuttiCommDump(ncclComm_t comm);

/* Counters of a communicator, kept when TUTTI_STATS=1 or TUTTI_TRACE_FILE is set at its init
 * (docs/observe.md): one row per collective and algorithm that ran on this rank. Fills up to
 * maxRows rows and sets *nrows to how many there are (more than maxRows: call again with more
 * room). ncclInvalidUsage when the communicator does not count. Thread-safe. The same rows are
 * logged at INFO when the communicator is destroyed. */
typedef struct {
    const char *collective; /* "AllReduce", "Send", "Recv", ... (static text) */
    const char *algorithm;  /* "Ring", "Tree", "OneShot", "Direct"; "P2P" for sends, receives;
                               "Device" for device-direct operations (CUDA), timeNs 0 */
    uint64_t ops;
    uint64_t bytes;         /* the operations' buffer bytes (NCCL's count x datatype), summed */
    uint64_t timeNs;        /* their time on this rank, from start to completion, summed */
} tuttiCommStat_t;
ncclResult_t tuttiCommStats(ncclComm_t comm, tuttiCommStat_t *rows, int maxRows, int *nrows);

/* AlltoAll with a count and a displacement per peer (MPI's Alltoallv): this rank sends
 * sendcounts[p] elements from sendbuff + sdispls[p] elements to rank p and receives
 * recvcounts[p] elements from rank p into recvbuff + rdispls[p] elements. The four arrays have
 * one entry per rank; recvcounts[p] here must equal rank p's sendcounts[this rank] (a
 * difference is ncclInvalidUsage on both ranks, from the descriptor check). What PyTorch's
 * uneven all_to_all_single needs. It runs as one group of a Send and a Recv per peer (the one to
 * itself a local copy), so it takes a host stream, joins an enclosing group, and counts as
 * point-to-point traffic of every peer pair. Buffers of one rank must not overlap. Every argument
 * is checked before anything is issued: an error issues nothing. */
ncclResult_t tuttiAlltoAllV(const void *sendbuff, const size_t sendcounts[],
                            const size_t sdispls[], void *recvbuff, const size_t recvcounts[],
                            const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm,
                            cudaStream_t stream);

/* AllGather with a count per rank (MPI's Allgatherv): rank p contributes counts[p] elements,
 * its sendbuff, and every rank receives them at recvbuff + displs[p] elements. counts and
 * displs have one entry per rank and must be the same on every rank; a count that differs from
 * a peer's is ncclInvalidUsage (the descriptor check; one taken for 0 may be seen only at the
 * deadline, docs/semantics.md), a layout that differs is wrong data. In
 * place when sendbuff is recvbuff + displs[rank]. What PyTorch's all_gather of tensors of
 * different sizes needs. It runs as one group of a Broadcast rooted at each rank with a nonzero
 * count (as PyTorch's NCCL backend does), so it takes a host stream, joins an enclosing group,
 * and has every algorithm and transport Broadcast has. Blocks of recvbuff must not overlap. Every
 * argument is checked before anything is issued: an error issues nothing. */
ncclResult_t tuttiAllGatherV(const void *sendbuff, void *recvbuff, const size_t counts[],
                             const size_t displs[], ncclDataType_t datatype, ncclComm_t comm,
                             cudaStream_t stream);

/* ReduceScatter with a count per rank (MPI's Reduce_scatter, with displacements): block p of
 * every rank's sendbuff, counts[p] elements at sendbuff + displs[p] elements, is reduced with
 * `op` into rank p's recvbuff (counts[rank] elements). counts and displs have one entry per
 * rank and must be the same on every rank, as for tuttiAllGatherV. In place when recvbuff is
 * sendbuff + displs[rank]. Every operator ncclReduceScatter takes, ncclAvg and
 * ncclRedOpCreatePreMulSum's included. It runs as one group of a Reduce rooted at each rank with
 * a nonzero count, and checks every argument before anything is issued. */
ncclResult_t tuttiReduceScatterV(const void *sendbuff, void *recvbuff, const size_t counts[],
                                 const size_t displs[], ncclDataType_t datatype, ncclRedOp_t op,
                                 ncclComm_t comm, cudaStream_t stream);

/* Per-operation events: tell when one operation completed, and with what error, however it was
 * issued (what a PyTorch Work or any asynchronous caller waits on). tuttiEventRecord marks the
 * point after every operation `comm` has issued so far on `stream` (a host stream), or, with
 * stream NULL, on a nonblocking communicator's own queue (or, where its last operation was in a
 * group over several communicators, the queue that group runs on); with stream NULL on a blocking
 * communicator the operations are complete already and the event completes at once. A group's
 * operations are issued at its outermost ncclGroupEnd: record after it (recording inside a group
 * is ncclInvalidUsage). An event may be recorded again; a pending record is then replaced.
 * Thread-safe: any thread may query or synchronize an event; destroying an event while another
 * thread uses it is a misuse, as with CUDA events. */
typedef struct tuttiEvent_st *tuttiEvent_t;
ncclResult_t tuttiEventCreate(tuttiEvent_t *event);
ncclResult_t tuttiEventDestroy(tuttiEvent_t event);
ncclResult_t tuttiEventRecord(tuttiEvent_t event, ncclComm_t comm, cudaStream_t stream);
/* ncclInProgress while the operations before the record are running; then ncclSuccess or the
 * first error among them (the event's own result: it is not forgotten once reported, and it
 * does not consume the stream's latched error). An event never recorded is complete. */
ncclResult_t tuttiEventQuery(tuttiEvent_t event);
/* Waits until the event completed (driving the progress engine meanwhile) and returns as
 * tuttiEventQuery. */
ncclResult_t tuttiEventSynchronize(tuttiEvent_t event);
/* Waits at most timeoutUs microseconds (negative: no limit) for the event without driving the
 * progress engine: the thread sleeps and is woken when the operations before the record have
 * completed, which Tutti's engine thread (or a thread synchronizing) moves meanwhile. Returns
 * as tuttiEventQuery: ncclInProgress if the time ran out first. For a thread that watches
 * operations that other threads wait for, such as a completion thread, which polling or
 * driving would take CPUs from. */
ncclResult_t tuttiEventWait(tuttiEvent_t event, int64_t timeoutUs);

/* Host memory shareable between the ranks of a host, whatever device is current: what
 * ncclMemAlloc gives a thread with no current CUDA device (ncclMemAlloc gives device memory,
 * as NCCL's, on a thread with one in a CUDA build). For host code that must get host memory in
 * a process that also uses a GPU, such as a CPU tensor allocator. Freed with ncclMemFree;
 * collectives on it take the single-copy paths (docs/design.md). ncclInvalidArgument for a NULL
 * ptr or size 0, ncclSystemError when the memory cannot be had. */
ncclResult_t tuttiMemAllocHost(void **ptr, size_t size);

/* NCCL 2.30's parameter API, over Tutti's parameter table (every NCCL_* and TUTTI_* variable
 * Tutti reads; tutti-info lists the same keys with the same values). Declared here because
 * nccl.h stays NCCL 2.28's; a program compiled against NCCL 2.30's nccl.h links with libtutti
 * as is (docs/env.md, "Reading parameters from a program"). Keys are the variables' names.
 * Values are read from the environment at each call (a default when unset or, for integers, not
 * an integer in range). Thread-safe. */
#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < 23000
typedef struct ncclParamHandle_st *ncclParamHandle_t;
/* *out = the parameter named `key`; ncclInvalidArgument (and *out untouched) for an unknown key.
 * The handle lives as long as the library. */
ncclResult_t ncclParamBind(ncclParamHandle_t *out, const char *key);
/* An integer parameter's value; ncclInvalidArgument for a string parameter or a value the type
 * cannot hold. */
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t *out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t *out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t *out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t *out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t *out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t *out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t *out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t *out);
/* A string parameter's value (the environment's string, or the static default); ncclInvalidArgument
 * for an integer parameter. */
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char **out);
/* The value's bytes, whatever its type: an integer as int64_t, a string with its NUL. *len is
 * set to the bytes the value needs; when that exceeds maxLen, nothing is copied and the call
 * returns ncclInvalidArgument. */
ncclResult_t ncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len);
/* The value of `key` as text (what tutti-info prints), in a buffer of the calling thread that
 * the next call on that thread reuses; *valueLen its length without the NUL. */
ncclResult_t ncclParamGetParameter(const char *key, const char **value, int *valueLen);
/* Every key, in tutti-info's order: a table owned by the library. */
ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *tableLen);
/* Prints every parameter to stdout, one "KEY=value" line each (NCCL logs them). */
void ncclParamDumpAll(void);
#endif

/* NCCL 2.29's growing of a communicator, declared here because nccl.h stays NCCL 2.28's (a
 * program compiled against NCCL 2.29's nccl.h links with libtutti as is). After a death the
 * survivors shrink (ncclCommShrink), then take in new ranks: exactly one existing rank (the
 * coordinator) makes the grow's id with ncclCommGetUniqueId, with nothing in flight on `comm`,
 * and hands it to the new ranks out of band; then every existing rank and every new rank calls
 * ncclCommGrow (docs/semantics.md, "Carrying on after a failure"). */
#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < 22900
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);
/* A communicator of `nRanks` ranks: every rank of `comm`, which keep their ranks, and new ones.
 * Existing ranks pass their `comm` and rank -1, the id on the coordinator and NULL elsewhere (a
 * NULL `config` inherits the parent's); new ranks pass comm NULL, their rank in
 * [size of comm, nRanks) and the id. */
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                          ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                           ncclComm_t *newcomm, ncclConfig_t *config);
#endif

#ifdef __cplusplus
}
#endif

#endif
