#!/usr/bin/env bash
# The `openssl ocsp` baseline: builds a small test PKI with the openssl CLI,
# one DER OCSP request per leaf, then runs `openssl ocsp` as a responder (one
# process, then `-multi 2` where this OpenSSL has it) and drives it with
# ocsp-load. Everything runs in a new network namespace (unshare -rn, plus a
# PID namespace so that nothing outlives the script): the responder binds all
# interfaces and must not listen in the host's namespace.
#
#   bench/scripts/ocsp-baseline.sh [--duration S] [--warmup S] [--connections N]
#       [--method get|post] [--json] [--leaves N] [--keep DIR]
#       [--requests-out DIR] [--no-run] [--no-multi] [--ocsp-load PATH]
#
# With --json, each run prints one line: {"responder", "openssl", "load"},
# "load" being ocsp-load's JSON object.
#
# ocsp-load comes from --ocsp-load, else $OCSP_LOAD, else
# $CARGO_TARGET_DIR/release/ocsp-load (CARGO_TARGET_DIR defaulting as in
# scripts/lib.sh). Build it with: cargo build --release -p signet-bench --bin ocsp-load

set -euo pipefail

usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2; }

duration=10 warmup=2 connections=64 method=get output=text leaves=100
keep="" requests_out="" run=1 multi=1 port=8888
ocsp_load="${OCSP_LOAD:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration="${2:?--duration needs a value}"; shift 2 ;;
    --warmup) warmup="${2:?--warmup needs a value}"; shift 2 ;;
    --connections) connections="${2:?--connections needs a value}"; shift 2 ;;
    --method) method="${2:?--method needs a value}"; shift 2 ;;
    --json) output=json; shift ;;
    --leaves) leaves="${2:?--leaves needs a value}"; shift 2 ;;
    --keep) keep="${2:?--keep needs a value}"; shift 2 ;;
    --requests-out) requests_out="${2:?--requests-out needs a value}"; shift 2 ;;
    --no-run) run=0; shift ;;
    --no-multi) multi=0; shift ;;
    --ocsp-load) ocsp_load="${2:?--ocsp-load needs a value}"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "ocsp-baseline: unknown argument $1" >&2; usage ;;
  esac
done

[ "$leaves" -ge 10 ] 2>/dev/null || { echo "ocsp-baseline: --leaves must be at least 10" >&2; exit 2; }

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'ocsp-baseline: %s\n' "$*" >&2; exit 1; }

# Outside the namespace: resolve paths, check the tools, then re-run this
# script inside a new network + PID namespace with the same arguments.
if [ -z "${OCSP_BASELINE_NETNS:-}" ]; then
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  if [ -z "$ocsp_load" ]; then
    target="${CARGO_TARGET_DIR:-${SIGNET_CACHE:-$HOME/.cache/signet}/target-$(printf '%s' "$root" | sha256sum | cut -c1-12)}"
    ocsp_load="$target/release/ocsp-load"
  fi
  if [ "$run" = 1 ] && [ ! -x "$ocsp_load" ]; then
    die "$ocsp_load not found: cargo build --release -p signet-bench --bin ocsp-load, or pass --ocsp-load PATH"
  fi
  for tool in openssl unshare ip ss; do
    command -v "$tool" >/dev/null || die "$tool is needed"
  done
  # Absolute paths: the inner run works in its own directory.
  abs() { mkdir -p "$1" && (cd "$1" && pwd); }
  args=(--duration "$duration" --warmup "$warmup" --connections "$connections" --method "$method" --leaves "$leaves")
  [ "$output" = json ] && args+=(--json)
  [ -n "$keep" ] && args+=(--keep "$(abs "$keep")")
  [ -n "$requests_out" ] && args+=(--requests-out "$(abs "$requests_out")")
  [ "$run" = 0 ] && args+=(--no-run)
  [ "$multi" = 0 ] && args+=(--no-multi)
  [ "$run" = 1 ] && args+=(--ocsp-load "$(cd "$(dirname "$ocsp_load")" && pwd)/$(basename "$ocsp_load")")
  # unshare ignores SIGINT and SIGTERM while it waits for its child, so it
  # runs in the background and a signal here is passed on: SIGTERM to the
  # inner script (which cleans up), then, if it lingers, SIGKILL to unshare;
  # --kill-child makes that kill the inner script, and with it (the first
  # process of the PID namespace) everything it started.
  OCSP_BASELINE_NETNS=1 unshare -rn --pid --fork --kill-child bash "${BASH_SOURCE[0]}" "${args[@]}" &
  ns_pid=$!
  pass_on() {
    trap '' INT TERM
    kill -TERM $(cat "/proc/$ns_pid/task/$ns_pid/children" 2>/dev/null) 2>/dev/null || true
    (sleep 5; kill -KILL "$ns_pid" 2>/dev/null) &
    wait "$ns_pid" 2>/dev/null || true
    exit "$1"
  }
  trap 'pass_on 130' INT
  trap 'pass_on 143' TERM
  rc=0
  wait "$ns_pid" || rc=$?
  exit "$rc"
