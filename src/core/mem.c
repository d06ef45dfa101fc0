/* Memory: ncclMemAlloc blocks, and the pages of registered buffers moved into memory files.
 *
 * An ncclMemAlloc block is an anonymous memory file (memfd) mapped shared, so that other ranks
 * of the host can later map the very same pages; a process-wide registry (under a mutex) maps
 * each block's address to its file and size, and ncclMemFree accepts only addresses found there.
 * In a CUDA build a thread with a current device gets device memory instead, as from NCCL (the
 * device layer allocates it and keeps its list: never a memory file).
 *
 * A registration (ncclCommRegister, ncclCommWindowRegister) of ordinary memory moves the
 * buffer's whole pages into such a file too ("sharing" them), so that peers map them just the
 * same: the pages are copied into a new memory file, and the file's mapping is moved over the
 * old pages with mremap, which swaps them in one step, contents unchanged, while other threads
 * keep running. The partial pages at either end stay private (they hold other data, which other
 * threads may be writing); peers reach those few bytes with cross-memory attach. Only pages of
 * private anonymous writable mappings are moved (malloc's heap and mmap'd chunks; never files,
 * shared memory or the main thread's stack), and only 64 KiB or more. While shared the pages are
 * MADV_DONTFORK, as RDMA-registered memory is: a child of fork() does not get them, so it cannot
 * silently share them with the parent. The last deregistration swaps private pages back the same
 * way, after checking that the range still holds the file (a buffer freed and unmapped while
 * registered is left alone; a registration that meets such a stale record drops it). Registrations
 * of one range from several communicators share one file, counted. The buffer must not be
 * written by another thread during the registration or deregistration call itself (a write
 * between the copy and the swap would be lost), nor freed before it is deregistered;
 * TUTTI_REGISTER_REMAP=0 makes registrations bookkeeping only. Peers keep their mappings of a
 * block cached after it dies, so freeing a block, or the last deregistration of moved pages,
 * drops the file's pages from every mapping (release_file) once this process maps it no more.
 * The registrations and windows that hold such pages are core/mem_reg.c's. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/mem.h"
#include "device/device.h"
#include "transport/team.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

/* ---- ncclMemAlloc blocks ------------------------------------------------------------------ */

struct tt_mem_block {
    void *ptr;
    size_t bytes;
    int fd;
    uint64_t id; /* process-unique, never reused: peers cache their mappings by it */
    bool shared_pages; /* ordinary pages moved here by registrations, not ncclMemAlloc's */
    int refs;          /* registrations holding shared_pages */
    pid_t owner;       /* the process that made the file (a child of fork() inherits the list) */
    struct tt_mem_block *next;
};

static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tt_mem_block *blocks;
static uint64_t next_block_id = 1;
static _Atomic size_t live_blocks; /* lets tt_mem_region skip the lock when there are none */

static void release_file(int fd, size_t bytes);

/* A new memory file of `bytes` (its pages reserved now when `reserve`, else on first touch),
 * sealed at that size: F_SEAL_SHRINK means no process, this one or a peer holding the
 * descriptor, can cut the file under the peers' mappings, whose loads would then raise SIGBUS;
 * peers map only files that carry it (transport/team.c). -1 with errno on failure. */
