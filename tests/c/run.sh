#!/usr/bin/env bash
# libpki's C tests: builds the library, installs it to a temp prefix with
# scripts/install, compiles the C programs here with the system cc through
# pkg-config, starts a real signd on a temp dir, and runs them (also under
# valgrind). Ends with "libpki C tests: N passed, M failed"; exits non-zero
# on any failure.
#
# Needs: cargo, cc, pkg-config, openssl (CLI), valgrind, setpriv, libssl-dev.
# Environment: CARGO_TARGET_DIR (default <repo>/target); LIBPKI_VALGRIND=0
# skips the valgrind runs; LIBPKI_KEEP=1 keeps the temp dir.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
src="$repo/tests/c"
target="${CARGO_TARGET_DIR:-$repo/target}"
passed=0
failed=0
signd_pid=
tokend_pid=

tmp="$(mktemp -d /tmp/libpki-c.XXXXXX)"
# The refused-caller test runs as nobody: it must reach the socket, the
# programs and the library.
chmod 0755 "$tmp"
cleanup() {
    [ -n "$tokend_pid" ] && kill "$tokend_pid" 2>/dev/null
    if [ -n "$signd_pid" ]; then
        kill "$signd_pid" 2>/dev/null
        wait "$signd_pid" 2>/dev/null
    fi
    if [ "${LIBPKI_KEEP:-0}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

log() { printf '%s\n' "$*"; }

# check NAME COMMAND...: runs a check, output to $tmp/log/NAME.log.
mkdir -p "$tmp/log"
check() {
    local name="$1"
    shift
    if "$@" >"$tmp/log/$name.log" 2>&1; then
        passed=$((passed + 1))
        log "ok   $name"
    else
        failed=$((failed + 1))
        log "FAIL $name"
        sed 's/^/     | /' "$tmp/log/$name.log" | tail -n 40
    fi
}

summary() {
    log "libpki C tests: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}

# --- build and install ------------------------------------------------------

# The workspace's own build (scripts/lib.sh's build_all: libraries, binaries and
# examples, one feature set), which scripts/test has already done: a build of
# chosen packages (-p) would resolve other features and compile them again.
log "building the workspace (release: libpki, signd, signetctl, tokend, signet-jwt-fixture, sign_bench) ..."
if ! (cd "$repo" && cargo build --release --workspace --lib --bins --examples --locked) >"$tmp/log/build.log" 2>&1; then
    tail -n 40 "$tmp/log/build.log"
    failed=$((failed + 1))
    summary
    exit 1
fi
bin="$target/release"
prefix="$tmp/prefix"
check install "$repo/scripts/install" --no-build --libpki-only --prefix "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"

# libpki's header is the one cbindgen makes (its Rust unit tests run in
# scripts/test's `cargo test --workspace`; --workspace keeps the feature set).
check rust-header bash -c "cd '$repo' && cargo test --release --workspace --locked --test header"

exports_only_pki() {
    local so="$prefix/lib/libpki.so"
    local others
    others="$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^pki_' || true)"
    [ -z "$others" ] || { echo "libpki.so exports non-pki symbols:"; echo "$others"; return 1; }
    nm -D --defined-only "$so" | grep -q ' T pki_sign$' || { echo "pki_sign is not exported"; return 1; }
    readelf -d "$so" | grep -q 'SONAME.*\[libpki\.so\.0\]' || { echo "no soname libpki.so.0"; return 1; }
    # No dynamic OpenSSL dependency: it is linked in statically.
    ! readelf -d "$so" | grep -Eq 'NEEDED.*lib(ssl|crypto)' || { echo "libpki.so needs a shared OpenSSL"; return 1; }
}
check exports-only-pki exports_only_pki

# compile NAME [EXTRA...]: builds tests/c/NAME.c through pkg-config.
cflags=(-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -O1 -pthread)
compile() {
    local name="$1"
    shift
    # shellcheck disable=SC2046 # pkg-config output is a list of words.
    cc "${cflags[@]}" "$src/$name.c" -o "$tmp/$name" $(pkg-config --cflags --libs libpki) \
        -Wl,-rpath,"$prefix/lib" "$@"
}
for prog in sign_all threads errors certs jwt bench reconnect drain; do
    check "compile-$prog" compile "$prog"
done
check compile-with_openssl compile with_openssl -lssl -lcrypto

# The guide's example program, extracted from docs/libpki.md, built against
# the shared library and, separately, the static one.
sed -n '/^```c$/,/^```$/p' "$repo/docs/libpki.md" | sed '1d;$d' > "$tmp/example.c"
check compile-example bash -c "cc ${cflags[*]} '$tmp/example.c' -o '$tmp/example' \
    \$(pkg-config --cflags --libs libpki) -Wl,-rpath,'$prefix/lib'"
check compile-example-static bash -c "cc ${cflags[*]} '$tmp/example.c' -o '$tmp/example-static' \
    \$(pkg-config --cflags libpki) '$prefix/lib/libpki.a' \$(pkg-config --static --libs-only-l libpki | sed 's/-lpki //') \
    && ! readelf -d '$tmp/example-static' | grep -q 'libpki'"

# --- tests that need no daemon ---------------------------------------------

check errors-local "$tmp/errors" local
check errors-no-daemon "$tmp/errors" nodaemon "$tmp/nothing-here.sock"
check with-openssl-local "$tmp/with_openssl"

# Certificates: a root CA and a leaf from the openssl CLI, a second root.
certs="$tmp/pki-certs"
make_certs() {
    mkdir -p "$certs" && cd "$certs" || return 1
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout root.key \
        -subj "/CN=libpki test root" -days 3650 -outform DER -out root.der \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout other.key \
        -subj "/CN=libpki other root" -days 3650 -outform DER -out other.der \
        -addext basicConstraints=critical,CA:TRUE &&
    openssl req -new -newkey rsa:2048 -nodes -keyout leaf.key -subj "/CN=leaf.example" -out leaf.csr &&
    printf 'basicConstraints=CA:FALSE\nsubjectAltName=DNS:leaf.example\n' > leaf.ext &&
    openssl x509 -req -in leaf.csr -CA root.der -CAform DER -CAkey root.key -CAcreateserial \
        -days 30 -extfile leaf.ext -outform DER -out leaf.der &&
    openssl x509 -inform DER -in leaf.der -out leaf.pem &&
    head -c 300 /dev/urandom > garbage.der
}
check make-certs make_certs
now="$(date +%s)"
check cert-good "$tmp/certs" "$certs/leaf.der" 0 PKI_RESULT_OK "$certs/root.der"
check cert-good-pem-at-time "$tmp/certs" "$certs/leaf.pem" $((now + 86400)) PKI_RESULT_OK "$certs/other.der" "$certs/root.der"
check cert-root-itself "$tmp/certs" "$certs/root.der" 0 PKI_RESULT_OK "$certs/root.der"
check cert-expired "$tmp/certs" "$certs/leaf.der" $((now + 365 * 86400)) PKI_RESULT_CERT_EXPIRED "$certs/root.der"
check cert-not-yet-valid "$tmp/certs" "$certs/leaf.der" $((now - 86400)) PKI_RESULT_CERT_NOT_YET_VALID "$certs/root.der"
check cert-wrong-root "$tmp/certs" "$certs/leaf.der" 0 PKI_RESULT_CERT_UNTRUSTED "$certs/other.der"
check cert-no-roots "$tmp/certs" "$certs/leaf.der" 0 PKI_RESULT_CERT_UNTRUSTED
check cert-garbage "$tmp/certs" "$certs/garbage.der" 0 PKI_RESULT_MALFORMED_CERT "$certs/root.der"
check cert-garbage-root "$tmp/certs" "$certs/leaf.der" 0 PKI_RESULT_MALFORMED_CERT "$certs/garbage.der"

# JWTs: a JWK set and tokens that signet-jwt-fixture signs with fresh keys
# (ES256, EdDSA, RS256, PS256, ML-DSA-44). The jwt program reads files only,
# so tokens tokend mints can be checked the same way.
jwts="$tmp/jwts"
jwt_iss=https://tokend.test
jwt_aud=https://api.test
check jwt-fixture "$bin/signet-jwt-fixture" "$jwts"
jwt() { "$tmp/jwt" "$jwts/jwks.json" "$@"; }
for alg in ES256 EdDSA RS256 PS256 ML-DSA-44; do
    check "jwt-good-$alg" jwt "$jwts/good-$alg.jwt" PKI_RESULT_OK "$jwt_iss" "$jwt_aud" \
        sub=alice client_id=client-1 "scope=read write" "iss=$jwt_iss"
done
check jwt-good-nothing-checked jwt "$jwts/good-EdDSA.jwt" PKI_RESULT_OK - - sub=alice
check jwt-expired jwt "$jwts/expired.jwt" PKI_RESULT_TOKEN_EXPIRED "$jwt_iss" "$jwt_aud"
check jwt-expired-within-leeway env JWT_LEEWAY=3600 "$tmp/jwt" "$jwts/jwks.json" "$jwts/expired.jwt" PKI_RESULT_OK
check jwt-not-yet-valid jwt "$jwts/not-yet-valid.jwt" PKI_RESULT_TOKEN_NOT_YET_VALID "$jwt_iss" "$jwt_aud"
check jwt-wrong-audience jwt "$jwts/wrong-audience.jwt" PKI_RESULT_TOKEN_WRONG_AUDIENCE "$jwt_iss" "$jwt_aud"
check jwt-audience-unchecked jwt "$jwts/wrong-audience.jwt" PKI_RESULT_OK "$jwt_iss" - aud=https://elsewhere.test
check jwt-wrong-issuer jwt "$jwts/wrong-issuer.jwt" PKI_RESULT_TOKEN_WRONG_ISSUER "$jwt_iss" "$jwt_aud"
check jwt-unknown-kid jwt "$jwts/unknown-kid.jwt" PKI_RESULT_TOKEN_UNKNOWN_KEY "$jwt_iss" "$jwt_aud"
check jwt-alg-none jwt "$jwts/alg-none.jwt" PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM "$jwt_iss" "$jwt_aud"
check jwt-hs256 jwt "$jwts/hs256.jwt" PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM "$jwt_iss" "$jwt_aud"
check jwt-garbage jwt "$jwts/garbage.jwt" PKI_RESULT_TOKEN_MALFORMED "$jwt_iss" "$jwt_aud"
head -c 3000 /dev/urandom | base64 -w0 > "$jwts/random.jwt"
check jwt-random jwt "$jwts/random.jwt" PKI_RESULT_TOKEN_MALFORMED

# --- a real signd -----------------------------------------------------------

run="$tmp/run"
mkdir -p "$run" "$tmp/state"
chmod 0755 "$run"
export SIGNET_SIGND_SOCKET="$run/signd.sock"
cat > "$tmp/signd.toml" <<TOML
socket = "$SIGNET_SIGND_SOCKET"
socket_mode = "0666"
state_dir = "$tmp/state"
[roles.admin]
users = ["root"]
admin = true
keys = ["*"]
[roles.tokend]
users = ["root"]
operations = ["sign-jws", "list", "public-key"]
TOML
# start_signd: starts signd in the background and waits until it is ready.
start_signd() {
    : >"$tmp/log/signd.log"
    "$bin/signd" --config "$tmp/signd.toml" >>"$tmp/log/signd.log" 2>&1 &
    signd_pid=$!
    for _ in $(seq 1 100); do
        grep -q "signd ready" "$tmp/log/signd.log" && [ -S "$SIGNET_SIGND_SOCKET" ] && return 0
        kill -0 "$signd_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "signd did not start:"
    tail -n 20 "$tmp/log/signd.log"
    return 1
}
stop_signd() {
    kill "$signd_pid" && wait "$signd_pid" 2>/dev/null
    signd_pid=
}
if ! start_signd; then
    failed=$((failed + 1))
    summary
    exit 1
fi

algorithms=(ecdsa-p256 ecdsa-p384 ecdsa-p521 ed25519 rsa-2048 rsa-3072 rsa-4096 ml-dsa-44 ml-dsa-65 ml-dsa-87)
generate_keys() {
    for alg in "${algorithms[@]}"; do
        # Key ids are the algorithm names; the tests rely on it.
        "$bin/signetctl" key generate "$alg" -a "$alg" || return 1
    done
}
check generate-keys generate_keys

sigs="$tmp/sigs"
mkdir -p "$sigs"
check sign-all "$tmp/sign_all" "$sigs" "${algorithms[@]}"

# The system openssl (3.0) checks what signd signed. It cannot parse ML-DSA
# keys (3.5+), so ML-DSA signatures are checked with pki_verify only (in
# sign_all above).
openssl_verify() {
    local id="$1" digest="$2" sig="$3"
    shift 3
    openssl pkey -pubin -inform DER -in "$sigs/$id.spki.der" -out "$sigs/$id.pem" &&
    openssl dgst "-$digest" -verify "$sigs/$id.pem" -signature "$sigs/$sig" "$@" "$sigs/msg"
}
check openssl-ecdsa-p256 openssl_verify ecdsa-p256 sha256 ecdsa-p256.sig
check openssl-ecdsa-p256-sha512 openssl_verify ecdsa-p256 sha512 ecdsa-p256.sha512.sig
check openssl-ecdsa-p384 openssl_verify ecdsa-p384 sha384 ecdsa-p384.sig
check openssl-ecdsa-p521 openssl_verify ecdsa-p521 sha512 ecdsa-p521.sig
for bits in 2048 3072 4096; do
    check "openssl-rsa-$bits" openssl_verify "rsa-$bits" sha256 "rsa-$bits.sig"
    check "openssl-rsa-$bits-pkcs1-sha512" openssl_verify "rsa-$bits" sha512 "rsa-$bits.pkcs1-sha512.sig"
    for h in 256 384 512; do
        check "openssl-rsa-$bits-pss-sha$h" openssl_verify "rsa-$bits" "sha$h" "rsa-$bits.pss-sha$h.sig" \
            -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:digest -sigopt "rsa_mgf1_md:sha$h"
    done
done
openssl_ed25519() {
    openssl pkey -pubin -inform DER -in "$sigs/ed25519.spki.der" -out "$sigs/ed25519.pem" &&
    openssl pkeyutl -verify -pubin -inkey "$sigs/ed25519.pem" -rawin -in "$sigs/msg" -sigfile "$sigs/ed25519.sig"
}
check openssl-ed25519 openssl_ed25519
# And a tampered message fails there too (the check above is not vacuous).
tampered() {
    cp "$sigs/msg" "$sigs/msg.orig" && printf 'x' >> "$sigs/msg" &&
    ! openssl_verify ecdsa-p256 sha256 ecdsa-p256.sig; local r=$?
    mv "$sigs/msg.orig" "$sigs/msg"
    return $r
}
check openssl-rejects-tampered tampered

check threads-8x1000 "$tmp/threads" ecdsa-p256 8 1000
check errors-daemon "$tmp/errors" daemon
check with-openssl-daemon "$tmp/with_openssl" ecdsa-p256
check example "$tmp/example" ecdsa-p256
check example-static "$tmp/example-static" ed25519

# A token tokend mints (signed through this signd with an ML-DSA-44 key under
# tokend's sign-jws role), checked by the jwt program against tokend's JWKS:
# good, wrong audience, one flipped byte (the program's own alterations), and,
# once its 10 s are up, expired.
tok="$tmp/tokend"
start_tokend() {
    mkdir -p "$tok" &&
    "$bin/signetctl" key generate tokend-ml-dsa-44 -a ml-dsa-44 --role tokend >/dev/null &&
    tok_port=$(python3 "$repo/tests/lib/free_port.py") &&
    cat > "$tok/tokend.toml" <<TOKTOML &&
issuer = "http://127.0.0.1:$tok_port"
listen = "127.0.0.1:$tok_port"
state_dir = "$tok/db"
signd_socket = "$SIGNET_SIGND_SOCKET"
admin_socket = "$tok/admin.sock"
[tokens]
algorithm = "ML-DSA-44"
access_token_seconds = 10
TOKTOML
    { "$bin/tokend" --config "$tok/tokend.toml" >"$tmp/log/tokend.log" 2>&1 & } &&
    tokend_pid=$! &&
    for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$tok_port/healthz" -o /dev/null && break; sleep 0.1; done &&
    SIGNET_TOKEND_SOCKET="$tok/admin.sock" "$bin/signetctl" --json oauth client create sssd \
        --auth-method client_secret_basic --audience client.example --scope login > "$tok/client.json" &&
    secret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$tok/client.json") &&
    curl -fsS -u "sssd:$secret" -d grant_type=client_credentials "http://127.0.0.1:$tok_port/token" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"], end="")' > "$tok/token.jwt" &&
    curl -fsS "http://127.0.0.1:$tok_port/jwks" -o "$tok/jwks.json" &&
    date +%s > "$tok/minted"
}
check tokend-mints-ml-dsa-44 start_tokend
tok_jwt() { "$tmp/jwt" "$tok/jwks.json" "$tok/token.jwt" "$@"; }  # leeway: JWT_LEEWAY, default 30 s
check tokend-jwt-good tok_jwt PKI_RESULT_OK "http://127.0.0.1:$tok_port" client.example \
    sub=sssd client_id=sssd scope=login
check tokend-jwt-wrong-audience tok_jwt PKI_RESULT_TOKEN_WRONG_AUDIENCE "http://127.0.0.1:$tok_port" other.example
check tokend-jwt-wrong-issuer tok_jwt PKI_RESULT_TOKEN_WRONG_ISSUER https://elsewhere.test -
tokend_expired() {
    local left=$(( $(cat "$tok/minted") + 11 - $(date +%s) ))
    [ "$left" -gt 0 ] && sleep "$left"
    JWT_LEEWAY=0 tok_jwt PKI_RESULT_TOKEN_EXPIRED "http://127.0.0.1:$tok_port" client.example
}
check tokend-jwt-expired tokend_expired
[ -n "$tokend_pid" ] && kill "$tokend_pid" 2>/dev/null && wait "$tokend_pid" 2>/dev/null

# One client across a signd restart: the reconnect program is driven by
# lines on a fifo, between which signd is stopped and started again.
reconnect() {
    local fifo="$tmp/reconnect.fifo" out="$tmp/reconnect.out" pid r=0
    mkfifo "$fifo" || return 1
    "$tmp/reconnect" ecdsa-p256 <"$fifo" >"$out" 2>&1 &
    pid=$!
    exec {fd}>"$fifo"
    wait_for() {
        for _ in $(seq 1 100); do grep -q "$1" "$out" && return 0; sleep 0.1; done
        echo "timed out waiting for '$1'"; return 1
    }
    wait_for "phase 1 done" && stop_signd && echo >&"$fd" && wait_for "phase 2 done" &&
        start_signd && echo >&"$fd" || r=1
    exec {fd}>&-
    wait "$pid" || r=1
    cat "$out"
    return $r
}
check reconnect-after-restart reconnect

# SIGTERM under a signing load of 8 threads (RSA-4096: slow enough that calls
# are always in flight): signd answers the calls it has,
# refuses the new ones with `shutting-down`, and exits 0 promptly; then it is
# started again for the tests below.
drain() {
    local out="$tmp/drain.out" pid status r=0
    "$tmp/drain" rsa-4096 8 >"$out" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do grep -q "^signing" "$out" && break; sleep 0.05; done
    grep -q "^signing" "$out" || { echo "the load never started"; cat "$out"; kill "$pid"; return 1; }
    kill -TERM "$signd_pid"
    wait "$signd_pid"
    status=$?
    signd_pid=
    wait "$pid" || r=1
    cat "$out"
    [ "$status" -eq 0 ] || { echo "signd exited with $status"; r=1; }
    if grep -q "calls still in progress" "$tmp/log/signd.log"; then
        echo "signd exited with calls in progress"; r=1
    fi
    start_signd || r=1
    return $r
}
check drain-on-sigterm drain

# A caller signd's policy does not know: nobody.
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
check errors-denied as_nobody env SIGNET_SIGND_SOCKET="$SIGNET_SIGND_SOCKET" "$tmp/errors" denied

# --- keys in an HSM: signd's NSS backend over a SoftHSM2 token ---------------
# A second signd whose keys live on a SoftHSM2 token registered in an NSS
# database, set up with the operator's tools. The same C programs sign through
# it; key ids are again algorithm names (Ed25519 and ML-DSA are not available
# through NSS: see docs/signd.md).
hsm="$tmp/hsm"
hsm_algorithms=(ecdsa-p256 ecdsa-p384 rsa-2048)
setup_hsm() {
    mkdir -p "$hsm/tokens" "$hsm/run" "$hsm/state" && chmod 0755 "$hsm/run" &&
    printf 'directories.tokendir = %s\nobjectstore.backend = file\n' "$hsm/tokens" > "$hsm/softhsm2.conf" &&
    SOFTHSM2_CONF="$hsm/softhsm2.conf" softhsm2-util --init-token --free --label signet --pin 1234 --so-pin 5678 >/dev/null &&
    mkdir -p "$hsm/nssdb" && certutil -N -d "sql:$hsm/nssdb" --empty-password &&
    SOFTHSM2_CONF="$hsm/softhsm2.conf" modutil -dbdir "sql:$hsm/nssdb" -add softhsm -libfile /usr/lib/softhsm/libsofthsm2.so -force >/dev/null &&
    printf '1234' > "$hsm/pin" && chmod 0600 "$hsm/pin" &&
    cat > "$hsm/signd.toml" <<HSMTOML
socket = "$hsm/run/signd.sock"
socket_mode = "0666"
state_dir = "$hsm/state"
[nss]
database = "sql:$hsm/nssdb"
token = "signet"
pin_file = "$hsm/pin"
[roles.admin]
users = ["root"]
admin = true
keys = ["*"]
HSMTOML
}
hsm_signd_pid=
start_hsm_signd() {
    SOFTHSM2_CONF="$hsm/softhsm2.conf" "$bin/signd" --config "$hsm/signd.toml" >"$tmp/log/signd-hsm.log" 2>&1 &
    hsm_signd_pid=$!
    for _ in $(seq 1 100); do
        grep -q "signd ready" "$tmp/log/signd-hsm.log" && [ -S "$hsm/run/signd.sock" ] && break
        sleep 0.1
    done
    for alg in "${hsm_algorithms[@]}"; do
        SIGNET_SIGND_SOCKET="$hsm/run/signd.sock" "$bin/signetctl" key generate "$alg" -a "$alg" --backend nss >/dev/null || return 1
    done
    SIGNET_SIGND_SOCKET="$hsm/run/signd.sock" "$bin/signetctl" key show ecdsa-p256 | grep -q 'token "signet"'
}
check hsm-setup setup_hsm
check hsm-signd-and-token-keys start_hsm_signd
mkdir -p "$tmp/sigs-hsm"
check hsm-sign-all env SIGNET_SIGND_SOCKET="$hsm/run/signd.sock" "$tmp/sign_all" "$tmp/sigs-hsm" "${hsm_algorithms[@]}"
check hsm-threads-8x200 env SIGNET_SIGND_SOCKET="$hsm/run/signd.sock" "$tmp/threads" ecdsa-p256 8 200
hsm_openssl_verify() {
    openssl pkey -pubin -inform DER -in "$tmp/sigs-hsm/ecdsa-p256.spki.der" -out "$tmp/sigs-hsm/p256.pem" &&
    openssl dgst -sha256 -verify "$tmp/sigs-hsm/p256.pem" -signature "$tmp/sigs-hsm/ecdsa-p256.sig" "$tmp/sigs-hsm/msg"
}
check hsm-openssl-verifies-p256 hsm_openssl_verify
[ -n "$hsm_signd_pid" ] && kill "$hsm_signd_pid" 2>/dev/null && wait "$hsm_signd_pid" 2>/dev/null

# --- valgrind ---------------------------------------------------------------

if [ "${LIBPKI_VALGRIND:-1}" != 0 ]; then
    # Rust's std and OpenSSL keep some allocations until exit ("still
    # reachable"); that is fine. Definite leaks and invalid accesses are not.
    vg() {
        valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite \
            --error-exitcode=1 "$@"
    }
    check valgrind-errors-local vg "$tmp/errors" local
    check valgrind-errors-no-daemon vg "$tmp/errors" nodaemon "$tmp/nothing-here.sock"
    check valgrind-errors-daemon vg "$tmp/errors" daemon
    check valgrind-errors-denied as_nobody env SIGNET_SIGND_SOCKET="$SIGNET_SIGND_SOCKET" \
        valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite \
        --error-exitcode=1 "$tmp/errors" denied
    mkdir -p "$tmp/sigs-vg"
    check valgrind-sign-all vg "$tmp/sign_all" "$tmp/sigs-vg" "${algorithms[@]}"
    check valgrind-threads-8x50 vg "$tmp/threads" ecdsa-p256 8 50
    check valgrind-certs vg "$tmp/certs" "$certs/leaf.der" $((now + 365 * 86400)) PKI_RESULT_CERT_EXPIRED "$certs/root.der"
    check valgrind-with-openssl vg "$tmp/with_openssl" ecdsa-p256
    check valgrind-jwt-good vg "$tmp/jwt" "$jwts/jwks.json" "$jwts/good-ML-DSA-44.jwt" PKI_RESULT_OK \
        "$jwt_iss" "$jwt_aud" sub=alice
    check valgrind-jwt-expired vg "$tmp/jwt" "$jwts/jwks.json" "$jwts/expired.jwt" PKI_RESULT_TOKEN_EXPIRED
    check valgrind-example vg "$tmp/example" ecdsa-p256
fi

# --- performance (reported, not judged) ------------------------------------

check bench "$tmp/bench" ecdsa-p256 2000
grep '^bench' "$tmp/log/bench.log" || true
# The same calls from Rust (signet-ipc directly), for comparison.
if [ -x "$bin/examples/sign_bench" ]; then
    check bench-rust "$bin/examples/sign_bench" ecdsa-p256 2000
    grep '^rust' "$tmp/log/bench-rust.log" || true
fi

summary
