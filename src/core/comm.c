/* Communicator lifecycle: join the bootstrap, learn every peer (host, pid, FIFO geometry), pick
 * a transport per neighbour (shared memory on one host unless NCCL_SHM_DISABLE/NCCL_P2P_DISABLE,
 * TCP otherwise), connect the ring, and tear all of it down again. Any failure on the way frees
 * what was built, through the same path as ncclCommDestroy. */
#include "core/comm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "algo/fault.h"
#include "core/connect.h"
#include "core/group.h"
#include "core/lifecycle.h"
#include "core/mem.h"
#include "core/redop.h"
#include "core/stream.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/time.h"

#define PEER_INFO_VERSION 3
#define SLOT_BYTES_MIN 8
#define SLOT_BYTES_MAX (64ull << 20)

static uint64_t fnv1a(uint64_t h, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < bytes; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Ranks with the same host hash share memory: hostname plus the kernel's boot id (so two
 * containers with one hostname on different machines differ), or NCCL_HOSTID when set. */
static uint64_t host_hash(void)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const char *forced = tt_param_hostid();
    if (forced[0] != '\0') return fnv1a(h, forced, strlen(forced));
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    h = fnv1a(h, host, strlen(host));
    char boot[64] = {0};
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, boot, sizeof boot - 1);
        if (n > 0) h = fnv1a(h, boot, (size_t)n);
        close(fd);
    }
    return h;
}

/* Bytes per FIFO slot: TUTTI_CHUNK_BYTES when set (a test knob), else NCCL_BUFFSIZE / 8. */
static ncclResult_t choose_slot_bytes(size_t *out)
{
    int64_t chunk = tt_param_chunk_bytes();
    int64_t buff = tt_param_buffsize();
    int64_t slot = chunk > 0 ? chunk : buff / TT_CONN_SLOTS;
    if (slot < SLOT_BYTES_MIN || (uint64_t)slot > SLOT_BYTES_MAX)
        return TT_ERROR(ncclInvalidArgument,
                        "slot size %lld bytes (from %s) is outside [%d, %llu]",
                        (long long)slot, chunk > 0 ? "TUTTI_CHUNK_BYTES" : "NCCL_BUFFSIZE/8",
                        SLOT_BYTES_MIN, (unsigned long long)SLOT_BYTES_MAX);
    *out = (size_t)slot;
    return ncclSuccess;
}

/* When process `pid` started, in clock ticks since boot (field 22 of /proc/PID/stat); 0 when
 * unknown. With the pid it names one process for as long as the machine runs. */
static uint64_t process_start_ticks(pid_t pid)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return 0;
    text[n] = '\0';
    /* The command name (field 2) may hold spaces and parentheses: count from its last ')'. */
    const char *p = strrchr(text, ')');
    for (int field = 2; p != NULL && field < 22; field++) p = strchr(p + 1, ' ');
    return p != NULL ? strtoull(p + 1, NULL, 10) : 0;
}

/* A pidfd of every other rank of this host, so that a stalled wait sees a dead peer at once
 * (core/state.h). A pid is trusted only when the process behind it here started when the peer
 * says it did: a peer in another pid namespace may have a pid that names a stranger here. */
static void open_pidfds(struct ncclComm *comm)
{
    int n = comm->st.nranks;
    if (TT_CALLOC(&comm->st.pidfds, (size_t)n) != ncclSuccess) return;
    uint64_t mine = comm->peers[comm->st.rank].host_hash;
    for (int r = 0; r < n; r++) {
        const struct tt_peer_info *p = &comm->peers[r];
        comm->st.pidfds[r] = -1;
        if (r == comm->st.rank || p->host_hash != mine || p->start_ticks == 0) continue;
        long fd = syscall(SYS_pidfd_open, (pid_t)p->pid, 0);
        if (fd < 0) continue;
        if (process_start_ticks(p->pid) != p->start_ticks) {
            close((int)fd);
            continue;
        }
        comm->st.pidfds[r] = (int)fd;
        comm->st.npidfds++;
    }
}

