/* Tests that check what the library leaves in /dev/shm: a private tmpfs there, so that the
 * count sees this test's entries only, and the count of entries with a given prefix. */
#ifndef TUTTI_TESTS_PRIVATE_SHM_H
#define TUTTI_TESTS_PRIVATE_SHM_H

#include <dirent.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mount.h>

/* Mounts a private tmpfs on /dev/shm in a mount namespace of this process (root, or a user
 * namespace); children forked later share it. False when that is not allowed. */
static inline bool private_dev_shm(void)
{
    if (unshare(CLONE_NEWNS) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return false;
    return mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=512m") == 0;
}

/* Entries of `dir` whose names start with `prefix` ("" counts all but . and ..); -1 when the
 * directory cannot be read. */
static inline int count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

#endif
