/* Memory and stream kinds: the seam through which the executor copies and the core queues work,
 * so that a device build (CUDA) adds an implementation instead of edits all over.
 *
 * A memory kind says where a buffer lives and how bytes move in and out of it; the host kind is
 * plain memory (memcpy), and the executor's fast path tests for it inline, so host builds pay
 * nothing for the seam. A stream kind says what a stream handle is and how work is queued on
 * it: host streams are Tutti's own queues (core/stream.c); a device build registers its
 * streams' kind, which tt_device_stream_kind recognises. Only this folder may mention CUDA.
 *
 * Device work reaches the host engine by staging (device/cuda/cuda.c): an operation's device
 * buffers are copied on the device stream into pinned host buffers, the host algorithms run on
 * those, and the results are copied back on the same stream; two words in pinned memory order
 * the host work inside the stream (the stream writes `start` once the copies in are done, the
 * engine writes `done` when the operation ended, the stream waits for it before the copies
 * out). Host builds compile the same calls to constants. */
#ifndef TT_DEVICE_H
#define TT_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nccl.h"

enum tt_mem_kind { TT_MEM_HOST, TT_MEM_DEVICE, TT_MEM_KIND_COUNT };

struct tt_mem_ops {
    const char *name;
    /* Copies `bytes` from src to dst, both of this kind (or host). */
    void (*copy)(void *dst, const void *src, size_t bytes);
};

/* The implementations, indexed by kind; NULL where this build has none (device on a host
 * build). */
extern const struct tt_mem_ops *const tt_mem_kinds[TT_MEM_KIND_COUNT];

/* The kind of memory at `ptr`. Host builds: always TT_MEM_HOST, inline, without a look-up.
 * CUDA builds: TT_MEM_HOST as well until the process uses CUDA (tt_device_active), then asked of
 * the driver. */
#ifdef TUTTI_CUDA
enum tt_mem_kind tt_device_mem_kind(const void *ptr);
/* Whether the driver knows the host memory at `ptr` (pinned by cudaHostRegister or
 * cudaHostAlloc, or managed): its pages are the device's to reach by DMA and must not be moved
 * (registration's page swap). False until the process uses CUDA. */
bool tt_device_host_pinned(const void *ptr);
#else
static inline enum tt_mem_kind tt_device_mem_kind(const void *ptr)
{
    (void)ptr;
    return TT_MEM_HOST;
}
static inline bool tt_device_host_pinned(const void *ptr)
{
    (void)ptr;
    return false;
}
#endif

/* Copies through the kind: host memory inline, the others through their implementation. */
static inline void tt_device_copy(enum tt_mem_kind kind, void *dst, const void *src,
                                  size_t bytes)
{
    if (kind == TT_MEM_HOST)
        memcpy(dst, src, bytes);
    else
        tt_mem_kinds[kind]->copy(dst, src, bytes);
}

struct tt_device_stream_kind {
    const char *name;
    /* Whether `stream` is a live stream of this kind. */
    bool (*owns)(cudaStream_t stream);
};

/* Tutti's host streams (their queues live in core/stream.c). */
extern const struct tt_device_stream_kind tt_device_host_stream;
/* The device kind that claims `stream` (not a host stream), or NULL: host builds have none,
 * nor do CUDA builds in a process that does not use CUDA. */
const struct tt_device_stream_kind *tt_device_stream_kind(cudaStream_t stream);

/* Whether device memory and streams can appear in this process: a CUDA build whose driver is
 * loaded and initialised. Cheap (one load) once decided; while undecided it looks for the
 * driver at most every 10 ms. Host builds: false, inline. */
#ifdef TUTTI_CUDA
bool tt_device_active(void);
#else
static inline bool tt_device_active(void)
{
    return false;
}
#endif
/* Looks for the driver again (communicator init): with TUTTI_CUDA=-1 (the default) it is taken
 * when the process already loaded it (it uses CUDA), with TUTTI_CUDA=1 or `load` it is loaded
 * (tutti-info). Never fails: without a driver the process stays host-only. */
