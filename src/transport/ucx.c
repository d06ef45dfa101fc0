/* UCX transport: the connection contract over UCP's tag API, so that whatever fabric UCX drives
 * (InfiniBand, RoCE, TCP, shared memory) carries Tutti's network connections without
 * hand-written verbs. Built only when CMake finds UCX (TUTTI_HAVE_UCX); chosen for the peers
 * that shared memory does not serve when NCCL_NET=UCX (or TUTTI_NET=ucx).
 *
 * Each communicator owns one UCP context and worker (its state in the transport context) and
 * one endpoint per peer, created from the worker address the peer put in its info blob. A
 * connection keeps a ring of `depth` staging slots on each side: TT_CONN_SLOTS, or more for
 * small slots (up to UCX_MAX_DEPTH, about UCX_RING_BYTES in all), since a window of 8 small
 * frames would bound a stream to 8 frames per round trip where TCP has the kernel's buffers
 * besides. The receiver posts a tagged receive into every free slot, for exactly the frame that
 * slot will hold, and tells the sender how many frames it has released (a credit message); the
 * sender sends frame k only once the receiver has released frame k - depth, so every frame
 * lands in a posted receive (zero-copy where the fabric allows it) and UCX never buffers an
 * unexpected one. Invariants: receiver: receives are posted for frames [done, done + depth);
 * sender: credit <= posted <= credit + depth, and frame k's send request lives in slot
 * k % depth until it completes.
 *
 * Waiting never spins for long: a call that cannot proceed progresses the worker once, and after
 * a few such misses arms the worker (ucp_worker_arm) and hands the engine the worker's event fd
 * to poll, whose sleeps are at most TT_WAIT_SLEEP_MAX_US, so deadlines and the abort flag are
 * seen as with TCP. Once armed, a quiet event fd means nothing happened, so later misses cost one
 * poll() instead of a progress (a real progress still runs at least every millisecond, for
 * UCX's keepalive). The worker is shared by the communicator's connections, which different
 * threads may drive at once, so every call holds the worker's lock (UCS_THREAD_MODE_SERIALIZED).
 *
 * A peer that dies makes UCX fail its endpoint (UCP_ERR_HANDLING_MODE_PEER); a rank whose
 * communicator fails sends a "bye" on each connection (the transport's shutdown). Either is an
 * error only once a call needs what the peer will never provide, as a TCP end of stream is:
 * frames sent before a bye are still read.
 *
 * Wire format (integers little-endian):
 *   Info blob (both sides; exchanged over the bootstrap):
 *     0 u64 magic UCX_INFO_MAGIC | 8 u64 slot_bytes | 16 u32 rank | 20 u8 connection tag
 *     21 u8 flags (1: network-only worker address) | 22 u16 address bytes (<= 232)
 *     24 the UCP worker address
 *   Tags (64 bits): kind (2 bits) | connection tag (6) | sending rank (24) | sequence (32):
 *     kind 0 data frame k (sequence k mod 2^32), sender to receiver
 *     kind 1 credit: u64 frames released, receiver to sender
 *     kind 2 bye from the sender: u64 frames it committed
 *     kind 3 bye from the receiver: u64 frames it released
 *   Data frame: 0 u32 payload bytes | 4 u32 (k mod 2^32) XOR UCX_FRAME_MAGIC
 *     8 the operation's descriptor (struct tt_op_desc, laid out as in TCP's frames) | payload
 * A frame whose length or check word is wrong is a ncclRemoteError; its payload is never handed
 * out. */
#include <dlfcn.h>
#include <endian.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>
#include <ucs/config/global_opts.h>

#include "transport/transport.h"
#include "transport/wire.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/time.h"
#include "util/wait.h"

/* ---- UCX, loaded at run time ----------------------------------------------------------------- */

/* Every UCX function this file calls; after the pointers are declared, each name stands for
 * its pointer, so the code below reads as plain UCX. */
#define UCX_FUNCTIONS(X)                                                                           \
    X(ucp_cleanup) X(ucp_config_read) X(ucp_config_release) X(ucp_ep_close_nbx) X(ucp_ep_create) \
    X(ucp_ep_flush_nbx) X(ucp_get_version_string) X(ucp_init_version) X(ucp_request_cancel)      \
    X(ucp_request_check_status) X(ucp_request_free) X(ucp_tag_msg_recv_nbx) X(ucp_tag_probe_nb)  \
    X(ucp_tag_recv_nbx) X(ucp_tag_recv_request_test) X(ucp_tag_send_nbx) X(ucp_worker_arm)       \
    X(ucp_worker_create) X(ucp_worker_destroy) X(ucp_worker_get_efd) X(ucp_worker_progress)      \
    X(ucp_worker_query) X(ucp_worker_release_address) X(ucs_status_string)

#define UCX_DECLARE(name) static __typeof__(name) *ucx_##name;
UCX_FUNCTIONS(UCX_DECLARE)
#undef UCX_DECLARE
static ucs_global_opts_t *ucx_ucs_global_opts;

#define ucp_cleanup (*ucx_ucp_cleanup)
#define ucp_config_read (*ucx_ucp_config_read)
#define ucp_config_release (*ucx_ucp_config_release)
#define ucp_ep_close_nbx (*ucx_ucp_ep_close_nbx)
#define ucp_ep_create (*ucx_ucp_ep_create)
#define ucp_ep_flush_nbx (*ucx_ucp_ep_flush_nbx)
#define ucp_get_version_string (*ucx_ucp_get_version_string)
#define ucp_init_version (*ucx_ucp_init_version)
#define ucp_request_cancel (*ucx_ucp_request_cancel)
#define ucp_request_check_status (*ucx_ucp_request_check_status)
#define ucp_request_free (*ucx_ucp_request_free)
#define ucp_tag_msg_recv_nbx (*ucx_ucp_tag_msg_recv_nbx)
#define ucp_tag_probe_nb (*ucx_ucp_tag_probe_nb)
#define ucp_tag_recv_nbx (*ucx_ucp_tag_recv_nbx)
#define ucp_tag_recv_request_test (*ucx_ucp_tag_recv_request_test)
#define ucp_tag_send_nbx (*ucx_ucp_tag_send_nbx)
#define ucp_worker_arm (*ucx_ucp_worker_arm)
#define ucp_worker_create (*ucx_ucp_worker_create)
#define ucp_worker_destroy (*ucx_ucp_worker_destroy)
#define ucp_worker_get_efd (*ucx_ucp_worker_get_efd)
#define ucp_worker_progress (*ucx_ucp_worker_progress)
#define ucp_worker_query (*ucx_ucp_worker_query)
#define ucp_worker_release_address (*ucx_ucp_worker_release_address)
#define ucs_status_string (*ucx_ucs_status_string)
#define ucs_global_opts (*ucx_ucs_global_opts)

