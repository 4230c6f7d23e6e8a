/* Links libpki together with the system's OpenSSL (-lssl -lcrypto): both
 * work side by side, since libpki keeps its own OpenSSL private. A key made
 * and used by the system OpenSSL is checked by libpki, and the other way
 * round, and the system libssl still makes a TLS context.
 * Usage: with_openssl [KEY]  (KEY: an ecdsa-p256 key in signd; optional) */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common.h"

int main(int argc, char **argv) {
    printf("system OpenSSL: %s; libpki %s\n", OpenSSL_version(OPENSSL_VERSION), pki_version());
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    CHECK(ctx != NULL);
    SSL_CTX_free(ctx);

    /* System OpenSSL signs with a fresh Ed25519 key; libpki verifies. */
    EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    CHECK(key != NULL);
    unsigned char *spki = NULL;
    int spki_len = i2d_PUBKEY(key, &spki);
    CHECK(spki_len > 0);
    const unsigned char msg[] = "signed by the system OpenSSL";
    unsigned char sig[64];
    size_t sig_len = sizeof sig;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    CHECK(EVP_DigestSignInit(md, NULL, NULL, NULL, key) == 1);
    CHECK(EVP_DigestSign(md, sig, &sig_len, msg, sizeof msg - 1) == 1);
    EVP_MD_CTX_free(md);
    EXPECT_OK(pki_verify(spki, (size_t)spki_len, msg, sizeof msg - 1, sig, sig_len));
    sig[0] ^= 1;
    EXPECT(pki_verify(spki, (size_t)spki_len, msg, sizeof msg - 1, sig, sig_len), PKI_RESULT_BAD_SIGNATURE);
    OPENSSL_free(spki);
    EVP_PKEY_free(key);

    /* signd signs through libpki; the system OpenSSL verifies. */
    if (argc > 1) {
        pki_client *client = NULL;
        pki_buffer *pub = NULL, *s = NULL;
        EXPECT_OK(pki_client_new(NULL, &client));
        EXPECT_OK(pki_public_key(client, argv[1], &pub));
        EXPECT_OK(pki_sign(client, argv[1], msg, sizeof msg - 1, &s));
        if (pub && s) {
            const unsigned char *p = pki_buffer_data(pub);
            EVP_PKEY *pk = d2i_PUBKEY(NULL, &p, (long)pki_buffer_len(pub));
            CHECK(pk != NULL);
            EVP_MD_CTX *v = EVP_MD_CTX_new();
            CHECK(EVP_DigestVerifyInit(v, NULL, EVP_sha256(), NULL, pk) == 1);
            CHECK(EVP_DigestVerify(v, pki_buffer_data(s), pki_buffer_len(s), msg, sizeof msg - 1) == 1);
            EVP_MD_CTX_free(v);
            EVP_PKEY_free(pk);
        }
        pki_buffer_free(pub);
        pki_buffer_free(s);
        pki_client_free(client);
    }
    return finish("with_openssl");
}
