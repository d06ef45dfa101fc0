/* A port for a job's bootstrap root (NCCL_COMM_ID=127.0.0.1:PORT) that no other process can
 * take before the job's rank 0 starts the root: the socket listens from the moment the port is
 * picked and is handed down as tutti-run hands it to rank 0 (TUTTI_ROOT_FD, kept across exec;
 * src/bootstrap/root.c takes it when the address matches). A port picked, closed and bound
 * again later could meanwhile go to a test running beside this one. */
#ifndef TUTTI_TESTS_ROOT_PORT_H
#define TUTTI_TESTS_ROOT_PORT_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* Listens on 127.0.0.1:0, sets TUTTI_ROOT_FD for the processes started from here on and
 * returns the port, or -1 (after saying why). *fd_out gets the socket, for the caller to close
 * (and TUTTI_ROOT_FD to unset) once the job is done. */
static inline int root_port_hold(int *fd_out)
{
    *fd_out = -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int one = 1;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
        perror("root_port_hold");
        if (fd >= 0) close(fd);
        return -1;
    }
    char text[16];
    snprintf(text, sizeof text, "%d", fd);
    setenv("TUTTI_ROOT_FD", text, 1);
    *fd_out = fd;
    return ntohs(a.sin_port);
}

static inline void root_port_release(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
    unsetenv("TUTTI_ROOT_FD");
}

#endif
