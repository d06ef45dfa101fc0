/* Fault injection for tests (TUTTI_FAULT): makes one rank fail at a named point of a named
 * operation, so that every failure test is deterministic.
 *
 *   TUTTI_FAULT=rank=2,op=allreduce,seq=57,point=after_chunk:3,action=exit
 *
 * rank: the rank that fails (its rank in the communicator); op: the collective, by NCCL's name
 * without "nccl" (allreduce, broadcast, reduce, allgather, reducescatter, send, recv; any case);
 * seq: the operation's number on its lane, from 1 (the n-th collective of the communicator, or
 * the n-th send to one peer); point: after_chunk:K, once the operation has sent K slices
 * (K >= 1), or connect: at the rank's first exchange of point-to-point connections, once both
 * sides have posted their descriptions and 300 ms before it would attach to the peer's, or
 * team: in communicator init, 300 ms after the rank made its host mailbox and before the team's
 * exchange (op and seq are not matched at connect and team; actions exit and stall only);
 * action: exit (the process exits at once, as if killed), stall (it stops itself with
 * SIGSTOP, as if hung), close (its connection to the next rank is closed and the operation
 * fails), corrupt (the slice goes out with a wrong descriptor, as a confused or hostile peer's).
 * A malformed value fails communicator init with ncclInvalidArgument naming the bad part. */
#ifndef TT_ALGO_FAULT_H
#define TT_ALGO_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "nccl.h"

struct tt_op;

enum tt_fault_action { TT_FAULT_NONE, TT_FAULT_EXIT, TT_FAULT_STALL, TT_FAULT_CLOSE,
                       TT_FAULT_CORRUPT };

/* Whether TUTTI_FAULT names a fault (read once per process; one load on the data path). */
extern bool tt_fault_armed;

/* Parses TUTTI_FAULT (communicator init calls it); arms the fault when it is set. */
ncclResult_t tt_fault_init(void);
/* Checks a TUTTI_FAULT value without arming anything (tests, fuzzing). */
ncclResult_t tt_fault_parse(const char *text);
/* The action due now for `op`, which has just filled its `slices`-th slice (NONE mostly). */
enum tt_fault_action tt_fault_due(const struct tt_op *op, uint64_t slices);
/* Where a fault that names no operation fires (point=connect, point=team). */
enum tt_fault_point { TT_FAULT_AT_CHUNK, TT_FAULT_AT_CONNECT, TT_FAULT_AT_TEAM };
/* point=connect or team, at `at`: acts (exit, stall) when `rank` is the fault's, once. */
void tt_fault_at(enum tt_fault_point at, int rank);

#endif
