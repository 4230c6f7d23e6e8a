/* THREADS threads share one pki_client and each signs N distinct messages,
 * verifying every signature. Usage: threads KEY THREADS N */
#include <pthread.h>

#include "common.h"

struct job {
    const pki_client *client;
    const char *key;
    const uint8_t *spki;
    size_t spki_len;
    int thread;
    int n;
    int errors;
};

static void *run(void *arg) {
    struct job *job = arg;
    for (int i = 0; i < job->n; i++) {
        char msg[64];
        int len = snprintf(msg, sizeof msg, "thread %d message %d", job->thread, i);
        pki_buffer *sig = NULL;
        pki_result r = pki_sign(job->client, job->key, (const uint8_t *)msg, (size_t)len, &sig);
        if (r != PKI_RESULT_OK) {
            char detail[512];
            pki_last_error(detail, sizeof detail);
            fprintf(stderr, "thread %d sign %d: %s (%s)\n", job->thread, i, pki_result_str(r), detail);
            job->errors++;
            continue;
        }
        r = pki_verify(job->spki, job->spki_len, (const uint8_t *)msg, (size_t)len,
                       pki_buffer_data(sig), pki_buffer_len(sig));
        if (r != PKI_RESULT_OK) {
            fprintf(stderr, "thread %d verify %d: %s\n", job->thread, i, pki_result_str(r));
            job->errors++;
        }
        pki_buffer_free(sig);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: threads KEY THREADS N\n");
        return 2;
    }
    int nthreads = atoi(argv[2]), n = atoi(argv[3]);
    if (nthreads < 1 || nthreads > 64 || n < 0) return 2;
    pki_client *client = NULL;
    pki_buffer *spki = NULL;
    EXPECT_OK(pki_client_new(NULL, &client));
    EXPECT_OK(pki_public_key(client, argv[1], &spki));
    if (!client || !spki) return 1;

    struct job jobs[64];
    pthread_t threads[64];
    for (int t = 0; t < nthreads; t++) {
        jobs[t] = (struct job){client, argv[1], pki_buffer_data(spki), pki_buffer_len(spki), t, n, 0};
        if (pthread_create(&threads[t], NULL, run, &jobs[t]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    int errors = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(threads[t], NULL);
        errors += jobs[t].errors;
    }
    CHECK(errors == 0);
    printf("%d threads x %d signatures, %d errors\n", nthreads, n, errors);
    pki_buffer_free(spki);
    pki_client_free(client);
    return finish("threads");
}
