/* The C library symbols tree-sitter's C (the runtime and the grammars' scanners) links
 * against, for wasm32-unknown-unknown, which has no libc. Compiled by build.rs against the
 * wasi-libc headers (only for their declarations); the malloc family is in libc_shim.rs
 * (Rust's allocator). tree-sitter uses stdio only for its debug graphs and logging, which
 * the index never turns on, so those are no-ops; the clock is only read for parse timeouts,
 * which the index never sets. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <wctype.h>

struct __clockid { unsigned int id; };
/* wasi-libc's CLOCK_MONOTONIC is the address of this object. */
const struct __clockid _CLOCK_MONOTONIC = { 1 };

int strncmp(const char *a, const char *b, size_t n) {
  for (; n > 0; a++, b++, n--) {
    unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
    if (x != y) return x < y ? -1 : 1;
    if (x == 0) return 0;
  }
  return 0;
}

/* The grammars call these on code points. A native `wo` never calls setlocale, so glibc
 * answers for the "C" locale: ASCII only (no code point above 127 is a space or a letter
 * there). The same answers here keep the browser's chunks equal to the native ones. */
int iswspace(wint_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
int iswalpha(wint_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
int iswalnum(wint_t c) { return iswalpha(c) || (c >= '0' && c <= '9'); }

FILE *const stderr = NULL;
int vsnprintf(char *buf, size_t n, const char *fmt, va_list ap) {
  (void)fmt; (void)ap;
  if (n > 0) buf[0] = 0;
  return 0;
}
int snprintf(char *buf, size_t n, const char *fmt, ...) {
  (void)fmt;
  if (n > 0) buf[0] = 0;
  return 0;
}
int fprintf(FILE *f, const char *fmt, ...) { (void)f; (void)fmt; return 0; }
size_t fwrite(const void *p, size_t size, size_t n, FILE *f) { (void)p; (void)size; (void)f; return n; }
int fputc(int c, FILE *f) { (void)f; return c; }
int fputs(const char *s, FILE *f) { (void)s; (void)f; return 0; }
FILE *fdopen(int fd, const char *mode) { (void)fd; (void)mode; return NULL; }
int fclose(FILE *f) { (void)f; return 0; }
int clock_gettime(clockid_t id, struct timespec *ts) {
  (void)id;
  ts->tv_sec = 0;
  ts->tv_nsec = 0;
  return 0;
}
_Noreturn void abort(void) { __builtin_trap(); }
_Noreturn void __assert_fail(const char *expr, const char *file, int line, const char *func) {
  (void)expr; (void)file; (void)line; (void)func;
  __builtin_trap();
}
