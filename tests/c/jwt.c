/* Checks pki_jwt_verify's result for one token against a JWK set, both read
 * from files (made by signet-jwt-fixture, or minted by tokend).
 * Usage: jwt JWKS TOKEN EXPECTED [ISSUER [AUDIENCE [NAME=VALUE...]]]
 *   EXPECTED: a pki_result name; ISSUER, AUDIENCE: "-" for not checked;
 *   NAME=VALUE: a string claim the verified token must hold.
 *   JWT_LEEWAY (environment): leeway in seconds (default 30).
 * A token expected to verify is also altered (one character of its
 * signature, one of its payload, its signature cut off), each of which must
 * be refused; and the NULL arguments are checked. */
#include "common.h"

#include <ctype.h>
#include <time.h>

/* The token with character `at` of part `part` (0 header, 1 payload, 2
 * signature, at = -1: the middle) swapped for another base64url one. */
static char *altered(const char *token, int part, long at) {
    char *copy = strdup(token);
    char *start = copy;
    for (int i = 0; i < part; i++) start = strchr(start, '.') + 1;
    char *end = strchr(start, '.');
    size_t len = end ? (size_t)(end - start) : strlen(start);
    size_t i = at < 0 ? len / 2 : (size_t)at;
    start[i] = start[i] == 'A' ? 'B' : 'A';
    return copy;
}

static void expect_refused(const char *what, const char *token, const pki_jwks *jwks, const char *iss,
                           const char *aud, pki_result expected) {
    pki_jwt *jwt = NULL;
    pki_result r = pki_jwt_verify(token, jwks, iss, aud, 30, &jwt);
    if (r != expected) {
        fprintf(stderr, "%s: got %s (%s), expected %s\n", what, pki_result_str(r), last_error(),
                pki_result_str(expected));
        failures++;
    } else {
        printf("%s: %s: %s\n", what, pki_result_str(r), last_error());
        CHECK(*last_error() != 0);
    }
    CHECK(jwt == NULL);
    pki_jwt_free(jwt);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: jwt JWKS TOKEN EXPECTED [ISSUER [AUDIENCE [NAME=VALUE...]]]\n");
        return 2;
    }
    const char *iss = argc > 4 && strcmp(argv[4], "-") != 0 ? argv[4] : NULL;
    const char *aud = argc > 5 && strcmp(argv[5], "-") != 0 ? argv[5] : NULL;
    const char *leeway_env = getenv("JWT_LEEWAY");
    uint64_t leeway = leeway_env ? strtoull(leeway_env, NULL, 10) : 30;

    size_t jwks_len, token_len;
    unsigned char *jwks_json = read_file(argv[1], &jwks_len);
    unsigned char *token_bytes = read_file(argv[2], &token_len);
    /* A token file may end with a newline. */
    while (token_len > 0 && isspace(token_bytes[token_len - 1])) token_len--;
    char *token = malloc(token_len + 1);
    memcpy(token, token_bytes, token_len);
    token[token_len] = 0;
    free(token_bytes);

    pki_jwks *jwks = NULL;
    EXPECT_OK(pki_jwks_new(jwks_json, jwks_len, &jwks));
    free(jwks_json);
    if (!jwks) return finish("jwt");

    pki_jwt *jwt = NULL;
    pki_result r = pki_jwt_verify(token, jwks, iss, aud, leeway, &jwt);
    const char *why = last_error();
    if (strcmp(pki_result_str(r), argv[3]) != 0) {
        fprintf(stderr, "%s: got %s (%s), expected %s\n", argv[2], pki_result_str(r), why, argv[3]);
        failures++;
    } else {
        printf("%s: %s%s%s\n", argv[2], pki_result_str(r), *why ? ": " : "", why);
        /* A failure always comes with a reason, and no output. */
        CHECK((r == PKI_RESULT_OK) == (*why == 0));
        CHECK((r == PKI_RESULT_OK) == (jwt != NULL));
    }

    if (r == PKI_RESULT_OK && jwt) {
        for (int i = 6; i < argc; i++) {
            char *eq = strchr(argv[i], '=');
            if (!eq) {
                fprintf(stderr, "not NAME=VALUE: %s\n", argv[i]);
                failures++;
                continue;
            }
            *eq = 0;
            const char *got = pki_jwt_claim_str(jwt, argv[i]);
            if (!got || strcmp(got, eq + 1) != 0) {
                fprintf(stderr, "claim %s: got %s, expected %s\n", argv[i], got ? got : "(NULL)", eq + 1);
                failures++;
            } else {
                printf("  %s = %s\n", argv[i], got);
            }
        }
        int64_t exp = 0, nope = 42;
        CHECK(pki_jwt_claim_int(jwt, "exp", &exp));
        CHECK(exp + (int64_t)leeway > (int64_t)time(NULL));
        CHECK(pki_jwt_claim_str(jwt, "exp") == NULL);
        CHECK(pki_jwt_claim_str(jwt, "no-such-claim") == NULL);
        CHECK(!pki_jwt_claim_int(jwt, "no-such-claim", &nope) && nope == 42);
        CHECK(!pki_jwt_claim_int(jwt, "sub", &nope) && nope == 42);
        CHECK(pki_jwt_claim_str(NULL, "sub") == NULL);
        CHECK(pki_jwt_claim_str(jwt, NULL) == NULL);
        CHECK(!pki_jwt_claim_int(jwt, "exp", NULL));
        pki_jwt_free(jwt);

        /* The same token, altered. */
        char *sig_flipped = altered(token, 2, -1);
        expect_refused("signature character changed", sig_flipped, jwks, iss, aud, PKI_RESULT_BAD_SIGNATURE);
        free(sig_flipped);
        char *payload_flipped = altered(token, 1, -1);
        expect_refused("payload character changed", payload_flipped, jwks, iss, aud, PKI_RESULT_BAD_SIGNATURE);
        free(payload_flipped);
        char *cut = strdup(token);
        *strrchr(cut, '.') = 0;
        expect_refused("signature cut off", cut, jwks, iss, aud, PKI_RESULT_TOKEN_MALFORMED);
        free(cut);
    }

    /* Arguments. */
    pki_jwt *out = NULL;
    EXPECT(pki_jwt_verify(NULL, jwks, NULL, NULL, 0, &out), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_jwt_verify(token, NULL, NULL, NULL, 0, &out), PKI_RESULT_NULL_PARAMETER);
    EXPECT(pki_jwt_verify(token, jwks, NULL, NULL, 0, NULL), PKI_RESULT_NULL_PARAMETER);
    CHECK(out == NULL);
    expect_refused("empty token", "", jwks, NULL, NULL, PKI_RESULT_TOKEN_MALFORMED);
    expect_refused("not UTF-8", "\xff\xfe.\xfd", jwks, NULL, NULL, PKI_RESULT_INVALID_ARGUMENT);
    pki_jwks *bad = NULL;
    EXPECT(pki_jwks_new((const uint8_t *)"nope", 4, &bad), PKI_RESULT_MALFORMED_JWKS);
    EXPECT(pki_jwks_new((const uint8_t *)"{\"keys\":[]}", 11, &bad), PKI_RESULT_MALFORMED_JWKS);
    EXPECT(pki_jwks_new(NULL, 1, &bad), PKI_RESULT_NULL_PARAMETER);
    CHECK(bad == NULL);
    pki_jwks_free(NULL);
    pki_jwt_free(NULL);

    pki_jwks_free(jwks);
    free(token);
    return finish("jwt");
}
