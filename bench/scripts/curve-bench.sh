#!/usr/bin/env bash
# ECDSA signing by curve: signd against `openssl speed` from the very OpenSSL
# signd links (ensure_openssl in scripts/lib.sh: openssl-src's sources and
# options plus enable-ec_nistp_64_gcc_128), then acmed's issuance rate with a
# P-384 CA against a P-256 CA. Prints each figure and the ratios.
#
#   bench/scripts/curve-bench.sh [--seconds N] [--rounds N] [--concurrency N] [--workers N]
#                                [--plain] [--no-build] [--no-sign] [--no-acme] [-- ACME-BENCH-ARGS...]
#
# Signing: one standalone signd (audit durability "process", as scripts/run)
# with `--workers` signing threads (default 1) and one key per curve;
# signd-load keeps `--concurrency` calls in flight (default 16) for
# `--seconds` (default 5) per curve, and `openssl speed -seconds N ecdsap256
# ecdsap384 ecdsap521` (one process, one thread) runs just before, `--rounds`
# times (default 1). The ratio is openssl speed / signd: the target is ≤ 1.1
# with one signing thread. signd-load, signd's serving thread and its
# signing thread share the machine's cores; openssl speed has one to itself.
#
# --plain also times `openssl speed` of openssl-src's options alone (no
# enable-ec_nistp_64_gcc_128, as a plain `cargo build` gets), building that
# OpenSSL once into $SIGNET_CACHE/openssl-VERSION-plain: the before/after.
#
# ACME: bench/scripts/acme-bench.sh --ca-alg ecdsa-p256, then ecdsa-p384, with
# the same arguments (default: --clients 10 --requests 4000 --warmup 100
# --challenge http-01), alternating, `--rounds` times; the target is P-384
# ≥ 0.8 of P-256's issuances/s (medians).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$root/scripts/lib.sh"

SECS=5
ROUNDS=1
CONC=16
WORKERS=1
PLAIN=0
BUILD=1
ACME=1
SIGN=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --concurrency) CONC="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    --plain) PLAIN=1; shift ;;
    --no-build) BUILD=0; shift ;;
    --no-acme) ACME=0; shift ;;
    --no-sign) SIGN=0; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "curve-bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
