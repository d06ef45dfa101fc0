/* AlltoAll against its grouped Send/Recv form (docs/semantics.md, "Mismatched arguments"):
 * the engine's stall check calls in here (core/engine.c), on its slow path only.
 *
 * NCCL implements AlltoAll as grouped sends and receives, so a program may write one form on
 * some ranks and the other elsewhere. Here an AlltoAll runs over the host team (OneShot,
 * Direct) where it can, and a team collective and point-to-point operations never meet: each
 * side waits for the other, and no receiver has a descriptor to compare. So a stalled
 * point-to-point operation publishes, in its mailbox, which operation of which peer it waits
 * for (its ticket on that pair's lane: equal on both ends), its count and datatype, and whether
 * its batch holds the opposite operation with that peer alike (one block of the grouped form);
 * a connection exchange waiting for a peer's info does the same (core/connect.c). A team
 * AlltoAll stalled on a peer that has not reached it fails with ncclInvalidUsage when that
 * peer has waited, for FORMS_GRACE_NS, in a grouped Send and Recv of the AlltoAll's block
 * with this rank that this rank has not issued. The peer learns it through this rank's mailbox
 * (tt_state_gone_peer): its stalled operation, or its connection exchange, fails with the same
 * code and reason.
 *
 * Only that shape counts. A lone Send or Recv that waits for an operation its peer issues
 * after a collective is no proof of a mistake: the PyTorch backend runs point-to-point on
 * streams of their own, so that a pipeline stage may wait for a send its peer issues after an
 * asynchronous collective, as with NCCL's separate point-to-point communicators. Another
 * thread of this rank that issues the awaited operation meanwhile takes the lane's ticket (or
 * holds the bootstrap lock while it connects), and the grace covers the microseconds before
 * either. */
#include "core/forms.h"

#include "core/engine.h"
#include "transport/team.h"
#include "util/err.h"

#define FORMS_GRACE_NS 10000000ull

__attribute__((cold)) ncclResult_t tt_forms_check(const struct tt_task *t, struct tt_batch *b,
                                                  uint64_t now)
{
    const struct tt_comm_state *st = t->st;
    int found = -1;
    struct tt_team_p2p_wait w = {0};
    for (int p = 0; p < st->nranks && found < 0 && st->p2p_issued != NULL; p++) {
        struct tt_op_desc d;
        if (p == st->rank || (tt_team_peer_desc(st->team, p, &d) && d.ticket >= t->op.desc.ticket))
            continue; /* it reached this collective */
        if (tt_team_peer_p2p_wait(st->team, p, &w) && w.both_ways && w.count == t->op.count &&
            w.dtype == (int)t->op.redop.dtype &&
            !st->p2p_issued(st->on_fail_arg, p, w.peer_send, w.ticket))
            found = p;
    }
    if (found < 0 || found != b->forms_peer || b->forms_since_ns == 0) {
        b->forms_peer = found;
        b->forms_since_ns = found < 0 ? 0 : now;
        return ncclSuccess;
    }
    if (now - b->forms_since_ns < FORMS_GRACE_NS) return ncclSuccess;
    return TT_ERROR(ncclInvalidUsage,
                    "rank %d waits in grouped Send/Recv for %s #%llu of rank %d, which rank %d "
                    "has not issued, while rank %d runs AlltoAll #%llu over the host team: use "
                    "one form (AlltoAll or grouped Send/Recv) on every rank",
                    found, w.peer_send ? "Send" : "Recv", (unsigned long long)w.ticket + 1,
                    st->rank, st->rank, st->rank, (unsigned long long)t->seq);
}

bool tt_forms_both_ways(const struct tt_batch *b, const struct tt_task *t)
{
    int other = t->op.coll == TT_COLL_SEND ? TT_COLL_RECV : TT_COLL_SEND;
    for (const struct tt_task *u = b->head; u; u = u->next)
        if (u->op.coll == other && u->comm == t->comm && u->peer == t->peer &&
            u->op.count == t->op.count && u->op.redop.dtype == t->op.redop.dtype)
            return true;
    return false;
}

/* A stalled point-to-point task says in its mailbox what it waits for (see above): the task
 * whose peer waits for this rank, if one does (that peer runs the check), else the first. */
__attribute__((cold)) void tt_forms_publish_wait(const struct tt_batch *b, const struct tt_task *t,
                                                 bool *published)
{
    struct tt_team *team = t->st->team;
    if (t->peer == t->st->rank ||
        (*published && tt_team_peer_waiting(team, t->peer) != t->st->rank))
        return;
    struct tt_team_p2p_wait w = {.peer = t->peer, .peer_send = t->op.coll == TT_COLL_RECV,
                                 .ticket = t->ticket, .count = t->op.count,
                                 .dtype = (int)t->op.redop.dtype,
                                 .both_ways = tt_forms_both_ways(b, t)};
    tt_team_set_p2p_wait(team, &w);
    *published = true;
}
