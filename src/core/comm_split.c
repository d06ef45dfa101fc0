/* Communicators made from communicators (split, shrink, grow) and several made at once (init all,
 * scalable init). Each new communicator is an ordinary one: its members agree on a fresh unique
 * id and call tt_comm_init_rank, so it owns its own bootstrap and transports and outlives its
 * parent. The parent only carries the agreement: its lowest member of the new group (new rank
 * 0) creates the id and sends it over the parent's bootstrap to the other members.
 *
 * Those messages use one tag per kind (split, shrink). The bootstrap matches messages by
 * (peer, tag) in sending order, and every rank runs the splits and shrinks of one parent in the
 * same order (as NCCL requires), so the k-th id a rank receives from a peer is always the one
 * that peer sent for the k-th operation they share.
 *
 * A grow is the one whose id does not come from new rank 0: the existing rank that called
 * ncclCommGetUniqueId (the coordinator) made it and handed it to the new ranks out of band, so
 * the existing ranks first find the coordinator (an allgather over the parent's bootstrap of
 * who holds an id) and then receive the id from it. Existing ranks keep their ranks. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/group.h"
#include "core/lifecycle.h"
#include "util/err.h"
#include "util/log.h"

#define SPLIT_ID_TAG 0x73706c74  /* "splt" */
#define SHRINK_ID_TAG 0x7368726b /* "shrk" */
#define GROW_ID_TAG 0x67726f77   /* "grow" */

/* What each rank of the parent tells the others in a split. */
struct split_entry {
    int32_t color;
    int32_t key;
    int32_t rank;
    int32_t refused; /* this rank's parent cannot be split: its error code (0: it can) */
};

/* tt_comm_init_rank's result, passed on as is: ncclInProgress is not an error (a nonblocking
 * config returns at once and finishes in the background). */
static ncclResult_t init_child(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                               const ncclConfig_t *config)
{
    int log_rank = tt_log_get_rank();
    ncclResult_t res = tt_comm_init_rank(out, nranks, id, rank, config);
    tt_log_set_rank(log_rank); /* init logs as the new rank; the caller still serves its own */
    if (res != ncclSuccess && res != ncclInProgress) tt_error_trail(res, __FILE__, __LINE__);
    return res;
}

/* The configuration of a communicator made from `parent`: `config`, or where that is NULL the
 * parent's own (NCCL: a NULL config inherits the parent's), of which Tutti keeps `blocking`. */
static const ncclConfig_t *child_config(const struct ncclComm *parent,
                                        const ncclConfig_t *config, ncclConfig_t *inherited)
{
    if (config != NULL) return config;
    *inherited = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
    inherited->blocking = parent->blocking ? 1 : 0;
    return inherited;
}

/* The new group's members are parent ranks members[0..n); this rank is members[newrank]. New
 * rank 0 creates the id and sends it to the others, who receive it from new rank 0. */
static ncclResult_t share_id(struct ncclComm *comm, const int *members, int n, int newrank,
                             int tag, ncclUniqueId *id)
{
    ncclResult_t res = ncclSuccess;
    if (newrank == 0) TT_TRY(tt_bootstrap_get_unique_id(id));
    pthread_mutex_lock(&comm->bootstrap_lock);
    if (newrank == 0) {
        for (int i = 1; i < n; i++)
            TT_TRY_GOTO(tt_bootstrap_send_sealed(comm->bootstrap, members[i], tag, id,
                                                 sizeof *id),
                        res, out);
    } else {
        TT_TRY_GOTO(tt_bootstrap_recv_sealed(comm->bootstrap, members[0], tag, id, sizeof *id),
                    res, out);
    }
out:
    pthread_mutex_unlock(&comm->bootstrap_lock);
    /* The root new rank 0 started ends now, not at its deadline: the members that did get the
     * id are told at once that the communicator cannot form. */
    if (res != ncclSuccess && newrank == 0) tt_bootstrap_root_cancel(id);
    return res;
}

/* Another rank's refusal (check_parent_or_refuse), passed on with its code. */
static ncclResult_t refused_by(const char *caller, const char *what, int rank, int32_t code)
{
    return TT_ERROR((ncclResult_t)code,
                    "%s: parent rank %d refused the %s (its communicator has failed or still "
                    "has operations in progress: its own error says which), so the %s fails "
                    "on every rank", caller, rank, what, what);
}

