/* Every error path returns its documented code.
 * Usage: errors local            no daemon needed: NULLs, bad input, local verify
 *        errors nodaemon SOCKET  nothing listens at SOCKET
 *        errors denied           signd (SIGNET_SIGND_SOCKET) refuses this caller
 *        errors daemon           signd serves this caller; keys ecdsa-p256, ed25519 exist */
#include "common.h"

static const uint8_t MSG[] = {'h', 'i'};

static void local(void) {
    pki_client *client = NULL;
    pki_buffer *buf = NULL;
    pki_key_list *list = NULL;
    uint8_t junk[64];
    memset(junk, 0x30, sizeof junk);

    /* Version and names. */
    CHECK(pki_version() != NULL && strlen(pki_version()) > 0);
    CHECK(strcmp(pki_result_str(PKI_RESULT_OK), "PKI_RESULT_OK") == 0);
    CHECK(strcmp(pki_result_str(PKI_RESULT_CERT_EXPIRED), "PKI_RESULT_CERT_EXPIRED") == 0);
    CHECK(strcmp(pki_result_str(12345), "PKI_RESULT_UNKNOWN") == 0);
    CHECK(strcmp(pki_algorithm_name(PKI_ALGORITHM_ML_DSA_65), "ml-dsa-65") == 0);
    CHECK(strcmp(pki_algorithm_name(0), "unknown") == 0);
    CHECK(strcmp(pki_scheme_name(PKI_SCHEME_RSA_PSS_SHA384), "rsa-pss-sha384") == 0);
    CHECK(strcmp(pki_scheme_name(99), "unknown") == 0);

    /* NULL outputs and inputs. */
    EXPECT(pki_client_new(NULL, NULL), PKI_RESULT_NULL_PARAMETER);
    CHECK(pki_last_error(NULL, 0) > 0);
    EXPECT(pki_client_new("", &client), PKI_RESULT_INVALID_ARGUMENT);
    CHECK(client == NULL); /* outputs are written only on success */
    EXPECT(pki_buffer_new(NULL, 5, &buf), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_buffer_new(junk, 5, NULL), PKI_RESULT_NULL_PARAMETER);
    CHECK(buf == NULL);
    EXPECT(pki_sign(NULL, "k", MSG, 2, &buf), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_list_keys(NULL, &list), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_public_key(NULL, "k", &buf), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_sign_batch(NULL, "k", NULL, NULL, 0, &buf), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_verify(NULL, 10, MSG, 2, junk, 10), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_verify(junk, 10, NULL, 2, junk, 10), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_verify(junk, 10, MSG, 2, NULL, 10), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_cert_verify(NULL, 10, NULL, 0, 0), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_cert_verify(junk, 10, NULL, 1, 0), PKI_RESULT_NULL_PARAMETER);
    const pki_buffer *null_root = NULL;
    EXPECT(pki_cert_verify(junk, 10, &null_root, 1, 0), PKI_RESULT_NULL_PARAMETER);
    CHECK(buf == NULL && list == NULL);

    /* Accessors and frees tolerate NULL. */
    CHECK(pki_buffer_data(NULL) == NULL && pki_buffer_len(NULL) == 0);
    CHECK(pki_key_list_len(NULL) == 0 && pki_key_list_id(NULL, 0) == NULL);
    CHECK(pki_key_list_algorithm(NULL, 0) == PKI_ALGORITHM_UNKNOWN && !pki_key_list_available(NULL, 0));
    pki_buffer_free(NULL);
    pki_key_list_free(NULL);
    pki_client_free(NULL);

    /* Buffers: a copy, and the empty buffer. */
    EXPECT_OK(pki_buffer_new(junk, sizeof junk, &buf));
    CHECK(pki_buffer_len(buf) == sizeof junk && memcmp(pki_buffer_data(buf), junk, sizeof junk) == 0);
    pki_buffer_free(buf);
    buf = NULL;
    EXPECT_OK(pki_buffer_new(NULL, 0, &buf));
    CHECK(pki_buffer_len(buf) == 0 && pki_buffer_data(buf) != NULL);
    pki_buffer_free(buf);

    /* The last error: set on failure, cleared on success, truncated safely. */
    EXPECT(pki_verify(junk, sizeof junk, MSG, 2, junk, 8), PKI_RESULT_MALFORMED_KEY);
    char small[8];
    size_t n = pki_last_error(small, sizeof small);
    CHECK(n > sizeof small && strlen(small) == sizeof small - 1);
    EXPECT_OK(pki_buffer_new(junk, 1, &buf));
    CHECK(pki_last_error(NULL, 0) == 0);
    pki_buffer_free(buf);

    /* Malformed and unsupported inputs. */
    EXPECT(pki_verify(junk, 0, MSG, 2, junk, 8), PKI_RESULT_MALFORMED_KEY);
    EXPECT(pki_verify_scheme(junk, sizeof junk, 99, MSG, 2, junk, 8), PKI_RESULT_INVALID_ARGUMENT);
    EXPECT(pki_cert_verify(junk, sizeof junk, NULL, 0, 0), PKI_RESULT_MALFORMED_CERT);
    EXPECT(pki_cert_verify(junk, 0, NULL, 0, 0), PKI_RESULT_MALFORMED_CERT);
}

