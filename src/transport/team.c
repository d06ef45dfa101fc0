/* Mailboxes and cross-memory attach for one host (see host.h). The segment layout is one header
 * cache line (event counter, sleeper count), a line with the nonce the CMA probe reads and the
 * CPU the owner last waited on (kept off the counter's line, which peers poll), then two
 * 64-byte aligned slots, each an 8-byte flag word followed by the payload. Peers map each other's segments read-only in spirit (the
 * mapping is read-write only so futex sleepers can count themselves). */
#include "transport/team.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/time.h"

#define LINE 64
/* Before each slot's payload: the flag word (8 bytes) and the descriptor of the operation that
 * filled it (24, right before the payload: tt_team_slot_desc), so that a small payload still
 * shares their cache line. */
#define FLAG_BYTES 8
#define SLOT_HEADER_BYTES (FLAG_BYTES + sizeof(struct tt_op_desc))
/* Peers' blocks mapped at once, per communicator: at least this many, and always more than one
 * operation can need (a send and a receive block per peer), so that mapping a block never evicts
 * one the same operation is still using. */
#define MAP_CACHE_MIN 32

struct mailbox {
    _Alignas(LINE) _Atomic uint64_t posted;
    _Atomic uint32_t sleepers;
    _Alignas(LINE) uint64_t nonce;
    _Atomic int32_t cpu; /* where the owner last waited, -1 unknown (tt_team_set_cpu)... */
    _Atomic int32_t tid; /* ...and the thread that waited there */
    _Atomic int32_t waiting_for; /* the rank a stalled operation of the owner waits for, or -1 */
    _Atomic uint64_t p2p_wait[2]; /* tt_team_set_p2p_wait's record (P2P_WAIT_*), 0: none */
    /* The owner's communicator failed: its first error (ncclResult_t) once set, and why. */
    _Alignas(LINE) _Atomic int32_t failed;
    char reason[TT_TEAM_REASON_BYTES];
    /* The collective the owner runs now (tt_team_publish_desc), on a line of its own. */
    _Alignas(LINE) struct tt_team_desc_line desc;
    _Alignas(LINE) unsigned char slots[];
};

/* One peer's shareable block mapped here. */
struct peer_map {
    int peer;
    uint64_t id;
    void *base;
    size_t bytes;
    uint64_t last_use;
};

#define TEAM_NAME_BYTES 48

struct tt_team {
    struct tt_team_hot hot;        /* first: read inline through team.h */
    const struct tt_peer_mem *mem; /* how peers' buffers are reached (host memory today) */
    int rank;
    int nranks;
    size_t slot_bytes;
    size_t map_bytes;
    char name[TEAM_NAME_BYTES];
    bool unlinked;
    bool cma;
    bool map_peers; /* TUTTI_MAP_PEERS */
    struct mailbox *mine;
    struct mailbox **boxes; /* [nranks], boxes[rank] == mine */
    int32_t *pids;
    uint64_t events;          /* events reserved so far by this rank */
    uint64_t slot_end[2];     /* event ending the last operation that used each slot */
    int *pidfds;              /* [nranks]: -1 not opened yet, -2 mapping impossible */
    struct peer_map *maps;    /* [nmaps], least recently used evicted */
    int nmaps;
    uint64_t map_clock;
};

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

static size_t segment_bytes(size_t slot_bytes)
{
    return sizeof(struct mailbox) + 2 * round_up(SLOT_HEADER_BYTES + slot_bytes, LINE);
}

/* Member `rank`'s mailbox name in the team named by `comm_hash`: every member can compute it. */
static void mailbox_name(char *name, size_t bytes, uint64_t comm_hash, int rank)
{
    snprintf(name, bytes, "/tutti-%016llx-mbox-%d", (unsigned long long)comm_hash, rank);
}

