/* Direct access among the ranks of one host, for algorithms that skip the connection FIFOs.
 *
 * Every rank owns a mailbox: a small shared segment it alone writes and every local peer maps.
 * It holds a monotonic event counter and two payload slots. A rank *posts* an event by storing
 * the next value of its counter (release); a peer waits for "rank p reached event e" with an
 * acquire load, so whatever p wrote before posting e is visible. All ranks of a communicator run
 * the same sequence of operations, so they agree on every event number without talking.
 * Payloads go into slot (op index & 1): a rank may refill a slot only once every peer has
 * posted the event that ends the operation that last used it (tt_team_slot_free).
 *
 * Cross-memory attach (process_vm_readv) lets a rank copy straight out of a peer's user buffer,
 * one copy instead of two through a FIFO. It needs ptrace permission over the peer (same user,
 * no Yama restriction, or CAP_SYS_PTRACE); tt_team_attach probes it and reports whether it
 * works. Not thread-safe: one operation at a time uses a communicator's mailboxes (the ring
 * lane orders them). */
#ifndef TT_TRANSPORT_TEAM_H
#define TT_TRANSPORT_TEAM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nccl.h"
#include "transport/transport.h"
#include "util/wait.h"

/* What a rank tells its local peers about its mailbox (allgathered by the core). */
struct tt_team_info {
    char name[48];
    uint64_t nonce;
    uint64_t probe_addr; /* address of the nonce in the owner's process, for the CMA probe */
    int32_t pid;
    uint32_t slot_bytes;
};

struct tt_team_region;

/* The descriptor of a collective a member runs, published in a cache line of its mailbox of
 * its own when the collective stalls or verifies its peers (core/engine.c): never on the fast
 * path. A sequence lock: `seq` is the ticket + 1
 * once the words hold that ticket's descriptor, 0 while they change. */
struct tt_team_desc_line {
    _Atomic uint64_t seq;
    _Atomic uint32_t sleepers; /* members asleep on seq, waiting for this one to publish */
    _Atomic uint64_t words[3]; /* struct tt_op_desc */
};
_Static_assert(sizeof(struct tt_op_desc) == 3 * sizeof(uint64_t), "tt_op_desc is 3 words");

/* The part of a team that every small operation reads, first in struct tt_team (team.c owns
 * the rest) so that the slot and sequence bookkeeping below is inline on OneShot's path rather
 * than a call each (about a dozen calls on an 8-byte AllReduce). Read it through the functions
 * below only. */
struct tt_team_hot {
    unsigned char **payload; /* [nranks]: member p's payload area of slot 0 (slot 1: + stride) */
    unsigned char *mine;     /* payload[rank] */
    size_t stride;           /* bytes from one slot to the next */
    uint64_t op_index;       /* operations begun so far */
    uint64_t seen_all;       /* every peer published this flagged operation */
    uint64_t slot_seq[2];    /* the flagged sequence number of each slot's last user, else 0 */
    struct tt_team_desc_line *desc; /* this member's published descriptor (in its mailbox) */
};
struct tt_team;
static inline struct tt_team_hot *tt_team_hot(struct tt_team *h)
{
    return (struct tt_team_hot *)(void *)h; /* its first member */
}
static inline const struct tt_team_hot *tt_team_hot_c(const struct tt_team *h)
{
    return (const struct tt_team_hot *)(const void *)h;
}

/* Publishes the descriptor of the collective this member runs (its ticket on the ring lane:
 * equal on every rank for the same operation). */
