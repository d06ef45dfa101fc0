/* nccl.h as provided by Tutti: the public API of NVIDIA NCCL 2.28.9, so that programs written for
 * NCCL compile and link against Tutti unchanged. Names, signatures, enumeration values, struct
 * layouts and macro values are NCCL's; the comments are Tutti's and say what Tutti does.
 *
 * The header needs no CUDA header. When CUDA's runtime header has been included first, its
 * cudaStream_t is used; otherwise the same opaque pointer type is declared here, and a
 * CPU-only program passes NULL as the stream.
 *
 * Every function has a twin with a `p` prefix (pncclAllReduce ...), the profiling entry point of
 * NCCL's PMPI-style interface; both names reach the same code. Tutti's own additions live in
 * tutti.h. */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>

#if !defined(CUDART_VERSION) && !defined(__CUDA_RUNTIME_H__) && !defined(__DRIVER_TYPES_H__)
/* The same declaration as CUDA's (an identical typedef may be repeated in C11 and C++). */
typedef struct CUstream_st *cudaStream_t;
#endif

/* ---- Version ------------------------------------------------------------------------------- */

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

/* Versions up to 2.8 were coded as X*1000 + Y*100 + Z, later ones as X*10000 + Y*100 + Z. */
#define NCCL_VERSION(X, Y, Z)                                                                   \
    (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE 22809

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Handles and identifiers --------------------------------------------------------------- */

/* A communicator: one rank's membership in a group of ranks. */
typedef struct ncclComm *ncclComm_t;
/* A registered memory window (ncclCommWindowRegister). */
typedef struct ncclWindow_vidmem *ncclWindow_t;
#define NCCL_COMM_NULL NULL

/* The rendezvous token that rank 0 creates (ncclGetUniqueId) and hands to every other rank by
 * any out-of-band means; its 128 bytes are opaque to the user. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ---- Result codes -------------------------------------------------------------------------- */

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1, /* a CUDA call failed */
    ncclSystemError = 2,        /* an operating-system call failed (memory, socket, file) */
    ncclInternalError = 3,      /* a bug in the library */
    ncclInvalidArgument = 4,    /* a bad value passed to a call */
    ncclInvalidUsage = 5,       /* a call made in the wrong order or context */
    ncclRemoteError = 6,        /* another rank failed or went away */
    ncclInProgress = 7,         /* a nonblocking call has not finished yet */
    ncclNumResults = 8
} ncclResult_t;

/* ---- Configuration ------------------------------------------------------------------------- */

/* "Not set by the user" markers for ncclConfig_t fields. */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
/* ncclCommSplit color of a rank that joins no new communicator. */
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* ncclCommWindowRegister flags and the alignment it requires. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values (GPU thread-block policies; ignored on host buffers). */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags: shrink once the parent's operations are done, or abort them first. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke flags (only the default exists). */
#define NCCL_REVOKE_DEFAULT 0x00

/* Communicator attributes. Always start from NCCL_CONFIG_INITIALIZER: the first three fields
 * (size, magic, version) identify the layout the program was compiled with, and a field left
 * at its UNDEF value takes the library's default. */
typedef struct ncclConfig_v22800 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;         /* 0: calls may return ncclInProgress (nonblocking communicator) */
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;
    int splitShare;
    int trafficClass;
    const char *commName; /* a name for logs */
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                 \
    {                                                                                           \
        sizeof(ncclConfig_t),                       /* size */                                  \
        0xcafebeef,                                 /* magic */                                 \
        NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */                         \
        NCCL_CONFIG_UNDEF_INT,                      /* blocking */                              \
        NCCL_CONFIG_UNDEF_INT,                      /* cgaClusterSize */                        \
        NCCL_CONFIG_UNDEF_INT,                      /* minCTAs */                               \
        NCCL_CONFIG_UNDEF_INT,                      /* maxCTAs */                               \
        NCCL_CONFIG_UNDEF_PTR,                      /* netName */                               \
        NCCL_CONFIG_UNDEF_INT,                      /* splitShare */                            \
        NCCL_CONFIG_UNDEF_INT,                      /* trafficClass */                          \
        NCCL_CONFIG_UNDEF_PTR,                      /* commName */                              \
        NCCL_CONFIG_UNDEF_INT,                      /* collnetEnable */                         \
        NCCL_CONFIG_UNDEF_INT,                      /* CTAPolicy */                             \
        NCCL_CONFIG_UNDEF_INT,                      /* shrinkShare */                           \
        NCCL_CONFIG_UNDEF_INT,                      /* nvlsCTAs */                              \
        NCCL_CONFIG_UNDEF_INT,                      /* nChannelsPerNetPeer */                   \
        NCCL_CONFIG_UNDEF_INT,                      /* nvlinkCentricSched */                    \
    }

/* What ncclGroupSimulateEnd reports; start from NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER                                                               \
    {                                                                                           \
        sizeof(ncclSimInfo_t),                      /* size */                                  \
        0x74685283,                                 /* magic */                                 \
        NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */                         \
        NCCL_UNDEF_FLOAT                            /* estimatedTime */                         \
    }

/* ---- Reduction operators and datatypes ----------------------------------------------------- */

/* Exists only so that ncclMaxRedOp below can be sized like the enumeration itself. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;

/* Built-in operators are 0 .. ncclNumOps-1; operators created by ncclRedOpCreatePreMulSum take
 * values from ncclNumOps up to ncclMaxRedOp, the largest value that keeps the type 32 bits. */