static int sealed_file(const char *name, size_t bytes, bool reserve)
{
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    if ((reserve ? fallocate(fd, 0, 0, (off_t)bytes) : ftruncate(fd, (off_t)bytes)) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

ncclResult_t tt_mem_alloc(void **ptr, size_t bytes)
{
    /* As NCCL: device memory on the current device when the thread has one. */
    void *dev = NULL;
    TT_TRY(tt_device_mem_alloc(&dev, bytes));
    if (dev != NULL) {
        *ptr = dev;
        return ncclSuccess;
    }
    return tt_mem_alloc_host(ptr, bytes);
}

ncclResult_t tt_mem_alloc_host(void **ptr, size_t bytes)
{
    ncclResult_t res = ncclSuccess;
    struct tt_mem_block *block = NULL;
    void *map = MAP_FAILED;
    int fd = sealed_file("tutti-mem", bytes, false);
    if (fd < 0)
        return TT_ERROR(ncclSystemError, "ncclMemAlloc: no memory file of %zu bytes: %s", bytes,
                        tt_strerror(errno));
    map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        res = TT_ERROR(ncclSystemError, "ncclMemAlloc: mapping %zu bytes failed: %s", bytes,
                       strerror(errno));
        goto fail;
    }
    TT_TRY_GOTO(TT_CALLOC(&block, 1), res, fail);
    block->ptr = map;
    block->bytes = bytes;
    block->fd = fd;
    block->owner = getpid();
    pthread_mutex_lock(&blocks_lock);
    block->id = next_block_id++;
    block->next = blocks;
    blocks = block;
    atomic_fetch_add(&live_blocks, 1);
    pthread_mutex_unlock(&blocks_lock);
    TT_INFO(TT_SUB_ALLOC, "ncclMemAlloc: %zu bytes at %p (memfd %d)", bytes, map, fd);
    *ptr = map;
    return ncclSuccess;
fail:
    if (map != MAP_FAILED) munmap(map, bytes);
    close(fd);
    return res;
}

ncclResult_t tt_mem_free(void *ptr)
{
    struct tt_mem_block *block = NULL;
    pthread_mutex_lock(&blocks_lock);
    for (struct tt_mem_block **p = &blocks; *p != NULL; p = &(*p)->next) {
        if ((*p)->ptr == ptr && !(*p)->shared_pages) {
            block = *p;
            *p = block->next;
            atomic_fetch_sub(&live_blocks, 1);
            break;
        }
    }
    pthread_mutex_unlock(&blocks_lock);
    ncclResult_t res = ncclSuccess;
    if (block == NULL && tt_device_mem_free(ptr, &res)) return res;
    if (block == NULL)
        return TT_ERROR(ncclInvalidArgument,
                        "ncclMemFree: %p was not returned by ncclMemAlloc (or was freed already)",
                        ptr);
    TT_INFO(TT_SUB_ALLOC, "ncclMemFree: %zu bytes at %p", block->bytes, ptr);
    munmap(block->ptr, block->bytes);
    /* A child of fork() shares the block's pages with its parent (a shared mapping of the same
     * file): dropping them would wipe the parent's data. The child lets go of its view only. */
    if (block->owner == getpid())
        release_file(block->fd, block->bytes);
    else
        close(block->fd);
    free(block);
    return ncclSuccess;
}

bool tt_mem_region(const void *ptr, size_t bytes, struct tt_team_region *out)
{
    *out = (struct tt_team_region){.fd = -1};
    if (ptr == NULL || bytes == 0 ||
        atomic_load_explicit(&live_blocks, memory_order_relaxed) == 0)
        return false;
    uintptr_t lo = (uintptr_t)ptr, hi = lo + bytes;
    if (hi < lo) return false;
    pthread_mutex_lock(&blocks_lock);
    for (const struct tt_mem_block *b = blocks; b != NULL; b = b->next) {
        uintptr_t base = (uintptr_t)b->ptr, end = base + b->bytes;
        /* An ncclMemAlloc block must hold the whole buffer; shared pages may hold a part. */
        uintptr_t from = lo > base ? lo : base, to = hi < end ? hi : end;
        if (from >= to || (!b->shared_pages && (from != lo || to != hi))) continue;
        *out = (struct tt_team_region){.fd = b->fd, .id = b->id, .offset = from - base,
                                       .bytes = b->bytes, .lo = from - lo, .hi = to - lo};
        break;
    }
    pthread_mutex_unlock(&blocks_lock);
    return out->fd >= 0;
}

/* Whether [ptr, ptr + bytes) lies inside one ncclMemAlloc block. */
bool tt_mem_in_allocated_block(const void *ptr, size_t bytes)
{
    uintptr_t lo = (uintptr_t)ptr;
    bool found = false;
    pthread_mutex_lock(&blocks_lock);
    for (const struct tt_mem_block *b = blocks; b != NULL && !found; b = b->next) {
        uintptr_t base = (uintptr_t)b->ptr;
        found = !b->shared_pages && lo >= base && lo - base <= b->bytes &&
                bytes <= b->bytes - (lo - base);
    }
    pthread_mutex_unlock(&blocks_lock);
    return found;
}

/* ---- sharing the pages of registered ordinary memory -------------------------------------- */

#define SHARE_MIN_BYTES ((size_t)64 << 10)

/* Whether a mapping of /proc/self/maps (`name` its path, possibly empty) is private anonymous
 * writable memory: malloc's heap, its mmap'd chunks and arenas. */
static bool private_anonymous(const char *perms, unsigned long inode, const char *name)
{
    return strcmp(perms, "rw-p") == 0 && inode == 0 &&
           (name[0] == '\0' || strcmp(name, "[heap]") == 0 || strncmp(name, "[anon:", 6) == 0);
}

/* One line of /proc/self/maps. */
struct mapping {
    unsigned long start, end, inode;
    char perms[8];
    const char *name; /* its path, possibly empty; points into the line */
};

/* Reads the next mapping of `f` into *m (the line's storage in *line, *cap). */
static bool next_mapping(FILE *f, char **line, size_t *cap, struct mapping *m)
{
    while (getline(line, cap, f) > 0) {
        unsigned long offset;
        unsigned dev_major, dev_minor;
        int name_at = 0;
        if (sscanf(*line, "%lx-%lx %7s %lx %x:%x %lu %n", &m->start, &m->end, m->perms, &offset,
                   &dev_major, &dev_minor, &m->inode, &name_at) < 7 || name_at == 0)
            continue;
        char *name = *line + name_at;
        name[strcspn(name, "\n")] = '\0';
        m->name = name;
        return true;
    }
    return false;
}

/* Whether every byte of [lo, hi) lies in private anonymous memory (want_ino 0) or in shared
 * mappings of the memory file whose inode is want_ino. */
static bool range_mapped_as(uintptr_t lo, uintptr_t hi, unsigned long want_ino)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (f == NULL) return false;
    char *line = NULL;
    size_t cap = 0;
    uintptr_t covered = lo;
    bool ok = true;
    struct mapping m;
    while (ok && covered < hi && next_mapping(f, &line, &cap, &m)) {
        if (m.end <= covered) continue;
        if (m.start > covered) break; /* a hole */
        ok = want_ino != 0 ? m.inode == want_ino && strcmp(m.perms, "rw-s") == 0
                           : private_anonymous(m.perms, m.inode, m.name);
        covered = m.end;
    }
    free(line);
    fclose(f);
    return ok && covered >= hi;
}