/* What new rank 0 of a shrink sends each survivor it counts: the id, and its survivor list as
 * a digest, so that a survivor which counted others (the exclude lists differ) says so. */
struct shrink_offer {
    ncclUniqueId id;
    uint64_t digest;
    int32_t n;
    int32_t refused; /* new rank 0's parent cannot shrink: its error code (0: it can) */
};

/* A survivor's answer to the offer, and new rank 0's verdict on all the answers. */
#define SHRINK_SAME 1
#define SHRINK_DIFFERS 0 /* a refusal answers its error code, negated */
struct shrink_verdict {
    int32_t rank;    /* the parent rank of the first survivor that differed, refused or was
                        gone, or -1 */
    int32_t refused; /* its error code when it refused or was gone, 0 when its list differed */
    int32_t gone;    /* 1: new rank 0 could not reach it (it died or left meanwhile) */
};

/* Shrinks are how a job leaves dead ranks behind, so another may die during one: a wait on a
 * survivor ends when its process ended (this host) or its bootstrap listener refuses
 * connections (tt_bootstrap_peer_gone), instead of at the deadline. A failed communicator does
 * not count: after a failure every survivor's has, and they are the ones shrinking. */
struct survivor_watch {
    struct ncclComm *comm;
    int peer;
};

static ncclResult_t watch_survivor(void *arg)
{
    const struct survivor_watch *w = arg;
    if (!tt_state_peer_died(&w->comm->st, w->peer) &&
        !tt_bootstrap_peer_gone(w->comm->bootstrap, w->peer))
        return ncclSuccess;
    return TT_ERROR(ncclRemoteError, "ncclCommShrink: parent rank %d, a survivor, is gone (its "
                    "process ended, or its bootstrap listener refuses connections) while parent "
                    "rank %d waited for it; shrink again without it", w->peer,
                    w->comm->st.rank);
}

static ncclResult_t recv_from_survivor(struct ncclComm *comm, int peer, void *data, size_t bytes,
                                       bool sealed)
{
    struct survivor_watch w = {.comm = comm, .peer = peer};
    if (!sealed)
        return tt_bootstrap_recv_watched(comm->bootstrap, peer, SHRINK_ID_TAG, data, bytes,
                                         watch_survivor, &w);
    return tt_bootstrap_recv_sealed_watched(comm->bootstrap, peer, SHRINK_ID_TAG, data, bytes,
                                            watch_survivor, &w);
}