ncclResult_t tt_team_create(int rank, int nranks, uint64_t comm_hash, size_t slot_bytes,
                            struct tt_team **out, struct tt_team_info *info)
{
    struct tt_team *h = NULL;
    ncclResult_t res = ncclSuccess;
    TT_TRY(TT_CALLOC(&h, 1));
    h->mem = &tt_peer_mem_host;
    h->rank = rank;
    h->map_peers = tt_param_map_peers() != 0;
    h->nranks = nranks;
    h->slot_bytes = slot_bytes;
    h->hot.stride = round_up(SLOT_HEADER_BYTES + slot_bytes, LINE);
    h->map_bytes = segment_bytes(slot_bytes);
    TT_TRY_GOTO(TT_CALLOC(&h->boxes, (size_t)nranks), res, fail);
    TT_TRY_GOTO(TT_CALLOC(&h->pids, (size_t)nranks), res, fail);
    TT_TRY_GOTO(TT_CALLOC(&h->hot.payload, (size_t)nranks), res, fail);
    TT_TRY_GOTO(TT_CALLOC(&h->pidfds, (size_t)nranks), res, fail);
    h->nmaps = 2 * nranks + 1 > MAP_CACHE_MIN ? 2 * nranks + 1 : MAP_CACHE_MIN;
    TT_TRY_GOTO(TT_CALLOC(&h->maps, (size_t)h->nmaps), res, fail);
    for (int p = 0; p < nranks; p++) h->pidfds[p] = -1;
    mailbox_name(h->name, sizeof h->name, comm_hash, rank);
    int fd = shm_open(h->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        res = TT_ERROR(ncclSystemError, "cannot create shared memory %s: %s", h->name,
                       tt_strerror(errno));
        goto fail;
    }
    /* Reserve the pages now, so a full /dev/shm fails here rather than as SIGBUS later. */
    int err = posix_fallocate(fd, 0, (off_t)h->map_bytes);
    if (err == 0) {
        h->mine = mmap(NULL, h->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (h->mine == MAP_FAILED) err = errno;
    }
    close(fd);
    if (err != 0) {
        h->mine = NULL;
        shm_unlink(h->name);
        res = TT_ERROR(ncclSystemError, "cannot map %zu bytes of shared memory for %s: %s",
                       h->map_bytes, h->name, strerror(err));
        goto fail;
    }
    if (getrandom(&h->mine->nonce, sizeof h->mine->nonce, 0) != (ssize_t)sizeof(uint64_t))
        h->mine->nonce = comm_hash ^ (uint64_t)getpid();
    h->boxes[rank] = h->mine;
    h->hot.desc = &h->mine->desc;
    h->hot.mine = h->hot.payload[rank] = h->mine->slots + SLOT_HEADER_BYTES;
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", h->name);
    atomic_store_explicit(&h->mine->cpu, -1, memory_order_relaxed);
    atomic_store_explicit(&h->mine->waiting_for, -1, memory_order_relaxed);
    info->nonce = h->mine->nonce;
    info->probe_addr = (uint64_t)(uintptr_t)&h->mine->nonce;
    info->pid = (int32_t)getpid();
    info->slot_bytes = (uint32_t)slot_bytes;
    *out = h;
    return ncclSuccess;
fail:
    tt_team_destroy(h);
    return res;
}

ncclResult_t tt_team_attach(struct tt_team *h, const struct tt_team_info *infos)
{
    bool cma = true;
    for (int p = 0; p < h->nranks; p++) {
        h->pids[p] = infos[p].pid;
        if (p == h->rank) continue;
        if (infos[p].slot_bytes != h->slot_bytes)
            return TT_ERROR(ncclInvalidUsage,
                            "mailbox slot size differs: rank %d has %u bytes, rank %d %zu; set "
                            "TUTTI_ONESHOT_BYTES alike on every rank",
                            p, infos[p].slot_bytes, h->rank, h->slot_bytes);
        char name[sizeof infos[p].name + 1];
        memcpy(name, infos[p].name, sizeof infos[p].name);
        name[sizeof infos[p].name] = '\0';
        int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
        if (fd < 0)
            return TT_ERROR(ncclSystemError, "cannot open rank %d's mailbox %s: %s", p, name,
                            tt_strerror(errno));
        /* A file shorter than the mailbox would turn the first access past its end into
         * SIGBUS instead of an error. */
        struct stat st = {0};
        if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < (uint64_t)h->map_bytes) {
            close(fd);
            return TT_ERROR(ncclRemoteError, "rank %d's mailbox %s is %lld bytes, not the %zu "
                            "it must have (stale, or not Tutti's)", p, name,
                            (long long)st.st_size, h->map_bytes);
        }
        void *map = mmap(NULL, h->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        int err = errno;
        close(fd);
        if (map == MAP_FAILED)
            return TT_ERROR(ncclSystemError, "cannot map rank %d's mailbox %s: %s", p, name,
                            strerror(err));
        h->boxes[p] = map;
        h->hot.payload[p] = h->boxes[p]->slots + SLOT_HEADER_BYTES;
        if (h->boxes[p]->nonce != infos[p].nonce)
            return TT_ERROR(ncclRemoteError, "rank %d's mailbox %s holds a foreign nonce", p,
                            name);
        /* Probe cross-memory attach on the nonce: it must read back what the mapping shows,
         * and writing it back unchanged must work too (Direct AllReduce writes into peers'
         * outputs; a sandbox may allow one call and not the other). */
        uint64_t probe = 0;
        struct iovec local = {.iov_base = &probe, .iov_len = sizeof probe};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)infos[p].probe_addr,
                               .iov_len = sizeof probe};
        if (process_vm_readv(infos[p].pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof probe ||
            probe != infos[p].nonce ||
            process_vm_writev(infos[p].pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof probe) {
            if (cma)
                TT_INFO(TT_SUB_SHM, "cross-memory attach to rank %d (pid %d) does not work "
                                    "(%s): single-copy algorithms disabled",
                        p, infos[p].pid, strerror(errno));
            cma = false;
        }
    }
    h->cma = cma;
    return ncclSuccess;
}

void tt_team_unlink_all(uint64_t comm_hash, int nranks)
{
    for (int r = 0; r < nranks; r++) {
        char name[TEAM_NAME_BYTES];
        mailbox_name(name, sizeof name, comm_hash, r);
        (void)shm_unlink(name); /* ENOENT for those removed already */
    }
}

void tt_team_unlink(struct tt_team *h)
{
    if (h != NULL && !h->unlinked && h->mine != NULL) {
        shm_unlink(h->name);
        h->unlinked = true;
    }
}

void tt_team_destroy(struct tt_team *h)
{
    if (h == NULL) return;
    tt_team_unlink(h);
    for (int p = 0; h->boxes != NULL && p < h->nranks; p++)
        if (h->boxes[p] != NULL) munmap(h->boxes[p], h->map_bytes);
    for (int p = 0; h->pidfds != NULL && p < h->nranks; p++)
        if (h->pidfds[p] >= 0) close(h->pidfds[p]);
    for (int i = 0; h->maps != NULL && i < h->nmaps; i++)
        if (h->maps[i].base != NULL) munmap(h->maps[i].base, h->maps[i].bytes);
    free(h->maps);
    free(h->boxes);
    free(h->pids);
    free(h->hot.payload);
    free(h->pidfds);
    free(h);
}

bool tt_team_cma_works(const struct tt_team *h) { return h->cma; }

/* ---- What a cross-memory copy costs here ---------------------------------------------------- */

/* One of Direct's pieces (its process_vm_readv/writev calls move 256 KiB), copied from this
 * process into itself: the kernel pins the source pages and copies as it does from a peer. The
 * rounds alternate the two copies so that a noisy spell hits both; the best of each counts. */
#define CMA_PROBE_BYTES (256u << 10)
#define CMA_PROBE_ROUNDS 6

static uint32_t cma_cost_pct_value;
static pthread_once_t cma_cost_once = PTHREAD_ONCE_INIT;

static void cma_cost_measure(void)
{
    char *buf = aligned_alloc(4096, 2 * CMA_PROBE_BYTES);
    if (buf == NULL) return; /* 0: unknown; the model keeps its constant row */
    char *src = buf, *dst = buf + CMA_PROBE_BYTES;
    memset(buf, 1, 2 * CMA_PROBE_BYTES); /* fault every page in before timing */
    uint64_t best_cma = UINT64_MAX, best_mem = UINT64_MAX;
    bool ok = true;
    for (int round = 0; round < CMA_PROBE_ROUNDS && ok; round++) {
        struct iovec local = {.iov_base = dst, .iov_len = CMA_PROBE_BYTES};
        struct iovec remote = {.iov_base = src, .iov_len = CMA_PROBE_BYTES};
        uint64_t t0 = tt_time_ns();
        ok = process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)CMA_PROBE_BYTES;
        uint64_t t1 = tt_time_ns();
        memcpy(dst, src, CMA_PROBE_BYTES);
        __asm__ volatile("" : : "r"(dst) : "memory"); /* the copy is not dead */
        uint64_t t2 = tt_time_ns();
        if (t1 - t0 < best_cma) best_cma = t1 - t0;
        if (t2 - t1 < best_mem) best_mem = t2 - t1;
    }
    free(buf);
    if (!ok) return;
    if (best_mem == 0) best_mem = 1;
    uint64_t pct = (100 * best_cma + best_mem / 2) / best_mem;
    cma_cost_pct_value = pct < 1 ? 1 : pct > 100000 ? 100000 : (uint32_t)pct;
}

