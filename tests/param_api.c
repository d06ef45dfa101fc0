/* NCCL 2.30's parameter API as a program written for NCCL 2.30 calls it: compiled against
 * tests/nccl-2.30/nccl.h (not tutti.h), linked with libtutti. It prints every parameter as
 * "KEY=value" (tests/param.cmake compares the lines with tutti-info's listing and with
 * ncclParamDumpAll's), and checks that each key's typed value agrees with its text and that
 * misuse is ncclInvalidArgument. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "check.h"

#if NCCL_VERSION_CODE < 23000
#error "compile against tests/nccl-2.30/nccl.h"
#endif

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "dump") == 0) {
        ncclParamDumpAll();
        return 0;
    }
    const char **keys = NULL;
    int nkeys = -1;
    CHECK_RES(ncclParamGetAllParameterKeys(&keys, &nkeys), ncclSuccess);
    CHECK(nkeys > 10 && keys != NULL, "%d keys", nkeys);
    for (int k = 0; keys != NULL && k < nkeys; k++) {
        const char *text = NULL;
        int len = -1;
        CHECK_RES(ncclParamGetParameter(keys[k], &text, &len), ncclSuccess);
        if (text == NULL) continue;
        CHECK_EQ_MSG(len, (int)strlen(text), "%s's length", keys[k]);
        char copy[4096];
        snprintf(copy, sizeof copy, "%s", text);
        printf("%s=%s\n", keys[k], copy);

        ncclParamHandle_t h = NULL;
        CHECK_RES(ncclParamBind(&h, keys[k]), ncclSuccess);
        const char *s = NULL;
        int64_t i64 = 0;
        ncclResult_t as_str = ncclParamGetStr(h, &s);
        ncclResult_t as_int = ncclParamGetI64(h, &i64);
        /* Exactly one of the two types. */
        CHECK((as_str == ncclSuccess) != (as_int == ncclSuccess), "%s: GetStr %d, GetI64 %d",
              keys[k], (int)as_str, (int)as_int);
        char bytes[4096];
        int need = -1;
        CHECK_RES(ncclParamGet(h, bytes, sizeof bytes, &need), ncclSuccess);
        if (as_str == ncclSuccess) {
            CHECK_STR(s, copy);
            CHECK_EQ_MSG(need, (int)strlen(copy) + 1, "%s: ncclParamGet's length", keys[k]);
            CHECK_STR(bytes, copy);
        } else {
            /* An integer's text is its value, unless the variable is set to something invalid
             * (then the getters use the default). */
            char *end;
            long long parsed = strtoll(copy, &end, 0);
            if (*end == '\0' && end != copy)
                CHECK_EQ_MSG(i64, parsed, "%s: GetI64 against the text %s", keys[k], copy);
            int64_t raw;
            memcpy(&raw, bytes, sizeof raw);
            CHECK_EQ_MSG(need, (int)sizeof(int64_t), "%s: ncclParamGet's length", keys[k]);
            CHECK_EQ_MSG(raw, i64, "%s: ncclParamGet against GetI64", keys[k]);
            int32_t i32;
            if (i64 >= INT32_MIN && i64 <= INT32_MAX) {
                CHECK_RES(ncclParamGetI32(h, &i32), ncclSuccess);
                CHECK_EQ_MSG(i32, i64, "%s: GetI32", keys[k]);
            }
            uint8_t u8;
            if (i64 < 0 || i64 > 255) CHECK_RES(ncclParamGetU8(h, &u8), ncclInvalidArgument);
            /* Too small a buffer: the length, and an error. */
            CHECK_RES(ncclParamGet(h, bytes, 4, &need), ncclInvalidArgument);
            CHECK_EQ(need, 8);
        }
    }
    /* Misuse. */
    ncclParamHandle_t h = NULL;
    CHECK_RES(ncclParamBind(&h, "NCCL_NO_SUCH_PARAMETER"), ncclInvalidArgument);
    CHECK(h == NULL, "an unknown key left a handle");
    CHECK_RES(ncclParamBind(NULL, "NCCL_DEBUG"), ncclInvalidArgument);
    CHECK_RES(ncclParamBind(&h, NULL), ncclInvalidArgument);
    int64_t v;
    CHECK_RES(ncclParamGetI64(NULL, &v), ncclInvalidArgument);
    CHECK_RES(ncclParamGetI64((ncclParamHandle_t)&v, &v), ncclInvalidArgument);
    CHECK_RES(ncclParamBind(&h, "NCCL_BUFFSIZE"), ncclSuccess);
    CHECK_RES(ncclParamGetI64(h, NULL), ncclInvalidArgument);
    const char *s;
    CHECK_RES(ncclParamGetStr(h, &s), ncclInvalidArgument);
    const char *text;
    int len;
    CHECK_RES(ncclParamGetParameter(NULL, &text, &len), ncclInvalidArgument);
    CHECK_RES(ncclParamGetParameter("NCCL_DEBUG", NULL, &len), ncclInvalidArgument);
    CHECK_RES(ncclParamGetParameter("NCCL_DEBUG", &text, NULL), ncclInvalidArgument);
    CHECK_RES(ncclParamGetParameter("NCCL_NO_SUCH_PARAMETER", &text, &len), ncclInvalidArgument);
    CHECK_RES(ncclParamGetAllParameterKeys(NULL, &len), ncclInvalidArgument);
    const char **keys2;
    CHECK_RES(ncclParamGetAllParameterKeys(&keys2, NULL), ncclInvalidArgument);
    int version;
    CHECK_RES(ncclGetVersion(&version), ncclSuccess);
    fprintf(stderr, "param_api: built against NCCL %d, library reports %d; %d keys\n",
            NCCL_VERSION_CODE, version, nkeys);
    return check_failures ? 1 : 0;
}