static ncclResult_t exchange_peer_info(struct ncclComm *comm)
{
    TT_TRY(TT_CALLOC(&comm->peers, (size_t)comm->st.nranks));
    struct tt_peer_info *me = &comm->peers[comm->st.rank];
    me->version = PEER_INFO_VERSION;
    me->rank = comm->st.rank;
    me->pid = (int32_t)getpid();
    me->start_ticks = process_start_ticks(getpid());
    cpu_set_t set;
    long cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                             : sysconf(_SC_NPROCESSORS_ONLN);
    me->cpus = cpus > 0 ? (uint32_t)cpus : 1;
    me->host_hash = host_hash();
    me->slot_bytes = comm->slot_bytes;
    if (getrandom(&me->nonce, sizeof me->nonce, 0) != (ssize_t)sizeof me->nonce)
        me->nonce = tt_time_ns() ^ (uint64_t)getpid();
    TT_TRY(tt_bootstrap_allgather(comm->bootstrap, comm->peers, sizeof *me));
    for (int r = 0; r < comm->st.nranks; r++) {
        const struct tt_peer_info *p = &comm->peers[r];
        if (p->version != PEER_INFO_VERSION || p->rank != r)
            return TT_ERROR(ncclInvalidUsage,
                            "rank %d runs an incompatible Tutti (peer info version %u)", r,
                            p->version);
        if (p->slot_bytes != comm->slot_bytes)
            return TT_ERROR(ncclInvalidUsage,
                            "FIFO slot size differs between ranks: rank %d has %llu bytes, rank "
                            "%d has %llu; set NCCL_BUFFSIZE and TUTTI_CHUNK_BYTES alike everywhere",
                            comm->st.rank, (unsigned long long)comm->slot_bytes, r,
                            (unsigned long long)p->slot_bytes);
    }
    /* Shared-memory segment names must differ between communicators, even ones made from the
     * same NCCL_COMM_ID: rank 0's nonce makes them unique. */
    comm->tctx.comm_hash = comm->peers[0].nonce;
    return ncclSuccess;
}

/* One sysfs value of CPU 0's cache `index`: its level, or its size in bytes ("32768K"; K, M
 * and G are accepted). 0 when missing or malformed. */
static uint64_t cache_attr(int index, const char *attr)
{
    char path[96], text[32];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", index, attr);
    FILE *f = fopen(path, "re");
    if (f == NULL) return 0;
    bool got = fgets(text, sizeof text, f) != NULL;
    fclose(f);
    if (!got) return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    unsigned shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (end == text || errno != 0 || v > (1ull << 40) >> shift) return 0; /* at most 1 TiB */
    if (shift != 0) end++;
    if (*end != '\0' && *end != '\n') return 0;
    if (strcmp(attr, "level") != 0 && shift == 0) return 0; /* sizes always carry a unit */
    return (uint64_t)v << shift;
}

/* The L3 as the kernel reports it for CPU 0 (the highest level if there is no L3), which sizes
 * Direct's choice of streaming copies; 32 MiB when nothing says. sysconf is not asked: under a
 * hypervisor it may pass on the host's total (384 MiB on the development VM, whose sysfs says
 * 32 MiB). */
static size_t llc_bytes(void)
{
    uint64_t best = 0, best_level = 0;
    for (int i = 0; i < 16; i++) {
        uint64_t level = cache_attr(i, "level"), bytes = cache_attr(i, "size");
        if (level == 0 || bytes == 0 || best_level == 3 || level > 3 || level < best_level)
            continue;
        best_level = level;
        best = bytes;
    }
    return best > 0 ? (size_t)best : (size_t)32 << 20;
}

/* The shape of the job, from allgathered facts only, so that every rank's cost model sees the
 * same values: hosts, ranks on this host, CPUs, and the slowest link of the ring, from the
 * transport each rank will pick towards its successor. */
static void learn_shape(struct ncclComm *comm)
{
    int n = comm->st.nranks;
    uint64_t mine = comm->peers[comm->st.rank].host_hash;
    comm->nhosts = 0;
    comm->local_nranks = 0;
    uint32_t cpus = 0;
    comm->ring_link = TT_LINK_SHM;
    for (int r = 0; r < n; r++) {
        bool seen = false;
        for (int q = 0; q < r && !seen; q++)
            seen = comm->peers[q].host_hash == comm->peers[r].host_hash;
        comm->nhosts += !seen;
        comm->local_nranks += comm->peers[r].host_hash == mine;
        if (comm->peers[r].cpus > cpus) cpus = comm->peers[r].cpus;
        int next = (r + 1) % n;
        struct tt_reach reach = {.rank = r, .peer = next,
                                 .same_host = comm->peers[r].host_hash ==
                                              comm->peers[next].host_hash};
        if (n > 1 && tt_transport_pick(&reach)->link == TT_LINK_TCP) comm->ring_link = TT_LINK_TCP;
    }
    comm->oversubscribed = comm->nhosts == 1 && (uint32_t)n > cpus;
    comm->host_cpus = cpus;
}

/* The local team: the ranks of this host, whenever there are two or more of them and shared
 * memory is allowed, whatever else the communicator spans. Each member owns a mailbox every other
 * member maps (transport/team.h); members are numbered by communicator rank order. When the team
 * holds every rank, OneShot and Direct may run over it; cross-memory attach is used only if it
 * works between every pair, which the ranks agree on with one more allgather (selection must be
 * identical everywhere). Every rank takes part in the allgathers, in a team or not. */