uint32_t tt_cma_cost_pct(void)
{
    pthread_once(&cma_cost_once, cma_cost_measure);
    return cma_cost_pct_value;
}

size_t tt_team_slot_bytes(const struct tt_team *h) { return h->slot_bytes; }

void tt_team_op_begin(struct tt_team *h, int events, uint64_t *event_base, int *slot)
{
    *event_base = h->events;
    *slot = (int)(++h->hot.op_index & 1);
    h->events += (uint64_t)events;
}

void tt_team_op_end(struct tt_team *h, int slot, uint64_t end_event)
{
    h->slot_end[slot] = end_event;
    h->hot.slot_seq[slot] = 0;
}

/* A flagged operation k ends, for its slot's next user, when every peer has been seen to
 * publish a later flagged operation (seen_all), or has posted the first event reserved after
 * k: peers do either only after finishing k. */
static _Atomic uint64_t *slot_flag(const struct mailbox *box, size_t stride, int slot)
{
    return (_Atomic uint64_t *)(box->slots + (size_t)slot * stride);
}

void tt_team_publish(struct tt_team *h, int slot, uint64_t seq)
{
    /* Sequentially consistent for the sleeper check, as in tt_team_post. */
    _Atomic uint64_t *flag = slot_flag(h->mine, h->hot.stride, slot);
    /* The slot's previous user is over (the caller checked tt_team_slot_free): record how this
     * one will end (see tt_team_op_begin_flagged). */
    h->slot_end[slot] = h->events + 1;
    h->hot.slot_seq[slot] = seq;
    atomic_store(flag, seq);
    tt_wait_wake(flag, &h->mine->sleepers);
}

