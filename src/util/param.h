/* Parameters: every knob of Tutti is one line of TT_PARAMS below (name, environment variable,
 * type, default, one-line doc). The table generates the getters (tt_param_<name>()), the
 * listing of tutti-info and docs/env.md, so the three cannot disagree. NCCL's variable name is
 * used wherever NCCL has the knob. Values are read from the environment on first use and then
 * cached; tt_param_reload() forgets the cache (tests). Getters are thread-safe. */
#ifndef TT_UTIL_PARAM_H
#define TT_UTIL_PARAM_H

#include <stdint.h>

#include "nccl.h"

/* X(name, ENV_VARIABLE, type INT|STR, default, min, max, doc): an INT outside [min, max] (or not
 * an integer) is reported once at WARN and the default used, and fails communicator init
 * (tt_param_check); min and max are 0 for STR. */
#define TT_PARAMS(X)                                                                               \
    X(debug, "NCCL_DEBUG", STR, "WARN", 0, 0,                                                      \
      "Log level: NONE, VERSION, WARN, INFO, ABORT or TRACE")                                      \
    X(debug_subsys, "NCCL_DEBUG_SUBSYS", STR, "INIT,ENV,BOOTSTRAP", 0, 0,                          \
      "Subsystems logged at INFO/TRACE: INIT,COLL,P2P,SHM,NET,TUNING,ENV,ALLOC,CALL,PROXY,"        \
      "BOOTSTRAP,ALL; a leading ^ excludes")                                                       \
    X(debug_file, "NCCL_DEBUG_FILE", STR, "", 0, 0,                                                \
      "Write the log to this file instead of stderr (%h = host, %p = pid)")                        \
    X(comm_id, "NCCL_COMM_ID", STR, "", 0, 0,                                                      \
      "host:port of the bootstrap root; gives every rank the same unique id (set by tutti-run)")   \
    X(socket_ifname, "NCCL_SOCKET_IFNAME", STR, "", 0, 0,                                          \
      "Network interfaces to use: prefixes, ^ to exclude, = for exact names (e.g. eth0,^docker)")  \
    X(socket_family, "NCCL_SOCKET_FAMILY", STR, "", 0, 0,                                          \
      "Address family for sockets: AF_INET or AF_INET6 (default: either)")                         \
    X(hostid, "NCCL_HOSTID", STR, "", 0, 0,                                                        \
      "Override this process's host identity (ranks with equal ids are on one host)")              \
    X(buffsize, "NCCL_BUFFSIZE", INT, 4194304, 64, 536870912,                                      \
      "Bytes of each connection's FIFO (8 slots); must be equal on every rank")                    \
    X(shm_disable, "NCCL_SHM_DISABLE", INT, 0, 0, 1,                                               \
      "1: never use shared memory between ranks of one host (use TCP instead)")                    \
    X(p2p_disable, "NCCL_P2P_DISABLE", INT, 0, 0, 1,                                               \
      "1: disable direct peer access (same effect as NCCL_SHM_DISABLE on host buffers)")           \
    X(algo, "NCCL_ALGO", STR, "", 0, 0,                                                            \
      "Allowed algorithms, NCCL syntax (e.g. Ring, ^Tree, allreduce:ring)")                        \
    X(proto, "NCCL_PROTO", STR, "", 0, 0,                                                          \
      "Allowed protocols, NCCL syntax (e.g. Simple, ^LL)")                                         \
    X(comm_blocking, "NCCL_COMM_BLOCKING", INT, -1, -1, 1,                                         \
      "1 or 0: overrides config.blocking of every communicator (-1: use the config)")              \
    X(timeout_ms, "TUTTI_TIMEOUT_MS", INT, 300000, 0, 31536000000LL,                               \
      "Deadline of init and of every operation: milliseconds without progress (0 = none)")         \
    X(oneshot_bytes, "TUTTI_ONESHOT_BYTES", INT, 65536, 0, 67108864,                               \
      "Payload bytes of each rank's mailbox slot: the largest OneShot message (0 disables)")       \
    X(chunk_bytes, "TUTTI_CHUNK_BYTES", INT, 0, 0, 67108864,                                       \
      "Test knob: bytes per FIFO slot instead of NCCL_BUFFSIZE/8, so tiny buffers cross many "     \
      "chunks")                                                                                    \
    X(spin, "TUTTI_SPIN", INT, 2000, 0, 1000000000,                                                \
      "Polls of a blocked wait before it starts yielding the CPU")                                 \
    X(secret, "TUTTI_SECRET", STR, "", 0, 0,                                                       \
      "Job secret for NCCL_COMM_ID: key:<64 hex> as is, else a passphrase (Argon2id)")             \
    X(handshake_ms, "TUTTI_HANDSHAKE_MS", INT, 2000, 1, 3600000,                                   \
      "Ms a new bootstrap connection has to prove the secret, else dropped")                       \
    X(port_range, "TUTTI_PORT_RANGE", STR, "", 0, 0,                                               \
      "lo-hi: listen only on TCP ports in this range (firewalls)")                                 \
    X(map_peers, "TUTTI_MAP_PEERS", INT, 1, 0, 1,                                                  \
      "0: never map peers' shareable buffers; Direct then copies them with cross-memory "          \
      "attach (debugging, and the fallback's test)")                                               \
    X(stream_footprint, "TUTTI_STREAM_FOOTPRINT", INT, 0, 0, INT64_MAX,                            \
      "Direct's copies use non-temporal stores above this many bytes of buffers, all ranks "       \
      "together (0: four times the last-level cache)")                                             \
    X(fault, "TUTTI_FAULT", STR, "", 0, 0,                                                      \
      "Test knob: make a rank fail on purpose, e.g. rank=1,op=allreduce,seq=3,"                 \
      "point=after_chunk:2,action=exit|stall|close|corrupt (src/algo/fault.h)")                 \
    X(dump_signal, "TUTTI_DUMP_SIGNAL", INT, 0, 0, 1,                                           \
      "1: SIGUSR1 makes every communicator of the process log its stalled operations "          \
      "(tuttiCommDump)")                                                                        \
    X(register_remap, "TUTTI_REGISTER_REMAP", INT, 1, 0, 1,                                        \
      "1: ncclCommRegister and ncclCommWindowRegister move the whole pages of an ordinary "        \
      "buffer (64 KiB or more) into a memory file the host's peers map; 0: bookkeeping only")    \
    X(cuda, "TUTTI_CUDA", INT, -1, -1, 1,                                                          \
      "CUDA builds: -1 use the CUDA driver once the process loaded it, 1 load it at init, 0 "      \
      "never (host-only)")                                                                         \
    X(cuda_library, "TUTTI_CUDA_LIBRARY", STR, "", 0, 0,                                           \
      "CUDA builds: the driver library to open (default libcuda.so.1)")

enum tt_param_type { TT_PARAM_INT, TT_PARAM_STR };

struct tt_param_desc {
    const char *name;
    const char *env;
    enum tt_param_type type;
    const char *default_text;
    int64_t min;
    int64_t max;
    const char *doc;
};

#define TT_PARAM_GETTER_INT(name) int64_t tt_param_##name(void);
#define TT_PARAM_GETTER_STR(name) const char *tt_param_##name(void);
#define TT_PARAM_DECLARE(name, env, type, def, lo, hi, doc) TT_PARAM_GETTER_##type(name)
TT_PARAMS(TT_PARAM_DECLARE)
#undef TT_PARAM_DECLARE

/* The table, for listings: *count entries. */
const struct tt_param_desc *tt_param_table(int *count);
/* Current value of entry i as text (the default when unset). */
const char *tt_param_value_text(int i, char *buf, unsigned buf_bytes);
void tt_param_reload(void);
/* The first integer variable that is set but not an integer within its range, as an
 * ncclInvalidArgument naming it and its range (communicator init calls this); else
 * ncclSuccess. */
ncclResult_t tt_param_check(void);

#endif