static pthread_once_t ucx_once = PTHREAD_ONCE_INIT;
static char ucx_load_error[256];

/* Loads libucp.so.0 (and, through it, libuct, libucs and libucm) once per process; the handle
 * is kept until exit, as unloading UCX under its own hooks is not safe. */
static void load_ucx(void)
{
    /* The same hooks, once loaded, would also undo ncclCommRegister's page moves in this
     * process: unless the user chose UCX's hook mode, or turned the moves off, UCX is asked
     * not to hook mmap (its registration cache then runs without memory events). */
    const char *remap = getenv("TUTTI_REGISTER_REMAP");
    if (getenv("UCX_MEM_MMAP_HOOK_MODE") == NULL && (remap == NULL || strcmp(remap, "0") != 0)) {
        setenv("UCX_MEM_MMAP_HOOK_MODE", "none", 0);
        setenv("UCX_MEM_MALLOC_HOOKS", "no", 0);
        TT_INFO(TT_SUB_NET | TT_SUB_INIT, "ucx: UCX_MEM_MMAP_HOOK_MODE=none, so that UCX's "
                                          "memory hooks leave ncclCommRegister's pages alone");
    }
    void *lib = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(ucx_load_error, sizeof ucx_load_error, "%s", dlerror());
        return;
    }
#define UCX_RESOLVE(name)                                                                          \
    if ((*(void **)&ucx_##name = dlsym(lib, #name)) == NULL) {                                     \
        snprintf(ucx_load_error, sizeof ucx_load_error, "libucp.so.0 lacks %s", #name);           \
        return;                                                                                    \
    }
    UCX_FUNCTIONS(UCX_RESOLVE)
#undef UCX_RESOLVE
    ucx_ucs_global_opts = dlsym(lib, "ucs_global_opts");
    if (ucx_ucs_global_opts == NULL)
        snprintf(ucx_load_error, sizeof ucx_load_error, "libucs.so.0 lacks ucs_global_opts");
}

static ncclResult_t ucx_load(void)
{
    pthread_once(&ucx_once, load_ucx);
    if (ucx_load_error[0] != '\0')
        return TT_ERROR(ncclSystemError, "ucx: NCCL_NET=UCX, but UCX could not be loaded: %s "
                                         "(Debian: apt-get install libucx0)",
                        ucx_load_error);
    return ncclSuccess;
}

#define UCX_INFO_MAGIC 0x6f666e6978637574ull /* "tucxinfo" */
#define UCX_FRAME_MAGIC 0x58435554u          /* "TUCX" */
#define UCX_INFO_HEADER_BYTES 24
#define UCX_ADDR_MAX_BYTES (TT_CONN_INFO_BYTES - UCX_INFO_HEADER_BYTES)
#define UCX_FRAME_HEADER_BYTES 32
/* Each staging slot starts with this much room; the frame header sits in its last 32 bytes, so
 * header and payload are one contiguous message and the payload stays 64-byte aligned. */
#define UCX_SLOT_LEAD 64
/* Misses of a call before it arms the worker and lets the engine sleep on its event fd. */
#define UCX_SPIN_MISSES 4
/* While armed, a quiet event fd stands for a progress call at most this long. */
#define UCX_QUIET_NS 1000000ull
/* Ring depth: TT_CONN_SLOTS, doubled while the ring stays within UCX_RING_BYTES. */
#define UCX_MAX_DEPTH 64
#define UCX_RING_BYTES (1u << 20)
/* How long send_idle waits for an endpoint flush (see there). */
#define UCX_FLUSH_WAIT_NS 20000000ull
/* Bound on a graceful endpoint close at teardown (flushing what is still in flight). */
#define UCX_CLOSE_MS 1000

enum ucx_kind { KIND_DATA = 0, KIND_CREDIT = 1, KIND_BYE_TO_RECV = 2, KIND_BYE_TO_SEND = 3 };

struct ucx_peer {
    ucp_ep_h ep;
    _Atomic int status; /* ucs_status_t: UCS_OK until UCX fails the endpoint */
};

struct ucx_conn;

/* Per-communicator state: the worker and an endpoint per peer. */
struct ucx_net {
    pthread_mutex_t lock;
    ucp_context_h ucp;
    ucp_worker_h worker;
    int efd;
    int rank;
    int nranks;
    struct ucx_peer *peers;
    uint8_t addr[UCX_ADDR_MAX_BYTES];
    size_t addr_bytes;
    bool addr_net_only;
    bool armed;             /* armed, and not progressed since */
    uint64_t progressed_ns; /* last real progress */
    const _Atomic int *abort;
    /* Closed connections, freed after the worker: a cancelled receive may still be writing. */
    struct ucx_conn *closed;
};

struct ucx_conn {
    struct ucx_net *net;
    struct ucx_conn *next_closed;
    size_t slot_stride;
    uint8_t *staging;
    ncclResult_t failed; /* sticky */
    uint32_t misses;
    /* Receiver: each slot's receive request, whether its frame is in, and what it holds. */
    unsigned depth;
    void *req[UCX_MAX_DEPTH];
    bool full[UCX_MAX_DEPTH];
    uint32_t len[UCX_MAX_DEPTH];
    struct tt_op_desc desc[UCX_MAX_DEPTH];
    /* Sender: frames committed, and frames the receiver released (credit). Receiver: frames
     * released (done). */
    uint64_t posted;
    uint64_t done;
    uint64_t credit;
    bool need_flush; /* sender: committed since the endpoint was last flushed */
    void *flush_req;
    uint64_t flush_since_ns;
    /* Sender: the credit receive; receiver: the credit send (one in flight; `credit_dirty`
     * when a newer count waits for it). */
    uint64_t credit_buf;
    void *credit_req;
    bool credit_dirty;
    /* The peer's bye: received, and the count it carried. */
    uint64_t bye_buf;
    void *bye_req;
    bool bye_got;
    /* This side's bye. */
    uint64_t bye_out;
    void *bye_out_req;
    bool bye_sent;
    bool connected;
};


static ucp_tag_t make_tag(enum ucx_kind kind, int conn_tag, int from, uint64_t seq)
{
    return (ucp_tag_t)kind << 62 | (ucp_tag_t)(conn_tag & 0x3f) << 56 |
           (ucp_tag_t)(from & 0xffffff) << 32 | (uint32_t)seq;
}

/* ---- The per-communicator worker ------------------------------------------------------------ */

static struct ucx_net **net_of(struct tt_transport_ctx *ctx)
{
    return (struct ucx_net **)tt_transport_ctx_state(ctx, &tt_transport_ucx);
}

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct ucx_peer *p = arg;
    atomic_store(&p->status, (int)status);
}