typedef enum {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
    ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
    ncclInt8 = 0,
    ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclHalf = 6,
    ncclFloat32 = 7,
    ncclFloat = 7,
    ncclFloat64 = 8,
    ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar given to ncclRedOpCreatePreMulSum lives: read during each operation from
 * device-visible memory, or read once from host memory before the call returns. */
typedef enum {
    ncclScalarDevice = 0,
    ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

/* ---- Memory -------------------------------------------------------------------------------- */

/* Allocates memory suited to every optimisation (registration, direct peer access); the block
 * may be larger than asked for. Free it with ncclMemFree. */
ncclResult_t ncclMemAlloc(void **ptr, size_t size);
ncclResult_t pncclMemAlloc(void **ptr, size_t size);
ncclResult_t ncclMemFree(void *ptr);
ncclResult_t pncclMemFree(void *ptr);

/* ---- Library information and errors -------------------------------------------------------- */

/* Stores NCCL_VERSION_CODE of the API this library implements. */
ncclResult_t ncclGetVersion(int *version);
ncclResult_t pncclGetVersion(int *version);

/* A fixed text for each result code. */
const char *ncclGetErrorString(ncclResult_t result);
const char *pncclGetErrorString(ncclResult_t result);

/* The message of the last error reported to the calling thread ("" when none). */
const char *ncclGetLastError(ncclComm_t comm);
const char *pncclGetLastError(ncclComm_t comm);

/* Re-reads the logging variables. Deprecated by NCCL and not part of its supported API. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((deprecated("ncclResetDebugInit is not part of the supported NCCL API")))
#endif
void ncclResetDebugInit(void);
#if defined(__GNUC__) || defined(__clang__)
__attribute__((deprecated("pncclResetDebugInit is not part of the supported NCCL API")))
#endif
void pncclResetDebugInit(void);

/* ---- Communicator lifecycle ---------------------------------------------------------------- */

/* Creates a unique id for a new clique; call it on one rank and share the bytes with all. */
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId);

/* Joins the clique of `nranks` ranks named by `commId` as rank `rank` (0 <= rank < nranks).
 * Every rank must call it; it returns once all have arrived. */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);

/* ncclCommInitRank with attributes; `config` may be NULL for the defaults. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t *config);

/* ncclCommInitRankConfig with `nId` ids (the same list on every rank) to spread the rendezvous. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId *commIds, ncclConfig_t *config);

/* Creates all `ndev` ranks of a clique inside this process; comm[] receives them. */
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);
ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);

/* Completes every operation issued on `comm` and releases its shared resources; afterwards
 * ncclCommDestroy only frees local memory. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/* Frees this rank's communicator. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Stops whatever is in flight on `comm` and frees it, in bounded time, from any state. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stops in-flight operations so that destroy, split or shrink can proceed; `revokeFlags` must be
 * NCCL_REVOKE_DEFAULT. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Creates new communicators from ranks of `comm` that pass the same `color`, ordered by `key`;
 * NCCL_SPLIT_NOCOLOR yields *newcomm = NULL. A NULL `config` inherits the parent's. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                            ncclConfig_t *config);

/* Creates a communicator of the ranks of `comm` minus the listed ones, renumbered densely. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                             ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);

/* ---- Communicator queries ------------------------------------------------------------------ */

/* The first asynchronous error latched on `comm`, or ncclInProgress/ncclSuccess. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int *count);

/* The CUDA device of `comm` (-1 for a communicator of host processes). */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device);

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank);

/* ---- Buffer registration ------------------------------------------------------------------- */

/* Registers a buffer for zero-copy use by later operations; returns a handle. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle);

/* Registers a window (collective call; NCCL_WIN_* flags). */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                     int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---- User-defined reduction operators ------------------------------------------------------ */

/* Creates an operator that multiplies each rank's input by `*scalar` and then sums, valid on
 * `comm` for `datatype` only. With ncclScalarDevice the scalar is read again for every
 * collective that uses the operator (host memory on a CPU rank, device memory in CUDA builds),
 * when the collective is issued: NCCL reads it when the operation runs on its stream. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
/* Destroys an operator made by ncclRedOpCreatePreMulSum on the same `comm`. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- Collectives --------------------------------------------------------------------------- */

/* Every rank of the clique calls each collective with matching arguments. With stream == NULL
 * and host buffers, a call returns when the operation is complete on this rank. `count` is in
 * elements of `datatype`. */

/* recvbuff (significant at `root` only) = op over all ranks of sendbuff[0 .. count). */
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);

/* In-place broadcast of `buff` from `root` (deprecated by NCCL in favour of ncclBroadcast). */
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);

/* recvbuff on every rank = sendbuff of `root` (read at the root only). */
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);

/* recvbuff on every rank = op over all ranks of sendbuff. */
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);

/* sendbuff holds nranks blocks of recvcount; rank i receives the reduction of block i. In place
 * when recvbuff == sendbuff + rank * recvcount. */
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);

/* recvbuff (nranks blocks of sendcount) receives rank i's sendbuff at block i. In place when
 * sendbuff == recvbuff + rank * sendcount. */
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* Block j of sendbuff goes to rank j; block i of recvbuff comes from rank i (blocks of count). */
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* At `root`, block i of recvbuff receives rank i's sendbuff (count elements each). */
ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm,
                         cudaStream_t stream);

/* Rank i receives block i of `root`'s sendbuff (count elements each). */
ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm,
                         cudaStream_t stream);
ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm,
                          cudaStream_t stream);

/* ---- Point to point ------------------------------------------------------------------------ */

/* A send matches the receive that `peer` posts for this rank with the same count and datatype.
 * Sends and receives that must progress together go inside one group. */
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/* ---- Groups -------------------------------------------------------------------------------- */

/* Calls between ncclGroupStart and the matching ncclGroupEnd form one group: they are issued
 * together when the outermost ncclGroupEnd is reached. Groups nest. */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* Ends a group without running it and estimates its time into *simInfo. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo);

#ifdef __cplusplus
}
#endif

#endif