static ncclResult_t setup_team(struct ncclComm *comm)
{
    int n = comm->st.nranks;
    int64_t slot = tt_param_oneshot_bytes();
    bool shm_ok = tt_param_shm_disable() == 0 && tt_param_p2p_disable() == 0;
    /* Every rank decides alike whether teams are formed: the variables are equal everywhere. */
    if (n < 2 || slot <= 0 || !shm_ok) return ncclSuccess;
    uint64_t mine = comm->peers[comm->st.rank].host_hash;
    struct tt_team_info *all = NULL, *local = NULL;
    ncclResult_t res = ncclSuccess;
    TT_TRY(TT_CALLOC(&all, (size_t)n));
    TT_TRY_GOTO(TT_CALLOC(&local, (size_t)n), res, out);
    int me = 0;
    for (int r = 0; r < comm->st.rank; r++) me += comm->peers[r].host_hash == mine;
    bool in_team = comm->local_nranks >= 2;
    /* Segment names must differ between the hosts' teams of one communicator, even where two
     * "hosts" (NCCL_HOSTID) share one machine. */
    if (in_team)
        TT_TRY_GOTO(tt_team_create(me, comm->local_nranks, comm->tctx.comm_hash ^ mine,
                                   (size_t)slot, &comm->team, &all[comm->st.rank]),
                    res, out);
    TT_TRY_GOTO(tt_bootstrap_allgather(comm->bootstrap, all, sizeof *all), res, out);
    if (in_team) {
        int k = 0;
        for (int r = 0; r < n; r++)
            if (comm->peers[r].host_hash == mine) local[k++] = all[r];
        TT_TRY_GOTO(tt_team_attach(comm->team, local), res, out);
    }
    uint8_t *cma = (uint8_t *)all; /* reuse: one byte per rank */
    memset(cma, 0, (size_t)n);
    cma[comm->st.rank] = in_team && tt_team_cma_works(comm->team);
    TT_TRY_GOTO(tt_bootstrap_allgather(comm->bootstrap, cma, 1), res, out);
    comm->team_spans = in_team && comm->local_nranks == n;
    if (!comm->team_spans) goto out;
    /* Direct publishes its addresses in the mailbox slot: a slot too small for them (a tiny
     * TUTTI_ONESHOT_BYTES) leaves Direct off. The slot size is equal everywhere (checked at
     * attach), so every rank agrees. */
    comm->direct_ok = (size_t)slot >= tt_direct_slot_bytes();
    for (int r = 0; r < n; r++) comm->direct_ok &= cma[r] != 0;
    if (comm->direct_ok) {
        struct tt_direct_scratch *sc = &comm->scratch;
        sc->tmp_bytes = 256 << 10; /* a piece stays in L2 between the copy and the fold */
        int64_t bound = tt_param_stream_footprint();
        sc->stream_min_footprint = bound > 0 ? (size_t)bound : 4 * llc_bytes();
        sc->tmp = malloc(2 * sc->tmp_bytes);
        sc->stage = sc->tmp != NULL ? (char *)sc->tmp + sc->tmp_bytes : NULL;
        TT_TRY_GOTO(TT_CALLOC(&sc->send, (size_t)n), res, out);
        TT_TRY_GOTO(TT_CALLOC(&sc->recv, (size_t)n), res, out);
        if (sc->tmp == NULL) {
            res = TT_ERROR(ncclSystemError, "out of memory for %zu bytes of staging",
                           sc->tmp_bytes);
            goto out;
        }
    }
    TT_INFO(TT_SUB_INIT | TT_SUB_SHM, "one host: OneShot mailboxes of %lld bytes, Direct %s%s",
            (long long)slot, comm->direct_ok ? "on (cross-memory attach)" : "off",
            comm->oversubscribed ? "; more ranks than CPUs" : "");
out:
    if (in_team && res == ncclSuccess && !comm->team_spans)
        TT_INFO(TT_SUB_INIT | TT_SUB_SHM, "local team of %d ranks (of %d) on this host",
                comm->local_nranks, n);
    free(local);
    free(all);
    return res;
}

/* Spinning only pays when every rank of this host has a core of its own: with more ranks than
 * cores a spinning waiter burns the time slice the rank it waits for needs. So unless TUTTI_SPIN
 * is set explicitly, an oversubscribed host yields at once. */