bool tt_team_published(const struct tt_team *h, int peer, int slot, uint64_t seq,
                       struct tt_wait_hint *hint)
{
    struct mailbox *box = h->boxes[peer];
    _Atomic uint64_t *flag = slot_flag(box, h->hot.stride, slot);
    uint64_t seen = atomic_load_explicit(flag, memory_order_acquire);
    if (seen == seq) return true;
    tt_wait_hint_clear(hint);
    hint->word = flag;
    hint->seen = seen;
    hint->sleepers = &box->sleepers;
    return false;
}

bool tt_team_slot_free_wait(struct tt_team *h, int slot, struct tt_wait_hint *hint)
{
    for (int p = 0; p < h->nranks; p++)
        if (p != h->rank && !tt_team_reached(h, p, h->slot_end[slot], hint)) return false;
    return true;
}


void tt_team_post(struct tt_team *h, uint64_t event)
{
    /* Sequentially consistent so the sleeper check in tt_wait_wake cannot be reordered
     * before the store (see util/wait.c). */
    atomic_store(&h->mine->posted, event);
    tt_wait_wake(&h->mine->posted, &h->mine->sleepers);
}

void tt_team_set_cpu(struct tt_team *h, int cpu, int tid)
{
    if (atomic_load_explicit(&h->mine->cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&h->mine->cpu, cpu, memory_order_relaxed);
    if (atomic_load_explicit(&h->mine->tid, memory_order_relaxed) != tid)
        atomic_store_explicit(&h->mine->tid, tid, memory_order_relaxed);
}

int tt_team_peer_cpu(const struct tt_team *h, int peer, int *tid)
{
    *tid = atomic_load_explicit(&h->boxes[peer]->tid, memory_order_relaxed);
    return atomic_load_explicit(&h->boxes[peer]->cpu, memory_order_relaxed);
}

bool tt_team_reached(const struct tt_team *h, int peer, uint64_t event, struct tt_wait_hint *hint)
{
    struct mailbox *box = h->boxes[peer];
    uint64_t seen = atomic_load_explicit(&box->posted, memory_order_acquire);
    if (seen >= event) return true;
    tt_wait_hint_clear(hint);
    hint->word = &box->posted;
    hint->seen = seen;
    hint->sleepers = &box->sleepers;
    return false;
}

/* One direction of cross-memory attach, repeated until every byte moved. */
static ncclResult_t cross_copy(const struct tt_team *h, int peer, char *local, uintptr_t remote,
                               size_t bytes, bool write)
{
    while (bytes > 0) {
        struct iovec l = {.iov_base = local, .iov_len = bytes};
        struct iovec r = {.iov_base = (void *)remote, .iov_len = bytes};
        ssize_t got = write ? process_vm_writev(h->pids[peer], &l, 1, &r, 1, 0)
                            : process_vm_readv(h->pids[peer], &l, 1, &r, 1, 0);
        if (got <= 0) {
            if (got < 0 && errno == EINTR) continue;
            return TT_ERROR(ncclRemoteError,
                            "cross-memory %s of %zu bytes %s rank %d (pid %d) failed: %s",
                            write ? "write" : "read", bytes, write ? "to" : "from", peer,
                            (int)h->pids[peer], got < 0 ? strerror(errno) : "no progress");
        }
        local += got;
        remote += (uintptr_t)got;
        bytes -= (size_t)got;
    }
    return ncclSuccess;
}

static ncclResult_t host_read(const struct tt_team *h, int peer, void *local, uintptr_t remote,
                              size_t bytes)
{
    return cross_copy(h, peer, local, remote, bytes, false);
}

static ncclResult_t host_write(const struct tt_team *h, int peer, uintptr_t remote,
                               const void *local, size_t bytes)
{
    return cross_copy(h, peer, (char *)local, remote, bytes, true);
}

ncclResult_t tt_team_read(const struct tt_team *h, int peer, void *local, uintptr_t remote,
                          size_t bytes)
{
    return h->mem->read(h, peer, local, remote, bytes);
}

ncclResult_t tt_team_write(const struct tt_team *h, int peer, uintptr_t remote, const void *local,
                           size_t bytes)
{
    return h->mem->write(h, peer, remote, local, bytes);
}

/* Maps a peer's block: its memory file's descriptor is duplicated into this process through a
 * pidfd (the same ptrace permission cross-memory attach needs), checked, mapped and closed
 * again. */
static void *map_block(struct tt_team *h, int peer, const struct tt_team_region *r)
{
    if (h->pidfds[peer] == -1) {
        long fd = syscall(SYS_pidfd_open, (pid_t)h->pids[peer], 0);
        h->pidfds[peer] = fd >= 0 ? (int)fd : -2;
        if (fd < 0)
            TT_INFO(TT_SUB_SHM, "pidfd_open of rank %d (pid %d) failed (%s): its shareable "
                                "buffers are read with cross-memory attach",
                    peer, (int)h->pids[peer], strerror(errno));
    }
    if (h->pidfds[peer] < 0) return NULL;
    long fd = syscall(SYS_pidfd_getfd, h->pidfds[peer], r->fd, 0);
    if (fd < 0) {
        /* Not allowed, or not in this kernel: never for this peer. Anything else (out of
         * descriptors here, a file the peer has closed since) fails this mapping only. */
        bool never = errno == EPERM || errno == ENOSYS || errno == ESRCH;
        TT_INFO(TT_SUB_SHM, "pidfd_getfd of rank %d's memory file %d failed (%s): %s read "
                            "with cross-memory attach",
                peer, (int)r->fd, strerror(errno),
                never ? "its shareable buffers are" : "this buffer is");
        if (never) {
            close(h->pidfds[peer]);
            h->pidfds[peer] = -2;
        }
        return NULL;
    }
    /* A file shorter than the block, or one its owner could still shrink, would turn a load
     * past its end into SIGBUS here: such a file is read with cross-memory attach instead, which
     * fails with an error. */
    struct stat st = {0};
    int seals = fcntl((int)fd, F_GET_SEALS);
    if (fstat((int)fd, &st) != 0 || (uint64_t)st.st_size < r->bytes || seals < 0 ||
        !(seals & F_SEAL_SHRINK)) {
        TT_INFO(TT_SUB_SHM, "rank %d's memory file %llu is not sealed at %llu bytes or more "
                            "(size %lld, seals 0x%x): read with cross-memory attach",
                peer, (unsigned long long)r->id, (unsigned long long)r->bytes,
                (long long)st.st_size, seals < 0 ? 0 : seals);
        close((int)fd);
        return NULL;
    }
    void *base = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
    int err = errno;
    close((int)fd);
    if (base == MAP_FAILED) {
        TT_INFO(TT_SUB_SHM, "mapping %llu bytes of rank %d's memory file failed: %s",
                (unsigned long long)r->bytes, peer, strerror(err));
        return NULL;
    }
    return base;
}

static const void *host_map(struct tt_team *h, int peer, const struct tt_team_region *r)
{
    if (!h->map_peers || r->fd < 0 || r->offset > r->bytes || r->lo >= r->hi ||
        r->hi - r->lo > r->bytes - r->offset)
        return NULL;
    struct peer_map *victim = &h->maps[0];
    for (int i = 0; i < h->nmaps; i++) {
        struct peer_map *m = &h->maps[i];
        if (m->base != NULL && m->peer == peer && m->id == r->id && m->bytes == r->bytes) {
            m->last_use = ++h->map_clock;
            return (const char *)m->base + r->offset;
        }
        /* The victim: an empty entry, else the least recently used one. */
        if (victim->base != NULL && (m->base == NULL || m->last_use < victim->last_use))
            victim = m;
    }
    void *base = map_block(h, peer, r);
    if (base == NULL) return NULL;
    if (victim->base != NULL) munmap(victim->base, victim->bytes);
    *victim = (struct peer_map){.peer = peer, .id = r->id, .base = base, .bytes = r->bytes,
                                .last_use = ++h->map_clock};
    TT_INFO(TT_SUB_SHM, "mapped rank %d's memory file %llu (%llu bytes)", peer,
            (unsigned long long)r->id, (unsigned long long)r->bytes);
    return (const char *)base + r->offset;
}

void tt_team_set_failed(struct tt_team *h, int code, const char *reason)
{
    if (h == NULL || code == 0) return;
    int32_t expected = 0;
    /* The reason first, published by the store of the code (the reader checks the code). */
    if (atomic_load_explicit(&h->mine->failed, memory_order_relaxed) != 0) return;
    snprintf(h->mine->reason, sizeof h->mine->reason, "%s", reason != NULL ? reason : "");
    if (atomic_compare_exchange_strong_explicit(&h->mine->failed, &expected, code,
                                                memory_order_release, memory_order_relaxed))
        tt_wait_wake(&h->mine->posted, &h->mine->sleepers);
}

int tt_team_peer_failed(const struct tt_team *h, int peer, char *reason, size_t bytes)
{
    if (h == NULL || peer < 0 || peer >= h->nranks || peer == h->rank) return 0;
    const struct mailbox *box = h->boxes[peer];
    int code = atomic_load_explicit(&box->failed, memory_order_acquire);
    if (code != 0 && reason != NULL && bytes > 0) {
        /* The peer's memory: copied bounded and terminated, whatever it holds. */
        size_t n = sizeof box->reason < bytes ? sizeof box->reason : bytes;
        memcpy(reason, box->reason, n);
        reason[n - 1] = '\0';
    }
    return code;
}


bool tt_team_peer_desc(const struct tt_team *h, int peer, struct tt_op_desc *d)
{
    if (h == NULL || peer < 0 || peer >= h->nranks) return false;
    struct tt_team_desc_line *l = &h->boxes[peer]->desc;
    uint64_t seq = atomic_load_explicit(&l->seq, memory_order_acquire), w[3];
    if (seq == 0) return false;
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer models no fences: sequentially consistent loads give the same order. */
    for (int i = 0; i < 3; i++) w[i] = atomic_load_explicit(&l->words[i], memory_order_seq_cst);
    if (atomic_load_explicit(&l->seq, memory_order_seq_cst) != seq) return false;
#else
    for (int i = 0; i < 3; i++) w[i] = atomic_load_explicit(&l->words[i], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&l->seq, memory_order_relaxed) != seq) return false;
#endif
    memcpy(d, w, sizeof w);
    /* The peer's memory: believe the ticket only if it agrees with the sequence word. */
    return d->ticket + 1 == seq;
}