/* A client whose calls go to a socket nothing listens on. */
static void nodaemon(const char *socket) {
    pki_client *client = NULL;
    pki_buffer *buf = NULL;
    pki_key_list *list = NULL;
    EXPECT_OK(pki_client_new(socket, &client)); /* lazy: no connection yet */
    if (!client) return;
    EXPECT(pki_sign(client, "k", MSG, 2, &buf), PKI_RESULT_UNAVAILABLE);
    CHECK(strstr(last_error(), socket) != NULL);
    EXPECT(pki_public_key(client, "k", &buf), PKI_RESULT_UNAVAILABLE);
    EXPECT(pki_list_keys(client, &list), PKI_RESULT_UNAVAILABLE);
    const uint8_t *msgs[1] = {MSG};
    size_t lens[1] = {2};
    EXPECT(pki_sign_batch(client, "k", msgs, lens, 1, &buf), PKI_RESULT_UNAVAILABLE);
    CHECK(buf == NULL && list == NULL);
    pki_client_free(client);
}

/* signd refuses this caller: policy has no role for it. */
static void denied(void) {
    pki_client *client = NULL;
    pki_buffer *buf = NULL;
    pki_key_list *list = NULL;
    EXPECT_OK(pki_client_new(NULL, &client));
    if (!client) return;
    EXPECT(pki_sign(client, "ecdsa-p256", MSG, 2, &buf), PKI_RESULT_PERMISSION_DENIED);
    EXPECT(pki_public_key(client, "ecdsa-p256", &buf), PKI_RESULT_PERMISSION_DENIED);
    EXPECT(pki_list_keys(client, &list), PKI_RESULT_PERMISSION_DENIED);
    CHECK(buf == NULL && list == NULL);
    pki_client_free(client);
}

/* Errors signd reports to a caller it serves. */
static void daemon_errors(void) {
    pki_client *client = NULL;
    pki_buffer *buf = NULL;
    EXPECT_OK(pki_client_new(NULL, &client));
    if (!client) return;
    EXPECT(pki_sign(client, "no-such-key", MSG, 2, &buf), PKI_RESULT_UNKNOWN_KEY);
    EXPECT(pki_public_key(client, "no-such-key", &buf), PKI_RESULT_UNKNOWN_KEY);
    EXPECT(pki_sign_scheme(client, "ed25519", PKI_SCHEME_ECDSA_SHA256, MSG, 2, &buf),
           PKI_RESULT_WRONG_ALGORITHM);
    EXPECT(pki_sign_scheme(client, "ecdsa-p256", 99, MSG, 2, &buf), PKI_RESULT_INVALID_ARGUMENT);
    EXPECT(pki_sign_role(client, "no-such-role", "ecdsa-p256", PKI_SCHEME_DEFAULT, MSG, 2, &buf),
           PKI_RESULT_PERMISSION_DENIED);
    EXPECT(pki_sign(client, NULL, MSG, 2, &buf), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_sign(client, "ecdsa-p256", NULL, 2, &buf), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_sign(client, "ecdsa-p256", MSG, 2, NULL), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_sign_role(client, NULL, "ecdsa-p256", 0, MSG, 2, &buf), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_sign_batch(client, "ecdsa-p256", NULL, NULL, 1, &buf), PKI_RESULT_NULL_PARAMETER);
    const uint8_t *msgs[2] = {MSG, NULL};
    size_t lens[2] = {2, 2};
    pki_buffer *sigs[2] = {NULL, NULL};
    EXPECT(pki_sign_batch(client, "ecdsa-p256", msgs, lens, 2, sigs), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_sign_batch(client, "no-such-key", msgs, lens, 1, sigs), PKI_RESULT_UNKNOWN_KEY);
    CHECK(buf == NULL && sigs[0] == NULL && sigs[1] == NULL);

    /* A signature by one key does not verify under another. */
    pki_buffer *sig = NULL, *p256 = NULL, *ed = NULL;
    EXPECT_OK(pki_sign(client, "ecdsa-p256", MSG, 2, &sig));
    EXPECT_OK(pki_public_key(client, "ecdsa-p256", &p256));
    EXPECT_OK(pki_public_key(client, "ed25519", &ed));
    if (sig && p256 && ed) {
        EXPECT_OK(pki_verify(pki_buffer_data(p256), pki_buffer_len(p256), MSG, 2, pki_buffer_data(sig),
                             pki_buffer_len(sig)));
        EXPECT(pki_verify(pki_buffer_data(ed), pki_buffer_len(ed), MSG, 2, pki_buffer_data(sig),
                          pki_buffer_len(sig)),
               PKI_RESULT_BAD_SIGNATURE);
        EXPECT(pki_verify_scheme(pki_buffer_data(ed), pki_buffer_len(ed), PKI_SCHEME_RSA_PSS_SHA256, MSG, 2,
                                 pki_buffer_data(sig), pki_buffer_len(sig)),
               PKI_RESULT_WRONG_ALGORITHM);
    }
    pki_buffer_free(sig);
    pki_buffer_free(p256);
    pki_buffer_free(ed);
    pki_client_free(client);
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "local") == 0) {
        local();
    } else if (argc >= 3 && strcmp(argv[1], "nodaemon") == 0) {
        nodaemon(argv[2]);
    } else if (argc >= 2 && strcmp(argv[1], "denied") == 0) {
        denied();
    } else if (argc >= 2 && strcmp(argv[1], "daemon") == 0) {
        daemon_errors();
    } else {
        fprintf(stderr, "usage: errors local|nodaemon SOCKET|denied|daemon\n");
        return 2;
    }
    return finish(argv[1]);
}