static uint32_t choose_spin_limit(const struct ncclComm *comm)
{
    int64_t spin = tt_param_spin();
    if (spin < 0) spin = 0;
    if (getenv("TUTTI_SPIN") != NULL) return (uint32_t)spin;
    int local = 0;
    for (int r = 0; r < comm->st.nranks; r++)
        local += comm->peers[r].host_hash == comm->peers[comm->st.rank].host_hash;
    cpu_set_t set;
    long cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                             : sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t limit = local > cpus ? 0 : (uint32_t)spin;
    TT_INFO(TT_SUB_INIT, "%d ranks on this host, %ld cores: spin %u polls before yielding", local,
            cpus, limit);
    return limit;
}

/* The transport towards every peer, from the transport table (transport/transport.c). */
static ncclResult_t pick_transports(struct ncclComm *comm)
{
    int n = comm->st.nranks;
    TT_TRY(TT_CALLOC(&comm->transports, (size_t)n));
    for (int p = 0; p < n; p++) {
        struct tt_reach reach = {.rank = comm->st.rank, .peer = p,
                                 .same_host = comm->peers[p].host_hash ==
                                              comm->peers[comm->st.rank].host_hash};
        comm->transports[p] = tt_transport_pick(&reach);
    }
    return ncclSuccess;
}

/* Connects the ring: a send connection to the successor and a receive connection from the
 * predecessor. Each rank sets up both sides, the blobs are allgathered, and every rank connects
 * its send side before its receive side (a TCP receiver accepts there). */
static ncclResult_t connect_ring(struct ncclComm *comm)
{
    struct tt_ring *ring = &comm->ring;
    ring->prev = (comm->st.rank + comm->st.nranks - 1) % comm->st.nranks;
    ring->next = (comm->st.rank + 1) % comm->st.nranks;
    if (comm->st.nranks == 1) return ncclSuccess;

    ring->send = (struct tt_conn){.transport = comm->transports[ring->next],
                                  .peer = ring->next, .dir = TT_CONN_SEND,
                                  .slot_bytes = comm->slot_bytes};
    ring->recv = (struct tt_conn){.transport = comm->transports[ring->prev],
                                  .peer = ring->prev, .dir = TT_CONN_RECV,
                                  .slot_bytes = comm->slot_bytes};
    struct tt_conn_info *infos = NULL;
    ncclResult_t res = ncclSuccess;
    /* Per rank: [0] describes its send side, [1] its receive side. */
    TT_TRY(TT_CALLOC(&infos, 2 * (size_t)comm->st.nranks));
    struct tt_conn_info *mine = &infos[2 * comm->st.rank];
    TT_TRY_GOTO(ring->send.transport->setup(&comm->tctx, &ring->send, &mine[0]), res, out);
    TT_TRY_GOTO(ring->recv.transport->setup(&comm->tctx, &ring->recv, &mine[1]), res, out);
    TT_TRY_GOTO(tt_bootstrap_allgather(comm->bootstrap, infos, 2 * sizeof *infos), res, out);
    uint64_t deadline = tt_deadline_after_ms(comm->st.timeout_ms);
    /* My send side pairs with my successor's receive side, and vice versa. */
    TT_TRY_GOTO(ring->send.transport->connect(&comm->tctx, &ring->send,
                                              &infos[2 * ring->next + 1], deadline),
                res, out);
    TT_TRY_GOTO(ring->recv.transport->connect(&comm->tctx, &ring->recv, &infos[2 * ring->prev],
                                              deadline),
                res, out);
    TT_INFO(TT_SUB_INIT, "ring: %d -> %d via %s, %d -> %d via %s, %zu-byte slots", comm->st.rank,
            ring->next, ring->send.transport->name, ring->prev, comm->st.rank,
            ring->recv.transport->name, comm->slot_bytes);
out:
    free(infos);
    return res;
}

/* Communicator ids: unique in the process, never reused. */
static _Atomic uint64_t next_comm_id = 1;

/* The registry of live communicators: a handle is checked by lookup, never by reading
 * memory that may already be freed. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm **registry;
static size_t registry_count, registry_cap;
/* Bumped by every registry change; a thread's cached positive lookup holds while it stands. */
static _Atomic uint64_t registry_gen = 1;
static _Thread_local const struct ncclComm *cached_comm __attribute__((tls_model("initial-exec")));
static _Thread_local uint64_t cached_gen __attribute__((tls_model("initial-exec")));


static ncclResult_t registry_add(struct ncclComm *comm)
{
    pthread_mutex_lock(&registry_lock);
    if (registry_count == registry_cap) {
        size_t cap = registry_cap ? 2 * registry_cap : 16;
        struct ncclComm **grown = realloc(registry, cap * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&registry_lock);
            return TT_ERROR(ncclSystemError, "out of memory registering a communicator");
        }
        registry = grown;
        registry_cap = cap;
    }
    registry[registry_count++] = comm;
    atomic_fetch_add_explicit(&registry_gen, 1, memory_order_acq_rel);
    pthread_mutex_unlock(&registry_lock);
    return ncclSuccess;
}

