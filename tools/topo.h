/* The host's topology for the tools (tutti-info prints it, tutti-run places and pins ranks by
 * it): packages, NUMA nodes, cores and hardware threads (PUs) from hwloc when the build has it
 * (Debian's libhwloc-dev), else only the PU count from sysconf. The library itself does not
 * link hwloc: placement is the launcher's decision, made before a rank starts (as mpirun and
 * srun make it), and the kernel's first-touch policy then puts each rank's buffers and the FIFOs
 * it allocates on its own NUMA node (docs/observe.md, "Topology and placement").
 *
 * TUTTI_TOPO_XML (an hwloc XML file, as `lstopo file.xml` writes) or TUTTI_TOPO_SYNTHETIC (an
 * hwloc synthetic description such as "pack:2 numa:1 core:4 pu:2") replace the real machine,
 * so that placement can be tested for machines one does not have. */
#ifndef TUTTI_TOOLS_TOPO_H
#define TUTTI_TOOLS_TOPO_H

#include <stdbool.h>

#define TT_TOPO_MAX_PUS 1024

struct tt_topo {
    const char *source;  /* "hwloc", "hwloc synthetic", "hwloc XML" or "sysconf" */
    int packages;
    int numa_nodes;
    int cores;
    int pus;
    int l3_caches;       /* 0 when unknown */
    /* Per core (in hwloc's logical order, package by package): its package, its NUMA node
     * (-1: unknown), and its PUs' OS indices. */
    int *core_package;   /* [cores] */
    int *core_numa;      /* [cores] */
    int *core_first_pu;  /* [cores + 1]: core c's PUs are pu_os[core_first_pu[c] .. [c+1]) */
    int *pu_os;          /* [pus] */
};

/* Discovers the topology (or the replacement the variables name). Returns false with a message
 * in `err` when a replacement cannot be loaded; without hwloc, falls back to sysconf. */
bool tt_topo_load(struct tt_topo *topo, char *err, int err_bytes);
void tt_topo_free(struct tt_topo *topo);

/* Where local rank `local_rank` of `local_nranks` (the ranks of one host) runs: ranks are
 * spread over the packages in contiguous blocks (ring neighbours share a package; the ring
 * crosses between packages twice), as evenly as the counts allow, and within a package each
 * rank gets its own contiguous run of cores (several ranks share a core only when the package
 * has fewer cores than ranks). Fills the PUs' OS indices (at most max_pus) and returns how
 * many, with the package and the NUMA node of the first core. */
struct tt_topo_place {
    int package;
    int numa;
    int first_core;
    int ncores;
};
int tt_topo_place(const struct tt_topo *topo, int local_rank, int local_nranks,
                  struct tt_topo_place *where, int *pus, int max_pus);

#endif