void tt_team_peer_desc_hint(const struct tt_team *h, int peer, struct tt_wait_hint *hint)
{
    tt_wait_hint_clear(hint);
    if (h == NULL || peer < 0 || peer >= h->nranks) return;
    struct tt_team_desc_line *l = &h->boxes[peer]->desc;
    hint->word = &l->seq;
    hint->seen = atomic_load_explicit(&l->seq, memory_order_acquire);
    hint->sleepers = &l->sleepers;
}

void tt_team_set_waiting(struct tt_team *h, int peer)
{
    if (h != NULL) atomic_store_explicit(&h->mine->waiting_for, peer, memory_order_relaxed);
}

int tt_team_peer_waiting(const struct tt_team *h, int peer)
{
    if (h == NULL || peer < 0 || peer >= h->nranks) return -1;
    int w = atomic_load_explicit(&h->boxes[peer]->waiting_for, memory_order_relaxed);
    return w >= 0 && w < h->nranks ? w : -1; /* the peer's memory: range-checked */
}

/* The point-to-point wait record in two words, a sequence lock on the first: the rank waited
 * for + 1 in its low bits (0: no record, or being written), then whether it waits for that
 * rank's Send, then the ticket; the second holds the count, the datatype and the both-ways
 * flag. A record that does not fit (a ticket or count too large) is not published. Slow path
 * only: sequentially consistent accesses, fences and all. */
