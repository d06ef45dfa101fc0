/* UCX transport, setting up and tearing down (transport/ucx.h has the design and the wire
 * format): loading libucp at run time, the per-communicator UCP context and worker with one
 * endpoint per peer, a connection's staging ring, info blob and first posted receives, and
 * teardown, which frees a connection's buffers only after the worker is gone, since a
 * cancelled receive may still write them. */
#include <dlfcn.h>
#include <endian.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "transport/ucx.h"
#include "transport/wire.h"
#include "util/err.h"
#include "util/log.h"
#include "util/time.h"

/* The UCX functions (transport/ucx.h), filled by load_ucx. */
#define UCX_DEFINE(name) __typeof__(name) *tt_ucx_##name;
UCX_FUNCTIONS(UCX_DEFINE)
#undef UCX_DEFINE
ucs_global_opts_t *tt_ucx_ucs_global_opts;

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
    if ((*(void **)&tt_ucx_##name = dlsym(lib, #name)) == NULL) {                                  \
        snprintf(ucx_load_error, sizeof ucx_load_error, "libucp.so.0 lacks %s", #name);           \
        return;                                                                                    \
    }
    UCX_FUNCTIONS(UCX_RESOLVE)
#undef UCX_RESOLVE
    tt_ucx_ucs_global_opts = dlsym(lib, "ucs_global_opts");
    if (tt_ucx_ucs_global_opts == NULL)
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
void tt_ucx_net_progress(struct ucx_net *n)
{
    n->armed = false;
    for (int i = 0; i < 64 && ucp_worker_progress(n->worker) != 0; i++) {
    }
    n->progressed_ns = tt_time_ns();
}

/* Armed and nothing signalled since, not long ago: a progress call would find nothing. */
bool tt_ucx_net_quiet(struct ucx_net *n)
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
 * connections closed already), which UCX would otherwise report one by one at teardown: for at
 * most UCX_DRAIN_MS in all. A receive still in progress then may yet write its buffer, so the
 * buffers go on `*bufs` (*nbufs of them, heap-allocated), which the caller frees only after the
 * worker is destroyed. */
static void drain_unexpected(struct ucx_net *n, void ***bufs, size_t *nbufs)
{
    size_t cap = 0;
    *bufs = NULL;
    *nbufs = 0;
    uint64_t deadline = tt_deadline_after_ms(UCX_DRAIN_MS);
    while (!tt_deadline_passed(deadline)) {
        ucp_tag_recv_info_t info;
        ucp_tag_message_h msg = ucp_tag_probe_nb(n->worker, 0, 0, 1, &info);
        if (msg == NULL) return;
        if (*nbufs == cap) {
            size_t more = cap ? 2 * cap : 64;
            void **grown = realloc(*bufs, more * sizeof *grown);
            if (grown == NULL) return; /* the message stays: UCX warns about it, that is all */
            *bufs = grown;
            cap = more;
        }
        void *buf = malloc(info.length ? info.length : 1);
        if (buf == NULL) return;
        (*bufs)[(*nbufs)++] = buf;
        ucp_request_param_t param = {.op_attr_mask = 0};
        void *r = ucp_tag_msg_recv_nbx(n->worker, buf, info.length, msg, &param);
        struct tt_backoff b;
        tt_backoff_init(&b);
        while (UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS &&
               !tt_deadline_passed(deadline)) {
            if (ucp_worker_progress(n->worker) == 0) tt_backoff_pause(&b, NULL);
        }
        if (UCS_PTR_IS_PTR(r)) ucp_request_free(r); /* released by UCX once it completes */
    }
}

/* UCX's log level is the process's: quieting it for a moment is serialised, so that two
 * communicators doing so at once cannot leave it quiet (each restoring what the other set).
 * quiet_ucx_log lowers the level to `to`, when `want` and UCX is not set to debug, and
 * returns the level to restore; the lock is held until restore_ucx_log. */
static pthread_mutex_t ucx_log_lock = PTHREAD_MUTEX_INITIALIZER;

static ucs_log_level_t quiet_ucx_log(bool want, ucs_log_level_t to)
{
    pthread_mutex_lock(&ucx_log_lock);
    ucs_log_level_t level = ucs_global_opts.log_component.log_level;
    if (want && level < UCS_LOG_LEVEL_DEBUG && to < level)
        ucs_global_opts.log_component.log_level = to;
    return level;
}

static void restore_ucx_log(ucs_log_level_t level)
{
    ucs_global_opts.log_component.log_level = level;
    pthread_mutex_unlock(&ucx_log_lock);
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
        /* Peers that are slow to answer get the CPU meanwhile (ranks may share cores); an
         * abort arriving meanwhile ends the wait. */
        uint64_t deadline = tt_deadline_after_ms(UCX_CLOSE_MS);
        struct tt_backoff b;
        tt_backoff_init(&b);
        for (bool pending = reqs != NULL; pending;) {
            if (ucp_worker_progress(n->worker) == 0) tt_backoff_pause(&b, NULL);
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
            bool aborted = n->abort != NULL && atomic_load(n->abort);
            if (pending && (tt_deadline_passed(deadline) || aborted)) {
                TT_INFO(TT_SUB_NET, "ucx: endpoints not closed %s; destroying the worker anyway",
                        aborted ? "before the abort" : "within their time");
                for (int p = 0; p < n->nranks; p++)
                    if (reqs[p] != NULL) ucp_request_free(reqs[p]);
                break;
            }
        }
        free(reqs);
        /* Byes and credits of the peers still arriving meet closed connections: dropped here
         * (not after an abort, which must not wait), and UCX's warning about any that arrive
         * after the drain is held back. */
        void **bufs = NULL;
        size_t nbufs = 0;
        if (!force) drain_unexpected(n, &bufs, &nbufs);
        ucs_log_level_t level = quiet_ucx_log(true, UCS_LOG_LEVEL_ERROR);
        ucp_worker_destroy(n->worker);
        restore_ucx_log(level);
        for (size_t i = 0; i < nbufs; i++) free(bufs[i]);
        free(bufs);
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

void tt_ucx_ctx_fini(struct tt_transport_ctx *ctx)
{
    struct ucx_net **slot = net_of(ctx);
    if (slot == NULL || *slot == NULL) return;
    net_destroy(*slot);
    *slot = NULL;
}

/* ---- Setup and connect ---------------------------------------------------------------------- */
ncclResult_t tt_ucx_setup(struct tt_transport_ctx *ctx, struct tt_conn *conn,
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
         * its log is quieted for that try (only UCX's own log level; another thread's UCX
         * line meanwhile can at worst be dropped). */
        ucs_log_level_t level = quiet_ucx_log(checked, UCS_LOG_LEVEL_FATAL);
        st = ucp_ep_create(n->worker, &params, &p->ep);
        restore_ucx_log(level);
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

/* Posts a receive of `bytes` into buf for exactly `tag`, always through a request (*req;
 * *done stays false): a receive that completed at posting would give no length here (UCX
 * 1.13 left *info unset: every credit then read as 0 bytes), and every message's length is
 * checked, from ucp_tag_recv_request_test. */
static ncclResult_t post_recv(struct ucx_net *n, void *buf, size_t bytes, ucp_tag_t tag,
                              void **req, bool *done, ucp_tag_recv_info_t *info)
{
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO |
                                                 UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
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
ncclResult_t tt_ucx_take_frame(struct tt_conn *conn, struct ucx_conn *uc, uint64_t frame,
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
ncclResult_t tt_ucx_post_frame(struct tt_conn *conn, struct ucx_conn *uc, uint64_t frame)
{
    unsigned s = (unsigned)(frame % uc->depth);
    bool done;
    ucp_tag_recv_info_t info = {.length = 0};
    uc->full[s] = false;
    /* Through a request, as control messages: a frame that arrived before its receive was
     * posted would otherwise complete at posting with no length (poll_oldest reads it). */
    return post_recv(uc->net, slot_of(uc, frame) + UCX_SLOT_LEAD - UCX_FRAME_HEADER_BYTES,
                     UCX_FRAME_HEADER_BYTES + conn->slot_bytes,
                     make_tag(KIND_DATA, conn->tag, conn->peer, frame), &uc->req[s], &done,
                     &info);
}

/* A control message (credit or bye) is one u64: anything shorter would leave stale bytes. */
ncclResult_t tt_ucx_check_ctl(const struct tt_conn *conn, size_t length)
{
    if (length == sizeof(uint64_t)) return ncclSuccess;
    return TT_ERROR(ncclRemoteError, "ucx: peer rank %d sent a control message of %zu bytes, "
                                     "not 8", conn->peer, length);
}

/* The control receive of this side: credits (sender) and the peer's bye (both). */
ncclResult_t tt_ucx_post_credit_recv(struct tt_conn *conn, struct ucx_conn *uc, bool *done)
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

ncclResult_t tt_ucx_connect(struct tt_transport_ctx *ctx, struct tt_conn *conn,
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
            res = tt_ucx_post_frame(conn, uc, f);
    if (res == ncclSuccess && conn->dir == TT_CONN_SEND) {
        bool done;
        res = tt_ucx_post_credit_recv(conn, uc, &done);
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
void tt_ucx_close(struct tt_conn *conn)
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
void tt_ucx_shutdown(struct tt_conn *conn)
{
    struct ucx_conn *uc = conn->priv;
    if (uc == NULL) return;
    pthread_mutex_lock(&uc->net->lock);
    send_bye(conn, uc);
    pthread_mutex_unlock(&uc->net->lock);
}