fi

# Inside the namespace from here on.
ip link set lo up

# With -multi, openssl's parent only notices SIGTERM when a child exits
# (3.0 restarts its waitpid), so the children must be signalled too: -multi
# puts the responder in its own process group (a setsid'd responder would
# fail that setpgid and exit), which is signalled as a whole. Without
# -multi there is one process, in ours.
responder_pid=""
stop_responder() {
  [ -n "$responder_pid" ] || return 0
  kill -TERM -- "-$responder_pid" 2>/dev/null || kill -TERM "$responder_pid" 2>/dev/null || true
  local deadline=$((SECONDS + 5))
  # Gone when nothing listens on the port any more (a zombie still answers kill -0).
  while ss -Hltn "sport = :$port" | grep -q . && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 0.05
  done
  kill -KILL -- "-$responder_pid" 2>/dev/null || kill -KILL "$responder_pid" 2>/dev/null || true
  wait "$responder_pid" 2>/dev/null || true
  responder_pid=""
}
if [ -n "$keep" ]; then
  dir="$keep"
  mkdir -p "$dir"
  trap 'stop_responder' EXIT
else
  dir="$(mktemp -d "${TMPDIR:-/tmp}/ocsp-baseline.XXXXXX")"
  trap 'stop_responder; rm -rf "$dir"' EXIT
fi
# A second signal must not cut the cleanup short.
trap 'trap "" INT TERM; exit 130' INT TERM
cd "$dir"

