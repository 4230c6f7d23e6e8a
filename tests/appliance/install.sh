#!/usr/bin/env bash
# From `scripts/install` to a working appliance, without systemd, as the
# current user, every step asserted:
#
#   1. scripts/install --no-build --prefix $T/usr --destdir $T/root puts every
#      daemon (libexec/signet), signetctl (bin), libpki (header, libraries,
#      libpki.pc), the units (their ExecStart= and config paths moved to the
#      prefix), the sysusers.d and tmpfiles.d entries and a commented default
#      config per daemon (each accepted by the daemon's --check-config) in
#      place; a second run changes no config.
#   2. A C program builds against the installed libpki through pkg-config
#      (PKG_CONFIG_SYSROOT_DIR for the staged tree) and runs.
#   3. signd starts from the installed signd.toml (its socket, state directory
#      and admin uid moved to this test's directory and user: what an admin
#      would edit), and `signetctl setup --daemons-as $(id -u)` makes the CA,
#      the CT log's and tokend's keys and every config; it asks for signd's
#      restart; a rerun changes nothing; after signd's restart and ocspd's
#      start, it issues acmed's TLS certificate and completes; a rerun changes
#      nothing. Every config it wrote passes its daemon's --check-config.
#   4. The installed daemons run on those configs (the demo DNS server beside
#      them for acmed's lookups), and do real work: certbot obtains a
#      certificate from acmed (http-01) with an SCT from ctlogd; `openssl ocsp`
#      says good; ctlogd's get-sth shows the entry logged; tokend gives a
#      token (client_credentials) signed with the key setup made, verified
#      against its JWKS; probed's /api/checks are all up; setup's CT log is a
#      temporal shard, and `signetctl ct shard add` adds its successor.
#   5. With an NSS database as signd's [nss], `setup --backend nss` makes
#      every key on the token (no key file) and the CA with them; after
#      signd's restart, the issuing key on the token signs (acmed's
#      certificate, withheld for want of an ocspd there).
#
# Needs SIGNET_CERTBOT (ensure_certbot) and SIGNET_BIN_DIR, CARGO_TARGET_DIR
# (scripts/lib.sh), with the release binaries and libpki built.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SIGNET_CERTBOT:?run ensure_certbot from scripts/lib.sh first}"
: "${SIGNET_BIN_DIR:?source scripts/lib.sh first}"

# shellcheck source=../lib/stack.sh
. "$here/../lib/stack.sh"
stack_tmp install
PIDS=()
install_cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  stack_cleanup
}
trap install_cleanup EXIT

PREFIX="$T/usr"
ROOT="$T/root"
P="$ROOT$PREFIX"            # the staged prefix
ETC="$P/etc/signet"         # sysconfdir: PREFIX/etc for a prefix other than /usr
LIBEXEC="$P/libexec/signet"
CTL="$P/bin/signetctl"
STATE="$T/state"
RUN="$T/run"
LOGS="$T/logs"
ME=$(id -u)
DAEMONS=(signd ocspd acmed ctlogd tokend probed)
mkdir -p "$STATE" "$RUN" "$LOGS"

# --- 1. scripts/install ------------------------------------------------------------
# libpki's library, in the workspace's one build (scripts/lib.sh's build_all):
# nothing to do after scripts/test's build.
check "libpki built (cargo build --release --workspace --lib --bins --examples)" bash -c "cd '$stack_root' && cargo build --release --workspace --lib --bins --examples --locked"
INSTALL=(env CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(dirname "$SIGNET_BIN_DIR")}" "$stack_root/scripts/install"
  --no-build --prefix "$PREFIX" --destdir "$ROOT")