/* Whether anything in this process still maps the memory file whose inode is `ino` (true when
 * that cannot be read, which keeps the file's pages). */
static bool file_mapped_here(unsigned long ino)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (f == NULL) return true;
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    struct mapping m;
    while (!found && next_mapping(f, &line, &cap, &m))
        found = m.inode == ino && m.name[0] != '\0' && strstr(m.name, "memfd:") != NULL;
    free(line);
    fclose(f);
    return found;
}

/* Closes a block's memory file after dropping its pages: peers keep their mappings of a block
 * cached after it dies (until evicted or their communicator goes), and without this the pages
 * would live on in those mappings. A hole punched over the whole file takes every page out of
 * every mapping at once, so the memory returns to the system now; a peer that touched the block
 * afterwards (only an operation still running on a freed buffer could) reads zeros instead of
 * faulting, since the file keeps its size. Called only once this process maps the file no more. */
static void release_file(int fd, size_t bytes)
{
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes) != 0)
        TT_INFO(TT_SUB_ALLOC, "dropping the pages of a memory file of %zu bytes failed (%s): "
                "they live until the peers unmap it", bytes, strerror(errno));
    close(fd);
}

/* Swaps the pages at `at` for those at `pages` (both `bytes` long, `pages` a mapping of its own),
 * in one step. The kernel unmaps the destination before it moves the source, so a move that
 * fails late may leave `at` unmapped: then `fd`'s file (whose pages hold the data, whichever way
 * the swap went) is mapped there instead, and the caller learns the range is shared. Returns
 * whether `at` now holds `pages`' contents (true also in that fallback, with *fell_back set). */
static bool swap_in(void *at, void *pages, size_t bytes, int fd, bool *fell_back)
{
    *fell_back = false;
    if (mremap(pages, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, at) != MAP_FAILED) return true;
    unsigned char probe;
    if (mincore(at, 1, &probe) == 0 || errno != ENOMEM) return false; /* still mapped: untouched */
    *fell_back = mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == at;
    return *fell_back;
}

/* Whether `b` still holds its file over its whole range: false once the buffer was freed (and
 * perhaps its addresses reused) while registered. */
