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
    X(nsocks_perthread, "NCCL_NSOCKS_PERTHREAD", INT, 1, 1, 16,                                    \
      "TCP: data sockets per connection for each socket thread; frames are striped across "      \
      "them (NCCL's name; sockets per connection = this x NCCL_SOCKET_NTHREADS, at most 16)")     \
    X(socket_nthreads, "NCCL_SOCKET_NTHREADS", INT, 1, 1, 16,                                      \
      "TCP: NCCL's socket threads; Tutti drives every socket from the thread that progresses "    \
      "the operation and only multiplies the sockets by this (docs/tuning.md)")                   \
    X(socket_bufsize, "TUTTI_SOCKET_BUFSIZE", INT, 0, 0, 268435456,                                \
      "TCP: SO_SNDBUF/SO_RCVBUF of the transport's sockets, bytes (0: kernel autotuning)")       \
    X(socket_cc, "TUTTI_SOCKET_CC", STR, "auto", 0, 0,                                             \
      "TCP: congestion control of data sockets (TCP_CONGESTION): auto (reno in place of bbr "     \
      "or cubic where the handshake's round trip is under 1 ms, else the kernel's), default "     \
      "(the kernel's), or a name such as reno, cubic, bbr (docs/tuning.md)")                      \
    X(net_latency_ns, "TUTTI_NET_LATENCY_NS", INT, 0, 0, 1000000000,                               \
      "Cost model: one network step's latency in ns (0: 15000, measured on a veth pair)")         \
    X(net_mbps, "TUTTI_NET_MBPS", INT, 0, 0, 100000000,                                            \
      "Cost model: a host's network bandwidth in MB/s for collectives (0: 2000)")                 \
    X(buffsize, "NCCL_BUFFSIZE", INT, 4194304, 64, 536870912,                                      \
      "Bytes of each connection's FIFO (8 slots); must be equal on every rank")                    \
    X(net, "NCCL_NET", STR, "", 0, 0,                                                              \
      "Network transport between hosts: Socket (Tutti's TCP, the default) or UCX (InfiniBand, "    \
      "RoCE, TCP... through UCX; builds with UCX only)")                                           \
    X(tutti_net, "TUTTI_NET", STR, "", 0, 0,                                                       \
      "Same as NCCL_NET (socket or ucx), which wins when both are set")                            \
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
    X(root_fd, "TUTTI_ROOT_FD", INT, -1, -1, 1048576,                                            \
      "Set by tutti-run for rank 0: the socket listening on NCCL_COMM_ID's port, for the root")   \
    X(handshake_ms, "TUTTI_HANDSHAKE_MS", INT, 2000, 1, 3600000,                                   \
      "Ms a new bootstrap connection has to prove the secret, else dropped")                       \
    X(raise_nofile, "TUTTI_RAISE_NOFILE", INT, 1, 0, 1,                                          \
      "1: the first communicator or unique id of a process raises its soft limit on open files "  \
      "(RLIMIT_NOFILE) to the hard limit, as NCCL's bootstrap does; 0: leave the limit alone")   \
    X(port_range, "TUTTI_PORT_RANGE", STR, "", 0, 0,                                               \
      "lo-hi: listen only on TCP ports in this range (firewalls)")                                 \
    X(check_rooted, "TUTTI_CHECK_ROOTED", INT, 1, 0, 1,                                            \
      "1: a Broadcast or Reduce, or a collective of count 0, reports success only once every "    \
      "rank ran the same operation (root, collective and zero-count mismatches caught on every "   \
      "rank, at the cost of a synchronisation); "                                                   \
      "0: off. Must be equal on every rank")                                                        \
    X(map_peers, "TUTTI_MAP_PEERS", INT, 1, 0, 1,                                                  \
      "0: never map peers' shareable buffers; Direct then copies them with cross-memory "          \
      "attach (debugging, and the fallback's test)")                                               \
    X(shareable_bytes, "TUTTI_SHAREABLE_BYTES", INT, 0, 0, INT64_MAX,                              \
      "A promise to the cost model: collectives of at least this many bytes get buffers in "       \
      "shareable memory (ncclMemAlloc, tuttiMemAllocHost, registered) on every rank, so Direct "   \
      "is priced as over mapped buffers, as for symmetric windows (a buffer that is not still "    \
      "works, through cross-memory attach); 0: none. tutti.torch sets it to its allocator's "      \
      "threshold. Must be equal on every rank")                                                    \
    X(stream_footprint, "TUTTI_STREAM_FOOTPRINT", INT, 0, 0, INT64_MAX,                            \
      "Direct's copies use non-temporal stores above this many bytes of buffers, all ranks "       \
      "together (0: four times the last-level cache)")                                             \
    X(cma_cost, "TUTTI_CMA_COST", INT, 0, 0, 100000,                                             \
      "Direct AllReduce's cost model: a cross-memory copy's time per byte against memcpy's, in "  \
      "percent (e.g. 400: four times slower); 0: measured once per process at init "           \
      "(docs/tuning.md). Set it alike on every rank")                                            \
    X(fault, "TUTTI_FAULT", STR, "", 0, 0,                                                      \
      "Test knob: make a rank fail on purpose, e.g. rank=1,op=allreduce,seq=3,"                 \
      "point=after_chunk:2 (or point=connect, point=team),action=exit|stall|close|corrupt "      \
      "(src/algo/fault.h)")                                                                     \
    X(dump_signal, "TUTTI_DUMP_SIGNAL", INT, 0, 0, 1,                                           \
      "1: SIGUSR1 makes every communicator of the process log its stalled operations "          \
      "(tuttiCommDump)")                                                                        \
    X(register_remap, "TUTTI_REGISTER_REMAP", INT, 1, 0, 1,                                        \
      "1: ncclCommRegister and ncclCommWindowRegister move the whole pages of an ordinary "        \
      "buffer (64 KiB or more) into a memory file the host's peers map; 0: bookkeeping only")      \
    X(trace_file, "TUTTI_TRACE_FILE", STR, "", 0, 0,                                               \
      "Write each communicator's timeline (Chrome trace JSON) to this file at destroy: %r rank, "  \
      "%p pid, %h host, %c communicator number (docs/observe.md)")                                 \
    X(trace_events, "TUTTI_TRACE_EVENTS", INT, 262144, 16, 268435456,                              \
      "Events each traced communicator keeps (operations and steps); later ones are dropped")    \
    X(trace_clock, "TUTTI_TRACE_CLOCK", STR, "", 0, 0,                                             \
      "monotonic: time trace events with clock_gettime instead of the CPU's invariant TSC")        \
    X(stats, "TUTTI_STATS", INT, 0, 0, 1,                                                          \
      "1: count operations, bytes and time per collective and algorithm (tuttiCommStats; logged "  \
      "at INFO by ncclCommDestroy); on with TUTTI_TRACE_FILE too")                                 \
    X(topo_xml, "TUTTI_TOPO_XML", STR, "", 0, 0,                                                   \
      "Tools (tutti-info, tutti-run --bind): read the topology from this hwloc XML file")          \
    X(topo_synthetic, "TUTTI_TOPO_SYNTHETIC", STR, "", 0, 0,                                       \
      "Tools: use this hwloc synthetic topology instead, e.g. \"pack:2 numa:1 core:4 pu:2\"")    \
    X(cuda, "TUTTI_CUDA", INT, -1, -1, 1,                                                          \
      "CUDA builds: -1 use the CUDA driver once the process loaded it, 1 load it at init, 0 "      \
      "never (host-only)")                                                                         \
    X(cuda_library, "TUTTI_CUDA_LIBRARY", STR, "", 0, 0,                                           \
      "CUDA builds: the driver library to open (default libcuda.so.1)")                          \
    X(cuda_direct, "TUTTI_CUDA_DIRECT", INT, 1, 0, 2,                                              \
      "CUDA builds: AllReduce on device buffers among the GPU ranks of one host runs on the GPU "  \
      "over CUDA IPC (1), never (0: staged), or must (2: init fails where it cannot; tests)")      \
    X(cuda_direct_bytes, "TUTTI_CUDA_DIRECT_BYTES", INT, 33554432, 65536, 1073741824,              \
      "CUDA builds: device scratch per rank for the device-direct path (larger operations go "     \
      "through it in chunks; as much again holds the Send/Recv slots)")                           \
    X(cuda_oneshot_bytes, "TUTTI_CUDA_ONESHOT_BYTES", INT, 262144, 0, 1073741824,                  \
      "CUDA builds: device-direct AllReduce up to this many bytes is one-shot, larger two-shot")   \
    X(cuda_window_fold, "TUTTI_CUDA_WINDOW_FOLD", INT, 0, 0, 2,                                    \
      "CUDA builds: collectives on symmetric device windows are run by one rank's kernels (1), "   \
      "by every rank's, a share each (2), or (0) by one when every rank shares one GPU, else a "   \
      "share each")

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
/* The entry whose variable is `env`, or -1. */
int tt_param_find(const char *env);
/* Entry i's value now, read from the environment (not cached): an INT entry's as its getter
 * would read it (the default when unset or invalid), a STR entry's string. */
int64_t tt_param_int_now(int i);
const char *tt_param_str_now(int i);
/* The first integer variable that is set but not an integer within its range, as an
 * ncclInvalidArgument naming it and its range (communicator init calls this); else
 * ncclSuccess. */
ncclResult_t tt_param_check(void);

#endif
