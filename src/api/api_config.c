/* Reading a user's ncclConfig_t (see api_config.h). The first three fields (size, magic,
 * version) say which layout the program was compiled with; later NCCL versions only append
 * fields, so a copy of min(size, ours) bytes over the defaults reads every layout. */
#include "api/api_config.h"

#include <stddef.h>
#include <string.h>

#include "util/err.h"

#define CONFIG_MAGIC 0xcafebeefu
/* The oldest ncclConfig_t (NCCL 2.14) ends after netName; later versions only append fields. */
#define CONFIG_MIN_VERSION NCCL_VERSION(2, 14, 0)
#define CONFIG_MIN_BYTES (offsetof(ncclConfig_t, netName) + sizeof(const char *))

/* A boolean field of ncclConfig_t: unset, 0 or 1. */
static ncclResult_t check_config_flag(int value, const char *caller, const char *field)
{
    if (value != NCCL_CONFIG_UNDEF_INT && value != 0 && value != 1)
        return TT_ERROR(ncclInvalidArgument, "%s: config->%s is %d; it must be 0 or 1", caller,
                        field, value);
    return ncclSuccess;
}

/* An integer field of ncclConfig_t: unset, or within [lo, hi]. */
static ncclResult_t check_config_range(int value, int lo, int hi, const char *caller,
                                       const char *field)
{
    if (value != NCCL_CONFIG_UNDEF_INT && (value < lo || value > hi))
        return TT_ERROR(ncclInvalidArgument, "%s: config->%s is %d; it must lie in [%d, %d]",
                        caller, field, value, lo, hi);
    return ncclSuccess;
}

ncclResult_t tt_api_read_config(const ncclConfig_t *config, const char *caller,
                                ncclConfig_t *out)
{
    const ncclConfig_t defaults = NCCL_CONFIG_INITIALIZER;
    *out = defaults;
    if (config == NULL) return ncclSuccess;
    if (config->magic != CONFIG_MAGIC)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: config was not initialised with NCCL_CONFIG_INITIALIZER (magic "
                        "0x%x, want 0x%x)",
                        caller, config->magic, CONFIG_MAGIC);
    if (config->version < (unsigned)CONFIG_MIN_VERSION)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: config->version %u is older than the first ncclConfig_t (%d)",
                        caller, config->version, CONFIG_MIN_VERSION);
    if (config->size < CONFIG_MIN_BYTES)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: config->size %zu is smaller than any ncclConfig_t (%zu bytes)",
                        caller, config->size, (size_t)CONFIG_MIN_BYTES);
    size_t bytes = config->size < sizeof *out ? config->size : sizeof *out;
    memcpy(out, config, bytes);
    out->size = sizeof *out;
    TT_TRY(check_config_flag(out->blocking, caller, "blocking"));
    TT_TRY(check_config_flag(out->splitShare, caller, "splitShare"));
    TT_TRY(check_config_flag(out->shrinkShare, caller, "shrinkShare"));
    TT_TRY(check_config_flag(out->collnetEnable, caller, "collnetEnable"));
    TT_TRY(check_config_flag(out->nvlinkCentricSched, caller, "nvlinkCentricSched"));
    /* Fields Tutti accepts for compatibility but has no use for on CPUs are still checked, so
     * that a program that passes nonsense hears about it here as it would from NCCL. */
    /* As NCCL: a negative cluster size is refused, one above its maximum (8) capped. */
    if (out->cgaClusterSize > 8) out->cgaClusterSize = 8;
    TT_TRY(check_config_range(out->cgaClusterSize, 0, 8, caller, "cgaClusterSize"));
    TT_TRY(check_config_range(out->minCTAs, 1, 65535, caller, "minCTAs"));
    TT_TRY(check_config_range(out->maxCTAs, 1, 65535, caller, "maxCTAs"));
    /* trafficClass is the network's to interpret: NCCL passes any value on unchecked. */
    TT_TRY(check_config_range(out->nvlsCTAs, 1, 65535, caller, "nvlsCTAs"));
    TT_TRY(check_config_range(out->nChannelsPerNetPeer, 1, 65535, caller, "nChannelsPerNetPeer"));
    /* CTAPolicy is a set of NCCL_CTA_POLICY_* flags. */
    int policies = NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO;
    if (out->CTAPolicy != NCCL_CONFIG_UNDEF_INT && (out->CTAPolicy & ~policies) != 0)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: config->CTAPolicy is %d; it must be a combination of "
                        "NCCL_CTA_POLICY_DEFAULT, _EFFICIENCY and _ZERO (0 to %d)",
                        caller, out->CTAPolicy, policies);
    if (out->minCTAs != NCCL_CONFIG_UNDEF_INT && out->maxCTAs != NCCL_CONFIG_UNDEF_INT &&
        out->minCTAs > out->maxCTAs)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: config->minCTAs (%d) is larger than config->maxCTAs (%d)", caller,
                        out->minCTAs, out->maxCTAs);
    return ncclSuccess;
}