/* Removes `comm`; returns whether it was there. */
static bool registry_remove(const struct ncclComm *comm)
{
    bool found = false;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < registry_count; i++) {
        if (registry[i] == comm) {
            registry[i] = registry[--registry_count];
            atomic_fetch_add_explicit(&registry_gen, 1, memory_order_acq_rel);
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return found;
}

static bool registry_has(const struct ncclComm *comm)
{
    uint64_t gen = atomic_load_explicit(&registry_gen, memory_order_acquire);
    if (comm == cached_comm && gen == cached_gen) return true;
    bool found = false;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < registry_count && !found; i++) found = registry[i] == comm;
    gen = atomic_load_explicit(&registry_gen, memory_order_acquire);
    pthread_mutex_unlock(&registry_lock);
    if (found) {
        cached_comm = comm;
        cached_gen = gen;
    }
    return found;
}

static void comm_free(struct ncclComm *comm)
{
    if (comm == NULL) return;
    registry_remove(comm);
    if (comm->ring.send.transport) comm->ring.send.transport->close(&comm->ring.send);
    if (comm->ring.recv.transport) comm->ring.recv.transport->close(&comm->ring.recv);
    for (int r = 0; comm->p2p != NULL && r < comm->st.nranks; r++) {
        struct tt_p2p_peer *p = &comm->p2p[r];
        if (p->send.transport) p->send.transport->close(&p->send);
        if (p->recv.transport) p->recv.transport->close(&p->recv);
    }
    for (int r = 0; comm->tree != NULL && r < comm->st.nranks; r++) {
        struct tt_tree_link *l = &comm->tree[r];
        if (l->send.transport) l->send.transport->close(&l->send);
        if (l->recv.transport) l->recv.transport->close(&l->recv);
    }
    free(comm->p2p);
    free(comm->tree);
    free(comm->tree_tmp);
    free(comm->transports);
    for (int r = 0; comm->st.pidfds != NULL && r < comm->st.nranks; r++)
        if (comm->st.pidfds[r] >= 0) close(comm->st.pidfds[r]);
    free(comm->st.pidfds);
    if (comm->st.flight != NULL) pthread_mutex_destroy(&comm->st.flight->lock);
    free(comm->st.flight);
    tt_team_destroy(comm->team);
    free(comm->scratch.tmp);
    free(comm->scratch.send);
    free(comm->scratch.recv);
    tt_transport_ctx_fini(&comm->tctx);
    tt_bootstrap_destroy(comm->bootstrap);
    tt_redop_table_destroy(comm->redops);
    tt_mem_table_destroy(comm->regs);
    pthread_mutex_destroy(&comm->bootstrap_lock);
    pthread_mutex_destroy(&comm->tables_lock);
    free(comm->peers);
    free(comm);
}

/* Whether `id` is the one every rank derives from NCCL_COMM_ID (whose root rank 0 starts):
 * ids made by ncclGetUniqueId, split or shrink already have a running root. */
static bool id_is_comm_id(const ncclUniqueId *id)
{
    const char *comm_id = tt_param_comm_id();
    ncclUniqueId derived;
    if (comm_id[0] == '\0' || tt_bootstrap_id_from_string(comm_id, &derived) != ncclSuccess)
        return false;
    return memcmp(&derived, id, sizeof derived) == 0;
}

/* Whether init makes Tree's connections: where the cost model may pick Tree, across hosts, or
 * where NCCL_ALGO was set and allows it (within one host the model alone never picks it, and
 * the connections cost a FIFO each). Every rank sees the same host count and variables. */
static bool wants_tree(const struct ncclComm *comm)
{
    if (comm->st.nranks < 2 || (comm->nhosts <= 1 && !comm->tune.algo_forced)) return false;
    const enum tt_coll colls[] = {TT_COLL_ALLREDUCE, TT_COLL_BROADCAST, TT_COLL_REDUCE};
    for (int i = 0; i < 3; i++)
        if (comm->tune.algo_allowed[colls[i]][TT_ALGO_TREE]) return true;
    return false;
}

/* The communicator failed: its peers across sockets learn it at once from their connections
 * (the local team's mailboxes tell the others). Ring and Tree connections are made at init and
 * never change; point-to-point ones are looked at only when no other thread is making one. */
