/* Topology discovery and rank placement for the tools (tools/topo.h). */
#include "topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TUTTI_HAVE_HWLOC
#include <hwloc.h>
#endif

void tt_topo_free(struct tt_topo *topo)
{
    free(topo->core_package);
    free(topo->core_numa);
    free(topo->core_first_pu);
    free(topo->pu_os);
    memset(topo, 0, sizeof *topo);
}

static bool alloc_arrays(struct tt_topo *topo)
{
    topo->core_package = calloc((size_t)topo->cores + 1, sizeof(int));
    topo->core_numa = calloc((size_t)topo->cores + 1, sizeof(int));
    topo->core_first_pu = calloc((size_t)topo->cores + 1, sizeof(int));
    topo->pu_os = calloc((size_t)topo->pus + 1, sizeof(int));
    return topo->core_package && topo->core_numa && topo->core_first_pu && topo->pu_os;
}

/* Without hwloc: every online CPU a core of one package, NUMA unknown. */
static bool load_sysconf(struct tt_topo *topo, char *err, int err_bytes)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > TT_TOPO_MAX_PUS) n = TT_TOPO_MAX_PUS;
    topo->source = "sysconf";
    topo->packages = 1;
    topo->numa_nodes = 0;
    topo->cores = topo->pus = (int)n;
    if (!alloc_arrays(topo)) {
        snprintf(err, (size_t)err_bytes, "out of memory");
        return false;
    }
    for (int c = 0; c < topo->cores; c++) {
        topo->core_numa[c] = -1;
        topo->core_first_pu[c] = c;
        topo->pu_os[c] = c;
    }
    topo->core_first_pu[topo->cores] = topo->cores;
    return true;
}

#ifdef TUTTI_HAVE_HWLOC
static bool load_hwloc(struct tt_topo *topo, char *err, int err_bytes)
{
    const char *xml = getenv("TUTTI_TOPO_XML");
    const char *synthetic = getenv("TUTTI_TOPO_SYNTHETIC");
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0) {
        snprintf(err, (size_t)err_bytes, "hwloc_topology_init failed");
        return false;
    }
    topo->source = "hwloc";
    if (xml != NULL && *xml != '\0') {
        topo->source = "hwloc XML";
        if (hwloc_topology_set_xml(t, xml) != 0) {
            snprintf(err, (size_t)err_bytes, "TUTTI_TOPO_XML=%s: hwloc cannot read it", xml);
            hwloc_topology_destroy(t);
            return false;
        }
    } else if (synthetic != NULL && *synthetic != '\0') {
        topo->source = "hwloc synthetic";
        if (hwloc_topology_set_synthetic(t, synthetic) != 0) {
            snprintf(err, (size_t)err_bytes,
                     "TUTTI_TOPO_SYNTHETIC=%s: not an hwloc synthetic description (e.g. "
                     "\"pack:2 numa:1 core:4 pu:2\")", synthetic);
            hwloc_topology_destroy(t);
            return false;
        }
    }
    if (hwloc_topology_load(t) != 0) {
        snprintf(err, (size_t)err_bytes, "hwloc_topology_load failed");
        hwloc_topology_destroy(t);
        return false;
    }
    topo->packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
    topo->numa_nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    topo->pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    topo->l3_caches = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_L3CACHE);
    /* A machine whose cores hwloc cannot see: each PU stands for a core. */
    hwloc_obj_type_t core_type = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0
                                     ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    topo->cores = hwloc_get_nbobjs_by_type(t, core_type);
    if (topo->pus > TT_TOPO_MAX_PUS || topo->cores < 1 || !alloc_arrays(topo)) {
        snprintf(err, (size_t)err_bytes, "%d PUs, %d cores: not a topology Tutti can use",
                 topo->pus, topo->cores);
        hwloc_topology_destroy(t);
        return false;
    }
    int npu = 0;
    for (int c = 0; c < topo->cores; c++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(t, core_type, (unsigned)c);
        hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, core);
        topo->core_package[c] = pkg != NULL ? (int)pkg->logical_index : 0;
        int node_os = hwloc_bitmap_first(core->nodeset);
        hwloc_obj_t node = node_os >= 0 ? hwloc_get_numanode_obj_by_os_index(t, (unsigned)node_os)
                                        : NULL;
        topo->core_numa[c] = node != NULL ? (int)node->logical_index : -1;
        topo->core_first_pu[c] = npu;
        hwloc_obj_t pu = NULL;
        while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(t, core->cpuset, HWLOC_OBJ_PU,
                                                               pu)) != NULL &&
               npu < topo->pus)
            topo->pu_os[npu++] = (int)pu->os_index;
    }
    topo->core_first_pu[topo->cores] = npu;
    if (topo->packages < 1) topo->packages = 1;
    hwloc_topology_destroy(t);
    return true;
}
#endif

