/* Communicator lifecycle: init (the steps of core/setup.c in order: bootstrap, peers, shape,
 * transports, local team, ring, Tree), the registry of live communicators, destroy and abort
 * (which free only once no thread is inside a call), finalize and revoke.
 * Any failure on the way frees what was built, through the same path as ncclCommDestroy. */
#include "core/comm.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/fault.h"
#include "core/connect.h"
#include "core/group.h"
#include "core/lifecycle.h"
#include "core/mem.h"
#include "core/redop.h"
#include "core/setup.h"
#include "core/stream.h"
#include "core/watch.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/time.h"
#include "util/trace.h"

/* Communicator ids: unique in the process, never reused. */
static _Atomic uint64_t next_comm_id = 1;

/* The registry of live communicators: a handle is checked by lookup, never by reading
 * memory that may already be freed. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm **registry;
static size_t registry_count, registry_cap;

/* Communicators removed from the registry while another thread was still inside a call that
 * may touch them: freed once no thread is in a call any more (reap_zombies). */
static pthread_mutex_t zombies_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm **zombies;
static size_t nzombies, zombies_cap;

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

/* Whether `comm` is registered with id `id` (its id is read only while it is registered). */
static bool registry_has_same(const struct ncclComm *comm, uint64_t id)
{
    bool same = false;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < registry_count && !same; i++)
        same = registry[i] == comm && comm->id == id;
    pthread_mutex_unlock(&registry_lock);
    return same;
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
    free(comm->st.fail_member);
    if (comm->st.flight != NULL) pthread_mutex_destroy(&comm->st.flight->lock);
    free(comm->st.flight);
    if (atomic_load(&comm->st.abort)) tt_watch_release_for_abort(comm); /* queued meanwhile */
    tt_mem_close_device_windows(comm);
    tt_device_team_destroy(comm->dev_team);
    tt_team_destroy(comm->team);
    free(comm->scratch.tmp);
    free(comm->scratch.send);
    free(comm->scratch.recv);
    tt_transport_ctx_fini(&comm->tctx);
    tt_bootstrap_destroy(comm->bootstrap);
    tt_redop_table_destroy(comm->redops);
    /* Registrations still held: moved back, unless the communicator was aborted or failed
     * (Abort returns within a second; moving may wait for queued operations and copies). */
    tt_mem_table_destroy(comm->regs, atomic_load(&comm->st.abort) || tt_state_stopped(&comm->st));
    pthread_mutex_destroy(&comm->bootstrap_lock);
    pthread_mutex_destroy(&comm->split_lock);
    pthread_cond_destroy(&comm->split_turn);
    pthread_mutex_destroy(&comm->tables_lock);
    free(comm->peers);
    tt_trace_close(comm->trace); /* writes the file: no thread records any more */
    free(comm);
}

/* Whether `id` is the one every rank derives from NCCL_COMM_ID (whose root rank 0 starts):
 * ids made by ncclGetUniqueId, split or shrink already have a running root. The derivation is
 * remembered for the NCCL_COMM_ID and TUTTI_SECRET it was made from: with a passphrase it is an
 * Argon2id run (about a second, 64 MiB), which every init of rank 0, splits included, would
 * otherwise repeat (found by review). */