/* Progresses the worker until it has nothing more to do (bounded). Lock held. */
static void net_progress(struct ucx_net *n)
{
    n->armed = false;
    for (int i = 0; i < 64 && ucp_worker_progress(n->worker) != 0; i++) {
    }
    n->progressed_ns = tt_time_ns();
}

/* Armed and nothing signalled since, not long ago: a progress call would find nothing. */
static bool net_quiet(struct ucx_net *n)
{
    if (!n->armed || tt_time_ns() - n->progressed_ns > UCX_QUIET_NS) return false;
    struct pollfd pfd = {.fd = n->efd, .events = POLLIN, .revents = 0};
    return poll(&pfd, 1, 0) == 0;
}

/* Finds a worker address that fits the info blob: the full one, else one without the
 * shared-memory transports (peers on other hosts never need those). */
static ncclResult_t net_address(struct ucx_net *n)
{
    for (int net_only = 0; net_only < 2; net_only++) {
        ucp_worker_attr_t attr = {.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS |
                                                UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS,
                                  .address_flags = net_only ? UCP_WORKER_ADDRESS_FLAG_NET_ONLY
                                                            : 0};
        ucs_status_t st = ucp_worker_query(n->worker, &attr);
        if (st != UCS_OK)
            return TT_ERROR(ncclSystemError, "ucx: ucp_worker_query failed: %s",
                            ucs_status_string(st));
        size_t bytes = attr.address_length;
        if (bytes <= UCX_ADDR_MAX_BYTES) memcpy(n->addr, attr.address, bytes);
        ucp_worker_release_address(n->worker, attr.address);
        if (bytes <= UCX_ADDR_MAX_BYTES) {
            n->addr_bytes = bytes;
            n->addr_net_only = net_only;
            return ncclSuccess;
        }
        TT_INFO(TT_SUB_NET | TT_SUB_INIT, "ucx: worker address of %zu bytes%s exceeds %d", bytes,
                net_only ? " (network only)" : "", UCX_ADDR_MAX_BYTES);
    }
    return TT_ERROR(ncclInvalidUsage,
                    "ucx: UCX's worker address does not fit in %d bytes even without shared "
                    "memory; narrow UCX_TLS or UCX_NET_DEVICES to the devices the job uses",
                    UCX_ADDR_MAX_BYTES);
}

/* Receives and drops the messages nobody will ask for (the peers' byes and last credits to
 * connections closed already), which UCX would otherwise report one by one at teardown. */
static void drain_unexpected(struct ucx_net *n)
{
    uint8_t scratch[64];
    for (int i = 0; i < 4096; i++) {
        ucp_tag_recv_info_t info;
        ucp_tag_message_h msg = ucp_tag_probe_nb(n->worker, 0, 0, 1, &info);
        if (msg == NULL) return;
        void *buf = info.length <= sizeof scratch ? scratch : malloc(info.length);
        ucp_request_param_t param = {.op_attr_mask = 0};
        void *r = buf != NULL ? ucp_tag_msg_recv_nbx(n->worker, buf, info.length, msg, &param)
                              : NULL;
        uint64_t deadline = tt_deadline_after_ms(100);
        while (UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS &&
               !tt_deadline_passed(deadline))
            ucp_worker_progress(n->worker);
        if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
        if (buf != scratch) free(buf);
    }
}

static void net_destroy(struct ucx_net *n)
{
    if (n == NULL) return;
    if (n->worker != NULL) {
        bool force = n->abort != NULL && atomic_load(n->abort);
        void **reqs = calloc((size_t)n->nranks, sizeof *reqs);
        for (int p = 0; p < n->nranks; p++) {
            struct ucx_peer *peer = &n->peers[p];
            if (peer->ep == NULL) continue;
            /* A failed endpoint must be closed by force; a healthy one is flushed first, so
             * that what the peer still needs (rendezvous acknowledgements) reaches it. */
            bool f = force || atomic_load(&peer->status) != UCS_OK || reqs == NULL;
            ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                         .flags = f ? UCP_EP_CLOSE_FLAG_FORCE : 0};
            void *req = ucp_ep_close_nbx(peer->ep, &param);
            if (UCS_PTR_IS_PTR(req)) {
                if (reqs != NULL) reqs[p] = req;
                else ucp_request_free(req);
            }
            peer->ep = NULL;
        }
        uint64_t deadline = tt_deadline_after_ms(UCX_CLOSE_MS);
        for (bool pending = reqs != NULL; pending;) {
            ucp_worker_progress(n->worker);
            pending = false;
            for (int p = 0; p < n->nranks; p++) {
                if (reqs[p] == NULL) continue;
                if (ucp_request_check_status(reqs[p]) != UCS_INPROGRESS) {
                    ucp_request_free(reqs[p]);
                    reqs[p] = NULL;
                } else {
                    pending = true;
                }
            }
            if (pending && tt_deadline_passed(deadline)) {
                TT_INFO(TT_SUB_NET, "ucx: endpoints not closed after %d ms; destroying the "
                                    "worker anyway", UCX_CLOSE_MS);
                for (int p = 0; p < n->nranks; p++)
                    if (reqs[p] != NULL) ucp_request_free(reqs[p]);
                break;
            }
        }
        free(reqs);
        /* Byes and credits of the peers still arriving meet closed connections: dropped here,
         * and UCX's warning about any that arrive after the drain is held back. */
        drain_unexpected(n);
        ucs_log_level_t level = ucs_global_opts.log_component.log_level;
        if (level == UCS_LOG_LEVEL_WARN) ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_ERROR;
        ucp_worker_destroy(n->worker);
        ucs_global_opts.log_component.log_level = level;
    }
    if (n->ucp != NULL) ucp_cleanup(n->ucp);
    while (n->closed != NULL) {
        struct ucx_conn *c = n->closed;
        n->closed = c->next_closed;
        free(c->staging);
        free(c);
    }
    free(n->peers);
    pthread_mutex_destroy(&n->lock);
    free(n);
}

