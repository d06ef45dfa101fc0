/* The steps of communicator init (core/comm.c runs them in order): FIFO geometry, what every
 * rank tells every other (host, pid, start time, CPUs), pidfds of the peers on this host, the
 * shape of the job (hosts, ranks per host, the ring's slowest link), the transport towards each
 * peer from the transport table, the local team, and the ring. Every decision that selection
 * depends on is taken from allgathered facts, so every rank takes the same one. */
#include "core/setup.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "algo/fault.h"
#include "core/comm.h"
#include "device/device.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/time.h"

#define PEER_INFO_VERSION 4
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

/* Ranks with the same host hash share memory: the hostname, the kernel's boot id (so two
 * containers with one hostname on different machines differ) and the device of /dev/shm (so
 * two containers of one machine that share its hostname, as with host networking, but each
 * mount a /dev/shm of their own, where shared-memory segments cannot meet, differ too); or
 * NCCL_HOSTID alone when set, which the user vouches for. docs/hosts.md explains the rule. */
static uint64_t host_hash(void)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const char *forced = tt_param_hostid();
    if (forced[0] != '\0') {
        TT_INFO(TT_SUB_INIT, "host identity: NCCL_HOSTID=%s", forced);
        return fnv1a(h, forced, strlen(forced));
    }
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    h = fnv1a(h, host, strlen(host));
    char boot[64] = {0};
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, boot, sizeof boot - 1);
        if (n > 0) {
            boot[n] = '\0';
            h = fnv1a(h, boot, (size_t)n);
        }
        close(fd);
    }
    struct stat shm;
    uint64_t shm_dev = stat("/dev/shm", &shm) == 0 ? (uint64_t)shm.st_dev : 0;
    h = fnv1a(h, &shm_dev, sizeof shm_dev);
    boot[strcspn(boot, "\n")] = '\0';
    TT_INFO(TT_SUB_INIT, "host identity: hostname %s, boot id %s, /dev/shm device %llu",
            host, boot[0] != '\0' ? boot : "(unknown)", (unsigned long long)shm_dev);
    return h;
}

/* Bytes per FIFO slot: TUTTI_CHUNK_BYTES when set (a test knob), else NCCL_BUFFSIZE / 8. */
ncclResult_t tt_setup_slot_bytes(size_t *out)
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
void tt_setup_pidfds(struct ncclComm *comm)
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

/* A digest of the settings from which every rank must choose alike: the algorithm and protocol
 * (forced or by the cost model's inputs), the small-message and device thresholds, the
 * transports allowed, and the rooted check. A rank started with other values would pick another
 * algorithm or path for the same operation, and the ranks would wait for each other until the
 * deadline: compared at init instead (tt_setup_peers). */
