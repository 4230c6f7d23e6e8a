#!/usr/bin/env bash
# Runs acme-bench against the stack scripts/run starts (signd, ocspd, acmed,
# the demo DNS server) in a throw-away state directory, and reports the CPU
# seconds each process used during the run beside acme-bench's own figures.
#
#   bench/scripts/acme-bench.sh [--ca-alg ALG] [--keep] -- ACME-BENCH-ARGS...
#
# --ca-alg picks the demo CA's key algorithm (signd's names: ecdsa-p256,
# ecdsa-p384, rsa-2048, ml-dsa-44, ...); the stack is created once per
# algorithm and reused (state under $SIGNET_CACHE/bench-acme-<alg>).
# Example:
#   bench/scripts/acme-bench.sh -- --clients 10 --requests 2000 --warmup 100 --challenge http-01
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$root/scripts/lib.sh"
set +e
CA_ALG=ecdsa-p256
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --ca-alg) CA_ALG="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
STATE="$SIGNET_CACHE/bench-acme-$CA_ALG"
[ "$KEEP" = 1 ] || rm -rf "$STATE"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
OCSP=$(port); ACME=$(port); DNS=$(port); H1=$(port); TA=$(port)
# scripts/run makes the demo CA with this algorithm (the first time).
export SIGNET_DEMO_CA_ALGORITHM="$CA_ALG"
"$root/scripts/run" --state-dir "$STATE" --ocsp-port "$OCSP" --acme-port "$ACME" --dns-port "$DNS" \
  --http01-port "$H1" --tlsalpn01-port "$TA" > "$STATE.log" 2>&1 &
RUN=$!
trap 'kill -TERM $RUN 2>/dev/null; wait $RUN 2>/dev/null' EXIT
for _ in $(seq 1 900); do
  [ -f "$STATE/endpoints.json" ] && grep -q "\"directory\": \"https://127.0.0.1:$ACME/" "$STATE/endpoints.json" && break
  kill -0 $RUN 2>/dev/null || { tail -30 "$STATE.log"; exit 1; }
  sleep 0.1
done
cpu() { # pid -> utime+stime in clock ticks
  awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}
pids() { for n in signd ocspd acmed signet-testdns; do pgrep -f "$SIGNET_BIN_DIR/$n .*$STATE" | head -1; done; }
mapfile -t P < <(pids)
declare -A before
for p in "${P[@]}"; do before[$p]=$(cpu "$p"); done
t0=$(date +%s.%N)
/usr/bin/time -f "acme-bench: %U s user %S s system %e s wall" "$SIGNET_BIN_DIR/acme-bench" \
  --directory "https://127.0.0.1:$ACME/directory" --ca-bundle "$STATE/acmed/tls-ca.pem" \
  --domain-suffix signet.test --dns-zone "$STATE/dns/zone" \
  --http01-listen "127.0.0.1:$H1" --tlsalpn01-listen "127.0.0.1:$TA" "$@"
rc=$?
t1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
names=(signd ocspd acmed dns)
i=0
for p in "${P[@]}"; do
  echo "${names[$i]}: $(python3 -c "print(f'{($(cpu "$p") - ${before[$p]}) / $hz:.2f}')") s CPU over $(python3 -c "print(f'{$t1 - $t0:.1f}')") s"
  i=$((i + 1))
done
exit $rc