static ncclResult_t net_create(struct tt_transport_ctx *ctx, struct ucx_net **out)
{
    ncclResult_t res = ncclSuccess;
    struct ucx_net *n = NULL;
    ucp_config_t *config = NULL;
    ucs_status_t st;
    if (ctx->nranks > (1 << 24))
        return TT_ERROR(ncclInvalidUsage, "ucx: %d ranks; the transport's tags carry at most "
                                          "2^24", ctx->nranks);
    TT_TRY(ucx_load());
    TT_TRY(TT_CALLOC(&n, 1));
    pthread_mutex_init(&n->lock, NULL);
    n->efd = -1;
    n->rank = ctx->rank;
    n->nranks = ctx->nranks;
    n->abort = ctx->abort;
    TT_TRY_GOTO(TT_CALLOC(&n->peers, (size_t)ctx->nranks), res, fail);
    st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK) {
        res = TT_ERROR(ncclSystemError, "ucx: reading UCX's configuration (UCX_* variables) "
                                        "failed: %s", ucs_status_string(st));
        goto fail;
    }
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES |
                                         UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                                         UCP_PARAM_FIELD_ESTIMATED_NUM_EPS,
                           .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP,
                           .mt_workers_shared = 0,
                           .estimated_num_eps = (size_t)ctx->nranks};
    st = ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &n->ucp);
    ucp_config_release(config);
    if (st != UCS_OK) {
        n->ucp = NULL;
        res = TT_ERROR(ncclSystemError, "ucx: ucp_init failed: %s (check UCX_TLS and "
                                        "UCX_NET_DEVICES)", ucs_status_string(st));
        goto fail;
    }
    ucp_worker_params_t wparams = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                   .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    st = ucp_worker_create(n->ucp, &wparams, &n->worker);
    if (st != UCS_OK) {
        n->worker = NULL;
        res = TT_ERROR(ncclSystemError, "ucx: ucp_worker_create failed: %s",
                       ucs_status_string(st));
        goto fail;
    }
    st = ucp_worker_get_efd(n->worker, &n->efd);
    if (st != UCS_OK) {
        res = TT_ERROR(ncclSystemError, "ucx: the worker has no event fd (%s): UCX_TLS names "
                                        "a transport without wake-up support",
                       ucs_status_string(st));
        goto fail;
    }
    TT_TRY_GOTO(net_address(n), res, fail);
    TT_INFO(TT_SUB_NET | TT_SUB_INIT, "ucx: UCX %s worker ready, %zu-byte address%s",
            ucp_get_version_string(), n->addr_bytes,
            n->addr_net_only ? " (network transports only)" : "");
    *out = n;
    return ncclSuccess;
fail:
    net_destroy(n);
    return res;
}

static void ucx_ctx_fini(struct tt_transport_ctx *ctx)
{
    struct ucx_net **slot = net_of(ctx);
    if (slot == NULL || *slot == NULL) return;
    net_destroy(*slot);
    *slot = NULL;
}

/* ---- Setup and connect ---------------------------------------------------------------------- */

static uint8_t *slot_of(const struct ucx_conn *uc, uint64_t frame)
{
    return uc->staging + (frame % uc->depth) * uc->slot_stride;
}

static ncclResult_t ucx_setup(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                              struct tt_conn_info *info)
{
    memset(info, 0, sizeof *info);
    if (conn->slot_bytes == 0 || conn->slot_bytes > UINT32_MAX)
        return TT_ERROR(ncclInvalidUsage,
                        "ucx: slot of %zu bytes for peer rank %d: frames carry 1 to 2^32-1 bytes "
                        "(lower NCCL_BUFFSIZE)",
                        conn->slot_bytes, conn->peer);
    if (conn->tag < 0 || conn->tag > 0x3f)
        return TT_ERROR(ncclInternalError, "ucx: connection tag %d does not fit in 6 bits",
                        conn->tag);
    struct ucx_net **slot = net_of(ctx);
    if (slot == NULL)
        return TT_ERROR(ncclInternalError, "ucx: no room for the worker in the transport "
                                           "context (TT_TRANSPORT_STATES)");
    if (*slot == NULL) TT_TRY(net_create(ctx, slot));
    struct ucx_net *n = *slot;

    struct ucx_conn *uc = NULL;
    TT_TRY(TT_CALLOC(&uc, 1));
    uc->net = n;
    uc->slot_stride = UCX_SLOT_LEAD + tt_conn_slot_stride(conn->slot_bytes);
    uc->depth = TT_CONN_SLOTS;
    while (uc->depth < UCX_MAX_DEPTH && 2 * uc->depth * uc->slot_stride <= UCX_RING_BYTES)
        uc->depth *= 2;
    conn->priv = uc;
    if (posix_memalign((void **)&uc->staging, 64, uc->depth * uc->slot_stride) != 0)
        return TT_ERROR(ncclSystemError, "out of memory for a %zu-byte UCX staging ring",
                        uc->depth * uc->slot_stride);

    uint8_t *p = info->bytes;
    tt_wire_put_u64(p, UCX_INFO_MAGIC);
    tt_wire_put_u64(p + 8, conn->slot_bytes);
    tt_wire_put_u32(p + 16, (uint32_t)ctx->rank);
    p[20] = (uint8_t)conn->tag;
    p[21] = n->addr_net_only ? 1 : 0;
    p[22] = (uint8_t)(n->addr_bytes & 0xff);
    p[23] = (uint8_t)(n->addr_bytes >> 8);
    memcpy(p + UCX_INFO_HEADER_BYTES, n->addr, n->addr_bytes);
    return ncclSuccess;
}

/* The endpoint towards conn->peer, created from the peer's worker address on first use. UCX
 * reports a dead peer only on endpoints made with peer failure handling, which its
 * shared-memory transports lack (UCX 1.13): where that leaves no transport, the endpoint is
 * made without it, and a dead peer is then seen at the communicator's deadline (or by its bye,
 * when its communicator failed before it died). */
static ncclResult_t peer_ep(struct ucx_net *n, int peer, const uint8_t *addr)
{
    struct ucx_peer *p = &n->peers[peer];
    if (p->ep != NULL) return ncclSuccess;
    atomic_store(&p->status, UCS_OK);
    ucs_status_t st = UCS_OK;
    for (int checked = 1; checked >= 0; checked--) {
        ucp_ep_params_t params = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                                UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                                UCP_EP_PARAM_FIELD_ERR_HANDLER,
                                  .address = (const ucp_address_t *)addr,
                                  .err_mode = checked ? UCP_ERR_HANDLING_MODE_PEER
                                                      : UCP_ERR_HANDLING_MODE_NONE,
                                  .err_handler = {.cb = on_ep_error, .arg = p}};
        /* The first try fails by design over shared memory, and UCX would say so as an ERROR:
         * its log is quieted for that try (only UCX's own log level; a race with another
         * thread's UCX logging can at worst drop that thread's line). */
        ucs_log_level_t level = ucs_global_opts.log_component.log_level;
        if (checked && level < UCS_LOG_LEVEL_DEBUG)
            ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_FATAL;
        st = ucp_ep_create(n->worker, &params, &p->ep);
        ucs_global_opts.log_component.log_level = level;
        if (st == UCS_OK) {
            if (!checked)
                TT_INFO(TT_SUB_NET, "ucx: the transports to peer rank %d cannot report a dead "
                                    "peer; its death will be seen at the deadline "
                                    "(TUTTI_TIMEOUT_MS)", peer);
            return ncclSuccess;
        }
        p->ep = NULL;
        if (st != UCS_ERR_UNREACHABLE) break;
    }
    return TT_ERROR(ncclSystemError, "ucx: no endpoint to peer rank %d: %s (can both ranks' "
                                     "UCX_TLS reach each other?)",
                    peer, ucs_status_string(st));
}

