/* The device-direct team's private parts, shared by direct.c (the team, its flags, AllReduce,
 * ReduceScatter, AllGather), rooted.c (the rooted collectives, AlltoAll, Send/Recv) and
 * window.c (symmetric windows). The protocol is described in direct.c. */
#ifndef TT_DEVICE_CUDA_DIRECT_H
#define TT_DEVICE_CUDA_DIRECT_H

#include <pthread.h>
#include <stdatomic.h>

#include "device/device.h"

#include "device/cuda/driver.h"

/* STEP counts the ring's steps (direct.c), apart from the chunks the others count. */
enum { FLAG_READY, FLAG_REDUCED, FLAG_DONE, FLAG_STEP, FLAG_COUNT };
#define FLAG_STRIDE 128
/* Behind the collectives' flags, the point-to-point ones: SENT(q), the chunks this member put
 * in its slot for member q, then ACK(q), the chunks it took out of q's slot for it. */
#define FLAG_SENT(q) (FLAG_COUNT + (q))
#define FLAG_ACK(q) (FLAG_COUNT + TT_DEVICE_TEAM_MAX + (q))
#define FLAGS_BYTES ((FLAG_COUNT + 2 * TT_DEVICE_TEAM_MAX) * FLAG_STRIDE)
/* Two-shot segments start on this many bytes (the kernels' loads stay aligned). */
#define SEGMENT_ALIGN 256
/* How long destroy waits for the peers to finish reading this member's scratch. */
#define DESTROY_WAIT_NS 10000000000ull
/* How long a release keeps forcing the peers' flags (tt_device_team_release), and how long
 * one read or write of flags on the team's own stream may take. */
#define ABORT_RELEASE_NS 500000000ull
#define POLL_WAIT_NS 100000000ull

/* One pinned word that flags are read into, and whether a copy into it is still pending. */
struct tt_dteam_reader {
    pthread_mutex_t lock;
    uint32_t *word;
    bool pending;
};

struct tt_device_team {
    int rank, nranks;
    CUdevice dev;
    CUcontext ctx;      /* the context the scratch lives in (current at create) */
    bool retained;      /* ctx is the device's primary context, retained by create */
    CUstream poll;      /* a non-blocking stream of its own: destroy reads flags on it, never
                           queued behind a user stream that may wait forever */
    CUdeviceptr mine;   /* this member's allocation: scratch, point-to-point slots, flags */
    size_t bytes;       /* scratch bytes; as many again for the point-to-point slots */
    CUdeviceptr base[TT_DEVICE_TEAM_MAX]; /* every member's allocation, in this process */
    bool mapped[TT_DEVICE_TEAM_MAX];      /* base[p] was opened from an IPC handle */
    struct tt_device_ipc_handle handles[TT_DEVICE_TEAM_MAX];
    /* The counts of what was queued, atomic: the device watchdog (core/watch.c) reads them
     * from its thread while the caller's thread queues more. */
    _Atomic uint64_t chunks; /* chunks queued so far; the flags carry its low 32 bits */
    _Atomic uint64_t steps;  /* ring steps queued so far (FLAG_STEP) */
    _Atomic uint64_t sent[TT_DEVICE_TEAM_MAX];     /* point-to-point chunks queued to each member */
    _Atomic uint64_t received[TT_DEVICE_TEAM_MAX]; /* and from each member */
    bool one_gpu;       /* every member on the same physical GPU (PCI address) */
    _Atomic bool keep;  /* released, with work queued or peers not done with it: the
                           allocation is not freed */
    _Atomic bool warned; /* the release's warning was logged */
    pthread_mutex_t release_lock;
    uint64_t released_upto; /* queued_total() when a release last forced to its bound, else 0;
                               under release_lock */
    struct tt_dteam_reader *reader; /* reads flags on `poll` (direct.c read_flag) */
};

size_t tt_dteam_dtype_bytes(ncclDataType_t dtype);
/* Makes the team's context current (host calls from any thread); returns the one to restore
 * with tt_dteam_leave. */
CUcontext tt_dteam_enter(const struct tt_device_team *t);
void tt_dteam_leave(const struct tt_device_team *t, CUcontext cur);
/* The address, in this process, of member `member`'s flag `which`. */
CUdeviceptr tt_dteam_flag_at(const struct tt_device_team *t, int member, int which);
/* Whether anything was queued on the team: a chunk, a ring step, a Send/Recv slot. */
bool tt_dteam_any_queued(const struct tt_device_team *t);
/* Whether every member's DONE, this one's included, reached the last chunk queued, and every
 * member took every point-to-point chunk this one put in its slots (ACK): then no queued work
 * touches this member's memory any more. Reads the flags on the team's own stream. */
bool tt_dteam_all_done(const struct tt_device_team *t);
/* Makes the context of the work current (tt_cuda_ensure_context: that of `recv`, else of
 * `s`) and loads the kernels into it if not done yet: before anything waits for a peer. */
ncclResult_t tt_dteam_context(void *recv, CUstream s);
/* Queues the write of this member's flag `which` = seq (fenced after the stream's writes). */
ncclResult_t tt_dteam_post(const struct tt_device_team *t, CUstream s, int which, uint32_t seq);
/* Queues a wait until every peer's flag `which` reached seq. */
ncclResult_t tt_dteam_wait_peers(const struct tt_device_team *t, CUstream s, int which,
                                uint32_t seq);
/* dst[0, count) = the reduction over every member of its scratch at element `first`, in rank
 * order, as the host kernels define it (reduce/reduce.h): PREMULSUM multiplies each input, then
 * adds; SUMDIV adds, dividing at the last step. */
ncclResult_t tt_dteam_reduce_members(const struct tt_device_team *t, CUstream s,
                                    const struct tt_device_redop *op, void *dst, size_t first,
                                    size_t count, size_t elt);
/* Member p's two-shot segment of a chunk of `count` elements: [*lo, *hi). */
void tt_dteam_segment(size_t count, size_t elt, int n, int p, size_t *lo, size_t *hi);
/* The start and the end of every chunk: nobody still reads my scratch for the last chunk;
 * then, once the chunk's input is in my scratch, READY and the wait for everyone's. */
ncclResult_t tt_dteam_chunk_begin(struct tt_device_team *t, CUstream s, uint32_t *seq);
ncclResult_t tt_dteam_chunk_ready(struct tt_device_team *t, CUstream s, uint32_t seq);
/* An operation's checks: a known dtype (elt != 0), an attached team, `recv`'s context current. */
ncclResult_t tt_dteam_check(const struct tt_device_team *t, size_t elt, ncclDataType_t dtype,
                           CUstream s, void *recv);
/* Queues a copy of `bytes` (none when dst == src), any memory cuMemcpyAsync accepts. */
ncclResult_t tt_dteam_copy(CUstream s, void *dst, const void *src, size_t bytes);
/* Byte `byte` of member `member`'s allocation, in this process. */
void *tt_dteam_scratch_at(const struct tt_device_team *t, int member, size_t byte);

#endif