static bool id_is_comm_id(const ncclUniqueId *id)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char seen_id[256];
    static uint64_t seen_secret; /* a hash: no copy of the secret is kept */
    static bool seen_ok;
    static ncclUniqueId seen;
    const char *comm_id = tt_param_comm_id();
    if (comm_id[0] == '\0') return false;
    uint64_t secret = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const char *c = tt_param_secret(); *c != '\0'; c++)
        secret = (secret ^ (uint8_t)*c) * 0x100000001b3ull;
    bool cacheable = strlen(comm_id) < sizeof seen_id;
    ncclUniqueId derived;
    bool ok;
    pthread_mutex_lock(&lock);
    if (cacheable && seen_id[0] != '\0' && strcmp(seen_id, comm_id) == 0 &&
        seen_secret == secret) {
        derived = seen;
        ok = seen_ok;
    } else {
        ok = tt_bootstrap_id_from_string(comm_id, &derived) == ncclSuccess;
        if (cacheable) {
            snprintf(seen_id, sizeof seen_id, "%s", comm_id);
            seen_secret = secret;
            seen = derived;
            seen_ok = ok;
        }
    }
    pthread_mutex_unlock(&lock);
    return ok && memcmp(&derived, id, sizeof derived) == 0;
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
    /* Hier runs over the same per-peer links. */
    return comm->hier.valid && comm->tune.algo_allowed[TT_COLL_ALLREDUCE][TT_ALGO_HIER];
}

/* A connection made and not closed since (TUTTI_FAULT's close, algo/prims.c, leaves a made
 * connection's transport NULL). */
static bool live(bool ready, const struct tt_conn *c)
{
    return ready && c->transport != NULL;
}

/* A receive connection's sender learns why this communicator failed (the thread that failed
 * it holds the reason), then the connection is shut down. */
static void end_recv(struct tt_conn *c, int code, const char *reason)
{
    if (c->transport->notify_back) c->transport->notify_back(c, code, reason);
    if (c->transport->shutdown) c->transport->shutdown(c);
}

/* The communicator failed: its peers across sockets learn it at once from their connections,
 * receive connections' senders with the reason (the local team's mailboxes tell the others).
 * Ring and Tree connections are made at init and never change; point-to-point ones are looked
 * at only when no other thread is making one. */
static void shutdown_conns(void *arg)
{
    struct ncclComm *comm = arg;
    int code = atomic_load(&comm->st.async_error);
    /* The failing thread's last error: the cause, except where a batch over several
     * communicators failed them all with one (it names the first one's operation). */
    const char *reason = tt_error_last();
    if (reason == NULL || reason[0] == '\0') reason = "its communicator failed";
    if (comm->ring.send.transport && comm->ring.send.transport->shutdown)
        comm->ring.send.transport->shutdown(&comm->ring.send);
    if (comm->ring.recv.transport) end_recv(&comm->ring.recv, code, reason);
    for (int r = 0; comm->tree_ready && r < comm->st.nranks; r++) {
        struct tt_tree_link *l = &comm->tree[r];
        if (live(l->send_ready, &l->send) && l->send.transport->shutdown)
            l->send.transport->shutdown(&l->send);
        if (live(l->recv_ready, &l->recv)) end_recv(&l->recv, code, reason);
    }
    if (pthread_mutex_trylock(&comm->bootstrap_lock) != 0) return;
    for (int r = 0; r < comm->st.nranks; r++) {
        struct tt_p2p_peer *p = &comm->p2p[r];
        if (live(p->send_ready, &p->send) && p->send.transport->shutdown)
            p->send.transport->shutdown(&p->send);
        if (live(p->recv_ready, &p->recv)) end_recv(&p->recv, code, reason);
    }
    pthread_mutex_unlock(&comm->bootstrap_lock);
}

/* A collective failed on this rank (its thread calls, before shutdown_conns): the peers at the
 * other end of the collectives' send connections read why, and fail with the same code (the
 * receive connections' senders learn it from shutdown_conns, which follows at once). */
static void tell_coll_peers(void *arg, ncclResult_t res, const char *reason)
{
    struct ncclComm *comm = arg;
    if (comm->ring.send.transport && comm->ring.send.transport->fail_notify)
        comm->ring.send.transport->fail_notify(&comm->ring.send, (int)res, reason);
    for (int r = 0; comm->tree_ready && r < comm->st.nranks; r++) {
        struct tt_tree_link *l = &comm->tree[r];
        if (live(l->send_ready, &l->send) && l->send.transport->fail_notify)
            l->send.transport->fail_notify(&l->send, (int)res, reason);
    }
}