/* Posts a receive of `bytes` into buf for exactly `tag`. Returns the request (NULL with
 * *done set when it completed at once, with its length in *info). */
static ncclResult_t post_recv(struct ucx_net *n, void *buf, size_t bytes, ucp_tag_t tag,
                              void **req, bool *done, ucp_tag_recv_info_t *info)
{
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO,
                                 .recv_info.tag_info = info};
    void *r = ucp_tag_recv_nbx(n->worker, buf, bytes, tag, UINT64_MAX, &param);
    *req = NULL;
    *done = r == NULL;
    if (UCS_PTR_IS_ERR(r))
        return TT_ERROR(ncclSystemError, "ucx: posting a receive failed: %s",
                        ucs_status_string(UCS_PTR_STATUS(r)));
    if (r != NULL) *req = r;
    return ncclSuccess;
}

/* Checks a received frame (slot `frame`'s header) and records it. */
static ncclResult_t take_frame(struct tt_conn *conn, struct ucx_conn *uc, uint64_t frame,
                               size_t length)
{
    const uint8_t *hdr = slot_of(uc, frame) + UCX_SLOT_LEAD - UCX_FRAME_HEADER_BYTES;
    uint32_t bytes = length >= UCX_FRAME_HEADER_BYTES ? tt_wire_get_u32(hdr) : 0;
    uint32_t check = length >= UCX_FRAME_HEADER_BYTES ? tt_wire_get_u32(hdr + 4) : 0;
    uint32_t want = (uint32_t)frame ^ UCX_FRAME_MAGIC;
    if (length < UCX_FRAME_HEADER_BYTES || bytes != length - UCX_FRAME_HEADER_BYTES ||
        bytes > conn->slot_bytes || check != want)
        return TT_ERROR(ncclRemoteError,
                        "ucx: peer rank %d sent a bad frame (frame %" PRIu64 ": %zu bytes with "
                        "header length %u for %zu-byte slots, check word %#x, want %#x)",
                        conn->peer, frame, length, bytes, conn->slot_bytes, check, want);
    unsigned s = (unsigned)(frame % uc->depth);
    uc->len[s] = bytes;
    tt_wire_get_desc(hdr + 8, &uc->desc[s]);
    uc->full[s] = true;
    return ncclSuccess;
}

/* Receiver: post the receive of `frame` into its slot. */
static ncclResult_t post_frame(struct tt_conn *conn, struct ucx_conn *uc, uint64_t frame)
{
    unsigned s = (unsigned)(frame % uc->depth);
    bool done;
    ucp_tag_recv_info_t info;
    uc->full[s] = false;
    TT_TRY(post_recv(uc->net, slot_of(uc, frame) + UCX_SLOT_LEAD - UCX_FRAME_HEADER_BYTES,
                     UCX_FRAME_HEADER_BYTES + conn->slot_bytes,
                     make_tag(KIND_DATA, conn->tag, conn->peer, frame), &uc->req[s], &done,
                     &info));
    if (done) TT_TRY(take_frame(conn, uc, frame, info.length));
    return ncclSuccess;
}

/* The control receive of this side: credits (sender) and the peer's bye (both). */
static ncclResult_t post_credit_recv(struct tt_conn *conn, struct ucx_conn *uc, bool *done)
{
    ucp_tag_recv_info_t info;
    return post_recv(uc->net, &uc->credit_buf, sizeof uc->credit_buf,
                     make_tag(KIND_CREDIT, conn->tag, conn->peer, 0), &uc->credit_req, done,
                     &info);
}

static ncclResult_t post_bye_recv(struct tt_conn *conn, struct ucx_conn *uc)
{
    ucp_tag_recv_info_t info;
    enum ucx_kind kind = conn->dir == TT_CONN_SEND ? KIND_BYE_TO_SEND : KIND_BYE_TO_RECV;
    return post_recv(uc->net, &uc->bye_buf, sizeof uc->bye_buf,
                     make_tag(kind, conn->tag, conn->peer, 0), &uc->bye_req, &uc->bye_got,
                     &info);
}

static ncclResult_t ucx_connect(struct tt_transport_ctx *ctx, struct tt_conn *conn,
                                const struct tt_conn_info *remote, uint64_t deadline_ns)
{
    struct ucx_conn *uc = conn->priv;
    struct ucx_net *n = uc->net;
    const uint8_t *p = remote->bytes;
    size_t addr_bytes = (size_t)(p[22] | p[23] << 8);
    if (tt_wire_get_u64(p) != UCX_INFO_MAGIC || addr_bytes == 0 || addr_bytes > UCX_ADDR_MAX_BYTES)
        return TT_ERROR(ncclInvalidUsage,
                        "ucx: peer rank %d sent connection info that is not UCX's (is "
                        "NCCL_NET/TUTTI_NET the same on every rank?)",
                        conn->peer);
    if (tt_wire_get_u32(p + 16) != (uint32_t)conn->peer || p[20] != (uint8_t)conn->tag ||
        tt_wire_get_u64(p + 8) != conn->slot_bytes)
        return TT_ERROR(ncclInvalidUsage,
                        "ucx: peer rank %d described rank %u, tag %u, %" PRIu64 "-byte slots; "
                        "expected tag %d and %zu-byte slots (NCCL_BUFFSIZE must be equal on "
                        "every rank)",
                        conn->peer, tt_wire_get_u32(p + 16), p[20], tt_wire_get_u64(p + 8), conn->tag,
                        conn->slot_bytes);
    pthread_mutex_lock(&n->lock);
    ncclResult_t res = peer_ep(n, conn->peer, p + UCX_INFO_HEADER_BYTES);
    if (res == ncclSuccess && conn->dir == TT_CONN_RECV)
        for (uint64_t f = 0; f < uc->depth && res == ncclSuccess; f++)
            res = post_frame(conn, uc, f);
    if (res == ncclSuccess && conn->dir == TT_CONN_SEND) {
        bool done;
        res = post_credit_recv(conn, uc, &done);
        if (res == ncclSuccess && done) uc->credit = le64toh(uc->credit_buf);
        /* A credit that completed at once is impossible here (nothing was sent yet); if one
         * did, the next poll of the credit receive would post again. */
    }
    if (res == ncclSuccess) res = post_bye_recv(conn, uc);
    uc->connected = res == ncclSuccess;
    pthread_mutex_unlock(&n->lock);
    TT_TRY(res);
    TT_INFO(TT_SUB_NET, "ucx: %s peer rank %d tag %d (%zu-byte slots)",
            conn->dir == TT_CONN_SEND ? "sending to" : "receiving from", conn->peer, conn->tag,
            conn->slot_bytes);
    return ncclSuccess;
}

/* ---- Teardown ------------------------------------------------------------------------------- */