static bool block_intact(const struct tt_mem_block *b)
{
    struct stat st;
    return fstat(b->fd, &st) == 0 &&
           range_mapped_as((uintptr_t)b->ptr, (uintptr_t)b->ptr + b->bytes, st.st_ino);
}

/* Unlinks `b` from the registry (blocks_lock held). */
static void unlink_block(struct tt_mem_block *b)
{
    for (struct tt_mem_block **p = &blocks; *p != NULL; p = &(*p)->next) {
        if (*p == b) {
            *p = b->next;
            atomic_fetch_sub(&live_blocks, 1);
            return;
        }
    }
}

static bool (*_Atomic range_waiter)(const void *ptr, size_t bytes);

void tt_mem_set_range_waiter(bool (*wait)(const void *ptr, size_t bytes))
{
    atomic_store(&range_waiter, wait);
}

/* Moving pages under a queued operation would lose its writes, or let its peers map a memory
 * file emptied under them: the move waits for such operations first. */
static bool wait_range_idle(const void *ptr, size_t bytes)
{
    bool (*wait)(const void *, size_t) = atomic_load(&range_waiter);
    if (wait == NULL || wait(ptr, bytes)) return true;
    TT_WARN("%zu bytes at %p: operations queued on them did not end within TUTTI_TIMEOUT_MS; "
            "their pages are not moved", bytes, ptr);
    return false;
}

struct tt_mem_block *tt_mem_share_pages(void *buff, size_t bytes)
{
    if (tt_param_register_remap() == 0) return NULL;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)buff + page - 1) / page * page;
    uintptr_t hi = ((uintptr_t)buff + bytes) / page * page;
    if ((uintptr_t)buff + bytes < (uintptr_t)buff || hi <= lo || hi - lo < SHARE_MIN_BYTES)
        return NULL;
    size_t len = hi - lo;
    struct tt_mem_block *block = NULL;
    void *pages = MAP_FAILED;
    int fd = -1;
    if (tt_device_host_pinned(buff)) {
        /* The device reaches these pages by DMA: moved, it would go on using the old ones. */
        TT_INFO(TT_SUB_REG, "registration of %p (%zu bytes): pinned for the device "
                "(cudaHostRegister), so its pages are not moved", buff, bytes);
        return NULL;
    }
    /* Before the lock: the engine may take it. */
    if (!wait_range_idle((void *)lo, len)) return NULL;
    /* The lock is held throughout, the copy included: registrations are rare, and two of one
     * range must not both move it. */
    pthread_mutex_lock(&blocks_lock);
    for (struct tt_mem_block *b = blocks, *next; b != NULL; b = next) {
        next = b->next;
        uintptr_t base = (uintptr_t)b->ptr;
        if (base >= hi || base + b->bytes <= lo) continue;
        if (b->shared_pages && !block_intact(b)) {
            /* Freed while registered: forget it (its holders still release it) and look on. */
            TT_WARN("registration of %p: the %zu bytes at %p registered before were freed "
                    "without deregistering them", buff, b->bytes, b->ptr);
            unlink_block(b);
            continue;
        }
        if (b->shared_pages && base == lo && b->bytes == len) {
            b->refs++;
            block = b;
        } else if (!b->shared_pages && (uintptr_t)buff >= base &&
                   (uintptr_t)buff + bytes <= base + b->bytes) {
            TT_INFO(TT_SUB_REG, "registration of %p (%zu bytes): ncclMemAlloc memory, "
                    "shareable as it is", buff, bytes);
        } else {
            TT_INFO(TT_SUB_REG, "registration of %p (%zu bytes) overlaps %s at %p: its pages "
                    "are not moved", buff, bytes,
                    b->shared_pages ? "another registration" : "an ncclMemAlloc block", b->ptr);
        }
        pthread_mutex_unlock(&blocks_lock);
        return block;
    }
    if (!range_mapped_as(lo, hi, 0)) {
        TT_INFO(TT_SUB_REG, "registration of %p (%zu bytes): not private anonymous memory, so "
                "its pages are not moved; peers copy it with cross-memory attach", buff, bytes);
        goto out;
    }
    /* The file's pages are reserved now: memory that runs short fails here, not in the copy. */
    fd = sealed_file("tutti-registered", len, true);
    if (fd < 0 || TT_CALLOC(&block, 1) != ncclSuccess) {
        TT_INFO(TT_SUB_REG, "registration of %p: no memory file of %zu bytes (%s)", buff, len,
                strerror(errno));
        goto out;
    }
    pages = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (pages == MAP_FAILED) goto out;
    /* Not inherited by fork(), set before the move (mremap carries it along), so that a child
     * forked at any moment never shares these pages with the parent; set again below for the
     * fallback, which maps the file anew. */
    madvise(pages, len, MADV_DONTFORK);
    memcpy(pages, (void *)lo, len);
    bool fell_back;
    if (!swap_in((void *)lo, pages, len, fd, &fell_back)) {
        TT_INFO(TT_SUB_REG, "registration of %p: moving %zu bytes failed (%s)", buff, len,
                strerror(errno));
        goto out;
    }
    if (fell_back) munmap(pages, len);
    pages = MAP_FAILED;
    madvise((void *)lo, len, MADV_DONTFORK);
    *block = (struct tt_mem_block){.ptr = (void *)lo, .bytes = len, .fd = fd, .id = next_block_id++,
                                .shared_pages = true, .refs = 1, .next = blocks};
    blocks = block;
    atomic_fetch_add(&live_blocks, 1);
    TT_INFO(TT_SUB_REG, "registration of %p (%zu bytes): %zu bytes at %p moved into memory "
            "file %llu", buff, bytes, len, (void *)lo, (unsigned long long)block->id);
    pthread_mutex_unlock(&blocks_lock);
    return block;
