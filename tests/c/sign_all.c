/* Signs with every key named on the command line and verifies the results
 * with pki_verify; writes each key's SPKI and signatures to OUTDIR for the
 * openssl CLI. Key ids are algorithm names (e.g. "ecdsa-p256").
 * Usage: sign_all OUTDIR KEY... (the socket comes from SIGNET_SIGND_SOCKET). */
#include "common.h"

static const unsigned char MSG[] = "libpki test message: sign me";
#define MSG_LEN (sizeof MSG - 1)

static void test_key(const pki_client *client, const char *outdir, const char *id) {
    char name[256];
    pki_buffer *spki = NULL, *sig = NULL;
    EXPECT_OK(pki_public_key(client, id, &spki));
    EXPECT_OK(pki_sign(client, id, MSG, MSG_LEN, &sig));
    if (!spki || !sig) {
        pki_buffer_free(spki);
        pki_buffer_free(sig);
        return;
    }
    const uint8_t *k = pki_buffer_data(spki), *s = pki_buffer_data(sig);
    size_t klen = pki_buffer_len(spki), slen = pki_buffer_len(sig);
    snprintf(name, sizeof name, "%s.spki.der", id);
    write_file(outdir, name, k, klen);
    snprintf(name, sizeof name, "%s.sig", id);
    write_file(outdir, name, s, slen);

    /* Good signature; wrong message; corrupted signature; truncated signature. */
    EXPECT_OK(pki_verify(k, klen, MSG, MSG_LEN, s, slen));
    EXPECT(pki_verify(k, klen, MSG, MSG_LEN - 1, s, slen), PKI_RESULT_BAD_SIGNATURE);
    unsigned char *bad = malloc(slen);
    memcpy(bad, s, slen);
    bad[slen / 2] ^= 0x01;
    EXPECT(pki_verify(k, klen, MSG, MSG_LEN, bad, slen), PKI_RESULT_BAD_SIGNATURE);
    EXPECT(pki_verify(k, klen, MSG, MSG_LEN, s, slen - 1), PKI_RESULT_BAD_SIGNATURE);
    free(bad);

    /* The explicit default scheme is the same as pki_verify. */
    EXPECT_OK(pki_verify_scheme(k, klen, PKI_SCHEME_DEFAULT, MSG, MSG_LEN, s, slen));

    /* Other schemes, where the key has them. */
    if (strncmp(id, "rsa-", 4) == 0) {
        static const struct { uint32_t scheme; const char *suffix; } rsa[] = {
            {PKI_SCHEME_RSA_PSS_SHA256, "pss-sha256"},
            {PKI_SCHEME_RSA_PSS_SHA384, "pss-sha384"},
            {PKI_SCHEME_RSA_PSS_SHA512, "pss-sha512"},
            {PKI_SCHEME_RSA_PKCS1_SHA512, "pkcs1-sha512"},
        };
        for (size_t i = 0; i < sizeof rsa / sizeof rsa[0]; i++) {
            pki_buffer *other = NULL;
            EXPECT_OK(pki_sign_scheme(client, id, rsa[i].scheme, MSG, MSG_LEN, &other));
            if (!other) continue;
            const uint8_t *o = pki_buffer_data(other);
            size_t olen = pki_buffer_len(other);
            EXPECT_OK(pki_verify_scheme(k, klen, rsa[i].scheme, MSG, MSG_LEN, o, olen));
            /* PSS signatures do not verify as PKCS#1 v1.5 ones. */
            EXPECT(pki_verify(k, klen, MSG, MSG_LEN, o, olen), PKI_RESULT_BAD_SIGNATURE);
            snprintf(name, sizeof name, "%s.%s.sig", id, rsa[i].suffix);
            write_file(outdir, name, o, olen);
            pki_buffer_free(other);
        }
    }
    if (strcmp(id, "ecdsa-p256") == 0) {
        pki_buffer *other = NULL;
        EXPECT_OK(pki_sign_scheme(client, id, PKI_SCHEME_ECDSA_SHA512, MSG, MSG_LEN, &other));
        if (other) {
            EXPECT_OK(pki_verify_scheme(k, klen, PKI_SCHEME_ECDSA_SHA512, MSG, MSG_LEN,
                                        pki_buffer_data(other), pki_buffer_len(other)));
            EXPECT(pki_verify(k, klen, MSG, MSG_LEN, pki_buffer_data(other), pki_buffer_len(other)),
                   PKI_RESULT_BAD_SIGNATURE);
            write_file(outdir, "ecdsa-p256.sha512.sig", pki_buffer_data(other), pki_buffer_len(other));
            pki_buffer_free(other);
        }
    }

    /* A batch of three messages, the empty message included. */
    const uint8_t *msgs[3] = {(const uint8_t *)"one", (const uint8_t *)"", MSG};
    size_t lens[3] = {3, 0, MSG_LEN};
    pki_buffer *sigs[3] = {NULL, NULL, NULL};
    EXPECT_OK(pki_sign_batch(client, id, msgs, lens, 3, sigs));
    for (int i = 0; i < 3; i++) {
        CHECK(sigs[i] != NULL);
        if (!sigs[i]) continue;
        EXPECT_OK(pki_verify(k, klen, msgs[i], lens[i], pki_buffer_data(sigs[i]), pki_buffer_len(sigs[i])));
        pki_buffer_free(sigs[i]);
    }

    pki_buffer_free(spki);
    pki_buffer_free(sig);
    printf("signed and verified with %s\n", id);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: sign_all OUTDIR KEY...\n");
        return 2;
    }
    write_file(argv[1], "msg", MSG, MSG_LEN);
    pki_client *client = NULL;
    EXPECT_OK(pki_client_new(NULL, &client));
    if (!client) return 1;

    /* Every key is listed, with the algorithm its id names. */
    pki_key_list *list = NULL;
    EXPECT_OK(pki_list_keys(client, &list));
    for (int a = 2; a < argc; a++) {
        int found = 0;
        for (size_t i = 0; i < pki_key_list_len(list); i++) {
            if (strcmp(pki_key_list_id(list, i), argv[a]) == 0) {
                found = 1;
                CHECK(strcmp(pki_algorithm_name(pki_key_list_algorithm(list, i)), argv[a]) == 0);
                CHECK(pki_key_list_available(list, i));
            }
        }
        if (!found) fprintf(stderr, "key %s not listed\n", argv[a]);
        CHECK(found);
    }
    CHECK(pki_key_list_id(list, pki_key_list_len(list)) == NULL);
    CHECK(pki_key_list_algorithm(list, 1000) == PKI_ALGORITHM_UNKNOWN);
    pki_key_list_free(list);

    for (int a = 2; a < argc; a++) test_key(client, argv[1], argv[a]);
    pki_client_free(client);
    return finish("sign_all");
}
