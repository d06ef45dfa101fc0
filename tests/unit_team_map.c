/* Mapping a peer's memory file (transport/team.c, tt_team_map) must never expose this process to
 * SIGBUS: a file that its owner could still shrink, or that is shorter than the block the peer
 * publishes, is refused (the caller then copies with cross-memory attach, which fails with an
 * error instead). Runs two mailboxes, rank 0 and rank 1, in one process: "rank 1"'s files are
 * this process's own, which pidfd_getfd duplicates just as it would a peer's.
 *
 * Checked: a sealed file of the right size maps and shows what was written into it, and a second
 * lookup is served from the cache; an unsealed file and a sealed file shorter than the published
 * block are refused; a sealed file cannot be shrunk; a descriptor the peer has closed is
 * refused without disabling mapping from that peer. Exit 77 where pidfd_getfd is unavailable. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/team.h"

#include "check.h"

#define BLOCK ((size_t)1 << 20)

/* A memory file of `bytes`, filled with a pattern, sealed against shrinking when `seal`. */
static int make_file(size_t bytes, int seal)
{
    int fd = memfd_create("unit-host-map", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
        perror("memfd");
        exit(1);
    }
    unsigned char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    for (size_t i = 0; i < bytes; i++) p[i] = (unsigned char)(i * 7 + 3);
    munmap(p, bytes);
    if (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
        perror("F_ADD_SEALS");
        exit(1);
    }
    return fd;
}

static struct tt_team_region region(int fd, uint64_t id, size_t bytes)
{
    return (struct tt_team_region){.fd = fd, .id = id, .offset = 4096, .bytes = bytes,
                                   .lo = 0, .hi = bytes - 4096};
}

int main(void)
{
    long pidfd = syscall(SYS_pidfd_open, getpid(), 0);
    long probe = pidfd >= 0 ? syscall(SYS_pidfd_getfd, pidfd, 0, 0) : -1;
    if (probe < 0) {
        printf("unit_team_map: skipped: pidfd_getfd unavailable (%s)\n", strerror(errno));
        return 77;
    }
    close((int)probe);
    close((int)pidfd);

    struct tt_team *h[2] = {NULL, NULL};
    struct tt_team_info infos[2];
    uint64_t hash = ((uint64_t)getpid() << 20) ^ 0x5eed;
    for (int r = 0; r < 2; r++) {
        if (tt_team_create(r, 2, hash, 256, &h[r], &infos[r]) != ncclSuccess) {
            fprintf(stderr, "tt_team_create failed\n");
            return 1;
        }
    }
    for (int r = 0; r < 2; r++) {
        if (tt_team_attach(h[r], infos) != ncclSuccess) {
            fprintf(stderr, "tt_team_attach failed\n");
            return 1;
        }
    }

    /* Sealed, as large as published: mapped, the contents visible at the offset, cached. */
    int good = make_file(BLOCK, 1);
    struct tt_team_region r = region(good, 1, BLOCK);
    const unsigned char *m = tt_team_map(h[0], 1, &r);
    CHECK(m != NULL, "a sealed file of %zu bytes was not mapped", BLOCK);
    if (m != NULL) {
        size_t bad = 0;
        for (size_t i = 0; i < BLOCK - 4096; i++) bad += m[i] != (unsigned char)((i + 4096) * 7 + 3);
        CHECK(bad == 0, "%zu bytes of the mapped file differ from what was written", bad);
        CHECK(tt_team_map(h[0], 1, &r) == m, "a second lookup mapped the block again");
    }
    CHECK(ftruncate(good, 0) != 0 && errno == EPERM, "a sealed file could be shrunk");

    /* Unsealed: its owner could cut it under the mapping. */
    int loose = make_file(BLOCK, 0);
    r = region(loose, 2, BLOCK);
    CHECK(tt_team_map(h[0], 1, &r) == NULL, "an unsealed file was mapped");

    /* Sealed but shorter than the block the owner publishes: loads past its end would fault. */
    int small = make_file(BLOCK / 2, 1);
    r = region(small, 3, BLOCK);
    CHECK(tt_team_map(h[0], 1, &r) == NULL, "a file of %zu bytes was mapped as %zu", BLOCK / 2,
          BLOCK);

    /* A descriptor the peer no longer holds (EBADF): this block is refused, but later ones
     * still map (a one-off failure must not switch the peer to cross-memory attach for good). */
    r = region(9999, 4, BLOCK);
    CHECK(tt_team_map(h[0], 1, &r) == NULL, "a closed descriptor was mapped");
    int again = make_file(BLOCK, 1);
    r = region(again, 5, BLOCK);
    CHECK(tt_team_map(h[0], 1, &r) != NULL,
          "after one failed pidfd_getfd, a sealed file was no longer mapped");
    close(again);

    close(good);
    close(loose);
    close(small);
    for (int r2 = 0; r2 < 2; r2++) tt_team_destroy(h[r2]);
    printf("unit_team_map: %s (%d failed checks)\n", check_failures ? "FAILED" : "passed",
           (int)check_failures);
    return check_failures != 0;
}