static void free_req(struct ucx_net *n, void **req, bool cancel)
{
    if (*req == NULL) return;
    if (cancel && ucp_request_check_status(*req) == UCS_INPROGRESS)
        ucp_request_cancel(n->worker, *req);
    ucp_request_free(*req);
    *req = NULL;
}

/* Sends this side's bye (once): the count of frames committed (sender) or released
 * (receiver). Lock held. */
static void send_bye(struct tt_conn *conn, struct ucx_conn *uc)
{
    struct ucx_net *n = uc->net;
    struct ucx_peer *p = &n->peers[conn->peer];
    if (uc->bye_sent || !uc->connected || atomic_load(&p->status) != UCS_OK) return;
    uc->bye_sent = true;
    uc->bye_out = htole64(conn->dir == TT_CONN_SEND ? uc->posted : uc->done);
    enum ucx_kind kind = conn->dir == TT_CONN_SEND ? KIND_BYE_TO_RECV : KIND_BYE_TO_SEND;
    ucp_request_param_t param = {.op_attr_mask = 0};
    void *r = ucp_tag_send_nbx(p->ep, &uc->bye_out, sizeof uc->bye_out,
                               make_tag(kind, conn->tag, n->rank, 0), &param);
    if (UCS_PTR_IS_PTR(r)) uc->bye_out_req = r;
}

/* Frees nothing UCX may still touch: the connection's buffers go to the worker's list of
 * closed connections, freed after the worker at teardown. The peer is told, as a TCP close
 * would tell it. */
static void ucx_close(struct tt_conn *conn)
{
    struct ucx_conn *uc = conn->priv;
    if (uc == NULL) return;
    struct ucx_net *n = uc->net;
    pthread_mutex_lock(&n->lock);
    if (uc->connected) send_bye(conn, uc);
    for (unsigned s = 0; s < uc->depth; s++) free_req(n, &uc->req[s], conn->dir == TT_CONN_RECV);
    free_req(n, &uc->credit_req, conn->dir == TT_CONN_SEND);
    free_req(n, &uc->bye_req, true);
    free_req(n, &uc->bye_out_req, false);
    free_req(n, &uc->flush_req, false);
    uc->next_closed = n->closed;
    n->closed = uc;
    pthread_mutex_unlock(&n->lock);
    conn->priv = NULL;
}

/* Tells the peer this side is gone (its communicator failed); the connection stays usable. */
static void ucx_shutdown(struct tt_conn *conn)
{
    struct ucx_conn *uc = conn->priv;
    if (uc == NULL) return;
    pthread_mutex_lock(&uc->net->lock);
    send_bye(conn, uc);
    pthread_mutex_unlock(&uc->net->lock);
}

/* ---- The data path (every function below runs with the worker's lock held) ------------------ */

static ncclResult_t fail(struct ucx_conn *uc, ncclResult_t res)
{
    uc->failed = res;
    return res;
}

static ncclResult_t peer_failed(struct tt_conn *conn, struct ucx_conn *uc)
{
    ucs_status_t st = (ucs_status_t)atomic_load(&uc->net->peers[conn->peer].status);
    return fail(uc, TT_ERROR(ncclRemoteError, "ucx: connection to peer rank %d failed: %s",
                             conn->peer, ucs_status_string(st)));
}

static bool peer_ok(const struct tt_conn *conn, const struct ucx_conn *uc)
{
    return atomic_load(&uc->net->peers[conn->peer].status) == UCS_OK;
}

/* Checks a control receive; returns whether it completed. */
static ncclResult_t poll_ctl(struct tt_conn *conn, void **req, bool *done)
{
    *done = false;
    if (*req == NULL) return ncclSuccess;
    ucs_status_t st = ucp_request_check_status(*req);
    if (st == UCS_INPROGRESS) return ncclSuccess;
    ucp_request_free(*req);
    *req = NULL;
    if (st != UCS_OK)
        return TT_ERROR(ncclRemoteError, "ucx: control message from peer rank %d failed: %s",
                        conn->peer, ucs_status_string(st));
    *done = true;
    return ncclSuccess;
}

/* The peer's bye, if it came. */
static ncclResult_t poll_bye(struct tt_conn *conn, struct ucx_conn *uc)
{
    if (uc->bye_got) return ncclSuccess;
    bool done;
    TT_TRY(poll_ctl(conn, &uc->bye_req, &done));
    if (done) uc->bye_got = true;
    return ncclSuccess;
}

/* Sender: takes every credit message that arrived. */
static ncclResult_t poll_credit(struct tt_conn *conn, struct ucx_conn *uc)
{
    for (int i = 0; i < 64; i++) {
        bool done;
        if (uc->credit_req != NULL) TT_TRY(poll_ctl(conn, &uc->credit_req, &done));
        else done = true; /* completed at posting */
        if (!done) return ncclSuccess;
        uint64_t released = le64toh(uc->credit_buf);
        if (released > uc->posted)
            return TT_ERROR(ncclRemoteError,
                            "ucx: peer rank %d released %" PRIu64 " frames of %" PRIu64 " sent",
                            conn->peer, released, uc->posted);
        if (released > uc->credit) uc->credit = released;
        TT_TRY(post_credit_recv(conn, uc, &done));
        if (!done) return ncclSuccess;
    }
    return ncclSuccess;
}

/* Sender: frees the send requests that completed. One that failed means the endpoint failed:
 * that is recorded as the peer's failure, an error only once a call needs the peer (a credit),
 * since the peer may well have taken every frame before it went (as a TCP peer may close after
 * reading what it needed). */
static ncclResult_t reap_sends(struct tt_conn *conn, struct ucx_conn *uc)
{
    for (unsigned s = 0; s < uc->depth; s++) {
        if (uc->req[s] == NULL) continue;
        ucs_status_t st = ucp_request_check_status(uc->req[s]);
        if (st == UCS_INPROGRESS) continue;
        ucp_request_free(uc->req[s]);
        uc->req[s] = NULL;
        if (st != UCS_OK) {
            int ok = UCS_OK;
            atomic_compare_exchange_strong(&uc->net->peers[conn->peer].status, &ok, (int)st);
            TT_INFO(TT_SUB_NET, "ucx: a send to peer rank %d failed: %s", conn->peer,
                    ucs_status_string(st));
        }
    }
    return ncclSuccess;
}

/* Receiver: sends the count of released frames, unless a credit is still in flight (then the
 * newer count follows it). */
