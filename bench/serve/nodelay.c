/* Diagnostic for bench/serve/run.sh (NODELAY_SHIM=1): an LD_PRELOAD shim that sets TCP_NODELAY
 * on every socket a process accepts, to show what `wo serve` gains once its own listener does
 * so (axum::serve leaves Nagle's algorithm on; see BENCHMARKS.md). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static int nodelay(int fd) {
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
  static int (*real)(int, struct sockaddr *, socklen_t *, int);
  if (!real) real = (int (*)(int, struct sockaddr *, socklen_t *, int))dlsym(RTLD_NEXT, "accept4");
  return nodelay(real(fd, addr, len, flags));
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
  static int (*real)(int, struct sockaddr *, socklen_t *);
  if (!real) real = (int (*)(int, struct sockaddr *, socklen_t *))dlsym(RTLD_NEXT, "accept");
  return nodelay(real(fd, addr, len));
}