ACME_ARGS=("$@")
[ ${#ACME_ARGS[@]} -gt 0 ] || ACME_ARGS=(--clients 10 --requests 4000 --warmup 100 --challenge http-01)

div() { awk -v a="$1" -v b="$2" 'BEGIN { print (b > 0 ? a / b : 0) }'; }
median() { printf '%s\n' $1 | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

have jq || { echo "curve-bench.sh needs jq (apt-get install jq)" >&2; exit 1; }
ensure_rust
PLAIN_OPENSSL=""
if [ "$PLAIN" = 1 ]; then
  PLAIN_OPENSSL="$(SIGNET_OPENSSL_EXTRA="" ensure_openssl >&2 && echo "$OPENSSL_DIR")/bin/openssl"
fi
ensure_openssl
OPENSSL="$OPENSSL_DIR/bin/openssl"
BIN="$SIGNET_BIN_DIR"
if [ "$BUILD" = 1 ]; then
  say "building signd, signetctl, signd-load (release)"
  (cd "$root" && cargo build --release --locked -q -p signd -p signetctl -p signet-bench --bin signd --bin signetctl --bin signd-load)
fi
for b in signd signetctl signd-load; do
  [ -x "$BIN/$b" ] || { echo "$BIN/$b is missing (run without --no-build)" >&2; exit 1; }
done

if [ "$SIGN" = 1 ]; then
DIR="$(mktemp -d "${SIGNET_BENCH_DIR:-/tmp}/curve-bench.XXXXXX")"
SIGND_PID=""
cleanup() {
  if [ -n "$SIGND_PID" ]; then
    kill -TERM "$SIGND_PID" 2>/dev/null || true
    wait "$SIGND_PID" 2>/dev/null || true
  fi
  rm -rf "$DIR"
}
trap cleanup EXIT

cat > "$DIR/signd.toml" <<TOML
socket = "$DIR/signd.sock"
socket_mode = "0600"
state_dir = "$DIR/signd"
workers = $WORKERS

[audit]
durability = "process"

[roles.admin]
users = [$(id -u)]
admin = true
keys = ["*"]
TOML
RUST_LOG=warn "$BIN/signd" --config "$DIR/signd.toml" 2> "$DIR/signd.log" &
SIGND_PID=$!
for _ in $(seq 1 200); do
  [ -S "$DIR/signd.sock" ] && "$BIN/signetctl" --socket "$DIR/signd.sock" health >/dev/null 2>&1 && break
  kill -0 "$SIGND_PID" 2>/dev/null || { echo "signd exited; see its log:" >&2; cat "$DIR/signd.log" >&2; exit 1; }
  sleep 0.05
done
CURVES=(p256 p384 p521)
for c in "${CURVES[@]}"; do
  "$BIN/signetctl" --socket "$DIR/signd.sock" key generate "k$c" --algorithm "ecdsa-$c" >/dev/null
done

# speed OPENSSL -> "p256 RATE" lines (signatures per second, one thread)
speed() {
  "$1" speed -seconds "$SECS" ecdsap256 ecdsap384 ecdsap521 2>/dev/null |
    awk '/ bits ecdsa \(nistp(256|384|521)\)/ { c = $4; gsub(/[()nist]/, "", c); print c, $(NF-1) }'
}

say "OpenSSL $("$OPENSSL" version | awk '{print $2}') at $OPENSSL_DIR; signd workers $WORKERS, signd-load --concurrency $CONC; ${SECS} s each, $ROUNDS round(s); load $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A OSSL SIGND BEFORE
for r in $(seq 1 "$ROUNDS"); do
  while read -r c rate; do OSSL[$c]+="$rate "; done < <(speed "$OPENSSL")
  if [ -n "$PLAIN_OPENSSL" ]; then
    while read -r c rate; do BEFORE[$c]+="$rate "; done < <(speed "$PLAIN_OPENSSL")
  fi
  for c in "${CURVES[@]}"; do
    out="$("$BIN/signd-load" --socket "$DIR/signd.sock" --key "k$c" --concurrency "$CONC" --seconds "$SECS")"
    SIGND[$c]+="$(printf '%s' "$out" | jq -r '.signs_per_sec') "
    [ "$(printf '%s' "$out" | jq -r '.errors')" = 0 ] || echo "signd-load k$c: $out" >&2
  done
done

printf '\n%-6s %14s %14s %16s %s\n' curve "signd sign/s" "openssl sign/s" "openssl / signd" "(target <= 1.1)"
for c in "${CURVES[@]}"; do
  s=$(median "${SIGND[$c]}"); o=$(median "${OSSL[$c]}")
  printf '%-6s %14.0f %14.1f %16.3f   signd: %s openssl: %s\n' "$c" "$s" "$o" "$(div "$o" "$s")" "${SIGND[$c]}" "${OSSL[$c]}"
done
if [ -n "$PLAIN_OPENSSL" ]; then
  printf '\n%-6s %22s %22s %8s\n' curve "openssl-src options" "+ ec_nistp_64_gcc_128" speedup
  for c in "${CURVES[@]}"; do
    b=$(median "${BEFORE[$c]}"); o=$(median "${OSSL[$c]}")
    printf '%-6s %22.1f %22.1f %8.2f\n' "$c" "$b" "$o" "$(div "$o" "$b")"
  done
fi

kill -TERM "$SIGND_PID" 2>/dev/null || true
wait "$SIGND_PID" 2>/dev/null || true
SIGND_PID=""
fi
[ "$ACME" = 1 ] || exit 0
[ -n "${DIR:-}" ] || { DIR="$(mktemp -d "${SIGNET_BENCH_DIR:-/tmp}/curve-bench.XXXXXX")"; trap 'rm -rf "$DIR"' EXIT; }

declare -A ISS
for r in $(seq 1 "$ROUNDS"); do
  for alg in ecdsa-p256 ecdsa-p384; do
    say "round $r: acme-bench.sh --ca-alg $alg -- ${ACME_ARGS[*]}"
    "$here/acme-bench.sh" --ca-alg "$alg" -- "${ACME_ARGS[@]}" --ca-key-type "ec:P-${alg#ecdsa-p}" --output json --label "$alg-$r" > "$DIR/acme.json" ||
      { echo "acme-bench.sh --ca-alg $alg failed" >&2; cat "$DIR/acme.json" >&2; exit 1; }
    ISS[$alg]+="$(jq -r '.summary.throughput_per_sec' "$DIR/acme.json") "
    jq -c '{label: .label, issuances_per_sec: .summary.throughput_per_sec, p99_ms: .summary.latency_ms.p99, failed: .summary.failed}' "$DIR/acme.json"
  done
done
p256=$(median "${ISS[ecdsa-p256]}"); p384=$(median "${ISS[ecdsa-p384]}")
printf '\nacmed issuances/s (median of %s): P-256 CA %.1f, P-384 CA %.1f: P-384 / P-256 = %.3f (target >= 0.8)\n' \
  "$ROUNDS" "$p256" "$p384" "$(div "$p384" "$p256")"
