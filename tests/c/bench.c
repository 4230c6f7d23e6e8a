/* Times pki_sign (one round trip to signd per call) and pki_sign_batch.
 * Usage: bench KEY N */
#include <time.h>

#include "common.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: bench KEY N\n");
        return 2;
    }
    int n = atoi(argv[2]);
    if (n < 1) return 2;
    pki_client *client = NULL;
    EXPECT_OK(pki_client_new(NULL, &client));
    if (!client) return 1;
    const uint8_t msg[32] = {0};
    pki_buffer *sig = NULL;
    EXPECT_OK(pki_sign(client, argv[1], msg, sizeof msg, &sig)); /* connect and warm up */
    pki_buffer_free(sig);

    double start = now();
    for (int i = 0; i < n; i++) {
        sig = NULL;
        EXPECT_OK(pki_sign(client, argv[1], msg, sizeof msg, &sig));
        pki_buffer_free(sig);
    }
    double single = (now() - start) / n * 1e6;

    enum { BATCH = 100 };
    const uint8_t *msgs[BATCH];
    size_t lens[BATCH];
    pki_buffer *sigs[BATCH];
    for (int i = 0; i < BATCH; i++) {
        msgs[i] = msg;
        lens[i] = sizeof msg;
    }
    int rounds = n / BATCH > 0 ? n / BATCH : 1;
    start = now();
    for (int r = 0; r < rounds; r++) {
        EXPECT_OK(pki_sign_batch(client, argv[1], msgs, lens, BATCH, sigs));
        if (failures) break;
        for (int i = 0; i < BATCH; i++) pki_buffer_free(sigs[i]);
    }
    double batched = (now() - start) / (rounds * BATCH) * 1e6;
    printf("bench %s: pki_sign %.1f us/call (%d calls); pki_sign_batch of %d: %.1f us/signature\n", argv[1],
           single, n, BATCH, batched);
    pki_client_free(client);
    return finish("bench");
}