void tt_device_probe(bool load);
/* One line on the device support of this build and process (tutti-info, logs). */
const char *tt_device_describe(char *buf, size_t bytes);
/* The CUDA device current on the calling thread, or -1 (host builds, no driver). */
int tt_device_current(void);
/* ncclMemAlloc's device memory, as NCCL's: `bytes` of device memory on the device current on
 * the calling thread (the driver's allocator, so CUDA IPC can export it). When no device is
 * current (host builds, no driver, a thread without a context) *ptr is NULL and the call
 * succeeds: the caller allocates host memory instead. ncclUnhandledCudaError on CUDA's failure. */
ncclResult_t tt_device_mem_alloc(void **ptr, size_t bytes);
/* Frees `ptr` when tt_device_mem_alloc returned it and it is not freed yet (then true, *res
 * saying how freeing went); false for any other pointer. The device layer keeps the list. */
bool tt_device_mem_free(void *ptr, ncclResult_t *res);

/* Host copies of an operation's device buffers (owned by the device layer once queued). */
struct tt_device_stage;

/* Replaces the device buffers among `*send` (`send_bytes` read) and `*recv` (`recv_bytes`
 * written) by pinned host buffers, appending what must be copied in and out to `*stages`;
 * overlapping buffers (in place) share one host buffer at the same offsets. Host buffers are
 * left as they are. ncclUnhandledCudaError with CUDA's message on failure. */
ncclResult_t tt_device_stage_buffers(struct tt_device_stage **stages, const void **send,
                                     size_t send_bytes, void **recv, size_t recv_bytes);
/* Releases stages that were never queued (error paths). Accepts NULL. */
void tt_device_stage_free(struct tt_device_stage *stages);
/* Moves the stages of `more` onto the list `*into` (a group gathering its operations'). */
void tt_device_stage_join(struct tt_device_stage **into, struct tt_device_stage *more);

/* The pair of words that orders host work inside one device stream: [0] start, written by the
 * stream; [1] done, written by the engine. Pinned, mapped to every device, zeroed. */
ncclResult_t tt_device_words_create(uint32_t **words);

/* Queues on device stream `stream` (NULL: the legacy default stream): the copies in of
 * `stages`, start = seq, a wait until done >= seq (wrapping), the copies out, and the release
 * of `stages`, which the device layer owns from the call on (also when it fails). *waits says
 * whether the stream now waits for done >= seq: then, even when the call failed, the caller
 * must write `done` = seq in its turn, or the stream never moves again. */
ncclResult_t tt_device_stream_order(cudaStream_t stream, uint32_t *words, uint32_t seq,
                                    struct tt_device_stage *stages, bool *waits);

/* The device reductions, in the order of reduce/kernels.h's loops: dst = a OP b for the binary
 * ones, dst = OP a for premul (scalar * a) and div (a / divisor). Semantics as the host kernels
 * of reduce/ (reduce.h), bit for bit. */
enum tt_device_red {
    TT_DEVICE_RED_SUM,
    TT_DEVICE_RED_PROD,
    TT_DEVICE_RED_MAX,
    TT_DEVICE_RED_MIN,
    TT_DEVICE_RED_PREMULSUM,
    TT_DEVICE_RED_SUMDIV,
    TT_DEVICE_RED_PREMUL,
    TT_DEVICE_RED_DIV,
    TT_DEVICE_RED_COUNT
};

/* Queues dst[i] = a[i] OP b[i] for `count` elements of `dtype` in device memory on `stream`
 * (a CUDA kernel; dst may alias a or b exactly). scalar_f is PREMULSUM's scalar for floating
 * types (rounded to the dtype), scalar_u for integers; divisor SUMDIV's. CUDA builds only. */
ncclResult_t tt_device_reduce(cudaStream_t stream, ncclDataType_t dtype, enum tt_device_red red,
                              double scalar_f, uint64_t scalar_u, uint64_t divisor, void *dst,
                              const void *a, const void *b, size_t count);

/* Peer memory between processes of one host (CUDA IPC): the building block of the device
 * side of the local team's peer-memory contract (transport/team.h, struct tt_peer_mem). A
 * handle is 64 opaque bytes that another process of the host opens into an address of its own
 * for the same memory, valid until it closes it; the exporter must keep the allocation alive
 * meanwhile. Export names the whole allocation that holds `ptr` and the offset of `ptr` in it. */