static void shutdown_conns(void *arg)
{
    struct ncclComm *comm = arg;
    struct tt_conn *fixed[2] = {&comm->ring.send, &comm->ring.recv};
    for (int i = 0; i < 2; i++)
        if (fixed[i]->transport && fixed[i]->transport->shutdown)
            fixed[i]->transport->shutdown(fixed[i]);
    for (int r = 0; comm->tree_ready && r < comm->st.nranks; r++) {
        struct tt_tree_link *l = &comm->tree[r];
        if (l->send_ready && l->send.transport->shutdown) l->send.transport->shutdown(&l->send);
        if (l->recv_ready && l->recv.transport->shutdown) l->recv.transport->shutdown(&l->recv);
    }
    if (pthread_mutex_trylock(&comm->bootstrap_lock) != 0) return;
    for (int r = 0; r < comm->st.nranks; r++) {
        struct tt_p2p_peer *p = &comm->p2p[r];
        if (p->send_ready && p->send.transport->shutdown) p->send.transport->shutdown(&p->send);
        if (p->recv_ready && p->recv.transport->shutdown) p->recv.transport->shutdown(&p->recv);
    }
    pthread_mutex_unlock(&comm->bootstrap_lock);
}

/* Everything init does after the communicator exists: bootstrap, peers, ring, barrier. */
static ncclResult_t comm_connect(struct ncclComm *comm, const ncclUniqueId *id)
{
    /* As in NCCL: with NCCL_COMM_ID every rank derives the same id, and rank 0 hosts the root. */
    if (comm->st.rank == 0 && id_is_comm_id(id)) TT_TRY(tt_bootstrap_root_start(id));
    TT_TRY(tt_bootstrap_create(id, comm->st.rank, comm->st.nranks, &comm->st.abort, &comm->bootstrap));
    comm->tctx.local_addr = *tt_bootstrap_local_addr(comm->bootstrap);
    TT_TRY(exchange_peer_info(comm));
    open_pidfds(comm);
    comm->st.spin_max = choose_spin_limit(comm);
    atomic_store(&comm->st.spin_limit, comm->st.spin_max);
    TT_TRY(tt_tune_init(&comm->tune));
    learn_shape(comm);
    TT_TRY(pick_transports(comm));
    TT_TRY(setup_team(comm));
    TT_TRY(connect_ring(comm));
    if (wants_tree(comm)) {
        TT_TRY(tt_connect_tree(comm));
        /* A non-root's partial result of Tree Reduce: at most half a FIFO. */
        size_t bytes = comm->slot_bytes * (TT_CONN_SLOTS / 2);
        comm->tree_tmp = malloc(bytes);
        if (comm->tree_tmp == NULL)
            return TT_ERROR(ncclSystemError, "out of memory for %zu bytes of Tree staging",
                            bytes);
        comm->tree_ready = true;
    }
    comm->st.on_fail = shutdown_conns;
    comm->st.on_fail_arg = comm;
    /* What the algorithms bind to; the engine's view of the team only where it spans. */
    if (comm->team_spans) comm->st.team = comm->team;
    comm->algo_env = (struct tt_algo_env){
        .ring_send = comm->st.nranks > 1 ? &comm->ring.send : NULL,
        .ring_recv = comm->st.nranks > 1 ? &comm->ring.recv : NULL,
        .tree = comm->tree_ready ? comm->tree : NULL,
        .tree_tmp = comm->tree_tmp,
        .team = comm->st.team,
        .scratch = &comm->scratch,
        .region = tt_mem_region,
    };
    /* Nobody returns before everyone is connected, so a failure anywhere fails init everywhere
     * instead of surfacing in the first collective. */
    TT_TRY(tt_bootstrap_barrier(comm->bootstrap));
    tt_team_unlink(comm->team); /* every peer has mapped it: nothing may leak in /dev/shm */
    TT_INFO(TT_SUB_INIT, "comm %p rank %d nranks %d pid %d ready", (void *)comm, comm->st.rank,
            comm->st.nranks, (int)getpid());
    return ncclSuccess;
}

/* The outermost ncclGroupEnd waits for the inits issued in the group through this. */
static ncclResult_t wait_ready(void *arg)
{
    return tt_comm_wait_ready(arg);
}

static void *init_main(void *arg)
{
    struct ncclComm *comm = arg;
    tt_log_set_rank(comm->st.rank);
    ncclResult_t res = comm_connect(comm, &comm->init_id);
    comm->st.init_result = res;
    if (res != ncclSuccess) tt_state_fail(&comm->st, res);
    atomic_store(&comm->st.phase, res == ncclSuccess ? TT_COMM_READY : TT_COMM_FAILED);
    return NULL;
}

/* SIGUSR1 dumps (TUTTI_DUMP_SIGNAL=1), set up by the first init that finds the variable. */
static pthread_once_t dump_once = PTHREAD_ONCE_INIT;
static void start_dump_signal(void);

