/* A stand-in for NCCL 2.30's nccl.h, for tests/param_api.c: a program written for NCCL 2.30
 * must build against its header and run on libtutti. It is Tutti's nccl.h (NCCL 2.28's API)
 * with the version raised to 2.30 and the parameter API that 2.30 adds, declared as NVIDIA's
 * documentation gives it ("NCCL Parameter API": ncclParamBind, the ncclParamGet* accessors,
 * ncclParamGetParameter, ncclParamGetAllParameterKeys, ncclParamDumpAll). Not installed. */
#ifndef TUTTI_TEST_NCCL_230_H
#define TUTTI_TEST_NCCL_230_H

#include <stdint.h>

#include "../../include/nccl.h"

#undef NCCL_MINOR
#undef NCCL_PATCH
#undef NCCL_VERSION_CODE
#define NCCL_MINOR 30
#define NCCL_PATCH 7
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclParamHandle_st *ncclParamHandle_t;
ncclResult_t ncclParamBind(ncclParamHandle_t *out, const char *key);
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t *out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t *out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t *out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t *out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t *out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t *out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t *out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t *out);
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char **out);
ncclResult_t ncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len);
ncclResult_t ncclParamGetParameter(const char *key, const char **value, int *valueLen);
ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *tableLen);
void ncclParamDumpAll(void);

#ifdef __cplusplus
}
#endif

#endif
