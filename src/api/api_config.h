/* Reading a user's ncclConfig_t, shared by every entry point that takes one (init, split,
 * shrink, scalable init). */
#ifndef TT_API_CONFIG_H
#define TT_API_CONFIG_H

#include "nccl.h"

/* Validates `config` (NULL means the defaults) into `out`, a full current-layout copy. A config
 * compiled against an older (smaller) or newer (larger) ncclConfig_t is accepted: the fields
 * this library knows are read when they lie within config->size, the others keep their
 * defaults. The GPU-only fields (CTAs, cgaClusterSize, netName, nvls...) are accepted and
 * ignored. A bad field is reported once, naming `caller`, as ncclInvalidArgument. */
ncclResult_t tt_api_read_config(const ncclConfig_t *config, const char *caller,
                                ncclConfig_t *out);

#endif