static void send_credit(struct tt_conn *conn, struct ucx_conn *uc)
{
    struct ucx_net *n = uc->net;
    struct ucx_peer *p = &n->peers[conn->peer];
    if (uc->credit_req != NULL) {
        if (ucp_request_check_status(uc->credit_req) == UCS_INPROGRESS) {
            uc->credit_dirty = true;
            return;
        }
        ucp_request_free(uc->credit_req);
        uc->credit_req = NULL;
    }
    uc->credit_dirty = false;
    if (atomic_load(&p->status) != UCS_OK) return; /* the frames' wait will say so */
    uc->credit_buf = htole64(uc->done);
    ucp_request_param_t param = {.op_attr_mask = 0};
    void *r = ucp_tag_send_nbx(p->ep, &uc->credit_buf, sizeof uc->credit_buf,
                               make_tag(KIND_CREDIT, conn->tag, n->rank, 0), &param);
    if (UCS_PTR_IS_PTR(r)) uc->credit_req = r;
    n->armed = false;
}

/* Receiver: whether the oldest unreleased frame is in (checking its receive). */
static ncclResult_t poll_oldest(struct tt_conn *conn, struct ucx_conn *uc, bool *ready)
{
    unsigned s = (unsigned)(uc->done % uc->depth);
    if (!uc->full[s] && uc->req[s] != NULL) {
        ucp_tag_recv_info_t info;
        ucs_status_t st = ucp_tag_recv_request_test(uc->req[s], &info);
        if (st != UCS_INPROGRESS) {
            ucp_request_free(uc->req[s]);
            uc->req[s] = NULL;
            if (st == UCS_ERR_MESSAGE_TRUNCATED)
                return TT_ERROR(ncclRemoteError,
                                "ucx: peer rank %d sent a frame larger than a %zu-byte slot",
                                conn->peer, conn->slot_bytes);
            if (st != UCS_OK)
                return TT_ERROR(ncclRemoteError, "ucx: receive from peer rank %d failed: %s",
                                conn->peer, ucs_status_string(st));
            TT_TRY(take_frame(conn, uc, uc->done, info.length));
        }
    }
    *ready = uc->full[s];
    return ncclSuccess;
}

/* A call found nothing to do: count the miss; after a few, arm the worker and point the hint
 * at its event fd. Returns true when the worker had events after all (call again). */
static ncclResult_t arm(struct ucx_conn *uc, struct tt_wait_hint *hint, bool *again)
{
    struct ucx_net *n = uc->net;
    *again = false;
    tt_wait_hint_clear(hint);
    if (++uc->misses < UCX_SPIN_MISSES) return ncclSuccess;
    if (!n->armed) {
        ucs_status_t st = ucp_worker_arm(n->worker);
        if (st == UCS_ERR_BUSY) {
            net_progress(n);
            *again = true;
            return ncclSuccess;
        }
        if (st != UCS_OK)
            return fail(uc, TT_ERROR(ncclSystemError, "ucx: ucp_worker_arm failed: %s",
                                     ucs_status_string(st)));
        n->armed = true;
    }
    hint->fd = n->efd;
    hint->events = POLLIN;
    return ncclSuccess;
}

static ncclResult_t recv_peek_locked(struct tt_conn *conn, struct ucx_conn *uc,
                                     const void **data, size_t *bytes, struct tt_op_desc *desc,
                                     struct tt_wait_hint *hint)
{
    if (uc->failed != ncclSuccess) return uc->failed;
    if (uc->credit_dirty) send_credit(conn, uc);
    for (int round = 0; round < 8; round++) {
        bool ready = false;
        ncclResult_t res = poll_oldest(conn, uc, &ready);
        if (res != ncclSuccess) return fail(uc, res);
        if (ready) {
            unsigned s = (unsigned)(uc->done % uc->depth);
            uc->misses = 0;
            *data = slot_of(uc, uc->done) + UCX_SLOT_LEAD;
            *bytes = uc->len[s];
            if (desc != NULL) *desc = uc->desc[s];
            return ncclSuccess;
        }
        if (round == 0 && !net_quiet(uc->net)) {
            net_progress(uc->net);
            continue;
        }
        /* Nothing more will come: the peer said how many frames it sent, or its endpoint
         * failed (after the progress above took whatever had arrived). */
        if ((res = poll_bye(conn, uc)) != ncclSuccess) return fail(uc, res);
        if (uc->bye_got && uc->done >= le64toh(uc->bye_buf))
            return fail(uc, TT_ERROR(ncclRemoteError,
                                     "ucx: peer rank %d closed the connection (after frame "
                                     "%" PRIu64 ")",
                                     conn->peer, uc->done));
        if (!peer_ok(conn, uc)) return peer_failed(conn, uc);
        bool again;
        TT_TRY(arm(uc, hint, &again));
        if (!again) return ncclSuccess;
    }
    return ncclSuccess;
}

static ncclResult_t ucx_recv_peek(struct tt_conn *conn, const void **data, size_t *bytes,
                                  struct tt_op_desc *desc, struct tt_wait_hint *hint)
{
    struct ucx_conn *uc = conn->priv;
    *data = NULL;
    *bytes = 0;
    pthread_mutex_lock(&uc->net->lock);
    ncclResult_t res = recv_peek_locked(conn, uc, data, bytes, desc, hint);
    pthread_mutex_unlock(&uc->net->lock);
    return res;
}

static ncclResult_t ucx_recv_release(struct tt_conn *conn)
{
    struct ucx_conn *uc = conn->priv;
    ncclResult_t res = ncclSuccess;
    pthread_mutex_lock(&uc->net->lock);
    unsigned s = (unsigned)(uc->done % uc->depth);
    if (uc->failed != ncclSuccess) {
        res = uc->failed;
    } else if (!uc->full[s]) {
        res = TT_ERROR(ncclInternalError, "ucx: release with no message from peer rank %d",
                       conn->peer);
    } else {
        /* The slot is free again: post the receive of the frame it holds next. */
        uc->done++;
        res = post_frame(conn, uc, uc->done + uc->depth - 1);
        if (res != ncclSuccess) fail(uc, res);
        else send_credit(conn, uc);
    }
    pthread_mutex_unlock(&uc->net->lock);
    return res;
}

/* Sender: polls what the peer sent back (credits, bye) and the sends that completed. */
static ncclResult_t sender_poll(struct tt_conn *conn, struct ucx_conn *uc)
{
    ncclResult_t res = reap_sends(conn, uc);
    if (res == ncclSuccess) res = poll_credit(conn, uc);
    if (res == ncclSuccess) res = poll_bye(conn, uc);
    return res == ncclSuccess ? res : fail(uc, res);
}

static bool slot_free(const struct ucx_conn *uc)
{
    return uc->posted - uc->credit < uc->depth && uc->req[uc->posted % uc->depth] == NULL;
}

