/* libFuzzer harness for the text parsers a user or a launcher feeds Tutti: NCCL_ALGO and
 * NCCL_PROTO (algo/tune_env.c), TUTTI_FAULT (algo/fault.c), the integer variables' range check
 * (util/param.c) and NCCL_COMM_ID's host:port (bootstrap). The input is cut at NUL bytes into
 * up to five values, one per parser; whatever they hold, each parser must either accept or
 * return an error, never crash, hang or read out of bounds (ASan and UBSan watch). Built and
 * run by tests/fuzz/run.sh. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/fault.h"
#include "algo/tune.h"
#include "bootstrap/bootstrap.h"
#include "util/param.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[5][512];
    size_t at = 0;
    for (int i = 0; i < 5; i++) {
        size_t n = 0;
        while (at < size && data[at] != 0 && n + 1 < sizeof text[i]) text[i][n++] = (char)data[at++];
        text[i][n] = '\0';
        while (at < size && data[at] != 0) at++; /* the rest of an overlong value */
        if (at < size) at++;
    }
    setenv("NCCL_ALGO", text[0], 1);
    setenv("NCCL_PROTO", text[1], 1);
    setenv("TUTTI_TIMEOUT_MS", text[3], 1);
    tt_param_reload();
    struct tt_tune tune;
    (void)tt_tune_init(&tune);
    (void)tt_fault_parse(text[2]);
    (void)tt_param_check();
    (void)tt_param_timeout_ms();
    ncclUniqueId id;
    (void)tt_bootstrap_id_from_string(text[4], &id);
    return 0;
}
