/* tutti-perf's command line: nccl-tests' flags (-b -e -f -i -n -w -c -o -d -r -z -a -R -t) and
 * tutti-perf's own (--json, --csv). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tutti-perf.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: tutti-run -n N tutti-perf [options]\n"
            "  -t, --collective NAME  all_reduce (default), all_gather, reduce_scatter,\n"
            "                         broadcast, reduce, alltoall, gather, scatter, sendrecv\n"
            "  -b, --minbytes SIZE    smallest size (default 32M); suffixes K, M, G\n"
            "  -e, --maxbytes SIZE    largest size (default 32M)\n"
            "  -f, --stepfactor F     multiply the size by F (default 2)\n"
            "  -i, --stepbytes SIZE   add SIZE instead of multiplying\n"
            "  -n, --iters N          timed calls per size (default 20)\n"
            "  -w, --warmup_iters N   untimed calls first (default 5)\n"
            "  -c, --check 0|1        check one call per size and form (default 1)\n"
            "  -o, --op OP            sum, prod, max, min, avg or all (default sum)\n"
            "  -d, --datatype TYPE    int8 uint8 int32 uint32 int64 uint64 half float double\n"
            "                         bfloat16 f8e4m3 f8e5m2, or all (default float)\n"
            "  -r, --root R           root of broadcast, reduce, gather, scatter (default 0)\n"
            "  -z, --blocking 0|1     accepted for nccl-tests compatibility\n"
            "  -a, --average 0..3     time shown: 0 rank 0, 1 average, 2 min, 3 max (default 1)\n"
            "  -R, --local_register 0|1|2\n"
            "                         1: register the ordinary send and receive buffers with\n"
            "                         ncclCommRegister (their pages move into memory peers map:\n"
            "                         no kernel copy); 2: buffers from ncclMemAlloc as symmetric\n"
            "                         windows (ncclCommWindowRegister), which also lets the cost\n"
            "                         model count on the mapping; with -G, windows over the\n"
            "                         device buffers, which every GPU rank maps (AllReduce reads\n"
            "                         and writes the peers' buffers in place)\n"
            "      --malloc           with -R 2: windows over ordinary (aligned_alloc) buffers,\n"
            "                         whose pages the registration moves, not ncclMemAlloc ones\n"
            "  -G, --device           CUDA builds: device buffers (cudaMalloc) on a CUDA stream,\n"
            "                         timed with CUDA events; prints the GPU's device-to-device\n"
            "                         copy bandwidth measured in the same run\n"
            "      --json FILE        also write the results as JSON\n"
            "      --csv              print CSV instead of the table\n"
            "  -h, --help             this text\n");
}

static bool parse_int(const char *text, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
        return false;
    }
    *out = (int)v;
    return true;
}

bool tp_parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"collective", required_argument, NULL, 't'},
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"stepbytes", required_argument, NULL, 'i'},
        {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'},
        {"check", required_argument, NULL, 'c'},
        {"op", required_argument, NULL, 'o'},
        {"datatype", required_argument, NULL, 'd'},
        {"root", required_argument, NULL, 'r'},
        {"blocking", required_argument, NULL, 'z'},
        {"average", required_argument, NULL, 'a'},
        {"local_register", required_argument, NULL, 'R'},
        {"json", required_argument, NULL, 'J'},
        {"csv", no_argument, NULL, 'C'},
        {"malloc", no_argument, NULL, 'M'},
        {"device", no_argument, NULL, 'G'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->min_bytes = 32u << 20;
    o->max_bytes = 32u << 20;
    o->step_factor = 2.0;
    o->iters = 20;
    o->warmup = 5;
    o->check = 1;
    o->average = 1;
    o->blocking = 1;
    o->coll = &tp_colls[0];
    o->dtypes[o->ndtypes++] = th_dtype_find(ncclFloat32);
    o->ops[o->nops++] = ncclSum;
    int ch;
    bool ok = true;
    while (ok && (ch = getopt_long(argc, argv, "t:b:e:f:i:n:w:c:o:d:r:z:a:R:Gh", longopts, NULL)) !=
                     -1) {
        switch (ch) {
        case 't':
            /* nccl-tests' name or the harness's ("allreduce"). */
            ok = false;
            for (size_t i = 0; i < tp_ncolls; i++) {
                if (strcasecmp(optarg, tp_colls[i].name) == 0 ||
                    strcasecmp(optarg, th_coll_name(tp_colls[i].model)) == 0) {
                    o->coll = &tp_colls[i];
                    ok = true;
                }
            }
            break;
        case 'b':
            ok = th_parse_size(optarg, &o->min_bytes);
            break;
        case 'e':
            ok = th_parse_size(optarg, &o->max_bytes);
            break;
        case 'f':
            o->step_factor = strtod(optarg, NULL);
            o->step_bytes = 0;
            ok = o->step_factor > 1.0;
            break;
        case 'i':
            ok = th_parse_size(optarg, &o->step_bytes) && o->step_bytes > 0;
            break;
        case 'n':
            ok = parse_int(optarg, 1, 1 << 30, &o->iters);
            break;
        case 'w':
            ok = parse_int(optarg, 0, 1 << 30, &o->warmup);
            break;
        case 'c':
            ok = parse_int(optarg, 0, 1, &o->check);
            break;
        case 'z':
            ok = parse_int(optarg, 0, 1, &o->blocking);
            break;
        case 'a':
            ok = parse_int(optarg, 0, 3, &o->average);
            break;
        case 'R':
            ok = parse_int(optarg, 0, 2, &o->local_register);
            break;
        case 'r':
            ok = parse_int(optarg, 0, 1 << 30, &o->root);
            break;
        case 'o':
            o->nops = 0;
            if (strcmp(optarg, "all") == 0) {
                for (int p = 0; p < TH_NUM_OPS; p++) {
                    o->ops[o->nops++] = (ncclRedOp_t)p;
                }
            } else {
                ok = th_op_parse(optarg, &o->ops[o->nops++]);
            }
            break;
        case 'd':
            o->ndtypes = 0;
            if (strcmp(optarg, "all") == 0) {
                for (int d = 0; d < TH_NUM_DTYPES; d++) {
                    o->dtypes[o->ndtypes++] = &th_dtypes[d];
                }
            } else {
                o->dtypes[o->ndtypes] = th_dtype_parse(optarg);
                ok = o->dtypes[o->ndtypes++] != NULL;
            }
            break;
        case 'J':
            o->json_path = optarg;
            break;
        case 'C':
            o->csv = true;
            break;
        case 'M':
            o->malloc_windows = true;
            break;
        case 'G':
            o->device = true;
            break;
        case 'h':
            usage(stdout);
            o->help = true;
            return false;
        default:
            ok = false;
            break;
        }
        if (!ok && ch != 'h' && ch != '?') {
            fprintf(stderr, "tutti-perf: bad value '%s' for -%c\n", optarg, ch);
        }
    }
    if (ok && o->device && (o->local_register == 1 || o->malloc_windows)) {
        fprintf(stderr, "tutti-perf: -G (device buffers) takes -R 2 only (symmetric windows "
                        "over the cudaMalloc buffers)\n");
        ok = false;
    }
    if (!ok || optind != argc || o->min_bytes > o->max_bytes) {
        usage(stderr);
        return false;
    }
    return true;
}