#define TT_DEVICE_IPC_HANDLE_BYTES 64
struct tt_device_ipc_handle {
    unsigned char bytes[TT_DEVICE_IPC_HANDLE_BYTES];
    uint64_t offset; /* of the exported pointer in its allocation */
};
ncclResult_t tt_device_ipc_export(const void *ptr, struct tt_device_ipc_handle *out);
/* Maps a peer's exported memory: *ptr is the peer's exported pointer, in this process. */
ncclResult_t tt_device_ipc_open(const struct tt_device_ipc_handle *h, void **ptr);
/* Unmaps what tt_device_ipc_open returned (the same pointer). */
ncclResult_t tt_device_ipc_close(void *ptr, const struct tt_device_ipc_handle *h);

/* The device-direct path (device/cuda/direct.c, rooted.c, window.c): collectives among the GPU
 * ranks of one host, moved and reduced by the GPU itself, without the host engine. Each member
 * allocates a device scratch buffer, as much again for Send/Recv slots and flag words behind them,
 * exports it with a CUDA IPC handle, and maps every peer's (the core allgathers the infos at init).
 * An AllReduce is then a sequence queued on the caller's CUDA stream: copy the input into the own
 * scratch, write the own READY flag (cuStreamWriteValue32, a fenced write), wait until every peer's
 * READY flag reached the operation (cuStreamWaitValue32 on the mapped flags: the stream waits in
 * the GPU's front end, no kernel spins, so ranks sharing one GPU cannot starve each other), reduce
 * with the reduction kernels reading the peers' scratch directly, and write DONE, which a peer
 * waits for before it overwrites its scratch for the next operation. One-shot: every rank reduces
 * the whole buffer. Two-shot: each rank reduces one segment, publishes it in its scratch (REDUCED
 * flag), and copies the others' segments from their scratch. Larger operations go through the
 * scratch in chunks. Flags count operations (uint32, wrapping compares), every rank queues the same
 * sequence, so they agree without talking. */
#ifdef TUTTI_CUDA
#define TT_DEVICE_DIRECT_BUILD 1
#else
#define TT_DEVICE_DIRECT_BUILD 0
#endif
#define TT_DEVICE_TEAM_MAX 64
#define TT_DEVICE_PCI_UNKNOWN 0xffffffffu
struct tt_device_team;
struct tt_device_team_info {
    uint8_t ok;     /* this member offers a scratch (it is a GPU rank and the setup worked) */
    uint8_t reserved[3];
    int32_t device; /* its CUDA device ordinal */
    int32_t pid;
    uint32_t pci;   /* the GPU's PCI domain, bus and device, TT_DEVICE_PCI_UNKNOWN if unknown */
    uint64_t bytes; /* its scratch's size (equal everywhere: the same variable) */
    struct tt_device_ipc_handle handle;
};
/* Makes this member's scratch of `bytes` on CUDA device `device` and fills `info` (info->ok
 * stays 0 when that fails; the error says why). */
ncclResult_t tt_device_team_create(int device, size_t bytes, struct tt_device_team **out,
                                   struct tt_device_team_info *info);
/* Maps every peer's scratch; `infos` has `nranks` entries (members numbered by rank), all ok. */
ncclResult_t tt_device_team_attach(struct tt_device_team *t, int rank, int nranks,
                                   const struct tt_device_team_info *infos);
/* Waits (bounded) until every peer finished reading this member's scratch, unmaps the peers',
 * frees it. Accepts NULL. */
void tt_device_team_destroy(struct tt_device_team *t);
/* Releases this member's streams (ncclCommAbort, the device watchdog): when this member's own
 * work may not all have run, calls mark(arg) (the caller tells the peers that this rank
 * failed: the forcing lets their streams past these flags too), then writes every flag this
 * member's streams may wait for past it (the peers' flags, through the mappings), again until
 * this member's own flags show its streams ran out, at most 0.5 s. What the released work
 * computes is undefined, as with NCCL's aborted kernels. Destroy then leaves the allocation
 * and the windows' mappings in place (a peer may still use them). When this member's work all
 * ran, nothing is forced: it waits at most 0.5 s for the peers to finish with its scratch,
 * and leaves it allocated if they do not. Any thread; concurrent calls run one after the
 * other. */
void tt_device_team_release(struct tt_device_team *t, void (*mark)(void *), void *arg);
/* Whether work this member queued that involves `peer` may not all have run: a collective
 * (every member takes part), or a Send to or Recv from it (own flags only; any thread). */
