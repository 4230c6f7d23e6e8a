/* A signing load across signd's SIGTERM. THREADS threads share one
 * pki_client and sign until their first error; once every thread has signed
 * twenty times the program prints "signing" (the driver then sends
 * signd SIGTERM) and waits for the threads.
 *
 * Expected: every signature returned verifies; every thread ends with
 * PKI_RESULT_UNAVAILABLE (stopping is "not there for now" to a caller); and
 * at least one thread was refused with signd's `shutting-down` error: a call
 * on a connection that was open when the stop began, answered at once.
 * Usage: drain KEY THREADS */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "common.h"

enum { WARMUP = 20, MAX_CALLS = 5000000 };

struct job {
    const pki_client *client;
    const char *key;
    const uint8_t *spki;
    size_t spki_len;
    int thread;
    long signed_ok;
    int bad_signatures;
    pki_result last;
    char detail[512];
};

static atomic_long total = 0;

static void *run(void *arg) {
    struct job *job = arg;
    for (long i = 0; i < MAX_CALLS; i++) {
        char msg[64];
        int len = snprintf(msg, sizeof msg, "thread %d message %ld", job->thread, i);
        pki_buffer *sig = NULL;
        pki_result r = pki_sign(job->client, job->key, (const uint8_t *)msg, (size_t)len, &sig);
        if (r != PKI_RESULT_OK) {
            job->last = r;
            pki_last_error(job->detail, sizeof job->detail);
            return NULL;
        }
        if (pki_verify(job->spki, job->spki_len, (const uint8_t *)msg, (size_t)len, pki_buffer_data(sig),
                       pki_buffer_len(sig)) != PKI_RESULT_OK)
            job->bad_signatures++;
        pki_buffer_free(sig);
        job->signed_ok++;
        atomic_fetch_add(&total, 1);
    }
    job->last = PKI_RESULT_OK;
    snprintf(job->detail, sizeof job->detail, "signd never stopped");
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: drain KEY THREADS\n");
        return 2;
    }
    int nthreads = atoi(argv[2]);
    if (nthreads < 1 || nthreads > 64) return 2;
    pki_client *client = NULL;
    pki_buffer *spki = NULL;
    EXPECT_OK(pki_client_new(NULL, &client));
    EXPECT_OK(pki_public_key(client, argv[1], &spki));
    if (!client || !spki) return 1;

    static struct job jobs[64];
    pthread_t threads[64];
    for (int t = 0; t < nthreads; t++) {
        jobs[t] = (struct job){.client = client, .key = argv[1], .spki = pki_buffer_data(spki),
                               .spki_len = pki_buffer_len(spki), .thread = t};
        if (pthread_create(&threads[t], NULL, run, &jobs[t]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    while (atomic_load(&total) < (long)WARMUP * nthreads) usleep(1000);
    printf("signing\n");
    fflush(stdout);

    int refused = 0;
    long signed_ok = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(threads[t], NULL);
        struct job *job = &jobs[t];
        signed_ok += job->signed_ok;
        printf("thread %d: %ld signatures, then %s (%s)\n", t, job->signed_ok, pki_result_str(job->last), job->detail);
        CHECK(job->bad_signatures == 0);
        CHECK(job->last == PKI_RESULT_UNAVAILABLE);
        if (strstr(job->detail, "shutting-down")) refused++;
    }
    printf("%ld signatures in all; %d of %d threads refused with shutting-down\n", signed_ok, refused, nthreads);
    CHECK(refused > 0);
    pki_buffer_free(spki);
    pki_client_free(client);
    return finish("drain");
}
