/* The ring pattern, as pure arithmetic: which chunk a rank handles at each step and with which
 * primitive. No I/O here, so the schedule can be checked exhaustively for every ring size
 * (tests/unit_ring.c) without any transport. Ring position equals rank. */
#ifndef TT_ALGO_RING_H
#define TT_ALGO_RING_H

#include <stddef.h>

#include "algo/algo.h"

static inline int tt_ring_mod(int a, int n) { return ((a % n) + n) % n; }

/* Ring all-reduce has 2n-1 steps: step 0 sends chunk (rank-1); step s in 1..n-2 receives chunk
 * (rank-1-s), reduces it with the local one and sends it on; step n-1 does the same for chunk
 * `rank`, which is then final, and also keeps it; steps n..2n-3 forward final chunks; the last
 * step only receives chunk (rank+1). Valid for n >= 2. */
static inline int tt_ring_allreduce_steps(int nranks) { return 2 * nranks - 1; }
static inline int tt_ring_allreduce_chunk(int rank, int nranks, int step)
{
    int s = step < nranks ? step : step - nranks;
    return tt_ring_mod(rank - 1 - s, nranks);
}
enum tt_prim_kind tt_ring_allreduce_prim(int nranks, int step, unsigned *flags);

/* Ring reduce-scatter is the first n steps of all-reduce, ending with the reduced chunk `rank`
 * stored locally instead of forwarded. */
static inline int tt_ring_reducescatter_chunk(int rank, int nranks, int step)
{
    return tt_ring_mod(rank - 1 - step, nranks);
}
enum tt_prim_kind tt_ring_reducescatter_prim(int nranks, int step, unsigned *flags);

/* Ring all-gather: step 0 stores and sends the own chunk; step s in 1..n-2 stores and forwards
 * chunk (rank-s); step n-1 only stores chunk (rank+1). */
static inline int tt_ring_allgather_chunk(int rank, int nranks, int step)
{
    return tt_ring_mod(rank - step, nranks);
}
enum tt_prim_kind tt_ring_allgather_prim(int nranks, int step);

/* Broadcast and reduce run along a chain: broadcast starts at the root, reduce ends at it. */
static inline int tt_ring_chain_pos(int rank, int nranks, int first)
{
    return tt_ring_mod(rank - first, nranks);
}

/* Splits the `loop_count` elements of one ring loop into n near-equal chunks: chunk c starts
 * at *off and holds *count elements (possibly 0 at the tail). */
static inline void tt_ring_loop_chunk(size_t loop_count, int nranks, int c, size_t *off,
                                      size_t *count)
{
    size_t piece = (loop_count + (size_t)nranks - 1) / (size_t)nranks;
    size_t start = piece * (size_t)c;
    *off = start;
    *count = start >= loop_count ? 0 : (loop_count - start < piece ? loop_count - start : piece);
}

/* Ring's cost estimate over `link` (OneShot compares itself with it). */
double tt_ring_estimate_us(const struct tt_tune_input *in, enum tt_link link);

#endif