bool tt_device_team_waits_on(struct tt_device_team *t, int peer);
/* Where the team's queued work stands (the flags, read on the team's own stream; any thread):
 * IDLE (nothing queued, all of it ran and no peer reads this member's memory any more, or
 * NULL), READ (this member's work ran, a peer may still read its memory), WAITING (this
 * member's own work may not all have run). A flag a release forced reads as "not run". */
enum { TT_DEVICE_TEAM_IDLE, TT_DEVICE_TEAM_READ, TT_DEVICE_TEAM_WAITING };
int tt_device_team_state(struct tt_device_team *t);
/* Whether anything was ever queued on the team (no CUDA call). False for NULL. */
bool tt_device_team_used(const struct tt_device_team *t);

/* An AllReduce's reduction for the device-direct path, the resolved form of reduce.h's struct
 * tt_redop in the device layer's terms: red is SUM, PROD, MAX, MIN, PREMULSUM (sum of scalar *
 * x) or SUMDIV (sum, then divide by `divisor`). */
struct tt_device_redop {
    ncclDataType_t dtype;
    enum tt_device_red red;
    double scalar_f;   /* PREMULSUM, floating dtypes (already rounded to the dtype) */
    uint64_t scalar_u; /* PREMULSUM, integer dtypes */
    uint64_t divisor;  /* SUMDIV */
};
/* Queues an AllReduce of `count` elements on `stream` (device buffers of this process; send ==
 * recv in place): one-shot while count * elt <= oneshot_bytes, else two-shot. Every member
 * must queue the same operations in the same order. */
ncclResult_t tt_device_team_allreduce(struct tt_device_team *t, cudaStream_t stream,
                                      const void *send, void *recv, size_t count,
                                      const struct tt_device_redop *op, size_t oneshot_bytes);
/* The same AllReduce as a ring (NCCL_ALGO=Ring): each chunk is cut into one segment per member;
 * in n - 1 steps every member folds the partial sum its left neighbour published into its own
 * input and publishes the result, then the n finished segments travel once around the ring.
 * Each member reads its left neighbour's memory only (a ring of links between several GPUs).
 * Every member gets the same bits: each segment is reduced once, by one member. */
ncclResult_t tt_device_team_allreduce_ring(struct tt_device_team *t, cudaStream_t stream,
                                           const void *send, void *recv, size_t count,
                                           const struct tt_device_redop *op);

/* Queues a ReduceScatter (`count` elements received per member; recv == send + rank * count in
 * place) or an AllGather (`count` elements sent per member; send == recv + rank * count in
 * place) on `stream`, over the same scratch and flags: ReduceScatter copies the input in and
 * each member reduces its own block from every member's scratch; AllGather copies the input in
 * and each member copies every peer's block out of its scratch. `op` is ignored by AllGather
 * except for its dtype. Same rules as the AllReduce. */
ncclResult_t tt_device_team_reduce_scatter(struct tt_device_team *t, cudaStream_t stream,
                                           const void *send, void *recv, size_t count,
                                           const struct tt_device_redop *op);
ncclResult_t tt_device_team_all_gather(struct tt_device_team *t, cudaStream_t stream,
                                       const void *send, void *recv, size_t count,
                                       ncclDataType_t dtype);

/* Broadcast, Reduce, Gather, Scatter (`count` per member, `root` a member) and AlltoAll
 * (`count` per pair) over the same scratch and flags: the input goes into the scratch (the
 * root's blocks for Scatter, every member's blocks for AlltoAll), and the members that receive
 * copy out of the holder's scratch (the root reduces every member's for Reduce). The buffer
 * only the root passes (Broadcast's and Scatter's send, Reduce's and Gather's recv) may be any
 * memory cuMemcpyAsync accepts; recv_device says whether Reduce's root output is device memory
 * (if not, the root reduces into its scratch and copies out). In place as NCCL defines it.
 * Same rules as the AllReduce. */
ncclResult_t tt_device_team_broadcast(struct tt_device_team *t, cudaStream_t stream,
                                      const void *send, void *recv, size_t count,
                                      ncclDataType_t dtype, int root);
ncclResult_t tt_device_team_reduce(struct tt_device_team *t, cudaStream_t stream,
                                   const void *send, void *recv, size_t count,
                                   const struct tt_device_redop *op, int root, bool recv_device);
