/* Helpers shared by the libpki C tests. */
#ifndef LIBPKI_TEST_COMMON_H
#define LIBPKI_TEST_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpki.h>

static int failures __attribute__((unused)) = 0;

/* The calling thread's last libpki error, in a static buffer. */
static inline const char *last_error(void) {
    static __thread char buf[1024];
    pki_last_error(buf, sizeof buf);
    return buf;
}

/* Checks that `call` returned `expected`; counts and reports a mismatch. */
#define EXPECT(call, expected)                                                        \
    do {                                                                              \
        pki_result got_ = (call);                                                     \
        if (got_ != (pki_result)(expected)) {                                         \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__,    \
                    __LINE__, #call, pki_result_str(got_), pki_result_str(expected),  \
                    last_error());                                                    \
            failures++;                                                               \
        }                                                                             \
    } while (0)

#define EXPECT_OK(call) EXPECT(call, PKI_RESULT_OK)

/* Checks a condition; counts and reports a failure. */
#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

/* Reads a whole file into a malloc'd buffer; exits on error. */
static inline unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        exit(2);
    }
    size_t cap = 4096, n = 0;
    unsigned char *data = malloc(cap);
    size_t got;
    while (data && (got = fread(data + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            unsigned char *bigger = realloc(data, cap);
            if (!bigger) {
                free(data);
                data = NULL;
            }
            data = bigger;
        }
    }
    fclose(f);
    if (!data) {
        fprintf(stderr, "out of memory reading %s\n", path);
        exit(2);
    }
    *len = n;
    return data;
}

/* Writes `len` bytes to `dir/name`; exits on error. */
static inline void write_file(const char *dir, const char *name, const void *data, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

/* Ends a test program: a summary line, and exit status 1 on any failure. */
static inline int finish(const char *name) {
    if (failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

#endif
