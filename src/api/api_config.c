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
    return ncclSuccess;
}
