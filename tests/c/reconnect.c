/* One pki_client across a signd restart: signs, then (after a line on stdin)
 * expects PKI_RESULT_UNAVAILABLE while signd is down, then (after another
 * line) signs again on the same client once signd is back.
 * Usage: reconnect KEY   (prints "phase N done" after each phase) */
#include "common.h"

static void wait_line(void) {
    char line[64];
    if (!fgets(line, sizeof line, stdin)) exit(2);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: reconnect KEY\n");
        return 2;
    }
    static const uint8_t msg[] = "across a restart";
    pki_client *client = NULL;
    pki_buffer *sig = NULL;
    EXPECT_OK(pki_client_new(NULL, &client));
    if (!client) return 1;

    EXPECT_OK(pki_sign(client, argv[1], msg, sizeof msg - 1, &sig));
    pki_buffer_free(sig);
    sig = NULL;
    printf("phase 1 done\n");
    fflush(stdout);

    wait_line(); /* signd is stopped */
    EXPECT(pki_sign(client, argv[1], msg, sizeof msg - 1, &sig), PKI_RESULT_UNAVAILABLE);
    CHECK(sig == NULL);
    printf("phase 2 done\n");
    fflush(stdout);

    wait_line(); /* signd is running again */
    EXPECT_OK(pki_sign(client, argv[1], msg, sizeof msg - 1, &sig));
    pki_buffer_free(sig);
    printf("phase 3 done\n");
    pki_client_free(client);
    return finish("reconnect");
}
