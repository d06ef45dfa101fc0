/* TUTTI_DUMP_SIGNAL=1: SIGUSR1 makes every live communicator of the process log its stalled
 * operations (tt_state_flight_dump), as tuttiCommDump does for one. The handler only writes a
 * byte into a pipe; a thread of its own reads it and dumps outside the signal. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/lifecycle.h"
#include "util/log.h"

/* Communicators dumped per signal, at most. */
#define DUMP_MAX 4096

static bool every(struct ncclComm *comm)
{
    (void)comm;
    return true;
}

static int dump_pipe[2] = {-1, -1};
/* What handled SIGUSR1 before (a job scheduler's preemption handler, say): still called. */
static struct sigaction previous_usr1;

static void on_dump_signal(int sig, siginfo_t *info, void *context)
{
    int saved = errno;
    char c = 1;
    ssize_t ignored = write(dump_pipe[1], &c, 1); /* async-signal-safe; a full pipe drops it */
    (void)ignored;
    errno = saved;
    if (previous_usr1.sa_flags & SA_SIGINFO)
        previous_usr1.sa_sigaction(sig, info, context);
    else if (previous_usr1.sa_handler != SIG_DFL && previous_usr1.sa_handler != SIG_IGN)
        previous_usr1.sa_handler(sig);
}

/* Waits for the signal handler's byte and dumps every live communicator. */
static void *dump_main(void *arg)
{
    (void)arg;
    char c;
    struct ncclComm **comms = malloc(DUMP_MAX * sizeof *comms);
    for (;;) {
        ssize_t n = read(dump_pipe[0], &c, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        /* In a call, as a caller is, so that Destroy and Abort wait for this thread before they
         * free a communicator it dumps; and the dumps log outside the registry's lock, so that
         * a log that blocks (stderr into a full pipe) holds up no other call. */
        struct tt_call_rec *rec = tt_call_enter();
        size_t cursor = 0;
        size_t count = comms == NULL ? 0 : tt_comm_pick(every, comms, DUMP_MAX, &cursor);
        for (size_t i = 0; i < count; i++) tt_state_flight_dump(&comms[i]->st, "SIGUSR1");
        tt_call_leave(&rec);
    }
    free(comms);
    return NULL;
}

/* A child of fork() has no dump thread: its SIGUSR1 must not reach the parent's (which would
 * dump the parent's communicators). Its handler's write then fails quietly; the program's own
 * handler is still called. */
static void dump_forget_in_child(void)
{
    close(dump_pipe[0]);
    close(dump_pipe[1]);
    dump_pipe[0] = dump_pipe[1] = -1;
}

static void start(void)
{
    if (pipe2(dump_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    pthread_atfork(NULL, NULL, dump_forget_in_child);
    /* The reader blocks; only the handler's end stays nonblocking. */
    fcntl(dump_pipe[0], F_SETFL, 0);
    pthread_t thread;
    if (pthread_create(&thread, NULL, dump_main, NULL) != 0) return;
    pthread_detach(thread);
    struct sigaction sa = {.sa_sigaction = on_dump_signal, .sa_flags = SA_RESTART | SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, &previous_usr1);
    TT_INFO(TT_SUB_INIT, "SIGUSR1 dumps every communicator's stalled operations");
}

void tt_dump_signal_start(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, start);
}