# ---- The PKI -------------------------------------------------------------
say "building a test PKI in $dir: P-256 root, OCSP responder, $leaves leaves"
cat > pki.cnf <<EOF
[req]
distinguished_name = dn
[dn]
[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[resp_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = critical,OCSPSigning
noCheck = ignored
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[leaf_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
authorityInfoAccess = OCSP;URI:http://127.0.0.1:$port/
EOF
p256=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
openssl req -config pki.cnf -x509 "${p256[@]}" -keyout ca.key -out ca.pem -subj "/CN=Signet OCSP baseline root" \
  -days 3650 -sha256 -extensions ca_ext -set_serial 1 2>/dev/null
openssl req -config pki.cnf -new "${p256[@]}" -keyout resp.key -out resp.csr -subj "/CN=Signet OCSP baseline responder" 2>/dev/null
openssl x509 -req -in resp.csr -CA ca.pem -CAkey ca.key -set_serial 2 -days 3650 -sha256 \
  -extfile pki.cnf -extensions resp_ext -out resp.pem 2>/dev/null

# `openssl ca` index format: status, expiry, revocation (date[,reason]),
# serial (upper-case hex), file name, subject. Every tenth leaf is revoked.
expiry="$(date -u -d '+365 days' +%y%m%d%H%M%SZ)"
revoked_at="$(date -u -d '-1 day' +%y%m%d%H%M%SZ)"
: > index.txt
mkdir -p leaves requests
for i in $(seq 1 "$leaves"); do
  serial="$(printf '%06X' $((0x100000 + i)))"
  openssl req -config pki.cnf -new "${p256[@]}" -keyout "leaves/leaf$i.key" -out "leaves/leaf$i.csr" \
    -subj "/CN=leaf-$i" 2>/dev/null
  openssl x509 -req -in "leaves/leaf$i.csr" -CA ca.pem -CAkey ca.key -set_serial "0x$serial" -days 365 -sha256 \
    -extfile pki.cnf -extensions leaf_ext -out "leaves/leaf$i.pem" 2>/dev/null
  if [ $((i % 10)) -eq 0 ]; then
    printf 'R\t%s\t%s,keyCompromise\t%s\tunknown\t/CN=leaf-%d\n' "$expiry" "$revoked_at" "$serial" "$i" >> index.txt
  else
    printf 'V\t%s\t\t%s\tunknown\t/CN=leaf-%d\n' "$expiry" "$serial" "$i" >> index.txt
  fi
  openssl ocsp -issuer ca.pem -cert "leaves/leaf$i.pem" -no_nonce -reqout "requests/req$i.der" >/dev/null
done
say "$(grep -c '^V' index.txt) good, $(grep -c '^R' index.txt) revoked; requests in $dir/requests"

if [ -n "$requests_out" ]; then
  mkdir -p "$requests_out"
  cp requests/*.der "$requests_out"/
  say "wrote $(ls requests | wc -l) requests to $requests_out"
fi
[ "$run" = 1 ] || exit 0

# ---- The runs ------------------------------------------------------------
# Waits until the responder listens on $port. Asks the kernel (ss) rather
# than connecting: `openssl ocsp` (3.0 at least) spins at 100% CPU and stops
# answering once a client connects and closes without sending a request
# (openssl/openssl#31129, #23934), so a connect-only probe would wedge it.
wait_for_port() {
  local deadline=$((SECONDS + 20))
  until ss -Hltn "sport = :$port" | grep -q .; do
    kill -0 "$responder_pid" 2>/dev/null || { cat responder.log >&2; die "the responder exited"; }
    [ "$SECONDS" -lt "$deadline" ] || die "the responder did not listen on $port within 20 s"
    sleep 0.05
  done
}

# One good and one revoked lookup through openssl's own client: the
# responder answers, and its answers verify against the root.
sanity_check() {
  local good revoked
  good="$(openssl ocsp -issuer ca.pem -cert leaves/leaf1.pem -url "http://127.0.0.1:$port/" -CAfile ca.pem 2>&1)"
  revoked="$(openssl ocsp -issuer ca.pem -cert leaves/leaf10.pem -url "http://127.0.0.1:$port/" -CAfile ca.pem 2>&1)"
  case "$good" in *"Response verify OK"*"leaves/leaf1.pem: good"*) ;; *) die "sanity check (good) failed: $good" ;; esac
  case "$revoked" in *"Response verify OK"*"leaves/leaf10.pem: revoked"*) ;; *) die "sanity check (revoked) failed: $revoked" ;; esac
}

# Runs the responder with extra arguments "$@" and drives it.
bench() {
  local label="$1"; shift
  openssl ocsp -index index.txt -port "$port" -rsigner resp.pem -rkey resp.key -CA ca.pem "$@" > responder.log 2>&1 &
  responder_pid=$!
  wait_for_port
  sanity_check
  say "$label: ocsp-load --connections $connections --duration $duration --warmup $warmup --method $method"
  # In the background: bash runs a trap only once a foreground command ends,
  # but interrupts `wait`.
  local rc=0
  "$ocsp_load" --url "http://127.0.0.1:$port/" --requests-dir requests --connections "$connections" \
    --duration "$duration" --warmup "$warmup" --method "$method" --output "$output" > load.out &
  wait $! || rc=$?
  if [ "$output" = json ]; then
    # One line per run: which responder, and ocsp-load's object.
    local load
    load="$(cat load.out)"
    printf '{"responder":"%s","openssl":"%s","load":%s}\n' "$label" "$(openssl version)" "${load:-null}"
  else
    cat load.out
  fi
  stop_responder
  return "$rc"
}

say "$(openssl version)"
status=0
bench "openssl ocsp (one process)" || status=1
if [ "$multi" = 1 ]; then
  if openssl ocsp -help 2>&1 | grep -q -- '-multi'; then
    bench "openssl ocsp -multi 2" -multi 2 || status=1
  else
    say "this openssl ocsp has no -multi: skipped"
  fi
fi
exit "$status"