ncclResult_t tt_comm_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                               const ncclConfig_t *config)
{
    struct ncclComm *comm = NULL;
    ncclResult_t res = ncclSuccess;
    *out = NULL;
    TT_TRY(tt_param_check());
    TT_TRY(tt_fault_init());
    if (tt_param_dump_signal() != 0) pthread_once(&dump_once, start_dump_signal);
    TT_TRY(TT_CALLOC(&comm, 1));
    comm->st.rank = rank;
    comm->st.nranks = nranks;
    comm->id = atomic_fetch_add(&next_comm_id, 1);
    comm->st.timeout_ms = tt_param_timeout_ms();
    comm->st.init_result = ncclSuccess;
    atomic_init(&comm->st.async_error, ncclSuccess);
    atomic_init(&comm->st.abort, 0);
    atomic_init(&comm->st.phase, TT_COMM_INITIALIZING);
    pthread_mutex_init(&comm->bootstrap_lock, NULL);
    pthread_mutex_init(&comm->tables_lock, NULL);
    TT_TRY_GOTO(TT_CALLOC(&comm->st.flight, 1), res, fail);
    pthread_mutex_init(&comm->st.flight->lock, NULL);
    comm->tctx.rank = rank;
    comm->tctx.nranks = nranks;
    comm->tctx.abort = &comm->st.abort;
    int64_t forced = tt_param_comm_blocking();
    comm->blocking = forced >= 0 ? forced != 0 : (config == NULL || config->blocking != 0);
    tt_log_set_rank(rank);
    TT_TRY_GOTO(choose_slot_bytes(&comm->slot_bytes), res, fail);
    TT_TRY_GOTO(TT_CALLOC(&comm->p2p, (size_t)nranks), res, fail);
    TT_TRY_GOTO(TT_CALLOC(&comm->tree, (size_t)nranks), res, fail);

    /* Nonblocking communicators, and inits issued inside a group (one thread may be
     * initialising several ranks), finish in the background. */
    bool in_group = tt_group_depth() > 0;
    if (comm->blocking && !in_group) {
        TT_TRY_GOTO(comm_connect(comm, id), res, fail);
        atomic_store(&comm->st.phase, TT_COMM_READY);
        TT_TRY_GOTO(registry_add(comm), res, fail);
        *out = comm;
        return ncclSuccess;
    }
    if (!comm->blocking) TT_TRY_GOTO(tt_stream_create(&comm->background), res, fail);
    comm->init_id = *id;
    TT_TRY_GOTO(registry_add(comm), res, fail);
    int err = pthread_create(&comm->init_thread, NULL, init_main, comm);
    if (err != 0) {
        res = TT_ERROR(ncclSystemError, "cannot start the init thread: %s", strerror(err));
        goto fail;
    }
    comm->init_thread_running = true;
    *out = comm;
    if (in_group) return tt_group_add_wait(wait_ready, comm);
    return ncclInProgress;
fail:
    comm_free(comm);
    return res;
}

ncclResult_t tt_comm_wait_ready(struct ncclComm *comm)
{
    if (comm->init_thread_running) {
        pthread_join(comm->init_thread, NULL);
        comm->init_thread_running = false;
    }
    return comm->st.init_result;
}

/* Communicators removed from the registry while another thread was still inside a call that
 * may touch them: freed once no thread is in a call any more (reap_zombies). */
static pthread_mutex_t zombies_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm **zombies;
static size_t nzombies, zombies_cap;

/* How long Destroy and Abort wait for other threads to leave their calls before leaving the
 * communicator to be freed later: Abort must return within a second. */
#define QUIESCE_NS 800000000ull

/* Joins the background init, waits for queued work on the communicator, frees it. */
static void comm_teardown(struct ncclComm *comm)
{
    tt_comm_wait_ready(comm);
    tt_stream_wait_comm_idle(comm);
    if (comm->background != NULL) tt_stream_destroy(comm->background);
    comm->background = NULL;
    comm_free(comm);
}

/* Frees the zombies, if no thread is in a call now (checked without waiting). */
static void reap_zombies(void)
{
    pthread_mutex_lock(&zombies_lock);
    if (nzombies > 0 && tt_call_quiesce(0)) {
        for (size_t i = 0; i < nzombies; i++) comm_teardown(zombies[i]);
        nzombies = 0;
    }
    pthread_mutex_unlock(&zombies_lock);
}

/* Frees a communicator already removed from the registry, once no other thread can be inside a
 * call that touches it; with the abort flag set, blocked calls leave within a sleep. A thread
 * still inside a call at the deadline leaves the communicator to reap_zombies. */