/* Whether this rank issued its point-to-point operation `ticket` with `peer`: the lane has
 * handed out that ticket. An operation takes its ticket only after its batch has looked at its
 * connections under the bootstrap lock (core/dispatch.c), so while another thread holds that
 * lock, every operation counts as issued; the microseconds before and after it are covered by
 * the caller's grace (core/engine.c). */
static bool p2p_issued(void *arg, int peer, bool send, uint64_t ticket)
{
    struct ncclComm *comm = arg;
    if (peer < 0 || peer >= comm->st.nranks) return true;
    if (pthread_mutex_trylock(&comm->bootstrap_lock) != 0) return true;
    const struct tt_lane *lane = send ? &comm->p2p[peer].send_lane : &comm->p2p[peer].recv_lane;
    bool issued = atomic_load_explicit(&lane->next_ticket, memory_order_acquire) > ticket;
    pthread_mutex_unlock(&comm->bootstrap_lock);
    return issued;
}

/* Everything init does after the communicator exists: bootstrap, peers, ring, barrier. */
static ncclResult_t comm_connect(struct ncclComm *comm, const ncclUniqueId *id)
{
    /* As in NCCL: with NCCL_COMM_ID every rank derives the same id, and rank 0 hosts the root. */
    if (comm->st.rank == 0 && id_is_comm_id(id)) TT_TRY(tt_bootstrap_root_start(id));
    TT_TRY(tt_bootstrap_create(id, comm->st.rank, comm->st.nranks, &comm->st.abort,
                               &comm->bootstrap));
    comm->tctx.local_addr = *tt_bootstrap_local_addr(comm->bootstrap);
    TT_TRY(tt_setup_peers(comm));
    tt_setup_pidfds(comm);
    comm->st.spin_max = tt_setup_spin_limit(comm);
    atomic_store(&comm->st.spin_limit, comm->st.spin_max);
    TT_TRY(tt_tune_init(&comm->tune));
    TT_TRY(tt_setup_shape(comm));
    TT_TRY(tt_setup_transports(comm));
    TT_TRY(tt_setup_team(comm));
    TT_TRY(tt_setup_device_team(comm));
    TT_TRY(tt_setup_ring(comm));
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
    comm->st.on_coll_error = tell_coll_peers;
    comm->st.p2p_issued = p2p_issued;
    comm->st.on_fail_arg = comm;
    /* What the algorithms bind to; the engine's view of the team only where it spans. */
    if (comm->team_spans) comm->st.team = comm->team;
    comm->algo_env = (struct tt_algo_env){
        .ring_send = comm->st.nranks > 1 ? &comm->ring.send : NULL,
        .ring_recv = comm->st.nranks > 1 ? &comm->ring.recv : NULL,
        .tree = comm->tree_ready ? comm->tree : NULL,
        .tree_tmp = comm->tree_tmp,
        .hier = comm->hier,
        .net = comm->ring_link == TT_LINK_TCP && comm->nhosts > 1,
        .team = comm->st.team,
        .scratch = &comm->scratch,
        .region = tt_mem_region,
    };
    /* Nobody returns before everyone is connected, so a failure anywhere fails init everywhere
     * instead of surfacing in the first collective. */
    TT_TRY(tt_bootstrap_barrier(comm->bootstrap));
    if (comm->dev_team != NULL) tt_watch_device(comm);
    TT_INFO(TT_SUB_INIT, "comm %p rank %d nranks %d pid %d ready", (void *)comm, comm->st.rank,
            comm->st.nranks, (int)getpid());
    return ncclSuccess;
}

/* The outermost ncclGroupEnd waits for the inits issued in the group through this. */
/* A deferred init's wait at its group's end: another thread may have aborted or destroyed the
 * communicator since (a watchdog), which then joined its init itself. */
