/* Checks pki_cert_verify's result for one certificate.
 * Usage: certs CERT TIME EXPECTED [ROOT...]
 *   TIME: seconds since the epoch (0: now); EXPECTED: a pki_result name. */
#include "common.h"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: certs CERT TIME EXPECTED [ROOT...]\n");
        return 2;
    }
    size_t cert_len;
    unsigned char *cert = read_file(argv[1], &cert_len);
    long long time = atoll(argv[2]);
    int n_roots = argc - 4;
    pki_buffer **roots = calloc((size_t)n_roots + 1, sizeof *roots);
    for (int i = 0; i < n_roots; i++) {
        size_t len;
        unsigned char *der = read_file(argv[4 + i], &len);
        EXPECT_OK(pki_buffer_new(der, len, &roots[i]));
        free(der);
    }
    pki_result r = pki_cert_verify(cert, cert_len, (const pki_buffer *const *)roots, (size_t)n_roots, time);
    const char *why = last_error();
    if (strcmp(pki_result_str(r), argv[3]) != 0) {
        fprintf(stderr, "%s: got %s (%s), expected %s\n", argv[1], pki_result_str(r), why, argv[3]);
        failures++;
    } else {
        printf("%s at %lld: %s%s%s\n", argv[1], time, pki_result_str(r), *why ? ": " : "", why);
        /* A failure always comes with a reason. */
        CHECK((r == PKI_RESULT_OK) == (*why == 0));
    }
    for (int i = 0; i < n_roots; i++) pki_buffer_free(roots[i]);
    free(roots);
    free(cert);
    return finish("certs");
}
