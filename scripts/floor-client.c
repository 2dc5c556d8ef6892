/* The least a client can do to replay a trace open-loop over HTTP/1.1:
 * one thread, one epoll, a timerfd for send times, kept-alive connections,
 * one write per request and reads until Content-Length is complete. No
 * measurement, no JSON, no results. Its CPU per request is the floor that
 * the kernel's part of the work (loopback delivery, wakeups) sets on this
 * machine, to compare trace-replay's figure with.
 *
 *   cc -O2 -o floor-client scripts/floor-client.c
 *   floor-client PORT RATE N        # N requests at RATE per second
 *   floor-client PORT RATE N stream # streamed answers, read to their end
 */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONN 4096
#define BUF 65536

struct conn {
    int fd;
    int busy;
    size_t got;
    char buf[BUF];
};

static struct conn conns[MAX_CONN];
static int nconn;
static struct sockaddr_in addr;
static char request[1024];
static size_t request_len;
static int streaming;

static void die(const char *what) {
    perror(what);
    exit(2);
}

static struct conn *idle_conn(int ep) {
    for (int i = 0; i < nconn; i++)
        if (!conns[i].busy)
            return &conns[i];
    if (nconn == MAX_CONN) {
        fprintf(stderr, "floor-client: more than %d connections\n", MAX_CONN);
        exit(2);
    }
    struct conn *c = &conns[nconn];
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die("socket");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) < 0)
        die("connect");
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)nconn};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        die("epoll_ctl");
    nconn++;
    return c;
}

/* The response in c->buf is complete: headers and Content-Length bytes,
 * or, streamed, up to the last chunk of a chunked body. */
static int complete(struct conn *c) {
    c->buf[c->got] = 0;
    if (streaming)
        return c->got >= 7 && memcmp(c->buf + c->got - 7, "\r\n0\r\n\r\n", 7) == 0;
    char *end = strstr(c->buf, "\r\n\r\n");
    if (!end)
        return 0;
    char *cl = strcasestr(c->buf, "content-length:");
    if (!cl || cl > end) {
        fprintf(stderr, "floor-client: a response without Content-Length\n");
        exit(2);
    }
    size_t body = strtoul(cl + 15, NULL, 10);
    return c->got >= (size_t)(end + 4 - c->buf) + body;
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "stream") == 0)) {
        fprintf(stderr, "usage: floor-client PORT RATE N [stream]\n");
        return 2;
    }
    streaming = argc == 5;
    int port = atoi(argv[1]);
    double rate = atof(argv[2]);
    long n = atol(argv[3]);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const char *body = streaming
                           ? "{\"model\":\"sim\",\"messages\":[{\"role\":\"user\",\"content\":"
                             "\"request 1 says hello\"}],\"max_tokens\":16,\"stream\":true,"
                             "\"stream_options\":{\"include_usage\":true}}"
                           : "{\"model\":\"sim\",\"messages\":[{\"role\":\"user\",\"content\":"
                             "\"request 1 says hello\"}],\"max_tokens\":16,\"stream\":false}";
    request_len = snprintf(request, sizeof request,
                           "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n"
                           "content-type: application/json\r\ncontent-length: %zu\r\n\r\n%s",
                           port, strlen(body), body);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (ep < 0 || tfd < 0)
        die("epoll/timerfd");
    struct epoll_event tev = {.events = EPOLLIN | EPOLLET, .data.u32 = UINT32_MAX};
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &tev);

    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long sent = 0, done = 0;
    while (done < n) {
        /* Send everything due, then arm the timer for the next one. */
        while (sent < n) {
            double due = sent / rate;
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            double elapsed = (now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
            if (elapsed < due) {
                double at = start.tv_sec + start.tv_nsec / 1e9 + due;
                struct itimerspec its = {0};
                its.it_value.tv_sec = (time_t)at;
                its.it_value.tv_nsec = (long)((at - (time_t)at) * 1e9);
                timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
                break;
            }
            struct conn *c = idle_conn(ep);
            c->busy = 1;
            c->got = 0;
            if (write(c->fd, request, request_len) != (ssize_t)request_len)
                die("write");
            sent++;
        }
        struct epoll_event evs[64];
        int k = epoll_wait(ep, evs, 64, -1);
        if (k < 0 && errno != EINTR)
            die("epoll_wait");
        for (int i = 0; i < k; i++) {
            if (evs[i].data.u32 == UINT32_MAX)
                continue; /* the timer: the send loop above checks the clock */
            struct conn *c = &conns[evs[i].data.u32];
            if (c->got > BUF / 2) {
                /* Streamed: only the end matters. */
                memmove(c->buf, c->buf + c->got - 16, 16);
                c->got = 16;
            }
            ssize_t r = read(c->fd, c->buf + c->got, BUF - 1 - c->got);
            if (r <= 0) {
                fprintf(stderr, "floor-client: the server closed a connection\n");
                return 2;
            }
            c->got += r;
            if (c->busy && complete(c)) {
                c->busy = 0;
                done++;
            }
        }
    }
    printf("%ld requests, %d connections\n", done, nconn);
    return 0;
}
