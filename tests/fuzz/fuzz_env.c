/* libFuzzer harness for the environment: every variable of the parameter table (util/param.h)
 * set at once to values cut from the input at NUL bytes, then the range check, the value
 * listing and every integer getter; TUTTI_SECRET's "key:" form and its empty form
 * (bootstrap/auth.c: tt_bs_derive; a passphrase is left out, as each one costs an Argon2id run
 * of 64 MiB); and NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY through the interface choice. Each
 * must accept or return an error, never crash or read out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/proto.h"
#include "util/param.h"
#include "util/sock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int count = 0;
    const struct tt_param_desc *table = tt_param_table(&count);
    char value[256];
    size_t at = 0;
    for (int i = 0; i < count + 1; i++) {
        size_t n = 0;
        while (at < size && data[at] != 0 && n + 1 < sizeof value) value[n++] = (char)data[at++];
        value[n] = '\0';
        while (at < size && data[at] != 0) at++;
        if (at < size) at++;
        if (i == count) {
            /* The secret: "key:..." or empty only (see above). */
            uint8_t key[32];
            uint64_t magic;
            if (value[0] == '\0' || strncmp(value, "key:", 4) == 0)
                (void)tt_bs_derive(value, "127.0.0.1:1", key, &magic);
            break;
        }
        /* A value starting with 0x01 leaves its variable unset. */
        if (value[0] == 1) unsetenv(table[i].env);
        else setenv(table[i].env, value, 1);
    }
    /* NCCL_DEBUG_FILE would make the logger write files named by the input. */
    unsetenv("NCCL_DEBUG_FILE");
    setenv("NCCL_DEBUG", "NONE", 1);
    tt_param_reload();
    (void)tt_param_check();
    char text[512];
    for (int i = 0; i < count; i++) (void)tt_param_value_text(i, text, sizeof text);
#define TT_FUZZ_GET_INT(name) (void)tt_param_##name();
#define TT_FUZZ_GET_STR(name) (void)tt_param_##name();
#define TT_FUZZ_GET(name, env, type, def, lo, hi, doc) TT_FUZZ_GET_##type(name)
    TT_PARAMS(TT_FUZZ_GET)
#undef TT_FUZZ_GET
    struct sockaddr_storage addr;
    char ifname[TT_SOCK_IFNAME_BYTES];
    (void)tt_sock_pick_addr(&addr, ifname, sizeof ifname);
    return 0;
}