static uint64_t members_digest(const int *members, int n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the ranks */
    for (int i = 0; i < n; i++) {
        uint32_t v = (uint32_t)members[i];
        for (int b = 0; b < 4; b++) h = (h ^ ((v >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    }
    return h;
}

/* share_id for a shrink. Only survivors take part, so nothing can be exchanged among all the
 * parent's ranks; instead new rank 0 offers the id with its survivor list, every survivor it
 * counts answers whether its own list is the same, and new rank 0 tells them all the verdict
 * (the parent rank of the first that differed, or -1). Exclude lists that differ then fail
 * every rank new rank 0 counts at once, with ncclInvalidUsage, instead of leaving them to wait
 * for the init's deadline; every message sent is received, so the parent's later splits and
 * shrinks still pair theirs. A survivor that refuses (`refusal`: its parent failed or is busy)
 * goes through the same exchange, its refusal in its offer or answer, and every rank fails
 * with its code. */
static ncclResult_t share_shrink_id(struct ncclComm *comm, const int *members, int n,
                                    int newrank, ncclResult_t refusal, ncclUniqueId *id)
{
    ncclResult_t res = ncclSuccess;
    struct shrink_offer offer = {.digest = members_digest(members, n), .n = n,
                                 .refused = newrank == 0 ? (int32_t)refusal : 0};
    struct shrink_verdict verdict = {.rank = -1};
    bool made_id = newrank == 0 && refusal == ncclSuccess;
    bool *gone = NULL;
    if (newrank == 0) TT_TRY(TT_CALLOC(&gone, (size_t)n));
    if (made_id) TT_TRY_GOTO(tt_bootstrap_get_unique_id(&offer.id), res, out_unlocked);
    pthread_mutex_lock(&comm->bootstrap_lock);
    struct tt_bootstrap *bs = comm->bootstrap;
    if (newrank == 0) {
        /* A survivor that cannot be reached (it died or left during the shrink) is skipped
         * from then on and named in the verdict, so that the others fail at once too. */
        for (int i = 1; i < n; i++) {
            ncclResult_t sent = tt_bootstrap_send_sealed(bs, members[i], SHRINK_ID_TAG, &offer,
                                                         sizeof offer);
            if (sent != ncclSuccess) gone[i] = true;
            if (sent != ncclSuccess && verdict.rank < 0)
                verdict = (struct shrink_verdict){.rank = members[i], .refused = (int32_t)sent,
                                                  .gone = 1};
        }
        for (int i = 1; i < n; i++) {
            int32_t answer = SHRINK_DIFFERS;
            if (gone[i]) continue;
            ncclResult_t got = recv_from_survivor(comm, members[i], &answer, sizeof answer,
                                                  false);
            if (got != ncclSuccess) gone[i] = true;
            if (got != ncclSuccess && verdict.rank < 0)
                verdict = (struct shrink_verdict){.rank = members[i], .refused = (int32_t)got,
                                                  .gone = 1};
            else if (got == ncclSuccess && answer != SHRINK_SAME && verdict.rank < 0)
                verdict = (struct shrink_verdict){.rank = members[i],
                                                  .refused = answer < 0 ? -answer : 0};
        }
        for (int i = 1; i < n; i++)
            if (!gone[i])
                (void)tt_bootstrap_send(bs, members[i], SHRINK_ID_TAG, &verdict,
                                        sizeof verdict); /* a failure: gone since it answered */
    } else {
        struct shrink_offer got;
        TT_TRY_GOTO(recv_from_survivor(comm, members[0], &got, sizeof got, true), res, out);
        int32_t answer = refusal != ncclSuccess ? -(int32_t)refusal
                         : got.n == offer.n && got.digest == offer.digest ? SHRINK_SAME
                                                                          : SHRINK_DIFFERS;
        TT_TRY_GOTO(tt_bootstrap_send(bs, members[0], SHRINK_ID_TAG, &answer, sizeof answer),
                    res, out);
        TT_TRY_GOTO(recv_from_survivor(comm, members[0], &verdict, sizeof verdict, false), res,
                    out);
        offer.id = got.id;
        if (got.refused != 0)
            verdict = (struct shrink_verdict){.rank = members[0], .refused = got.refused};
    }
    if (refusal != ncclSuccess)
        res = refusal; /* check_parent's error stays this thread's last */
    else if (verdict.rank >= 0 && verdict.gone)
        res = TT_ERROR(ncclRemoteError, "ncclCommShrink: parent rank %d, a survivor, could not "
                       "be reached by new rank 0 (parent rank %d): it died or left during the "
                       "shrink, which fails on every rank; shrink again without it",
                       verdict.rank, members[0]);
    else if (verdict.rank >= 0 && verdict.refused != 0)
        res = refused_by("ncclCommShrink", "shrink", verdict.rank, verdict.refused);
    else if (verdict.rank >= 0)
        res = TT_ERROR(ncclInvalidUsage,
                       "ncclCommShrink: the surviving ranks passed different exclude lists "
                       "(parent rank %d's leaves other survivors than parent rank %d's, which "
                       "would be new rank 0); every surviving rank must pass the same list",
                       verdict.rank, members[0]);
    *id = offer.id;
out:
    pthread_mutex_unlock(&comm->bootstrap_lock);
out_unlocked:
    free(gone);
    if (res != ncclSuccess && made_id) tt_bootstrap_root_cancel(&offer.id);
    return res;
}

static ncclResult_t allgather_entries(struct ncclComm *comm, struct split_entry *all)
{
    pthread_mutex_lock(&comm->bootstrap_lock);
    ncclResult_t res = tt_bootstrap_allgather(comm->bootstrap, all, sizeof *all);
    pthread_mutex_unlock(&comm->bootstrap_lock);
    return res;
}

/* The parent must be initialised, not finalized and idle (NCCL's rule for making communicators
 * from it). Its latched error stops a split and a default shrink; a shrink with
 * NCCL_SHRINK_ABORT is how a job leaves failed ranks behind, so it accepts a failed parent, and
 * so does any shrink of a revoked one (revoking is how a survivor stops its operations in
 * flight before it shrinks: docs/semantics.md, "Carrying on after a failure"). */
static ncclResult_t check_parent(struct ncclComm *comm, const char *caller, bool accept_failed,
                                 bool shrinking)
{
    bool revoked = shrinking && atomic_load(&comm->st.revoked);
    TT_TRY(tt_state_check_usable_as(&comm->st, caller, revoked));
    accept_failed |= revoked;
    ncclResult_t state = tt_comm_async_error(comm);
    if (state == ncclInProgress)
        return TT_ERROR(ncclInvalidUsage,
                        "%s: rank %d's communicator still has operations in progress; wait "
                        "until ncclCommGetAsyncError returns ncclSuccess",
                        caller, comm->st.rank);
    if (state != ncclSuccess && !accept_failed)
        return TT_ERROR(state,
                        "%s: rank %d's communicator has failed (error %d); only ncclCommShrink "
                        "with NCCL_SHRINK_ABORT makes a new communicator from it",
                        caller, comm->st.rank, (int)state);
    return ncclSuccess;
}

/* check_parent for a call whose exchange reaches the other ranks: a parent that cannot speak
 * (not initialised, destroyed) fails here, alone; one that may not be used now (failed, busy)
 * gives its refusal in *refusal, and the exchange carries it so that every rank fails with it
 * at once instead of waiting for this one until its deadline. */
static ncclResult_t check_parent_or_refuse(struct ncclComm *comm, const char *caller,
                                           bool accept_failed, bool shrinking,
                                           ncclResult_t *refusal)
{
    bool revoked = shrinking && atomic_load(&comm->st.revoked);
    TT_TRY(tt_state_check_usable_as(&comm->st, caller, revoked));
    *refusal = check_parent(comm, caller, accept_failed, shrinking);
    return ncclSuccess;
}

/* Members of a colour are ordered by key, ties by parent rank. */
static int compare_members(const void *a, const void *b)
{
    const struct split_entry *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Every rank sees every colour and every refusal, so a bad one fails the split on all ranks
 * alike instead of leaving the others waiting for the rank that gave up. */
static ncclResult_t check_colors(const struct ncclComm *comm, const struct split_entry *all)
{
    for (int r = 0; r < comm->st.nranks; r++)
        if (all[r].refused != 0 && r != comm->st.rank)
            return refused_by("ncclCommSplit", "split", r, all[r].refused);
    for (int r = 0; r < comm->st.nranks; r++) {
        int color = all[r].color;
        if (color >= 0 || color == NCCL_SPLIT_NOCOLOR) continue;
        if (r == comm->st.rank)
            return TT_ERROR(ncclInvalidArgument,
                            "ncclCommSplit: color %d is invalid: it must be >= 0 or "
                            "NCCL_SPLIT_NOCOLOR (%d)",
                            color, NCCL_SPLIT_NOCOLOR);
        return TT_ERROR(ncclInvalidArgument,
                        "ncclCommSplit: rank %d of the parent passed the invalid color %d (it "
                        "must be >= 0 or NCCL_SPLIT_NOCOLOR), so the split fails on every rank",
                        r, color);
    }
    return ncclSuccess;
}

static ncclResult_t split_now(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                              const ncclConfig_t *config)
{
    ncclResult_t res = ncclSuccess;
    struct split_entry *all = NULL;
    int *members = NULL;
    *newcomm = NULL;
    ncclResult_t refusal;
    TT_TRY(check_parent_or_refuse(comm, "ncclCommSplit", false, false, &refusal));
    TT_TRY(TT_CALLOC(&all, (size_t)comm->st.nranks));
    all[comm->st.rank] = (struct split_entry){.color = color, .key = key, .rank = comm->st.rank,
                                              .refused = (int32_t)refusal};
    res = allgather_entries(comm, all);
    if (refusal != ncclSuccess) {
        res = refusal; /* check_parent's error stays this thread's last */
        goto out;
    }
    TT_TRY_GOTO(res, res, out);
    TT_TRY_GOTO(check_colors(comm, all), res, out);
    if (color == NCCL_SPLIT_NOCOLOR) {
        TT_INFO(TT_SUB_INIT, "split: rank %d joins no new communicator (NCCL_SPLIT_NOCOLOR)",
                comm->st.rank);
        goto out;
    }

    /* Keep this colour's entries, in order, and find this rank among them. */
    int n = 0;
    for (int r = 0; r < comm->st.nranks; r++)
        if (all[r].color == color) all[n++] = all[r];
    qsort(all, (size_t)n, sizeof *all, compare_members);
    TT_TRY_GOTO(TT_CALLOC(&members, (size_t)n), res, out);
    int newrank = -1;
    for (int i = 0; i < n; i++) {
        members[i] = all[i].rank;
        if (all[i].rank == comm->st.rank) newrank = i;
    }
    TT_ASSERT(newrank >= 0);
    TT_INFO(TT_SUB_INIT, "split: parent rank %d color %d key %d becomes rank %d of %d",
            comm->st.rank, color, key, newrank, n);
    ncclUniqueId id;
    TT_TRY_GOTO(share_id(comm, members, n, newrank, SPLIT_ID_TAG, &id), res, out);
    ncclConfig_t inherited;
    res = init_child(newcomm, n, &id, newrank, child_config(comm, config, &inherited));
out:
    free(members);
    free(all);
    return res;
}

/* A split issued inside a group runs on a thread of its own, joined by the outermost
 * ncclGroupEnd (core/group.h, tt_group_add_wait): the group's splits meet their peers' all at
 * once, so one thread may split each of several ranks it drives (ncclCommInitAll's ranks in
 * one group, as with NCCL). *newcomm is written when the split ends. */
struct split_job {
    struct ncclComm *parent;
    int parent_rank;    /* for messages: the parent may be gone by the group's end */
    uint64_t ticket;    /* its turn among the parent's grouped splits (issue order) */
    _Atomic bool entered; /* the thread is inside its call scope */
    int color;
    int key;
    bool has_config;
    ncclConfig_t config;
    ncclComm_t *out;
    ncclResult_t res;
    char error[TT_REASON_BYTES];
    pthread_t thread;
};

static void *split_main(void *arg)
{
    /* Inside a call, as the split would be on the caller's thread: a Destroy or Abort of the
     * parent from another thread waits for it. The caller waits until it is (entered). */
    TT_CALL_SCOPE;
    struct split_job *j = arg;
    struct ncclComm *parent = j->parent;
    atomic_store(&j->entered, true);
    tt_log_set_rank(j->parent_rank);
    /* Two splits of one parent in one group use its bootstrap in issue order, as its other
     * ranks do: their messages pair up operation by operation. */
    pthread_mutex_lock(&parent->split_lock);
    while (parent->split_serving != j->ticket)
        pthread_cond_wait(&parent->split_turn, &parent->split_lock);
    pthread_mutex_unlock(&parent->split_lock);
    j->res = split_now(parent, j->color, j->key, j->out, j->has_config ? &j->config : NULL);
    if (j->res != ncclSuccess && j->res != ncclInProgress)
        snprintf(j->error, sizeof j->error, "%s", tt_error_last());
    pthread_mutex_lock(&parent->split_lock);
    parent->split_serving++;
    pthread_cond_broadcast(&parent->split_turn);
    pthread_mutex_unlock(&parent->split_lock);
    return NULL;
}

static ncclResult_t split_wait(void *arg, uint64_t tag)
{
    (void)tag;
    struct split_job *j = arg;
    pthread_join(j->thread, NULL);
    ncclResult_t res = j->res;
    if (res != ncclSuccess && res != ncclInProgress)
        res = TT_ERROR(res, "ncclCommSplit in a group (parent rank %d): %s", j->parent_rank,
                       j->error);
    free(j);
    /* A nonblocking child goes on initialising; its own ncclCommGetAsyncError tells. */
    return res == ncclInProgress ? ncclSuccess : res;
}

ncclResult_t tt_comm_split(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           const ncclConfig_t *config)
{
    *newcomm = NULL;
    if (tt_group_depth() == 0) return split_now(comm, color, key, newcomm, config);
    /* The rest of check_parent runs in split_now, which tells the other ranks of a refusal. */
    TT_TRY(tt_state_check_usable_as(&comm->st, "ncclCommSplit", false));
    struct split_job *j = NULL;
    TT_TRY(TT_CALLOC(&j, 1));
    *j = (struct split_job){.parent = comm, .parent_rank = comm->st.rank, .color = color,
                            .key = key, .out = newcomm, .has_config = config != NULL};
    if (config != NULL) j->config = *config;
    pthread_mutex_lock(&comm->split_lock);
    j->ticket = comm->split_next++;
    pthread_mutex_unlock(&comm->split_lock);
    int err = pthread_create(&j->thread, NULL, split_main, j);
    if (err != 0) {
        /* Its turn passes, so that a later split of the parent does not wait for it. */
        pthread_mutex_lock(&comm->split_lock);
        while (comm->split_serving != j->ticket)
            pthread_cond_wait(&comm->split_turn, &comm->split_lock);
        comm->split_serving++;
        pthread_cond_broadcast(&comm->split_turn);
        pthread_mutex_unlock(&comm->split_lock);
        free(j);
        ncclResult_t res = TT_ERROR(ncclSystemError, "ncclCommSplit: cannot start its thread in "
                                                     "a group: %s", strerror(err));
        tt_group_note_error(res);
        return res;
    }
    /* Until the thread is inside its call scope, this call is: the parent cannot be freed in
     * between by another thread's Abort. */
    while (!atomic_load(&j->entered)) sched_yield();
    ncclResult_t res = tt_group_add_wait(split_wait, j, 0);
    if (res != ncclSuccess) (void)split_wait(j, 0); /* not deferred after all: joined here */
    return res;
}

ncclResult_t tt_comm_shrink(ncclComm_t comm, const int *exclude_ranks, int exclude_count,
                            ncclComm_t *newcomm, const ncclConfig_t *config, int flags)
{
    ncclResult_t res = ncclSuccess;
    bool *excluded = NULL;
    int *members = NULL;
    *newcomm = NULL;
    /* With NCCL_SHRINK_ABORT the parent's operations end first, as NCCL aborts them: it is
     * revoked (what is queued on host streams or its own queue fails now, what runs fails at
     * its next check) and idle when the shrink starts. Only a parent that could be shrunk at
     * all (initialised, not aborted or finalized) is revoked: a refused call changes nothing. */
    if (flags & NCCL_SHRINK_ABORT) {
        TT_TRY(tt_state_check_usable_as(&comm->st, "ncclCommShrink", true));
        tt_comm_revoke(comm);
    }
    ncclResult_t refusal;
    TT_TRY(check_parent_or_refuse(comm, "ncclCommShrink", (flags & NCCL_SHRINK_ABORT) != 0, true,
                                  &refusal));
    /* Only the survivors call shrink, so they cannot exchange anything with all ranks: each
     * computes the survivor list from the exclude list, which they must all pass alike
     * (share_shrink_id checks it). */
    TT_TRY(TT_CALLOC(&excluded, (size_t)comm->st.nranks));
    TT_TRY_GOTO(TT_CALLOC(&members, (size_t)comm->st.nranks), res, out);
    for (int i = 0; i < exclude_count; i++) excluded[exclude_ranks[i]] = true;
    int n = 0, newrank = -1;
    for (int r = 0; r < comm->st.nranks; r++) {
        if (excluded[r]) continue;
        if (r == comm->st.rank) newrank = n;
        members[n++] = r;
    }
    TT_ASSERT(newrank >= 0);
    TT_INFO(TT_SUB_INIT, "shrink%s: parent rank %d becomes rank %d of %d (%d excluded)",
            (flags & NCCL_SHRINK_ABORT) ? " (abort)" : "", comm->st.rank, newrank, n,
            exclude_count);
    ncclUniqueId id;
    TT_TRY_GOTO(share_shrink_id(comm, members, n, newrank, refusal, &id), res, out);
    ncclConfig_t inherited;
    res = init_child(newcomm, n, &id, newrank, child_config(comm, config, &inherited));
out:
    free(members);
    free(excluded);
    return res;
}

ncclResult_t tt_comm_get_unique_id(ncclComm_t comm, ncclUniqueId *id)
{
    /* A grow's id is an ordinary fresh one (its own root and secret), made by the rank that
     * will hand it to the new ranks; the parent must be idle, as for the grow itself. */
    TT_TRY(check_parent(comm, "ncclCommGetUniqueId", false, false));
    TT_TRY(tt_bootstrap_get_unique_id(id));
    TT_INFO(TT_SUB_INIT, "grow: rank %d of %d made the id of the next grow", comm->st.rank,
            comm->st.nranks);
    return ncclSuccess;
}

/* What each existing rank tells the others in a grow. */
struct grow_entry {
    int32_t has_id; /* 1 on the coordinator (the rank that passed the id) */
    int32_t nranks;
    int32_t refused; /* this rank's parent cannot grow: its error code (0: it can) */
};

/* Every existing rank sees every entry, so a grow with no coordinator, several, or ranks that
 * disagree on the new size fails on all of them alike, before anyone waits for the new ranks. */
static ncclResult_t check_grow_entries(const struct ncclComm *comm,
                                       const struct grow_entry *all, int *coordinator)
{
    int me = comm->st.rank, n = comm->st.nranks, found = -1, count = 0;
    for (int r = 0; r < n; r++)
        if (all[r].refused != 0 && r != me)
            return refused_by("ncclCommGrow", "grow", r, all[r].refused);
    for (int r = 0; r < n; r++) {
        if (all[r].nranks != all[me].nranks)
            return TT_ERROR(ncclInvalidUsage,
                            "ncclCommGrow: rank %d passed nRanks %d but rank %d passed %d; every "
                            "rank must pass the same size",
                            me, (int)all[me].nranks, r, (int)all[r].nranks);
        if (all[r].has_id) {
            if (found < 0) found = r;
            count++;
        }
    }
    if (count != 1)
        return TT_ERROR(ncclInvalidUsage,
                        "ncclCommGrow: %d existing ranks passed a uniqueId; exactly one (the "
                        "rank that called ncclCommGetUniqueId) must, the others pass NULL",
                        count);
    *coordinator = found;
    return ncclSuccess;
}

ncclResult_t tt_comm_grow(ncclComm_t comm, int nranks, const ncclUniqueId *id, int rank,
                          ncclComm_t *newcomm, const ncclConfig_t *config)
{
    ncclResult_t res = ncclSuccess;
    *newcomm = NULL;
    if (comm == NULL) {
        /* A new rank: an ordinary init at the id the coordinator handed over. */
        TT_INFO(TT_SUB_INIT, "grow: new rank %d of %d joins", rank, nranks);
        return init_child(newcomm, nranks, id, rank, config);
    }
    struct grow_entry *all = NULL;
    ncclResult_t refusal;
    TT_TRY(check_parent_or_refuse(comm, "ncclCommGrow", false, false, &refusal));
    TT_TRY(TT_CALLOC(&all, (size_t)comm->st.nranks));
    all[comm->st.rank] = (struct grow_entry){.has_id = id != NULL, .nranks = nranks,
                                             .refused = (int32_t)refusal};
    pthread_mutex_lock(&comm->bootstrap_lock);
    res = tt_bootstrap_allgather(comm->bootstrap, all, sizeof *all);
    pthread_mutex_unlock(&comm->bootstrap_lock);
    if (refusal != ncclSuccess) res = refusal; /* check_parent's error stays the last */
    if (res != ncclSuccess) goto out;
    int coordinator = -1;
    TT_TRY_GOTO(check_grow_entries(comm, all, &coordinator), res, out);
    ncclUniqueId shared;
    if (id != NULL) shared = *id;
    pthread_mutex_lock(&comm->bootstrap_lock);
    if (comm->st.rank == coordinator) {
        for (int r = 0; r < comm->st.nranks && res == ncclSuccess; r++)
            if (r != coordinator)
                res = tt_bootstrap_send_sealed(comm->bootstrap, r, GROW_ID_TAG, &shared,
                                               sizeof shared);
    } else {
        res = tt_bootstrap_recv_sealed(comm->bootstrap, coordinator, GROW_ID_TAG, &shared,
                                       sizeof shared);
    }
    pthread_mutex_unlock(&comm->bootstrap_lock);
    if (res != ncclSuccess) goto out;
    TT_INFO(TT_SUB_INIT, "grow: rank %d of %d stays rank %d of %d (coordinator %d)",
            comm->st.rank, comm->st.nranks, comm->st.rank, nranks, coordinator);
    ncclConfig_t inherited;
    res = init_child(newcomm, nranks, &shared, comm->st.rank,
                     child_config(comm, config, &inherited));
out:
    free(all);
    return res;
}

/* One rank of ncclCommInitAll, run on a thread of its own. */
struct init_all_rank {
    ncclComm_t *out;
    const ncclUniqueId *id;
    int rank;
    int nranks;
    ncclResult_t res;
    char error[512]; /* the thread's error message: the last error is per thread */
};

static void *init_all_main(void *arg)
{
    struct init_all_rank *t = arg;
    t->res = tt_comm_init_rank(t->out, t->nranks, t->id, t->rank, NULL);
    if (t->res != ncclSuccess && t->res != ncclInProgress)
        snprintf(t->error, sizeof t->error, "%s", tt_error_last());
    return NULL;
}

ncclResult_t tt_comm_init_all(ncclComm_t *comms, int ndev)
{
    ncclResult_t res = ncclSuccess;
    struct init_all_rank *ranks = NULL;
    pthread_t *threads = NULL;
    int started = 0;
    for (int i = 0; i < ndev; i++) comms[i] = NULL;
    ncclUniqueId id;
    TT_TRY(tt_bootstrap_get_unique_id(&id));
    TT_TRY_GOTO(TT_CALLOC(&ranks, (size_t)ndev), res, out);
    TT_TRY_GOTO(TT_CALLOC(&threads, (size_t)ndev), res, out);
    /* Every rank must be running before any can finish: init is a rendezvous of all ndev. */
    for (; started < ndev; started++) {
        struct init_all_rank *t = &ranks[started];
        *t = (struct init_all_rank){.out = &comms[started], .id = &id, .rank = started,
                                    .nranks = ndev, .res = ncclSuccess};
        int err = pthread_create(&threads[started], NULL, init_all_main, t);
        if (err != 0) {
            res = TT_ERROR(ncclSystemError,
                           "ncclCommInitAll: starting the thread of rank %d of %d failed: %s",
                           started, ndev, strerror(err));
            /* The ranks already started learn at once that the job cannot form. */
            tt_bootstrap_root_cancel(&id);
            break;
        }
    }
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    /* With NCCL_COMM_BLOCKING=0 each init returns ncclInProgress and finishes in the
     * background; so does this call then. */
    bool in_progress = false;
    for (int i = 0; i < started && res == ncclSuccess; i++) {
        if (ranks[i].res == ncclInProgress)
            in_progress = true;
        else if (ranks[i].res != ncclSuccess)
            res = TT_ERROR(ranks[i].res, "ncclCommInitAll: rank %d of %d failed: %s", i, ndev,
                           ranks[i].error);
    }
    if (res == ncclSuccess && in_progress) res = ncclInProgress;
out:
    if (res != ncclSuccess && res != ncclInProgress) {
        for (int i = 0; i < ndev; i++) {
            if (comms[i] != NULL) tt_comm_destroy(comms[i], false);
            comms[i] = NULL;
        }
        tt_bootstrap_root_cancel(&id); /* nothing is left to wait for it */
    }
    free(threads);
    free(ranks);
    return res;
}

ncclResult_t tt_comm_init_rank_scalable(ncclComm_t *out, int nranks, int rank, int id_count,
                                        const ncclUniqueId *ids, const ncclConfig_t *config)
{
    /* One root serves every rank: the bootstrap's root only collects one address per rank and
     * hands out ring successors, so spreading that over several roots buys little at the
     * scale of host processes. ids[0] is the rendezvous; the other ids stay unused. */
    TT_INFO(TT_SUB_INIT, "scalable init: rank %d of %d meets at the first of %d ids", rank,
            nranks, id_count);
    /* The roots of the others, where this process made them, would wait for ranks that never
     * come (their deadline starts at the first rank): ended now. */
    for (int k = 1; k < id_count; k++) tt_bootstrap_root_cancel(&ids[k]);
    return init_child(out, nranks, &ids[0], rank, config);
}