ncclResult_t tt_device_team_gather(struct tt_device_team *t, cudaStream_t stream,
                                   const void *send, void *recv, size_t count,
                                   ncclDataType_t dtype, int root);
ncclResult_t tt_device_team_scatter(struct tt_device_team *t, cudaStream_t stream,
                                    const void *send, void *recv, size_t count,
                                    ncclDataType_t dtype, int root);
ncclResult_t tt_device_team_alltoall(struct tt_device_team *t, cudaStream_t stream,
                                     const void *send, void *recv, size_t count,
                                     ncclDataType_t dtype);

/* Send and Recv in a group (or alone) on device buffers: `ops` in issue order, queued on
 * a stream through per-pair slots behind the scratch and per-pair flags (rooted.c, "Send and
 * Recv"). A member's operations to a peer, and from a peer, must match the peer's in order and
 * size, as NCCL requires. */
struct tt_device_p2p {
    bool send;
    int peer;
    void *buff;
    size_t bytes;
};
/* Queues round `round` of `ops`: the round-th chunk of each peer's sequence of sends (send
 * true) or of receives; *any says whether there was one. A caller queues round 0's sends of
 * every communicator of a group, then its receives, then round 1's, until none has any. */
ncclResult_t tt_device_team_p2p_round(struct tt_device_team *t, cudaStream_t stream,
                                      const struct tt_device_p2p *ops, int nops, size_t round,
                                      bool send, bool *any);

/* Symmetric windows on device memory (window.c, "Symmetric windows"): a window registered with
 * NCCL_WIN_COLL_SYMMETRIC over device memory, on a communicator with the device-direct path, is
 * mapped by every member at registration, and an AllReduce whose buffers lie in windows then
 * reads and writes every member's buffers in place: no scratch, no copies. Registration is
 * collective: each member exports its buffer (info->ok stays 0 for host memory or without
 * CUDA), the core allgathers the infos, and, only when every member's is ok and of one size,
 * each opens the others' (the core then agrees that every open worked). */
struct tt_device_window;
ncclResult_t tt_device_window_export(const void *buff, size_t bytes,
                                     struct tt_device_team_info *info);
ncclResult_t tt_device_window_open(struct tt_device_team *t, const void *buff,
                                   const struct tt_device_team_info *infos,
                                   struct tt_device_window **out);
/* Waits (bounded) until no queued operation touches a window any more, then unmaps the
 * peers'. Collective, as NCCL's window deregistration. Accepts NULL. */
void tt_device_window_close(struct tt_device_team *t, struct tt_device_window *w);
/* Queues an AllReduce of `count` elements from offset send_off of window ws to offset recv_off
 * of window wr (the same window and offset: in place), every member at the same offsets. */
ncclResult_t tt_device_team_allreduce_window(struct tt_device_team *t, cudaStream_t stream,
                                             const struct tt_device_window *ws, size_t send_off,
                                             const struct tt_device_window *wr, size_t recv_off,
                                             size_t count, const struct tt_device_redop *op);
/* ReduceScatter (`count` per member, the input n * count) and AllGather (`count` per member,
 * the output n * count) on windows, likewise: every member passes the same offsets, or every
 * member is in place by NCCL's definition (recvbuff = sendbuff + rank * count for
 * ReduceScatter, sendbuff = recvbuff + rank * count for AllGather). */
ncclResult_t tt_device_team_reduce_scatter_window(struct tt_device_team *t, cudaStream_t stream,
                                                  const struct tt_device_window *ws,
                                                  size_t send_off,
                                                  const struct tt_device_window *wr,
                                                  size_t recv_off, size_t count,
                                                  const struct tt_device_redop *op);
ncclResult_t tt_device_team_all_gather_window(struct tt_device_team *t, cudaStream_t stream,
                                              const struct tt_device_window *ws, size_t send_off,
                                              const struct tt_device_window *wr, size_t recv_off,
                                              size_t count, ncclDataType_t dtype);

/* Whether `word` reached `seq` (wrapping compare), read with acquire. */
static inline bool tt_device_word_reached(const uint32_t *word, uint32_t seq)
{
    uint32_t now = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    return (int32_t)(now - seq) >= 0;
}

#endif