static inline void tt_team_publish_desc(struct tt_team *h, const struct tt_op_desc *d)
{
    struct tt_team_desc_line *l = tt_team_hot(h)->desc;
    uint64_t w[3];
    memcpy(w, d, sizeof w);
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer models no fences: sequentially consistent stores give the same order. */
    atomic_store_explicit(&l->seq, 0, memory_order_seq_cst);
    for (int i = 0; i < 3; i++) atomic_store_explicit(&l->words[i], w[i], memory_order_seq_cst);
    atomic_store_explicit(&l->seq, d->ticket + 1, memory_order_seq_cst);
#else
    atomic_store_explicit(&l->seq, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    for (int i = 0; i < 3; i++) atomic_store_explicit(&l->words[i], w[i], memory_order_relaxed);
    atomic_store_explicit(&l->seq, d->ticket + 1, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst); /* the store before the sleepers' count */
#endif
    tt_wait_wake(&l->seq, &l->sleepers);
}
/* The descriptor `peer` published last, into *d: false when it has published none or is
 * changing it (ask again). Slow path only. */
bool tt_team_peer_desc(const struct tt_team *h, int peer, struct tt_op_desc *d);
/* Fills `hint` to sleep until `peer` publishes another descriptor (take it before reading the
 * descriptor with tt_team_peer_desc, so a publication between the two is not slept through). */
void tt_team_peer_desc_hint(const struct tt_team *h, int peer, struct tt_wait_hint *hint);

/* Bytes of the reason a failed member leaves in its mailbox (with its code, four cache lines:
 * room for an operation's name and a sentence on the mismatch that failed it). */
#define TT_TEAM_REASON_BYTES 248

/* Creates this rank's mailbox with slots of `slot_bytes` payload bytes. */
ncclResult_t tt_team_create(int rank, int nranks, uint64_t comm_hash, size_t slot_bytes,
                            struct tt_team **out, struct tt_team_info *info);
/* Maps every peer's mailbox (`infos` has nranks entries) and probes cross-memory attach. */
ncclResult_t tt_team_attach(struct tt_team *h, const struct tt_team_info *infos);
/* Removes this rank's segment name once every peer has mapped it (after a barrier). */
void tt_team_unlink(struct tt_team *h);
/* Removes the names of all `nranks` members' mailboxes of the team named by `comm_hash`: after
 * a failed init, also those of members that died before removing their own. */
void tt_team_unlink_all(uint64_t comm_hash, int nranks);
void tt_team_destroy(struct tt_team *h);

bool tt_team_cma_works(const struct tt_team *h);
/* How much slower a cross-memory copy is than memcpy on this machine now: the time of one
 * 256 KiB process_vm_readv (from this process itself, the path a copy from a peer takes) over
 * that of a memcpy of the same bytes, best of a few, in percent (>= 1); 0 when cross-memory
 * attach fails. Measured once per process (about 0.4 ms), then cached; thread-safe. Each rank
 * measures its own, so the caller must agree on one value before the cost model uses it. */
uint32_t tt_cma_cost_pct(void);
size_t tt_team_slot_bytes(const struct tt_team *h);

/* Reserves `count` events and one slot for the next operation: returns the event number
 * before its first event and the slot it owns. Every rank calls it in the same order. */
void tt_team_op_begin(struct tt_team *h, int events, uint64_t *event_base, int *slot);
/* Records that the operation that owns `slot` ends at event `end_event`. */
void tt_team_op_end(struct tt_team *h, int slot, uint64_t end_event);
/* Whether every peer has finished the previous user of `slot`; otherwise fills `hint`. */
bool tt_team_slot_free_wait(struct tt_team *h, int slot, struct tt_wait_hint *hint);
static inline bool tt_team_slot_free(struct tt_team *h, int slot, struct tt_wait_hint *hint)
{
    /* Every peer finished a flagged previous user once a later flagged operation was seen. */
    const struct tt_team_hot *hot = tt_team_hot(h);
    if (hot->slot_seq[slot] != 0 && hot->seen_all > hot->slot_seq[slot]) return true;
    return tt_team_slot_free_wait(h, slot, hint);
}

/* Flagged operations post no events: each rank publishes its slot by storing the operation's
 * sequence number in the slot's flag word, right before the payload (NCCL's LL idea: a small
 * payload shares the flag's cache line, so a reader pays one line transfer). They suit
 * operations in which every rank reads every peer's slot: once a rank has seen all peers'
 * flags for operation k, all of them have finished everything before k, which is what frees
 * slots without "done" events. Reserves the slot and returns the sequence number (never 0). */
static inline void tt_team_op_begin_flagged(struct tt_team *h, uint64_t *seq, int *slot)
{
    *seq = ++tt_team_hot(h)->op_index;
    *slot = (int)(*seq & 1);
}
/* Publishes this rank's `slot` for operation `seq` (the payload is written) and wakes
 * sleepers. */
void tt_team_publish(struct tt_team *h, int slot, uint64_t seq);
/* Whether `peer` published `slot` for operation `seq`; otherwise fills `hint`. */
bool tt_team_published(const struct tt_team *h, int peer, int slot, uint64_t seq,
                       struct tt_wait_hint *hint);
/* Records that every peer published operation `seq` (so finished all operations before it). */
static inline void tt_team_op_seen_all(struct tt_team *h, uint64_t seq)
{
    struct tt_team_hot *hot = tt_team_hot(h);
    if (seq > hot->seen_all) hot->seen_all = seq;
}

/* This rank's payload area of `slot`, to fill before posting. */
static inline void *tt_team_my_slot(struct tt_team *h, int slot)
{
    return tt_team_hot(h)->mine + (size_t)slot * tt_team_hot(h)->stride;
}
/* Rank `peer`'s payload area of `slot` (read only; valid once the peer posted the event). */
static inline const void *tt_team_peer_slot(const struct tt_team *h, int peer, int slot)
{
    return tt_team_hot_c(h)->payload[peer] + (size_t)slot * tt_team_hot_c(h)->stride;
}
/* Each slot's payload is preceded by the descriptor of the operation that filled it (written
 * before posting, valid to a peer once it posted): these find it from the payload's address,
 * without another call. */
static inline struct tt_op_desc *tt_team_slot_desc(void *payload)
{
    return (struct tt_op_desc *)(void *)((char *)payload - sizeof(struct tt_op_desc));
}
static inline const struct tt_op_desc *tt_team_peer_slot_desc(const void *payload)
{
    return (const struct tt_op_desc *)(const void *)((const char *)payload -
                                                     sizeof(struct tt_op_desc));
}
/* Posts this rank's event `event` and wakes sleepers. */
void tt_team_post(struct tt_team *h, uint64_t event);
/* Whether `peer` reached `event`; otherwise fills `hint` (sleep on its counter). */
bool tt_team_reached(const struct tt_team *h, int peer, uint64_t event, struct tt_wait_hint *hint);
/* Waiters record the CPU they run on and their thread id, so that a rank waiting for a peer
 * can tell that the peer is queued behind it on the same CPU (the scheduler placed both there)
 * and spinning only delays it. The CPU a peer last recorded (-1: unknown), and its thread in
 * *tid (the waiter's own thread when one thread drives both ranks). */
void tt_team_set_cpu(struct tt_team *h, int cpu, int tid);
int tt_team_peer_cpu(const struct tt_team *h, int peer, int *tid);
/* Whom a stalled operation of this member waits for (-1: none), published for the others'
 * timeout messages, and what `peer` published: a timeout names the end of the chain of waits,
 * the rank that is stuck, not only the neighbour it reached through. Slow path only. */
void tt_team_set_waiting(struct tt_team *h, int peer);
int tt_team_peer_waiting(const struct tt_team *h, int peer);

/* A point-to-point operation of this member that waits for a peer, published for the peers'
 * stall checks (core/engine.c: a team AlltoAll that waits for this member while this member
 * waits in the grouped Send/Recv form of it is a usage error). One record per member, set and
 * cleared on the slow path only (a stall, a connection exchange). */
struct tt_team_p2p_wait {
    int peer;         /* the member waited for */
    bool peer_send;   /* it waits for the peer's Send (it is the matching Recv), else its Recv */
    uint64_t ticket;  /* the operation's place on that pair's lane, equal on both ends */
    size_t count;     /* its elements and datatype */
    int dtype;
    bool both_ways;   /* its batch also holds the opposite operation with that peer, of the
                         same count and datatype: one block of an AlltoAll's grouped form */
};
void tt_team_set_p2p_wait(struct tt_team *h, const struct tt_team_p2p_wait *w);
void tt_team_clear_p2p_wait(struct tt_team *h);
/* Whether `peer` published that it waits for this member, and its record in *w. */
bool tt_team_peer_p2p_wait(const struct tt_team *h, int peer, struct tt_team_p2p_wait *w);

/* Marks this member's communicator failed with its first error `code` (non-zero) and a short
 * reason, once, and wakes its sleepers: the other members' stalled waits see it within a
 * millisecond (core/engine.c) instead of waiting for their deadline. */
void tt_team_set_failed(struct tt_team *h, int code, const char *reason);
/* The error `peer` marked itself failed with (0: none), its reason copied into `reason`. */
int tt_team_peer_failed(const struct tt_team *h, int peer, char *reason, size_t bytes);
/* The peer-memory contract: how a member reaches its peers' buffers once they published where
 * they are (tt_team_my_slot and friends): map a shareable region, or read and write bytes at an
 * address in the peer's address space. Host memory is the implementation today (memory files
 * mapped through pidfds, cross-memory attach); a device build adds one (CUDA IPC handles) and
 * the algorithms above are unchanged. tt_team_map/read/write go through the team's. */
struct tt_peer_mem {
    const char *name;
    const void *(*map)(struct tt_team *h, int peer, const struct tt_team_region *r);
    ncclResult_t (*read)(const struct tt_team *h, int peer, void *local, uintptr_t remote,
                         size_t bytes);
    ncclResult_t (*write)(const struct tt_team *h, int peer, uintptr_t remote,
                          const void *local, size_t bytes);
};
extern const struct tt_peer_mem tt_peer_mem_host;

/* Copies `bytes` from address `remote` in `peer`'s process to `local` (cross-memory attach). */
ncclResult_t tt_team_read(const struct tt_team *h, int peer, void *local, uintptr_t remote,
                          size_t bytes);
/* Copies `bytes` from `local` to address `remote` in `peer`'s process (cross-memory attach). */
ncclResult_t tt_team_write(const struct tt_team *h, int peer, uintptr_t remote, const void *local,
                           size_t bytes);

/* The part of a buffer that lies inside shareable memory (a memory file: an ncclMemAlloc block,
 * or ordinary pages a registration moved into one): the owner's descriptor of the file, the
 * block's process-unique id and size, and where the part lies: bytes [lo, hi) of the buffer, at
 * `offset` in the file. A buffer wholly inside a block has lo = 0 and hi = its size; one whose
 * pages were moved by a registration may have a head and a tail outside (the partial pages it
 * shares with other data), which peers reach with cross-memory attach. fd < 0 means no part of
 * the buffer is shareable. */
struct tt_team_region {
    int32_t fd;
    uint32_t reserved;
    uint64_t id;
    uint64_t offset;
    uint64_t bytes;
    uint64_t lo;
    uint64_t hi;
};

/* Bytes [r->lo, r->hi) of `peer`'s buffer `r`, mapped into this process read-write (zero-copy
 * access with plain loads and stores): the address of byte r->lo. NULL when nothing of it is
 * shareable, it cannot be mapped or TUTTI_MAP_PEERS is 0 (then use tt_team_read and
 * tt_team_write). Mappings are cached per peer and block id (ids are never reused) and live
 * until evicted or tt_team_destroy; a block's owner drops the file's pages from every mapping
 * when it frees the block (core/mem.c, release_file), so a dead block's mapping holds no memory. */
const void *tt_team_map(struct tt_team *h, int peer, const struct tt_team_region *r);

#endif