static void comm_release(struct ncclComm *comm)
{
    if (tt_call_quiesce(tt_time_ns() + QUIESCE_NS)) {
        comm_teardown(comm);
        reap_zombies();
        return;
    }
    TT_INFO(TT_SUB_INIT, "comm %p rank %d: another thread is still inside a call on it; freed "
                         "once it returns", (void *)comm, comm->st.rank);
    pthread_mutex_lock(&zombies_lock);
    if (nzombies == zombies_cap) {
        size_t cap = zombies_cap ? 2 * zombies_cap : 8;
        struct ncclComm **grown = realloc(zombies, cap * sizeof *grown);
        if (grown != NULL) {
            zombies = grown;
            zombies_cap = cap;
        }
    }
    /* Out of memory for the list: the communicator is leaked rather than freed under a user. */
    if (nzombies < zombies_cap) zombies[nzombies++] = comm;
    pthread_mutex_unlock(&zombies_lock);
}

ncclResult_t tt_comm_destroy(ncclComm_t comm)
{
    TT_INFO(TT_SUB_INIT, "comm %p rank %d destroyed", (void *)comm, comm->st.rank);
    registry_remove(comm);
    comm_release(comm);
    return ncclSuccess;
}

ncclResult_t tt_comm_abort(ncclComm_t comm)
{
    /* The flag makes the init thread, the engine and every waiter give up within one sleep. */
    atomic_store(&comm->st.abort, 1);
    registry_remove(comm);
    comm_release(comm);
    return ncclSuccess;
}

ncclResult_t tt_comm_revoke(ncclComm_t comm)
{
    atomic_store(&comm->st.revoked, 1);
    tt_stream_wait_comm_idle(comm);
    return ncclSuccess;
}

ncclResult_t tt_comm_finalize(ncclComm_t comm)
{
    if (comm->st.finalized)
        return TT_ERROR(ncclInvalidArgument, "ncclCommFinalize: rank %d's communicator is "
                                             "already finalized", comm->st.rank);
    TT_TRY(tt_comm_wait_ready(comm));
    tt_stream_wait_comm_idle(comm);
    comm->st.finalized = true;
    return comm->st.async_error;
}

ncclResult_t tt_comm_check(ncclComm_t comm, const char *caller)
{
    if (comm == NULL) return TT_ERROR(ncclInvalidArgument, "%s: comm is NULL", caller);
    if (!registry_has(comm))
        return TT_ERROR(ncclInvalidArgument,
                        "%s: comm %p is not a live communicator (destroyed, or never created)",
                        caller, (void *)comm);
    return ncclSuccess;
}

int tt_comm_rank(ncclComm_t comm) { return comm->st.rank; }
int tt_comm_nranks(ncclComm_t comm) { return comm->st.nranks; }
ncclResult_t tt_comm_async_error(ncclComm_t comm)
{
    if (atomic_load(&comm->st.phase) == TT_COMM_INITIALIZING) return ncclInProgress;
    if (comm->st.async_error != ncclSuccess) return comm->st.async_error;
    if (comm->background != NULL && tt_stream_pending(comm->background) > 0) return ncclInProgress;
    return ncclSuccess;
}

ncclResult_t tt_comm_check_usable(ncclComm_t comm, const char *caller)
{
    return tt_state_check_usable(&comm->st, caller);
}

ncclResult_t tt_comm_dump(ncclComm_t comm)
{
    tt_state_flight_dump(&comm->st, "tuttiCommDump");
    return ncclSuccess;
}

/* ---- SIGUSR1: every communicator's stalled operations (TUTTI_DUMP_SIGNAL=1) ----------------- */

static int dump_pipe[2] = {-1, -1};

static void on_dump_signal(int sig)
{
    (void)sig;
    int saved = errno;
    char c = 1;
    ssize_t ignored = write(dump_pipe[1], &c, 1); /* async-signal-safe; a full pipe drops it */
    (void)ignored;
    errno = saved;
}

/* Waits for the signal handler's byte and dumps every live communicator. */
static void *dump_main(void *arg)
{
    (void)arg;
    char c;
    for (;;) {
        ssize_t n = read(dump_pipe[0], &c, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return NULL;
        pthread_mutex_lock(&registry_lock);
        for (size_t i = 0; i < registry_count; i++)
            tt_state_flight_dump(&registry[i]->st, "SIGUSR1");
        pthread_mutex_unlock(&registry_lock);
    }
}

static void start_dump_signal(void)
{
    if (pipe2(dump_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    /* The reader blocks; only the handler's end stays nonblocking. */
    fcntl(dump_pipe[0], F_SETFL, 0);
    pthread_t thread;
    if (pthread_create(&thread, NULL, dump_main, NULL) != 0) return;
    pthread_detach(thread);
    struct sigaction sa = {.sa_handler = on_dump_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    TT_INFO(TT_SUB_INIT, "SIGUSR1 dumps every communicator's stalled operations");
}