check "scripts/install --no-build --prefix $PREFIX --destdir $ROOT" "${INSTALL[@]}"
binaries() {
  local d
  for d in "${DAEMONS[@]}"; do [ -x "$LIBEXEC/$d" ] || { echo "$LIBEXEC/$d missing or not executable"; return 1; }; done
  [ -x "$CTL" ] || { echo "$CTL missing"; return 1; }
  "$LIBEXEC/signd" --help > /dev/null && "$CTL" --version
}
check "every daemon in libexec/signet and signetctl in bin, executable and running" binaries
libpki_files() {
  [ -f "$P/include/libpki.h" ] && [ -f "$P/lib/libpki.a" ] && [ -L "$P/lib/libpki.so" ] &&
    [ -f "$(readlink -f "$P/lib/libpki.so")" ] && grep -q "^prefix=$PREFIX\$" "$P/lib/pkgconfig/libpki.pc"
}
check "libpki: header, static and shared libraries, libpki.pc naming the prefix" libpki_files
units() {
  local u n=0
  for u in "$stack_root"/units/*.service "$stack_root"/units/*.socket "$stack_root"/units/signet.target; do
    [ -f "$P/lib/systemd/system/$(basename "$u")" ] || { echo "$(basename "$u") not installed"; return 1; }
    n=$((n + 1))
  done
  for d in "${DAEMONS[@]}"; do
    grep -qx "ExecStart=$PREFIX/libexec/signet/$d --config $PREFIX/etc/signet/$d.toml" "$P/lib/systemd/system/$d.service" ||
      { grep ExecStart "$P/lib/systemd/system/$d.service"; return 1; }
  done
  ! grep -rlE '(^|[=: ])(/usr/libexec/signet|/etc/signet/)' "$P/lib/systemd/system" "$P/lib/tmpfiles.d" || return 1
  [ -f "$P/lib/sysusers.d/signet.conf" ] && grep -q '^u *signd' "$P/lib/sysusers.d/signet.conf" &&
    grep -q "$PREFIX/etc/signet/signd.toml" "$P/lib/tmpfiles.d/signet.conf" && [ -f "$P/share/doc/signet/README.md" ]
  echo "$n units"
}
check "the units (ExecStart= and configs under the prefix), sysusers.d, tmpfiles.d" units
default_configs() {
  local d
  for d in "${DAEMONS[@]}"; do
    grep -q "^# .*See docs/$d.md" "$ETC/$d.toml" || { echo "$ETC/$d.toml: not the commented default"; return 1; }
    [ "$(stat -c %a "$ETC/$d.toml")" = 640 ] || { echo "$ETC/$d.toml: mode $(stat -c %a "$ETC/$d.toml")"; return 1; }
  done
}
check "a commented default config per daemon in PREFIX/etc/signet (0640)" default_configs
check_configs() { # accepted by each daemon's --check-config
  local d
  for d in "$@"; do "$LIBEXEC/$d" --config "$ETC/$d.toml" --check-config || { echo "$d refuses $ETC/$d.toml"; return 1; }; done
}
check "the default configs of ocspd, tokend and probed pass their daemon's --check-config" check_configs ocspd tokend probed
wait_for_ca() { # ctlogd's and acmed's defaults name the CA's files setup makes: refused for that alone
  local out
  out=$("$LIBEXEC/ctlogd" --config "$ETC/ctlogd.toml" --check-config 2>&1) && return 1
  echo "$out"; grep -q "$PREFIX/etc/signet/ca/root.pem" <<< "$out" || return 1
  out=$("$LIBEXEC/acmed" --config "$ETC/acmed.toml" --check-config 2>&1) && return 1
  echo "$out"; grep -q "$PREFIX/etc/signet/acmed/tls-chain.pem: No such file" <<< "$out"
}
check "ctlogd's and acmed's defaults are refused only for the CA's files setup makes" wait_for_ca
rerun_keeps_configs() {
  echo "# the operator's line" >> "$ETC/ocspd.toml"
  local before; before=$(cat "$ETC"/*.toml | sha256sum)
  "${INSTALL[@]}" && [ "$(cat "$ETC"/*.toml | sha256sum)" = "$before" ] && [ -x "$LIBEXEC/signd" ] &&
    [ ! -e "$ETC/ocspd.toml.tmp" ]
  sed -i '$d' "$ETC/ocspd.toml"
}
check "a second scripts/install succeeds and keeps every config (an edited one too)" rerun_keeps_configs
cp -a "$ETC" "$T/etc-as-installed"   # for the NSS appliance at the end

# --- 2. a C program against the installed libpki ----------------------------------------
cat > "$T/hello.c" <<'C'
#include <stdio.h>
#include <libpki.h>
int main(void) { printf("libpki %s\n", pki_version()); return pki_version()[0] ? 0 : 1; }
C
c_program() {
  local flags
  flags=$(PKG_CONFIG_PATH="$P/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$ROOT" pkg-config --cflags --libs libpki)
  # shellcheck disable=SC2086
  cc -o "$T/hello" "$T/hello.c" $flags && LD_LIBRARY_PATH="$P/lib" "$T/hello" | grep -q '^libpki [0-9]'
}
check "a C program builds with pkg-config --cflags --libs libpki and runs against the installed library" c_program

# --- 3. signd from the installed config, then signetctl setup ----------------------------
# The admin's edits for a throw-away appliance: socket, state directory, and this user as admin.
sed -i -e "s|^socket = .*|socket = \"$RUN/signd.sock\"|" -e "s|^state_dir = .*|state_dir = \"$STATE/signd\"|" \
  -e "s|^users = \[0\]|users = [$ME]|" "$ETC/signd.toml"
mkdir -p "$STATE/signd"
export SIGNET_SIGND_SOCKET="$RUN/signd.sock"
start() { # daemon [args...]: the installed binary on its config, in the background
  local d="$1"; shift
  "$LIBEXEC/$d" --config "$ETC/$d.toml" "$@" 2>> "$LOGS/$d.log" &
  PIDS+=("$!")
  eval "PID_$d=$!"
}
stop() { # daemon
  local pid; eval "pid=\$PID_$1"
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
}
eventually() { # SECONDS CMD...
  local deadline=$((SECONDS + $1)); shift
  until "$@" > /dev/null 2>&1; do [ $SECONDS -lt "$deadline" ] || { "$@"; return 1; }; sleep 0.1; done
}
check "signd --check-config accepts the installed signd.toml" "$LIBEXEC/signd" --config "$ETC/signd.toml" --check-config
start signd
check "signd starts from the installed signd.toml (signetctl health)" eventually 20 "$CTL" health

OCSP_PORT=$(free_port); ACME_PORT=$(free_port); DNS_PORT=$(free_port); HTTP01_PORT=$(free_port)
TLSALPN01_PORT=$(free_port); CT_PORT=$(free_port); PROBE_PORT=$(free_port); TOKEN_PORT=$(free_port)
SETUP=("$CTL" --json setup --config-dir "$ETC" --state-dir "$STATE" --run-dir "$RUN" --name appl
  --daemons-as "$ME" --ocsp-port "$OCSP_PORT" --acme-port "$ACME_PORT" --http01-port "$HTTP01_PORT"
  --tlsalpn01-port "$TLSALPN01_PORT" --ct-port "$CT_PORT" --token-port "$TOKEN_PORT" --probe-port "$PROBE_PORT"
  --dns-resolver "127.0.0.1:$DNS_PORT")
field() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(v if not isinstance(v, list) else len(v))' "$@"; }
setup_first() {
  "${SETUP[@]}" > "$T/setup1.json" || return 1
  cat "$T/setup1.json"
  [ "$(field "$T/setup1.json" complete)" = False ] && grep -q 'restart signd' "$T/setup1.json" &&
    "$CTL" key show appl-root && "$CTL" key show appl-ct && "$CTL" key show appl-token-es256 &&
    openssl verify -CAfile "$ETC/ca/root.pem" "$ETC/ca/issuing.pem" &&
    grep -q '^\[issuers\.appl\]' "$ETC/signd.toml" && grep -q '^\[logs\.appl\]' "$ETC/signd.toml" &&
    grep -q '^\[roles\.tokend\]' "$ETC/signd.toml" && grep -q '^# Written by signetctl setup' "$ETC/ocspd.toml" &&
    grep -q '^# Written by signetctl setup' "$ETC/ctlogd.toml" && grep -q '^# Written by signetctl setup' "$ETC/tokend.toml" &&
    grep -q 'Installed by scripts/install' "$ETC/acmed.toml"
}
check "signetctl setup (first run): keys in signd (openssl backend), the CA, signd's sections, ocspd/ctlogd/tokend configs; asks for signd's restart" setup_first
setup_again() { # run N: nothing new done, the same completeness
  local before; before=$(cat "$ETC"/*.toml "$ETC"/ca/*.pem | sha256sum)
  "${SETUP[@]}" > "$T/setup-again.json" || return 1
  cat "$T/setup-again.json"
  [ "$(field "$T/setup-again.json" done)" = 0 ] && [ "$(field "$T/setup-again.json" complete)" = "$1" ] &&
    [ "$(cat "$ETC"/*.toml "$ETC"/ca/*.pem | sha256sum)" = "$before" ]
}
check "signetctl setup again: nothing to do, nothing changed, still asks for the restart" setup_again False
check "signd --check-config accepts signd.toml with setup's sections" "$LIBEXEC/signd" --config "$ETC/signd.toml" --check-config
stop signd
start signd
check "signd restarts on it" eventually 20 "$CTL" health
check "ocspd --check-config accepts setup's ocspd.toml" check_configs ocspd
start ocspd
check "ocspd starts (the CA's CRL served)" eventually 20 curl -fs "http://127.0.0.1:$OCSP_PORT/crl/appl.crl" -o /dev/null
setup_second() {
  "${SETUP[@]}" > "$T/setup2.json" || return 1
  cat "$T/setup2.json"
  [ "$(field "$T/setup2.json" complete)" = True ] &&
    openssl verify -CAfile "$ETC/ca/root.pem" -untrusted "$ETC/ca/issuing.pem" "$ETC/acmed/tls.pem" &&
    [ "$(stat -c %a "$ETC/acmed/tls-key.pem")" = 600 ] &&
    grep -q '^# Written by signetctl setup' "$ETC/acmed.toml" && grep -q '^# Written by signetctl setup' "$ETC/probed.toml"
}
check "signetctl setup (second run): acmed's TLS certificate from the CA (recorded in ocspd), acmed's and probed's configs; complete" setup_second
check "signetctl setup again: nothing to do, nothing changed, complete" setup_again True
check "every config setup wrote passes its daemon's --check-config" check_configs ctlogd acmed tokend probed

# --- 4. the appliance at work ------------------------------------------------------------
printf 'signet.test A 127.0.0.1\n*.signet.test A 127.0.0.1\n' > "$T/zone"
"$SIGNET_BIN_DIR/signet-testdns" --listen "127.0.0.1:$DNS_PORT" --zone "$T/zone" > /dev/null 2>> "$LOGS/dns.log" &
PIDS+=("$!")
start ctlogd
start acmed
start tokend
start probed
CT_URL="http://127.0.0.1:$CT_PORT/appl/"
DIRECTORY="https://127.0.0.1:$ACME_PORT/directory"
TOKEN_URL="http://127.0.0.1:$TOKEN_PORT"
up() {
  curl -fs "${CT_URL}ct/v1/get-sth" && curl -fs --cacert "$ETC/ca/root.pem" "$DIRECTORY" &&
    curl -fs "$TOKEN_URL/healthz" && curl -fs "http://127.0.0.1:$PROBE_PORT/healthz"
}
check "ctlogd, acmed (HTTPS, its certificate from the CA), tokend and probed start on setup's configs" eventually 30 up

NAME=www.signet.test
LIVE="$T/certbot/conf/live/appl"
check "certbot obtains $NAME from acmed (http-01)" \
  env REQUESTS_CA_BUNDLE="$ETC/ca/root.pem" "$SIGNET_CERTBOT" --config-dir "$T/certbot/conf" --work-dir "$T/certbot/work" \
  --logs-dir "$T/certbot/logs" --non-interactive --server "$DIRECTORY" certonly --agree-tos -m admin@signet.test \
  --cert-name appl --standalone --http-01-address 127.0.0.1 --http-01-port "$HTTP01_PORT" -d "$NAME"
check "its chain verifies to the CA's root for $NAME" \
  openssl verify -CAfile "$ETC/ca/root.pem" -untrusted "$ETC/ca/chain.pem" -verify_hostname "$NAME" "$LIVE/fullchain.pem"
check "it carries an SCT list (from ctlogd)" \
  bash -c "openssl x509 -in '$LIVE/cert.pem' -noout -text | grep -q 'CT Precertificate SCTs'"
ocsp_good() {
  openssl ocsp -issuer "$ETC/ca/issuing.pem" -cert "$LIVE/cert.pem" -url "http://127.0.0.1:$OCSP_PORT/ocsp" \
    -CAfile "$ETC/ca/chain.pem" -no_nonce > "$T/ocsp.txt" 2>&1
  cat "$T/ocsp.txt"
  grep -q "^$LIVE/cert.pem: good" "$T/ocsp.txt" && grep -q "Response verify OK" "$T/ocsp.txt"
}
check "openssl ocsp says good (response verified)" ocsp_good
sth() {
  curl -fs "${CT_URL}ct/v1/get-sth" > "$T/sth.json" && cat "$T/sth.json" &&
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if s["tree_size"] >= 1 and s["tree_head_signature"] else 1)' "$T/sth.json"
}
check "ctlogd's get-sth: a signed tree head with the precertificate in it (tree_size >= 1)" eventually 10 sth
export SIGNET_TOKEND_SOCKET="$RUN/tokend.sock"
token() {
  "$CTL" --json oauth client create svc --auth-method client_secret_basic --scope appl.read \
    --audience https://api.signet.test > "$T/client.json" || return 1
  local secret; secret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$T/client.json")
  curl -fs -u "svc:$secret" -d grant_type=client_credentials "$TOKEN_URL/token" > "$T/token.json" || return 1
  curl -fs "$TOKEN_URL/jwks" > "$T/jwks.json" || return 1
  python3 "$stack_root/tests/lib/es256_token.py" "$T/token.json" "$T/jwks.json"
}
check "tokend: a token (client_credentials) signed by setup's ES256 key, verified against its JWKS" token
all_up() {
  curl -fs "http://127.0.0.1:$PROBE_PORT/api/checks" > "$T/checks.json" || return 1
  python3 "$stack_root/tests/lib/checks_up.py" "$T/checks.json" signd ocspd ctlogd tokend acmed acmed_tls appl_ocsp appl_crl appl_ct
}
check "probed's /api/checks: every check up (each daemon, acmed's TLS, the CA's OCSP and CRL, the CT log)" eventually 60 all_up
next_shard() {
  # setup's log is a temporal shard (NotAfter from 1 January this year to that of the year after
  # next), acmed's [[ct.logs]] names its window, and its successor is added while it runs.
  local end next_end
  curl -fs "${CT_URL}log.v3.json" > "$T/appl.v3.json" || return 1
  end=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["temporal_interval"]["end_exclusive"])' \
    "$T/appl.v3.json") || { cat "$T/appl.v3.json"; return 1; }
  [ "$end" = "$(($(date -u +%Y) + 2))-01-01T00:00:00Z" ] || { echo "window ends $end"; return 1; }
  grep -qx "not_after_end = \"$end\"" "$ETC/acmed.toml" || { echo "acmed.toml:"; cat "$ETC/acmed.toml"; return 1; }
  next_end="$((${end:0:4} + 2))${end:4}"
  "$CTL" --json --ctlogd-socket "$RUN/ctlogd.sock" ct shard add --name next --not-after-start "$end" \
    --not-after-end "$next_end" > "$T/next.json" || { cat "$T/next.json"; return 1; }
  cat "$T/next.json"
  curl -fs "${CT_URL%appl/}next/ct/v1/get-sth"
}
check "ctlogd: setup's log is a temporal shard named in acmed's config; signetctl ct shard add adds the next" next_shard

# --- 5. keys on an NSS token: setup --backend nss ------------------------------------------
# A second signd from the installed config, with an NSS database as [nss] (what an HSM registered
# in the database would be too); setup's first run makes every key there.
NETC="$T/nss/etc"; NRUN="$T/nss/run"; NSTATE="$T/nss/state"
mkdir -p "$T/nss" "$NRUN" "$NSTATE/signd" "$T/nss/db"
cp -a "$T/etc-as-installed" "$NETC"
sed -i -e "s|^socket = .*|socket = \"$NRUN/signd.sock\"|" -e "s|^state_dir = .*|state_dir = \"$NSTATE/signd\"|" \
  -e "s|^users = \[0\]|users = [$ME]|" -e "s|^# \[nss\]|[nss]|" -e "s|^# database = .*|database = \"sql:$T/nss/db\"|" "$NETC/signd.toml"
check "an empty NSS database (certutil -N)" certutil -N -d "sql:$T/nss/db" --empty-password
nss_start() {
  "$LIBEXEC/signd" --config "$NETC/signd.toml" 2>> "$LOGS/nss-signd.log" &
  PIDS+=("$!"); PID_nss=$!
  SIGNET_SIGND_SOCKET="$NRUN/signd.sock" eventually 20 "$CTL" health
}
check "signd starts from the installed signd.toml with [nss]" nss_start
nss_setup() {
  SIGNET_SIGND_SOCKET="$NRUN/signd.sock" "$CTL" --json setup --backend nss --config-dir "$NETC" --state-dir "$NSTATE" \
    --run-dir "$NRUN" --name hsm --daemons-as "$ME" > "$T/nss-setup.json" || { cat "$T/nss-setup.json"; return 1; }
  local id
  for id in hsm-root hsm-issuing hsm-ocsp hsm-ct hsm-token-es256; do
    SIGNET_SIGND_SOCKET="$NRUN/signd.sock" "$CTL" --json key show "$id" > "$T/key.json" || return 1
    python3 -c 'import json,sys; k=json.load(open(sys.argv[1])); print(k["id"], k["backend"], k["location"]); sys.exit(0 if k["backend"] == "nss" and k["available"] else 1)' "$T/key.json" || return 1
  done
  openssl verify -CAfile "$NETC/ca/root.pem" "$NETC/ca/issuing.pem" && [ ! -e "$NSTATE/signd/keys/hsm-root.pem" ]
}
check "signetctl setup --backend nss: the CA's, the log's and tokend's keys on the NSS token (no key file), the CA made with them" nss_setup
nss_restart() {
  kill -TERM "$PID_nss"; wait "$PID_nss" 2>/dev/null || true
  nss_start || return 1
  # Setup's second run finds the issuer loaded and has acmed's TLS certificate signed by the issuing
  # key on the token; with no ocspd here to record it, the certificate is withheld (exit 1).
  SIGNET_SIGND_SOCKET="$NRUN/signd.sock" "$CTL" --json setup --backend nss --config-dir "$NETC" --state-dir "$NSTATE" \
    --run-dir "$NRUN" --name hsm --daemons-as "$ME" > "$T/nss-setup2.json" 2>&1 && return 1
  cat "$T/nss-setup2.json"
  grep -q "was signed but ocspd could not record it" "$T/nss-setup2.json"
}
check "signd restarts with [issuers.hsm] on NSS keys; the second run has acmed's certificate signed by the CA key on the token (then withheld: no ocspd here)" nss_restart

echo
echo "install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