static uint64_t choice_hash(int64_t shareable_bytes)
{
    const char *strs[] = {tt_param_algo(), tt_param_proto()};
    const int64_t ints[] = {tt_param_oneshot_bytes(),   tt_param_net_latency_ns(),
                            tt_param_net_mbps(),        tt_param_check_rooted(),
                            tt_param_shm_disable(),     tt_param_p2p_disable(),
                            tt_param_map_peers(),       tt_param_cma_cost(),
                            shareable_bytes,
                            tt_param_cuda_direct(),     tt_param_cuda_direct_bytes(),
                            tt_param_cuda_oneshot_bytes()};
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        for (const char *c = strs[i]; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
        h = (h ^ 0xff) * 0x100000001b3ull; /* between strings */
    }
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        for (int b = 0; b < 8; b++)
            h = (h ^ (((uint64_t)ints[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    return h;
}

ncclResult_t tt_setup_peers(struct ncclComm *comm)
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
    /* Read at each init, not cached: tutti.torch sets it in the process (python/tutti/torch). */
    int64_t shareable = tt_param_int_now(tt_param_find("TUTTI_SHAREABLE_BYTES"));
    comm->shareable_bytes = (size_t)shareable; /* compared in the hash */
    me->choice_hash = choice_hash(shareable);
    if (getrandom(&me->nonce, sizeof me->nonce, 0) != (ssize_t)sizeof me->nonce)
        me->nonce = tt_time_ns() ^ (uint64_t)getpid();
    TT_TRY(tt_bootstrap_allgather(comm->bootstrap, comm->peers, sizeof *me));
    for (int r = 0; r < comm->st.nranks; r++) {
        const struct tt_peer_info *p = &comm->peers[r];
        if (p->version != PEER_INFO_VERSION || p->rank != r)
            return TT_ERROR(ncclInvalidUsage,
                            "rank %d runs an incompatible Tutti (peer info version %u)", r,
                            p->version);
        if (p->choice_hash != me->choice_hash)
            return TT_ERROR(ncclInvalidUsage,
                            "ranks %d and %d were started with different settings among those "
                            "that choose algorithms and paths (NCCL_ALGO, NCCL_PROTO, "
                            "TUTTI_ONESHOT_BYTES, TUTTI_NET_LATENCY_NS, TUTTI_NET_MBPS, "
                            "TUTTI_CHECK_ROOTED, NCCL_SHM_DISABLE, NCCL_P2P_DISABLE, "
                            "TUTTI_MAP_PEERS, TUTTI_CMA_COST, TUTTI_SHAREABLE_BYTES, "
                            "TUTTI_CUDA_DIRECT*, "
                            "TUTTI_CUDA_ONESHOT_BYTES): ranks that chose differently would wait "
                            "for each other until the deadline; set them alike everywhere",
                            comm->st.rank, r);
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

/* Hier's shape (algo/algo.h, struct tt_hier_shape): hosts numbered by their lowest rank,
 * local indices by rank order; valid when every host holds the same number (>= 2) of ranks
 * and there are several hosts. From allgathered host hashes only, so every rank agrees. */
static ncclResult_t setup_hier(struct ncclComm *comm)
{
    int n = comm->st.nranks, me = comm->st.rank;
    struct tt_hier_shape *h = &comm->hier;
    *h = (struct tt_hier_shape){0};
    if (comm->nhosts < 2 || n % comm->nhosts != 0 || n / comm->nhosts < 2) return ncclSuccess;
    int L = n / comm->nhosts, H = comm->nhosts, hosts = 0;
    /* host[r] and local[r]: rank r's host index and its index within that host; cnt[k]: the
     * ranks of host k seen so far; hash[k]: host k's hash. */
    int *host = NULL;
    uint64_t *hash = NULL;
    TT_TRY(TT_CALLOC(&host, 3 * (size_t)n));
    ncclResult_t res = TT_CALLOC(&hash, (size_t)H);
    if (res != ncclSuccess) {
        free(host);
        return res;
    }
    int *local = host + n, *cnt = host + 2 * n;
    bool uniform = true;
    for (int r = 0; r < n && uniform; r++) {
        int k = 0;
        while (k < hosts && hash[k] != comm->peers[r].host_hash) k++;
        if (k == hosts) {
            if (hosts == H) break; /* cannot happen: nhosts counted the same hashes */
            hash[hosts++] = comm->peers[r].host_hash;
        }
        host[r] = k;
        local[r] = cnt[k]++;
        uniform = cnt[k] <= L;
    }
    if (uniform && hosts == H) {
        int mh = host[me], ml = local[me];
        h->nlocal = L;
        h->nhosts = H;
        h->local_rank = ml;
        h->host_rank = mh;
        for (int r = 0; r < n; r++) {
            if (host[r] == mh && local[r] == (ml + 1) % L) h->local_next = r;
            if (host[r] == mh && local[r] == (ml + L - 1) % L) h->local_prev = r;
            if (local[r] == ml && host[r] == (mh + 1) % H) h->rail_next = r;
            if (local[r] == ml && host[r] == (mh + H - 1) % H) h->rail_prev = r;
        }
        h->valid = true;
    }
    free(hash);
    free(host);
    return ncclSuccess;
}

/* The shape of the job, from allgathered facts only, so that every rank's cost model sees the
 * same values: hosts, ranks on this host, CPUs, and the slowest link of the ring, from the
 * transport each rank will pick towards its successor. */
ncclResult_t tt_setup_shape(struct ncclComm *comm)
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
    comm->net_alpha_us = (float)tt_param_net_latency_ns() / 1000.0f;
    comm->net_gbps = (float)tt_param_net_mbps() / 1000.0f;
    return setup_hier(comm);
}

/* The local team: the ranks of this host, whenever there are two or more of them and shared
 * memory is allowed, whatever else the communicator spans. Each member owns a mailbox every other
 * member maps (transport/team.h); members are numbered by communicator rank order. When the team
 * holds every rank, OneShot and Direct may run over it; cross-memory attach is used only if it
 * works between every pair, which the ranks agree on with one more allgather (selection must be
 * identical everywhere). Every rank takes part in the allgathers, in a team or not. */
ncclResult_t tt_setup_team(struct ncclComm *comm)
{
    int n = comm->st.nranks;
    int64_t slot = tt_param_oneshot_bytes();
    bool shm_ok = tt_param_shm_disable() == 0 && tt_param_p2p_disable() == 0;
    /* Every rank decides alike whether teams are formed: the variables are equal everywhere. */
    if (n < 2 || slot <= 0 || !shm_ok) return ncclSuccess;
    uint64_t mine = comm->peers[comm->st.rank].host_hash;
    bool in_team = comm->local_nranks >= 2;
    struct tt_team_info *all = NULL, *local = NULL;
    ncclResult_t res = ncclSuccess;
    TT_TRY(TT_CALLOC(&all, (size_t)n));
    TT_TRY_GOTO(TT_CALLOC(&local, (size_t)n), res, out);
    int me = 0;
    for (int r = 0; r < comm->st.rank; r++) me += comm->peers[r].host_hash == mine;
    /* Segment names must differ between the hosts' teams of one communicator, even where two
     * "hosts" (NCCL_HOSTID) share one machine. */
    if (in_team)
        TT_TRY_GOTO(tt_team_create(me, comm->local_nranks, comm->tctx.comm_hash ^ mine,
                                   (size_t)slot, &comm->team, &all[comm->st.rank]),
                    res, out);
    if (__builtin_expect(tt_fault_armed, 0) && in_team)
        tt_fault_at(TT_FAULT_AT_TEAM, comm->st.rank);
    TT_TRY_GOTO(tt_bootstrap_allgather(comm->bootstrap, all, sizeof *all), res, out);
    if (in_team) {
        int k = 0;
        for (int r = 0; r < n; r++)
            if (comm->peers[r].host_hash == mine) local[k++] = all[r];
        TT_TRY_GOTO(tt_team_attach(comm->team, local), res, out);
        /* Failures travel through the host's mailboxes also where the team does not span the
         * communicator (several hosts): a local peer's failure ends the waits on it at once. */
        if (comm->local_nranks < n) {
            TT_TRY_GOTO(TT_CALLOC(&comm->st.fail_member, (size_t)n), res, out);
            for (int r = 0, m = 0; r < n; r++)
                comm->st.fail_member[r] = comm->peers[r].host_hash == mine ? m++ : -1;
        }
        comm->st.fail_team = comm->team;
    }
    /* Each rank's cost of a cross-memory copy against memcpy (percent; 0: cross-memory attach
     * does not work), measured by each rank unless TUTTI_CMA_COST gives it, and its last-level
     * cache in KiB: the cost model's Direct rows use both, so the ranks agree on the mean of
     * the costs (integers summed in rank order) and the smallest cache, equal everywhere. */
    struct cma_fact {
        uint32_t cost_pct;
        uint32_t llc_kib;
    };
    _Static_assert(sizeof *all >= sizeof(struct cma_fact), "the team info holds a cma_fact");
    struct cma_fact *cma = (struct cma_fact *)(void *)all; /* reuse: one per rank */
    memset(cma, 0, (size_t)n * sizeof *cma);
    if (in_team && tt_team_cma_works(comm->team)) {
        int64_t given = tt_param_cma_cost();
        /* Measured only where Direct may run (the team spans the communicator). */
        uint32_t pct = given > 0                    ? (uint32_t)given
                       : comm->local_nranks == n ? tt_cma_cost_pct()
                                                   : 1;
        cma[comm->st.rank].cost_pct = pct > 0 ? pct : 1;
        cma[comm->st.rank].llc_kib = (uint32_t)(llc_bytes() >> 10);
    }
    TT_TRY_GOTO(tt_bootstrap_allgather(comm->bootstrap, cma, sizeof *cma), res, out);
    /* Every member attached before this allgather: the mailbox's name goes now, not at the
     * end of init, so that a rank killed during the rest of init leaves nothing in /dev/shm. */
    if (in_team) tt_team_unlink(comm->team);
    comm->team_spans = in_team && comm->local_nranks == n;
    if (!comm->team_spans) goto out;
    /* Direct publishes its addresses in the mailbox slot: a slot too small for them (a tiny
     * TUTTI_ONESHOT_BYTES) leaves Direct off. The slot size is equal everywhere (checked at
     * attach), so every rank agrees. */
    comm->direct_ok = (size_t)slot >= tt_direct_slot_bytes();
    uint64_t cost_sum = 0;
    uint32_t llc_kib = UINT32_MAX;
    for (int r = 0; r < n; r++) {
        comm->direct_ok &= cma[r].cost_pct != 0;
        cost_sum += cma[r].cost_pct;
        if (cma[r].llc_kib < llc_kib) llc_kib = cma[r].llc_kib;
    }
    comm->cma_cost_pct = comm->direct_ok ? (uint32_t)(cost_sum / (uint64_t)n) : 0;
    comm->llc_bytes = comm->direct_ok ? (size_t)llc_kib << 10 : 0;
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
    TT_INFO(TT_SUB_INIT | TT_SUB_SHM,
            "one host: OneShot mailboxes of %lld bytes, Direct %s%s; a cross-memory copy costs "
            "%u%% of a memcpy (%s), last-level cache %zu KiB",
            (long long)slot, comm->direct_ok ? "on (cross-memory attach)" : "off",
            comm->oversubscribed ? "; more ranks than CPUs" : "", comm->cma_cost_pct,
            tt_param_cma_cost() > 0 ? "TUTTI_CMA_COST" : "measured, mean of the ranks",
            comm->llc_bytes >> 10);
out:
    /* A failed init removes every local member's mailbox name, not only this rank's: one that
     * died in between (a failure here is usually a death) cannot remove its own. The others
     * fail their init too, so none still needs a name. */
    if (in_team && res != ncclSuccess)
        tt_team_unlink_all(comm->tctx.comm_hash ^ mine, comm->local_nranks);
    if (in_team && res == ncclSuccess && !comm->team_spans)
        TT_INFO(TT_SUB_INIT | TT_SUB_SHM, "local team of %d ranks (of %d) on this host",
                comm->local_nranks, n);
    free(local);
    free(all);
    return res;
}

/* The device-direct path (device/device.h): when the local team spans the communicator, each
 * GPU rank (a CUDA device was current at init) makes a device scratch and exports it; one
 * allgather tells everyone whether every rank offers one, then each maps the others', and a
 * second allgather agrees that every mapping worked (CUDA IPC between two devices needs peer
 * access). Anything short of that leaves the path off everywhere, and AllReduce on device buffers
 * is staged as before; TUTTI_CUDA_DIRECT=2 makes it an init error instead. Host builds skip it
 * all (no allgather). Every rank of a spanning team takes part in the allgathers. */
ncclResult_t tt_setup_device_team(struct ncclComm *comm)
{
    int64_t mode = tt_param_cuda_direct();
    if (!TT_DEVICE_DIRECT_BUILD || mode == 0 || !comm->team_spans) {
        if (mode == 2 && comm->st.nranks > 1)
            return TT_ERROR(ncclInvalidUsage,
                            "TUTTI_CUDA_DIRECT=2: the device-direct path needs a CUDA build and "
                            "every rank on one host with shared memory");
        return ncclSuccess;
    }
    int n = comm->st.nranks, me = comm->st.rank;
    if (n > TT_DEVICE_TEAM_MAX) {
        if (mode == 2)
            return TT_ERROR(ncclInvalidUsage, "TUTTI_CUDA_DIRECT=2: %d ranks, at most %d", n,
                            TT_DEVICE_TEAM_MAX);
        return ncclSuccess;
    }
    struct tt_device_team_info *all = NULL;
    ncclResult_t res = ncclSuccess;
    TT_TRY(TT_CALLOC(&all, (size_t)n));
    char why[160] = "";
    if (comm->cuda_device >= 0) {
        ncclResult_t r = tt_device_team_create(comm->cuda_device,
                                               (size_t)tt_param_cuda_direct_bytes(),
                                               &comm->dev_team, &all[me]);
        if (r != ncclSuccess) snprintf(why, sizeof why, "%s", tt_error_last());
    }
    TT_TRY_GOTO(tt_bootstrap_allgather(comm->bootstrap, all, sizeof *all), res, out);
    int offered = 0;
    for (int r = 0; r < n; r++) offered += all[r].ok != 0;
    uint8_t *attached = (uint8_t *)all; /* reuse: one byte per rank */
    if (offered == n) {
        ncclResult_t r = tt_device_team_attach(comm->dev_team, me, n, all);
        if (r != ncclSuccess) snprintf(why, sizeof why, "%s", tt_error_last());
        memset(attached, 0, (size_t)n);
        attached[me] = r == ncclSuccess;
        TT_TRY_GOTO(tt_bootstrap_allgather(comm->bootstrap, attached, 1), res, out);
        int ok = 0;
        for (int r2 = 0; r2 < n; r2++) ok += attached[r2] != 0;
        if (ok == n) {
            TT_INFO(TT_SUB_INIT, "device-direct path on: %d GPU ranks on this host map each "
                                 "other's %lld-byte device scratch (CUDA IPC)",
                    n, (long long)tt_param_cuda_direct_bytes());
            goto out;
        }
        if (why[0] == '\0') snprintf(why, sizeof why, "another rank could not map the scratch");
    } else if (why[0] == '\0') {
        snprintf(why, sizeof why, "%d of %d ranks are GPU ranks (a CUDA device current at init)",
                 offered, n);
    }
    tt_device_team_destroy(comm->dev_team);
    comm->dev_team = NULL;
    if (mode == 2)
        res = TT_ERROR(ncclInvalidUsage, "TUTTI_CUDA_DIRECT=2: the device-direct path is off: %s",
                       why);
    else
        TT_INFO(TT_SUB_INIT, "device-direct path off (device buffers are staged): %s", why);
out:
    free(all);
    return res;
}

/* Spinning only pays when every rank of this host has a core of its own: with more ranks than
 * cores a spinning waiter burns the time slice the rank it waits for needs. So unless TUTTI_SPIN
 * is set explicitly, an oversubscribed host yields at once. */
uint32_t tt_setup_spin_limit(const struct ncclComm *comm)
{
    int64_t spin = tt_param_spin();
    if (spin < 0) spin = 0;
    const char *spin_env = getenv("TUTTI_SPIN");
    if (spin_env != NULL && spin_env[0] != '\0') return (uint32_t)spin; /* empty: as unset */
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
ncclResult_t tt_setup_transports(struct ncclComm *comm)
{
    int n = comm->st.nranks;
    TT_TRY(tt_transport_check_net());
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
ncclResult_t tt_setup_ring(struct ncclComm *comm)
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