#define P2P_WAIT_PEER_BITS 20
#define P2P_WAIT_SEND_BIT (1ull << P2P_WAIT_PEER_BITS)
#define P2P_WAIT_TICKET_SHIFT (P2P_WAIT_PEER_BITS + 1)
#define P2P_WAIT_COUNT_BITS 48
#define P2P_WAIT_DTYPE_SHIFT P2P_WAIT_COUNT_BITS
#define P2P_WAIT_BOTH_BIT (1ull << 63)

void tt_team_set_p2p_wait(struct tt_team *h, const struct tt_team_p2p_wait *w)
{
    if (h == NULL || w->peer < 0 || w->peer >= h->nranks || w->peer >= 1 << P2P_WAIT_PEER_BITS ||
        w->ticket >= 1ull << (64 - P2P_WAIT_TICKET_SHIFT) ||
        (uint64_t)w->count >= 1ull << P2P_WAIT_COUNT_BITS || w->dtype < 0 || w->dtype > 127)
        return;
    uint64_t head = (uint64_t)(w->peer + 1) | (w->peer_send ? P2P_WAIT_SEND_BIT : 0) |
                    w->ticket << P2P_WAIT_TICKET_SHIFT;
    uint64_t body = (uint64_t)w->count | (uint64_t)w->dtype << P2P_WAIT_DTYPE_SHIFT |
                    (w->both_ways ? P2P_WAIT_BOTH_BIT : 0);
    atomic_store(&h->mine->p2p_wait[0], 0);
    atomic_store(&h->mine->p2p_wait[1], body);
    atomic_store(&h->mine->p2p_wait[0], head);
}