out:
    if (pages != MAP_FAILED) munmap(pages, len);
    if (fd >= 0) close(fd);
    free(block);
    pthread_mutex_unlock(&blocks_lock);
    return NULL;
}

void tt_mem_leave_pages(struct tt_mem_block *block)
{
    if (block == NULL) return;
    pthread_mutex_lock(&blocks_lock);
    if (block->refs > 0) block->refs--;
    pthread_mutex_unlock(&blocks_lock);
}

void tt_mem_unshare_pages(struct tt_mem_block *block)
{
    if (block == NULL) return;
    pthread_mutex_lock(&blocks_lock);
    if (--block->refs > 0) {
        pthread_mutex_unlock(&blocks_lock);
        return;
    }
    unlink_block(block); /* a no-op when a registration found it stale and unlinked it */
    pthread_mutex_unlock(&blocks_lock);
    struct stat st;
    bool shared_still = false;
    if (!wait_range_idle(block->ptr, block->bytes)) {
        /* An operation still queued on the range would lose its writes if the pages moved,
         * and it may yet publish the file's descriptor to its peers: the block stays as it
         * is, linked, its file open (closed, the number could name another file by then). */
        TT_WARN("deregistration: operations queued on the %zu bytes at %p did not finish "
                "within TUTTI_TIMEOUT_MS; the pages stay shared and their memory file open",
                block->bytes, block->ptr);
        pthread_mutex_lock(&blocks_lock);
        block->next = blocks;
        blocks = block;
        atomic_fetch_add(&live_blocks, 1);
        pthread_mutex_unlock(&blocks_lock);
        return;
    } else if (!block_intact(block)) {
        TT_WARN("deregistration: the %zu bytes at %p no longer hold their memory file (freed "
                "while registered?); left as they are", block->bytes, block->ptr);
    } else {
        void *pages = mmap(NULL, block->bytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        bool fell_back = false;
        if (pages != MAP_FAILED) memcpy(pages, block->ptr, block->bytes);
        if (pages == MAP_FAILED || !swap_in(block->ptr, pages, block->bytes, block->fd,
                                            &fell_back) || fell_back) {
            TT_WARN("deregistration: could not give the %zu bytes at %p private pages back "
                    "(%s); they stay shared", block->bytes, block->ptr, strerror(errno));
            if (pages != MAP_FAILED) munmap(pages, block->bytes);
            shared_still = true;
        } else {
            TT_INFO(TT_SUB_REG, "deregistration: %zu bytes at %p are private again",
                    block->bytes, block->ptr);
        }
    }
    /* The file's pages go only where nothing here maps it any more: not where the swap failed,
     * nor where a buffer freed while registered was moved elsewhere whole (realloc's mremap). */
    if (!shared_still && fstat(block->fd, &st) == 0 && !file_mapped_here(st.st_ino))
        release_file(block->fd, block->bytes);
    else
        close(block->fd);
    free(block);
}