static ncclResult_t send_acquire_locked(struct tt_conn *conn, struct ucx_conn *uc, void **slot,
                                        struct tt_wait_hint *hint)
{
    if (uc->failed != ncclSuccess) return uc->failed;
    for (int round = 0; round < 8; round++) {
        if (slot_free(uc)) {
            uc->misses = 0;
            *slot = slot_of(uc, uc->posted) + UCX_SLOT_LEAD;
            return ncclSuccess;
        }
        TT_TRY(sender_poll(conn, uc));
        if (slot_free(uc)) continue;
        if (round == 0 && !net_quiet(uc->net)) {
            net_progress(uc->net);
            continue;
        }
        if (!peer_ok(conn, uc)) return peer_failed(conn, uc);
        if (uc->bye_got)
            return fail(uc, TT_ERROR(ncclRemoteError,
                                     "ucx: peer rank %d stopped receiving (its communicator "
                                     "failed) after %" PRIu64 " of %" PRIu64 " frames",
                                     conn->peer, le64toh(uc->bye_buf), uc->posted));
        bool again;
        TT_TRY(arm(uc, hint, &again));
        if (!again) return ncclSuccess;
    }
    return ncclSuccess;
}

static ncclResult_t ucx_send_acquire(struct tt_conn *conn, void **slot, struct tt_wait_hint *hint)
{
    struct ucx_conn *uc = conn->priv;
    *slot = NULL;
    pthread_mutex_lock(&uc->net->lock);
    ncclResult_t res = send_acquire_locked(conn, uc, slot, hint);
    pthread_mutex_unlock(&uc->net->lock);
    return res;
}

static ncclResult_t ucx_send_commit(struct tt_conn *conn, size_t bytes,
                                    const struct tt_op_desc *desc)
{
    struct ucx_conn *uc = conn->priv;
    struct ucx_net *n = uc->net;
    ncclResult_t res = ncclSuccess;
    pthread_mutex_lock(&n->lock);
    if (uc->failed != ncclSuccess) {
        res = uc->failed;
    } else if (bytes > conn->slot_bytes || !slot_free(uc)) {
        res = TT_ERROR(ncclInternalError,
                       "ucx: commit of %zu bytes into a %zu-byte slot (%" PRIu64 " in flight)",
                       bytes, conn->slot_bytes, uc->posted - uc->credit);
    } else {
        uint8_t *hdr = slot_of(uc, uc->posted) + UCX_SLOT_LEAD - UCX_FRAME_HEADER_BYTES;
        tt_wire_put_u32(hdr, (uint32_t)bytes);
        tt_wire_put_u32(hdr + 4, (uint32_t)uc->posted ^ UCX_FRAME_MAGIC);
        tt_wire_put_desc(hdr + 8, desc);
        ucp_request_param_t param = {.op_attr_mask = 0};
        void *r = ucp_tag_send_nbx(n->peers[conn->peer].ep, hdr, UCX_FRAME_HEADER_BYTES + bytes,
                                   make_tag(KIND_DATA, conn->tag, n->rank, uc->posted), &param);
        if (UCS_PTR_IS_ERR(r)) {
            res = fail(uc, TT_ERROR(ncclRemoteError, "ucx: send to peer rank %d failed: %s",
                                    conn->peer, ucs_status_string(UCS_PTR_STATUS(r))));
        } else {
            uc->req[uc->posted % uc->depth] = r;
            uc->posted++;
            uc->need_flush = true;
            n->armed = false; /* the send may need a progress call that no event announces */
        }
    }
    pthread_mutex_unlock(&n->lock);
    return res;
}

/* Everything committed has left this process: every send completed, and a flush of the
 * endpoint found nothing queued inside UCX (its TCP transport completes a small send once the
 * bytes are in its own buffer, which only a progress call writes to a full socket). A flush can
 * also wait for the endpoint's wire-up, which needs the peer to progress, and a peer that has
 * all it needs may be elsewhere (in the bootstrap, or back in the user's code): so a flush that
 * has not completed within UCX_FLUSH_WAIT_NS counts as done, since its frames were handed to
 * UCX whole and the peer will take them when either side progresses next. */
static bool ucx_send_idle(struct tt_conn *conn)
{
    struct ucx_conn *uc = conn->priv;
    struct ucx_net *n = uc->net;
    bool idle = false;
    pthread_mutex_lock(&n->lock);
    if (uc->failed != ncclSuccess || sender_poll(conn, uc) != ncclSuccess) goto out;
    /* Nothing more can leave towards a failed peer: what it missed is its own error. */
    if (!peer_ok(conn, uc)) {
        idle = true;
        goto out;
    }
    for (unsigned s = 0; s < uc->depth; s++)
        if (uc->req[s] != NULL) goto out;
    if (uc->flush_req != NULL) {
        if (ucp_request_check_status(uc->flush_req) == UCS_INPROGRESS &&
            tt_time_ns() - uc->flush_since_ns < UCX_FLUSH_WAIT_NS)
            goto out;
        ucp_request_free(uc->flush_req); /* an unfinished one is freed when it completes */
        uc->flush_req = NULL;
    } else if (uc->need_flush) {
        ucp_request_param_t param = {.op_attr_mask = 0};
        void *r = ucp_ep_flush_nbx(n->peers[conn->peer].ep, &param);
        uc->need_flush = false;
        if (UCS_PTR_IS_PTR(r)) {
            uc->flush_req = r;
            uc->flush_since_ns = tt_time_ns();
            goto out;
        }
    }
    idle = true;
out:
    pthread_mutex_unlock(&n->lock);
    return idle;
}

static ncclResult_t ucx_progress(struct tt_conn *conn)
{
    struct ucx_conn *uc = conn->priv;
    struct ucx_net *n = uc->net;
    ncclResult_t res = ncclSuccess;
    pthread_mutex_lock(&n->lock);
    if (uc->failed != ncclSuccess) {
        res = uc->failed;
        goto out;
    }
    if (!net_quiet(n)) net_progress(n);
    if (conn->dir == TT_CONN_RECV) {
        if (uc->credit_dirty) send_credit(conn, uc);
        goto out;
    }
    res = sender_poll(conn, uc);
out:
    pthread_mutex_unlock(&n->lock);
    return res;
}

/* ---- Selection ------------------------------------------------------------------------------ */

/* Any peer, when NCCL_NET (or TUTTI_NET) asks for UCX; shared memory comes first in the table,
 * so only the peers it does not serve get here. */
static bool ucx_can_reach(const struct tt_reach *r)
{
    return tt_transport_net_is_ucx();
}

const struct tt_transport tt_transport_ucx = {
    .name = "ucx",
    .link = TT_LINK_TCP,
    .can_reach = ucx_can_reach,
    .setup = ucx_setup,
    .connect = ucx_connect,
    .close = ucx_close,
    .send_acquire = ucx_send_acquire,
    .send_commit = ucx_send_commit,
    .send_idle = ucx_send_idle,
    .recv_peek = ucx_recv_peek,
    .recv_release = ucx_recv_release,
    .progress = ucx_progress,
    .shutdown = ucx_shutdown,
    .ctx_fini = ucx_ctx_fini,
};