bool tt_topo_load(struct tt_topo *topo, char *err, int err_bytes)
{
    memset(topo, 0, sizeof *topo);
    err[0] = '\0';
    const char *xml = getenv("TUTTI_TOPO_XML"), *synthetic = getenv("TUTTI_TOPO_SYNTHETIC");
    bool replaced = (xml != NULL && *xml != '\0') || (synthetic != NULL && *synthetic != '\0');
#ifdef TUTTI_HAVE_HWLOC
    if (load_hwloc(topo, err, err_bytes)) return true;
    /* A replacement that fails is an error; the real machine falls back to the CPU count. */
    if (replaced) return false;
    tt_topo_free(topo);
#else
    if (replaced) {
        snprintf(err, (size_t)err_bytes, "TUTTI_TOPO_XML and TUTTI_TOPO_SYNTHETIC need a build "
                                         "with hwloc (libhwloc-dev)");
        return false;
    }
#endif
    return load_sysconf(topo, err, err_bytes);
}

/* The first of `n` items split into `parts` contiguous blocks as evenly as possible (the
 * earlier blocks get the extra ones): block `i` starts at ceil(i * n / parts). */
static int block_start(int i, int n, int parts)
{
    return (int)(((long long)i * n + parts - 1) / parts);
}

int tt_topo_place(const struct tt_topo *topo, int local_rank, int local_nranks,
                  struct tt_topo_place *where, int *pus, int max_pus)
{
    int npkg = topo->packages;
    int pkg = 0;
    while (pkg + 1 < npkg && block_start(pkg + 1, local_nranks, npkg) <= local_rank) pkg++;
    int first = block_start(pkg, local_nranks, npkg);
    int ranks_here = block_start(pkg + 1, local_nranks, npkg) - first;
    int i = local_rank - first;
    /* The package's cores: contiguous in hwloc's logical order. */
    int core0 = 0, ncores = 0;
    for (int c = 0; c < topo->cores; c++) {
        if (topo->core_package[c] != pkg) continue;
        if (ncores == 0) core0 = c;
        ncores++;
    }
    if (ncores == 0) { /* a package without cores (a broken description): use every core */
        core0 = 0;
        ncores = topo->cores;
    }
    int mine_first, mine_count;
    if (ranks_here <= ncores) {
        mine_first = block_start(i, ncores, ranks_here);
        mine_count = block_start(i + 1, ncores, ranks_here) - mine_first;
    } else { /* more ranks than cores: a core each, shared, spread evenly */
        mine_first = (int)((long long)i * ncores / ranks_here);
        mine_count = 1;
    }
    where->package = pkg;
    where->first_core = core0 + mine_first;
    where->ncores = mine_count;
    where->numa = topo->core_numa[where->first_core];
    int n = 0;
    for (int c = where->first_core; c < where->first_core + mine_count; c++)
        for (int p = topo->core_first_pu[c]; p < topo->core_first_pu[c + 1] && n < max_pus; p++)
            pus[n++] = topo->pu_os[p];
    return n;
}
