/* Rank placement on machines this one is not (tools/topo.h): the topology comes from
 * TUTTI_TOPO_SYNTHETIC or TUTTI_TOPO_XML (tests/topo.cmake sets them: two packages with one or
 * two NUMA nodes each, and one package), and every local rank count from 1 to 3x the cores is
 * placed. The rules: ranks spread over the packages in contiguous blocks as evenly as possible;
 * while a package has at least as many cores as ranks, its ranks get disjoint runs of cores
 * that cover it; past that, one core each, shared as evenly as possible; a rank's CPUs are its
 * cores' PUs; its NUMA node is its first core's. One case is also checked against its layout
 * written out by hand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "topo.h"

static void check_layout(const struct tt_topo *t, int n)
{
    int *pus = malloc(TT_TOPO_MAX_PUS * sizeof *pus);
    int *core_users = calloc((size_t)t->cores, sizeof *core_users);
    int *per_pkg = calloc((size_t)t->packages, sizeof *per_pkg);
    int last_pkg = 0;
    for (int r = 0; r < n; r++) {
        struct tt_topo_place w;
        int npus = tt_topo_place(t, r, n, &w, pus, TT_TOPO_MAX_PUS);
        CHECK(w.package >= 0 && w.package < t->packages, "n=%d rank %d: package %d", n, r,
              w.package);
        CHECK(w.package >= last_pkg, "n=%d rank %d: package %d after %d (not contiguous)", n, r,
              w.package, last_pkg);
        last_pkg = w.package;
        per_pkg[w.package]++;
        CHECK(w.ncores >= 1, "n=%d rank %d: no core", n, r);
        int want_pus = 0;
        for (int c = w.first_core; c < w.first_core + w.ncores; c++) {
            CHECK_EQ_MSG(t->core_package[c], w.package, "n=%d rank %d core %d's package", n, r, c);
            core_users[c]++;
            for (int p = t->core_first_pu[c]; p < t->core_first_pu[c + 1]; p++, want_pus++)
                CHECK_EQ_MSG(pus[want_pus], t->pu_os[p], "n=%d rank %d PU %d", n, r, want_pus);
        }
        CHECK_EQ_MSG(npus, want_pus, "n=%d rank %d: PU count", n, r);
        CHECK_EQ_MSG(w.numa, t->core_numa[w.first_core], "n=%d rank %d: NUMA node", n, r);
    }
    int lo = n, hi = 0;
    for (int p = 0; p < t->packages; p++) {
        if (per_pkg[p] < lo) lo = per_pkg[p];
        if (per_pkg[p] > hi) hi = per_pkg[p];
    }
    CHECK(hi - lo <= 1, "n=%d: packages hold %d to %d ranks", n, lo, hi);
    for (int p = 0; p < t->packages; p++) {
        int cores = 0, used_lo = n, used_hi = 0;
        for (int c = 0; c < t->cores; c++) {
            if (t->core_package[c] != p) continue;
            cores++;
            if (core_users[c] < used_lo) used_lo = core_users[c];
            if (core_users[c] > used_hi) used_hi = core_users[c];
        }
        if (per_pkg[p] == 0) continue;
        if (per_pkg[p] <= cores)
            CHECK(used_lo == 1 && used_hi == 1, "n=%d package %d (%d ranks, %d cores): cores "
                  "used %d to %d times, want each once", n, p, per_pkg[p], cores, used_lo, used_hi);
        else
            CHECK(used_hi - used_lo <= 1, "n=%d package %d: cores shared %d to %d times", n, p,
                  used_lo, used_hi);
    }
    free(pus);
    free(core_users);
    free(per_pkg);
}

int main(void)
{
    struct tt_topo t;
    char err[256];
    if (!tt_topo_load(&t, err, sizeof err)) {
        printf("skipped: %s\n", err);
        return 77;
    }
    const char *expect = getenv("TOPO_EXPECT"); /* "packages numa cores pus" */
    if (expect != NULL) {
        int p, m, c, u;
        if (CHECK(sscanf(expect, "%d %d %d %d", &p, &m, &c, &u) == 4, "TOPO_EXPECT=%s", expect)) {
            CHECK_EQ(t.packages, p);
            CHECK_EQ(t.numa_nodes, m);
            CHECK_EQ(t.cores, c);
            CHECK_EQ(t.pus, u);
        }
    }
    for (int n = 1; n <= 3 * t.cores; n++) check_layout(&t, n);
    /* By hand: two packages of 4 cores of 2 PUs, 4 ranks: two cores each, in order. */
    if (t.packages == 2 && t.cores == 8 && t.pus == 16) {
        static const int want_first_pu[4] = {0, 4, 8, 12};
        for (int r = 0; r < 4; r++) {
            int pus[TT_TOPO_MAX_PUS];
            struct tt_topo_place w;
            int n = tt_topo_place(&t, r, 4, &w, pus, TT_TOPO_MAX_PUS);
            CHECK_EQ_MSG(n, 4, "rank %d of 4: PUs", r);
            CHECK_EQ_MSG(w.package, r / 2, "rank %d of 4: package", r);
            for (int i = 0; i < n; i++)
                CHECK_EQ_MSG(pus[i], want_first_pu[r] + i, "rank %d of 4: PU %d", r, i);
        }
    }
    printf("unit_topo_place: %s, %d packages, %d NUMA nodes, %d cores, %d PUs: %s\n", t.source,
           t.packages, t.numa_nodes, t.cores, t.pus, check_failures ? "FAILED" : "ok");
    tt_topo_free(&t);
    return check_failures ? 1 : 0;
}