void tt_team_clear_p2p_wait(struct tt_team *h)
{
    if (h != NULL) atomic_store(&h->mine->p2p_wait[0], 0);
}

bool tt_team_peer_p2p_wait(const struct tt_team *h, int peer, struct tt_team_p2p_wait *w)
{
    if (h == NULL || peer < 0 || peer >= h->nranks || peer == h->rank) return false;
    _Atomic uint64_t *rec = h->boxes[peer]->p2p_wait;
    uint64_t head = atomic_load(&rec[0]), body = atomic_load(&rec[1]);
    if (head == 0 || atomic_load(&rec[0]) != head) return false;
    /* The peer's memory: it counts only when it names this member. */
    if ((head & (P2P_WAIT_SEND_BIT - 1)) != (uint64_t)h->rank + 1) return false;
    *w = (struct tt_team_p2p_wait){
        .peer = h->rank,
        .peer_send = (head & P2P_WAIT_SEND_BIT) != 0,
        .ticket = head >> P2P_WAIT_TICKET_SHIFT,
        .count = (size_t)(body & ((1ull << P2P_WAIT_COUNT_BITS) - 1)),
        .dtype = (int)((body >> P2P_WAIT_DTYPE_SHIFT) & 127),
        .both_ways = (body & P2P_WAIT_BOTH_BIT) != 0};
    return true;
}

/* Host memory: peers' memory files mapped through pidfds, everything else by cross-memory
 * attach. */
const struct tt_peer_mem tt_peer_mem_host = {
    .name = "host",
    .map = host_map,
    .read = host_read,
    .write = host_write,
};

const void *tt_team_map(struct tt_team *h, int peer, const struct tt_team_region *r)
{
    return h->mem->map(h, peer, r);
}