static ncclResult_t wait_ready(void *arg, uint64_t id)
{
    if (!registry_has_same(arg, id))
        return TT_ERROR(ncclInvalidUsage, "ncclGroupEnd: a communicator initialised in the group "
                                          "(%p) was destroyed or aborted before the group "
                                          "ended", arg);
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

/* A process that exits without destroying its communicators (or right after an abort left one
 * to be freed later) still writes their traces, from an exit handler: the runs that end
 * abruptly are the ones whose traces are wanted. */
static pthread_once_t trace_exit_once = PTHREAD_ONCE_INIT;
static void write_traces_at_exit(void)
{
    pthread_mutex_lock(&registry_lock);
    for (size_t k = 0; k < registry_count; k++) tt_trace_write_now(registry[k]->trace);
    pthread_mutex_unlock(&registry_lock);
    pthread_mutex_lock(&zombies_lock);
    for (size_t i = 0; i < nzombies; i++) tt_trace_write_now(zombies[i]->trace);
    pthread_mutex_unlock(&zombies_lock);
}
static void register_trace_exit(void)
{
    atexit(write_traces_at_exit);
}

/* NCCL_DEBUG=VERSION (and every level above it) names the library once per process, at the
 * first init, as NCCL does. */
static pthread_once_t version_once = PTHREAD_ONCE_INIT;
static void log_version(void)
{
    tt_log_at(TT_LOG_VERSION, TT_SUB_INIT, __FILE__, __LINE__, "Tutti %s (NCCL API %d.%d.%d)",
              TUTTI_VERSION_STRING, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
}

ncclResult_t tt_comm_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                               const ncclConfig_t *config)
{
    struct ncclComm *comm = NULL;
    ncclResult_t res = ncclSuccess;
    *out = NULL;
    TT_TRY(tt_param_check());
    TT_TRY(tt_fault_init());
    if (tt_param_dump_signal() != 0) tt_dump_signal_start();
    pthread_once(&version_once, log_version);
    TT_TRY(TT_CALLOC(&comm, 1));
    comm->st.rank = rank;
    comm->st.nranks = nranks;
    comm->id = atomic_fetch_add(&next_comm_id, 1);
    comm->st.timeout_ms = tt_param_timeout_ms();
    comm->st.check_rooted = tt_param_check_rooted() != 0;
    comm->st.init_result = ncclSuccess;
    atomic_init(&comm->st.async_error, ncclSuccess);
    atomic_init(&comm->st.abort, 0);
    atomic_init(&comm->st.phase, TT_COMM_INITIALIZING);
    pthread_mutex_init(&comm->bootstrap_lock, NULL);
    pthread_mutex_init(&comm->split_lock, NULL);
    pthread_cond_init(&comm->split_turn, NULL);
    pthread_mutex_init(&comm->tables_lock, NULL);
    TT_TRY_GOTO(TT_CALLOC(&comm->st.flight, 1), res, fail);
    pthread_mutex_init(&comm->st.flight->lock, NULL);
    TT_TRY_GOTO(tt_trace_create(&comm->trace, rank, nranks, comm->id), res, fail);
    if (comm->trace != NULL) pthread_once(&trace_exit_once, register_trace_exit);
    comm->tctx.rank = rank;
    comm->tctx.nranks = nranks;
    comm->tctx.abort = &comm->st.abort;
    comm->tctx.connect_check = tt_connect_check;
    comm->tctx.connect_check_arg = comm;
    /* A process that uses CUDA has its driver loaded by now (cudaSetDevice comes first, as
     * with NCCL): take it, and remember the device as NCCL does. */
    tt_device_probe(false);
    comm->cuda_device = tt_device_current();
    int64_t forced = tt_param_comm_blocking();
    comm->blocking = forced >= 0 ? forced != 0 : (config == NULL || config->blocking != 0);
    tt_log_set_rank(rank);
    TT_TRY_GOTO(tt_setup_slot_bytes(&comm->slot_bytes), res, fail);
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
    if (in_group) return tt_group_add_wait(wait_ready, comm, comm->id);
    return ncclInProgress;
fail:
    if (comm->background != NULL) tt_stream_destroy(comm->background); /* and its thread */
    comm->background = NULL;
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


/* How long Destroy and Abort wait for other threads to leave their calls before leaving the
 * communicator to be freed later: Abort must return within a second. */
#define QUIESCE_NS 800000000ull

/* Joins the background init, waits for queued work on the communicator, frees it. */
static void comm_teardown(struct ncclComm *comm)
{
    tt_comm_wait_ready(comm);
    if (tt_state_stopped(&comm->st)) tt_stream_cancel_comm(comm, &comm->st);
    tt_stream_wait_comm_idle(comm);
    if (comm->background != NULL) tt_stream_destroy(comm->background);
    comm->background = NULL;
    comm_free(comm);
}

/* Frees the zombies, if no thread is in a call now (checked without waiting), whose work has
 * ended: one destroyed (not aborted) may still have operations waiting for their peers, and
 * whoever releases another communicator must not wait for them (an Abort returns within a
 * second); it is freed by a later release. */
static void reap_zombies(void)
{
    pthread_mutex_lock(&zombies_lock);
    if (nzombies > 0 && tt_call_quiesce(0)) {
        size_t kept = 0;
        for (size_t i = 0; i < nzombies; i++) {
            struct ncclComm *z = zombies[i];
            if (tt_state_stopped(&z->st)) tt_stream_cancel_comm(z, &z->st);
            bool busy = tt_stream_comm_queued(z) ||
                        atomic_load(&z->st.phase) == TT_COMM_INITIALIZING;
            if (busy) zombies[kept++] = z;
            else comm_teardown(z);
        }
        nzombies = kept;
    }
    pthread_mutex_unlock(&zombies_lock);
}

/* Frees a communicator already removed from the registry, once no other thread can be inside a
 * call that touches it; with the abort flag set, blocked calls leave within a sleep. A thread
 * still inside a call at the deadline leaves the communicator to reap_zombies. */
static void comm_release_quiet(struct ncclComm *comm, uint64_t quiesce_by_ns)
{
    if (tt_call_quiesce(quiesce_by_ns)) {
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

/* The same, out of the call in an outermost Destroy or Abort (tt_call_step_out): another thread
 * releasing a communicator at the same time does not wait for this one, nor this one for it. */
static void comm_release(struct ncclComm *comm, bool outermost, uint64_t quiesce_by_ns)
{
    struct tt_call_rec *own = outermost ? tt_call_step_out() : NULL;
    comm_release_quiet(comm, quiesce_by_ns);
    tt_call_step_in(own);
}

size_t tt_comm_pick(bool (*want)(struct ncclComm *comm), struct ncclComm **out, size_t max,
                    size_t *cursor)
{
    size_t n = 0;
    pthread_mutex_lock(&registry_lock);
    for (size_t k = 0; k < registry_count && n < max; k++) {
        struct ncclComm *c = registry[(*cursor + k) % registry_count];
        if (want(c)) out[n++] = c;
    }
    if (registry_count > 0) *cursor = (*cursor + max) % registry_count;
    pthread_mutex_unlock(&registry_lock);
    return n;
}

ncclResult_t tt_comm_destroy(ncclComm_t comm, bool outermost)
{
    TT_INFO(TT_SUB_INIT, "comm %p rank %d destroyed", (void *)comm, comm->st.rank);
    tt_watch_settle_for_destroy(comm); /* still in the watchdog's sight */
    /* Whoever takes it out of the registry frees it: a concurrent ncclCommAbort (a watchdog's)
     * may have, and then this thread's call only has to end for that one to go on. */
    if (registry_remove(comm)) comm_release(comm, outermost, tt_time_ns() + QUIESCE_NS);
    return ncclSuccess;
}

ncclResult_t tt_comm_abort(ncclComm_t comm, bool outermost)
{
    /* Abort returns within a second: the device release below counts against the wait for
     * other threads (QUIESCE_NS from here, not from after it). */
    uint64_t quiesce_by = tt_time_ns() + QUIESCE_NS;
    /* The flag makes the init thread, the engine and every waiter give up within one sleep. */
    atomic_store(&comm->st.abort, 1);
    /* Device streams wait in the GPU, where no flag reaches: released here, before anything
     * else, since the teardown may wait for other threads first (and they for the streams). */
    tt_watch_release_for_abort(comm);
    /* else a concurrent destroy or abort frees it */
    if (registry_remove(comm)) comm_release(comm, outermost, quiesce_by);
    return ncclSuccess;
}

ncclResult_t tt_comm_revoke(ncclComm_t comm)
{
    atomic_store(&comm->st.revoked, 1);
    /* Its operations queued behind other work fail now, as at an abort, instead of when the
     * streams reach them (behind an operation that may only end at its deadline). */
    tt_stream_cancel_comm(comm, &comm->st);
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

ncclResult_t tt_comm_check_same(ncclComm_t comm, uint64_t id, const char *caller)
{
    if (!registry_has_same(comm, id))
        return TT_ERROR(ncclInvalidUsage, "%s: a communicator the group used (%p) was destroyed "
                                          "or aborted before the group ended", caller,
                        (void *)comm);
    return tt_state_check_usable_as(&comm->st, caller, false);
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
int tt_comm_cuda_device(ncclComm_t comm) { return comm->cuda_device; }
int tt_comm_nranks(ncclComm_t comm) { return comm->st.nranks; }
const char *tt_comm_fail_reason(ncclComm_t comm)
{
    /* The failing thread writes the reason just after it latched the error: a moment for it. */
    for (int i = 0; i < 1000 && tt_state_error(&comm->st) != ncclSuccess &&
                    !atomic_load_explicit(&comm->st.fail_reason_set, memory_order_acquire);
         i++)
        sched_yield();
    return tt_state_fail_reason(&comm->st);
}
ncclResult_t tt_comm_async_error(ncclComm_t comm)
{
    if (atomic_load(&comm->st.phase) == TT_COMM_INITIALIZING) return ncclInProgress;
    if (comm->st.async_error != ncclSuccess) return comm->st.async_error;
    /* A peer that released its device streams may have let this rank's device work past
     * data not yet there: said here at once (the watchdog releases the streams). */
    if (tt_watch_peer_failed(comm)) return comm->st.async_error;
    if (comm->background != NULL && (tt_stream_pending(comm->background) > 0 ||
                                     tt_stream_comm_in_background(comm)))
        return ncclInProgress;
    return ncclSuccess;
}

ncclResult_t tt_comm_stats(ncclComm_t comm, tuttiCommStat_t *rows, int max_rows, int *nrows)
{
    if (comm->trace == NULL)
        return TT_ERROR(ncclInvalidUsage, "tuttiCommStats: rank %d's communicator keeps no "
                                          "counters: set TUTTI_STATS=1 (or TUTTI_TRACE_FILE) "
                                          "before its init", comm->st.rank);
    struct tt_trace_stat stats[TT_TRACE_STATS];
    int n = tt_trace_stats(comm->trace, stats, TT_TRACE_STATS);
    for (int i = 0; i < n && i < max_rows; i++)
        rows[i] = (tuttiCommStat_t){.collective = stats[i].name, .algorithm = stats[i].algo,
                                    .ops = stats[i].ops, .bytes = stats[i].bytes,
                                    .timeNs = stats[i].ticks};
    *nrows = n;
    return ncclSuccess;
}

ncclResult_t tt_comm_dump(ncclComm_t comm)
{
    tt_state_flight_dump(&comm->st, "tuttiCommDump");
    return ncclSuccess;
}
