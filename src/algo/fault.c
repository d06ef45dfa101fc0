/* TUTTI_FAULT parsing and matching (algo/fault.h). */
#include "algo/fault.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "algo/algo.h"
#include "algo/coll.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

bool tt_fault_armed;

struct fault {
    int rank;
    int coll;
    uint64_t seq;
    uint64_t after_slices;
    enum tt_fault_point at; /* point=connect or point=team; TT_FAULT_AT_CHUNK: after_chunk */
    enum tt_fault_action action;
    bool fired;
};
static struct fault fault;

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static bool parsed;
static ncclResult_t parse_result = ncclSuccess;

static int coll_named(const char *name)
{
    static const struct {
        const char *name;
        int coll;
    } names[] = {{"allreduce", TT_COLL_ALLREDUCE}, {"broadcast", TT_COLL_BROADCAST},
                 {"reduce", TT_COLL_REDUCE},       {"allgather", TT_COLL_ALLGATHER},
                 {"reducescatter", TT_COLL_REDUCESCATTER}, {"send", TT_COLL_SEND},
                 {"recv", TT_COLL_RECV}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(name, names[i].name) == 0) return names[i].coll;
    return -1;
}

static ncclResult_t parse(const char *text, struct fault *f)
{
    char buf[256];
    if (strlen(text) >= sizeof buf)
        return TT_ERROR(ncclInvalidArgument, "TUTTI_FAULT is longer than %zu characters",
                        sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", text);
    f->rank = -1;
    f->coll = -1;
    bool have_seq = false, have_point = false;
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq == NULL)
            return TT_ERROR(ncclInvalidArgument, "TUTTI_FAULT: \"%s\" is not key=value", item);
        *eq = '\0';
        const char *key = item, *value = eq + 1;
        char *end = NULL;
        if (strcmp(key, "rank") == 0) {
            long v = strtol(value, &end, 10);
            if (*value == '\0' || *end != '\0' || v < 0 || v > 1 << 30)
                return TT_ERROR(ncclInvalidArgument, "TUTTI_FAULT: rank=%s", value);
            f->rank = (int)v;
        } else if (strcmp(key, "op") == 0) {
            f->coll = coll_named(value);
            if (f->coll < 0)
                return TT_ERROR(ncclInvalidArgument, "TUTTI_FAULT: op=%s is not allreduce, "
                                "broadcast, reduce, allgather, reducescatter, send or recv",
                                value);
        } else if (strcmp(key, "seq") == 0) {
            unsigned long long v = strtoull(value, &end, 10);
            if (*value == '\0' || *end != '\0' || v == 0)
                return TT_ERROR(ncclInvalidArgument, "TUTTI_FAULT: seq=%s (from 1)", value);
            f->seq = v;
            have_seq = true;
        } else if (strcmp(key, "point") == 0 && strcmp(value, "connect") == 0) {
            f->at = TT_FAULT_AT_CONNECT;
            have_point = true;
        } else if (strcmp(key, "point") == 0 && strcmp(value, "team") == 0) {
            f->at = TT_FAULT_AT_TEAM;
            have_point = true;
        } else if (strcmp(key, "point") == 0) {
            const char *k = strncmp(value, "after_chunk:", 12) == 0 ? value + 12 : NULL;
            unsigned long long v = k ? strtoull(k, &end, 10) : 0;
            if (k == NULL || *k == '\0' || *end != '\0' || v == 0)
                return TT_ERROR(ncclInvalidArgument,
                                "TUTTI_FAULT: point=%s is not after_chunk:K with K >= 1, "
                                "connect or team", value);
            f->after_slices = v;
            have_point = true;
        } else if (strcmp(key, "action") == 0) {
            static const char *const actions[] = {"", "exit", "stall", "close", "corrupt"};
            f->action = TT_FAULT_NONE;
            for (int a = 1; a < 5; a++)
                if (strcmp(value, actions[a]) == 0) f->action = (enum tt_fault_action)a;
            if (f->action == TT_FAULT_NONE)
                return TT_ERROR(ncclInvalidArgument, "TUTTI_FAULT: action=%s is not exit, "
                                "stall, close or corrupt", value);
        } else {
            return TT_ERROR(ncclInvalidArgument, "TUTTI_FAULT: unknown key \"%s\" (rank, op, "
                            "seq, point, action)", key);
        }
    }
    /* At connect, op and seq name nothing (the fault fires at the rank's first connection),
     * and only exit and stall mean anything. */
    bool at_init = f->at != TT_FAULT_AT_CHUNK;
    if (f->rank < 0 || (!at_init && (f->coll < 0 || !have_seq)) || !have_point ||
        f->action == TT_FAULT_NONE)
        return TT_ERROR(ncclInvalidArgument, "TUTTI_FAULT=\"%s\" lacks one of rank, op, seq, "
                        "point, action", text);
    if (at_init && f->action != TT_FAULT_EXIT && f->action != TT_FAULT_STALL)
        return TT_ERROR(ncclInvalidArgument, "TUTTI_FAULT=\"%s\": point=%s takes action=exit "
                        "or stall only", text, f->at == TT_FAULT_AT_TEAM ? "team" : "connect");
    return ncclSuccess;
}

ncclResult_t tt_fault_init(void)
{
    pthread_mutex_lock(&fault_lock);
    if (!parsed) {
        const char *text = tt_param_fault();
        if (text[0] != '\0') {
            parse_result = parse(text, &fault);
            tt_fault_armed = parse_result == ncclSuccess;
            if (tt_fault_armed)
                TT_WARN("TUTTI_FAULT=\"%s\": rank %d will fail on purpose", text, fault.rank);
        }
        parsed = true;
    }
    ncclResult_t res = parse_result;
    pthread_mutex_unlock(&fault_lock);
    if (res != ncclSuccess)
        return TT_ERROR(res, "TUTTI_FAULT=\"%s\" is malformed (see the message above)",
                        tt_param_fault());
    return ncclSuccess;
}

ncclResult_t tt_fault_parse(const char *text)
{
    struct fault scratch = {0};
    return parse(text, &scratch);
}

enum tt_fault_action tt_fault_due(const struct tt_op *op, uint64_t slices)
{
    if (op->rank != fault.rank || op->coll != fault.coll || op->desc.ticket + 1 != fault.seq ||
        slices != fault.after_slices)
        return TT_FAULT_NONE;
    pthread_mutex_lock(&fault_lock);
    bool first = !fault.fired;
    fault.fired = true;
    pthread_mutex_unlock(&fault_lock);
    return first ? fault.action : TT_FAULT_NONE;
}

void tt_fault_at(enum tt_fault_point at, int rank)
{
    if (fault.at != at || at == TT_FAULT_AT_CHUNK || rank != fault.rank) return;
    pthread_mutex_lock(&fault_lock);
    bool first = !fault.fired;
    fault.fired = true;
    pthread_mutex_unlock(&fault_lock);
    if (!first) return;
    /* A moment first, so that the peers are already waiting for this rank: at connect, the
     * peer that has this rank's description too, in its connect; at team, in the exchange. */
    usleep(300000);
    if (fault.action == TT_FAULT_EXIT) _exit(71);
    if (fault.action == TT_FAULT_STALL) raise(SIGSTOP);
}
