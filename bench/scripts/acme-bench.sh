#!/usr/bin/env bash
# Runs acme-bench against the stack scripts/run starts (signd, ocspd, acmed,
# the demo DNS server) in a throw-away state directory, and reports the CPU
# seconds each process used during the run beside acme-bench's own figures.
#
#   bench/scripts/acme-bench.sh [--ca-alg ALG] [--keep] [--pebble] [--step-ca] [--rounds N] [--dns-ttl S] -- ACME-BENCH-ARGS...
#   bench/scripts/acme-bench.sh [--ca-alg ALG] [--pebble] --handlers [-- CRITERION-ARGS...]
#
# --ca-alg picks the demo CA's key algorithm (signd's names: ecdsa-p256,
# ecdsa-p384, rsa-2048, ml-dsa-44, ...); the stack is created once per
# algorithm and reused (state under $SIGNET_CACHE/bench-acme-<alg>).
#
# --pebble adds the same-run baseline: Pebble (Let's Encrypt's test ACME
# server, built by ensure_pebble) with the same CA key type, validating
# against the same responder ports and resolving through the same DNS server,
# with its artificial delays and nonce rejections off and authorization reuse
# off (acmed validates every order afresh too). Pebble keeps its state in
# memory and does no OCSP recording; acmed commits to LMDB and records every
# certificate in ocspd before answering.
#
# --step-ca adds step-ca (Smallstep's CA, built by ensure_step_ca), the
# production ACME CA: a root and intermediate of the same key type made here
# by openssl, its default database (Badger v2, which does not fsync each
# write), one ACME provisioner with 90-day certificates, validating on the
# same responder ports (--insecure --acme-http-port/--acme-tls-port) through
# the same DNS server (--resolver).
#
# With baselines, acme-bench runs against acmed, then each baseline, --rounds
# times (default 3), with the same arguments; the script prints each run and
# the ratio of the medians.
#
# RUN_LIMIT (seconds, default 600) bounds each acme-bench run.
#
# --dns-ttl is the TTL of the demo DNS server's answers (default 300 s, a
# common zone TTL): acmed reuses CAA answers for their TTL, as the Baseline
# Requirements allow. 0 makes every CAA check ask the DNS server.
#
# --handlers runs the criterion bench of single handlers
# (bench/benches/acme_handlers.rs) against acmed, and against Pebble and
# step-ca in the same run with --pebble and --step-ca, instead of acme-bench.
#
# Examples:
#   bench/scripts/acme-bench.sh -- --clients 10 --requests 2000 --warmup 100 --challenge http-01
#   bench/scripts/acme-bench.sh --pebble --rounds 3 -- --clients 10 --requests 1000 --warmup 50
#   bench/scripts/acme-bench.sh --pebble --step-ca --rounds 2 -- --clients 10 --requests 2000 --warmup 100
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$root/scripts/lib.sh"
set +e
CA_ALG=ecdsa-p256
KEEP=0
PEBBLE=0
STEPCA=0
ROUNDS=3
HANDLERS=0
DNS_TTL=300
while [ $# -gt 0 ]; do
  case "$1" in
    --ca-alg) CA_ALG="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --pebble) PEBBLE=1; shift ;;
    --step-ca) STEPCA=1; shift ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --dns-ttl) [[ "${2:-}" =~ ^[0-9]{1,9}$ ]] || { echo "acme-bench.sh: --dns-ttl takes seconds (0-999999999), not '${2:-}'" >&2; exit 2; }
      DNS_TTL="$2"; shift 2 ;;
    --handlers) HANDLERS=1; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
STATE="$SIGNET_CACHE/bench-acme-$CA_ALG"
[ "$KEEP" = 1 ] || rm -rf "$STATE"
port() { python3 "$SIGNET_ROOT/tests/lib/free_port.py"; }
OCSP=$(port); ACME=$(port); DNS=$(port); H1=$(port); TA=$(port); PEB=$(port); PEBM=$(port); STEP=$(port)
# A kept state keeps the ports it was made with (scripts/run refuses others).
kept_port() { sed -n "s/^$1=//p" "$STATE/ports" 2>/dev/null; }
if [ "$KEEP" = 1 ] && [ -f "$STATE/ports" ]; then
  OCSP=$(kept_port OCSP_PORT); ACME=$(kept_port ACME_PORT); DNS=$(kept_port DNS_PORT)
  H1=$(kept_port HTTP01_PORT); TA=$(kept_port TLSALPN01_PORT)
fi
# The stack is up once scripts/run writes endpoints.json (below): not the kept one.
rm -f "$STATE/endpoints.json"

if [ "$PEBBLE" = 1 ] || [ "$STEPCA" = 1 ]; then
  case "$CA_ALG" in
    ecdsa-p256) PEBBLE_KEY=ecdsa; OPENSSL_KEY=(-newkey ec -pkeyopt ec_paramgen_curve:P-256) ;;
    rsa-2048) PEBBLE_KEY=rsa; OPENSSL_KEY=(-newkey rsa:2048) ;;
    *) echo "the baselines' CA keys are ecdsa-p256 or rsa-2048, not $CA_ALG" >&2; exit 2 ;;
  esac
fi
[ "$PEBBLE" != 1 ] || ensure_pebble || exit 1
[ "$STEPCA" != 1 ] || ensure_step_ca || exit 1
BASELINES=()
[ "$PEBBLE" != 1 ] || BASELINES+=(pebble)
[ "$STEPCA" != 1 ] || BASELINES+=(step-ca)

# scripts/run builds (if needed) and makes the demo CA with this algorithm (the first time).
export SIGNET_DEMO_CA_ALGORITHM="$CA_ALG"
# Without Certificate Transparency unless asked (SIGNET_DEMO_CT=1): Pebble has
# none, and the baselines in docs/performance.md were measured without it.
export SIGNET_DEMO_CT="${SIGNET_DEMO_CT:-0}"
# The DNS server's answers carry a TTL, as a real zone's do, so acmed may
# reuse CAA answers for it (the load's names are new, their parents are not).
export SIGNET_DEMO_DNS_TTL="$DNS_TTL"
"$root/scripts/run" --state-dir "$STATE" --ocsp-port "$OCSP" --acme-port "$ACME" --dns-port "$DNS" \
  --http01-port "$H1" --tlsalpn01-port "$TA" > "$STATE.log" 2>&1 &
RUN=$!
PEBBLE_PID=
STEPCA_PID=
trap 'kill -TERM $RUN $PEBBLE_PID $STEPCA_PID 2>/dev/null; wait $RUN 2>/dev/null' EXIT
ready=0
for _ in $(seq 1 6000); do
  if [ -f "$STATE/endpoints.json" ] && grep -q "\"directory\": \"https://127.0.0.1:$ACME/" "$STATE/endpoints.json"; then
    ready=1
    break
  fi
  kill -0 $RUN 2>/dev/null || break
  sleep 0.1
done
if [ "$ready" != 1 ]; then
  echo "the stack did not come up; the end of $STATE.log:" >&2
  tail -30 "$STATE.log" >&2
  exit 1
fi

# await_baseline NAME BUNDLE DIRECTORY: until the baseline's ACME directory
# answers over TLS trusted by BUNDLE (10 s); its log is $STATE/NAME.log.
await_baseline() {
  for _ in $(seq 1 100); do
    curl -s --cacert "$2" "$3" >/dev/null && return 0
    sleep 0.1
  done
  echo "$1 did not start; see $STATE/$1.log" >&2
  return 1
}
stop_baseline() { # pid
  kill -TERM "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

# Pebble keeps everything in memory and, seen here, stops answering after
# about a thousand orders in one process: each round gets a fresh one.
start_pebble() {
  mkdir -p "$STATE/pebble"
  cat > "$STATE/pebble/config.json" <<EOF
{
  "pebble": {
    "listenAddress": "127.0.0.1:$PEB",
    "managementListenAddress": "127.0.0.1:$PEBM",
    "certificate": "$SIGNET_PEBBLE_DIR/test/certs/localhost/cert.pem",
    "privateKey": "$SIGNET_PEBBLE_DIR/test/certs/localhost/key.pem",
    "httpPort": $H1,
    "tlsPort": $TA,
    "ocspResponderURL": "",
    "externalAccountBindingRequired": false,
    "retryAfter": {"authz": 1, "order": 1},
    "keyAlgorithm": "$PEBBLE_KEY",
    "profiles": {"default": {"description": "90 days", "validityPeriod": 7776000}}
  }
}
EOF
  PEBBLE_VA_NOSLEEP=1 PEBBLE_WFE_NONCEREJECT=0 PEBBLE_AUTHZREUSE=0 \
    "$SIGNET_PEBBLE" -config "$STATE/pebble/config.json" -dnsserver "127.0.0.1:$DNS" >> "$STATE/pebble.log" 2>&1 &
  PEBBLE_PID=$!
  await_baseline pebble "$SIGNET_PEBBLE_DIR/test/certs/pebble.minica.pem" "https://127.0.0.1:$PEB/dir"
}
stop_pebble() {
  stop_baseline "$PEBBLE_PID"
  PEBBLE_PID=
}

# step-ca, a fresh CA and database each round (as `step ca init` would make
# them, without its prompts): a root and an intermediate (pathlen 0) by
# openssl, keys unencrypted, and one ACME provisioner named acme.
start_step_ca() {
  local d="$STATE/step-ca"
  rm -rf "$d"
  mkdir -p "$d"
  openssl req -x509 "${OPENSSL_KEY[@]}" -nodes -keyout "$d/root.key" -out "$d/root.pem" -days 3650 \
    -subj "/CN=step-ca bench root" -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null &&
  openssl req -new "${OPENSSL_KEY[@]}" -nodes -keyout "$d/intermediate.key" -out "$d/intermediate.csr" \
    -subj "/CN=step-ca bench intermediate" 2>/dev/null &&
  printf 'basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n' > "$d/int.ext" &&
  openssl x509 -req -in "$d/intermediate.csr" -CA "$d/root.pem" -CAkey "$d/root.key" -days 3650 \
    -extfile "$d/int.ext" -out "$d/intermediate.pem" 2>/dev/null || { echo "step-ca: no CA made" >&2; return 1; }
  cat > "$d/ca.json" <<JSON
{
  "root": "$d/root.pem",
  "crt": "$d/intermediate.pem",
  "key": "$d/intermediate.key",
  "address": "127.0.0.1:$STEP",
  "dnsNames": ["127.0.0.1", "localhost"],
  "logger": {"format": "text"},
  "db": {"type": "badgerv2", "dataSource": "$d/db"},
  "authority": {
    "provisioners": [{"type": "ACME", "name": "acme",
      "claims": {"defaultTLSCertDuration": "2160h", "maxTLSCertDuration": "2160h"}}]
  }
}
JSON
  "$SIGNET_STEPCA" --insecure --acme-http-port "$H1" --acme-tls-port "$TA" --resolver "127.0.0.1:$DNS" \
    "$d/ca.json" >> "$STATE/step-ca.log" 2>&1 &
  STEPCA_PID=$!
  await_baseline step-ca "$d/root.pem" "https://127.0.0.1:$STEP/acme/acme/directory"
}
stop_step_ca() {
  stop_baseline "$STEPCA_PID"
  STEPCA_PID=
}

# What acme-bench trusts: acmed's TLS certificate (--ca-bundle) and, for
# --verify-cert, the demo CA's root (with an ML-DSA CA, acmed's TLS
# certificate is self-signed P-256 and the two differ).
cat "$STATE/acmed/tls-ca.pem" "$STATE/ca/root.pem" > "$STATE/bench-roots.pem"

cpu() { # pid -> utime+stime in clock ticks
  awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}
hz=$(getconf CLK_TCK)
names=(signd ocspd acmed dns)
mapfile -t P < <(for n in signd ocspd acmed signet-testdns; do pgrep -f "$SIGNET_BIN_DIR/$n .*$STATE" | head -1; done)

# bench SERVER OUT ARGS...: one acme-bench run against SERVER (acmed or
# pebble), its JSON report (when asked for) in OUT, then each process's CPU.
bench() {
  local server="$1" out="$2" directory bundle procs pnames rc t0 t1 i
  shift 2
  if [ "$server" = pebble ]; then
    directory="https://127.0.0.1:$PEB/dir"; bundle="$SIGNET_PEBBLE_DIR/test/certs/pebble.minica.pem"
    procs=("$PEBBLE_PID" "${P[3]}"); pnames=(pebble dns)
  elif [ "$server" = step-ca ]; then
    directory="https://127.0.0.1:$STEP/acme/acme/directory"; bundle="$STATE/step-ca/root.pem"
    procs=("$STEPCA_PID" "${P[3]}"); pnames=(step-ca dns)
  else
    directory="https://127.0.0.1:$ACME/directory"; bundle="$STATE/bench-roots.pem"
    procs=("${P[@]}"); pnames=("${names[@]}")
  fi
  declare -A before
  for p in "${procs[@]}"; do before[$p]=$(cpu "$p"); done
  t0=$(date +%s.%N)
  # A server that stops answering would hold every client for --timeout per
  # issuance: the whole run gets RUN_LIMIT seconds (default 600).
  timeout "${RUN_LIMIT:-600}" /usr/bin/time -f "acme-bench: %U s user %S s system %e s wall" "$SIGNET_BIN_DIR/acme-bench" \
    --directory "$directory" --ca-bundle "$bundle" \
    --domain-suffix signet.test --dns-zone "$STATE/dns/zone" \
    --http01-listen "127.0.0.1:$H1" --tlsalpn01-listen "127.0.0.1:$TA" "$@" > "$out" 2> "$out.time"
  rc=$?
  t1=$(date +%s.%N)
  cat "$out.time" >&2
  i=0
  for p in "${procs[@]}"; do
    echo "${pnames[$i]}: $(python3 -c "print(f'{($(cpu "$p") - ${before[$p]}) / $hz:.2f}')") s CPU over $(python3 -c "print(f'{$t1 - $t0:.1f}')") s" >&2
    i=$((i + 1))
  done
  return $rc
}

if [ "$HANDLERS" = 1 ]; then
  ensure_openssl   # the libcrypto scripts/run built the daemons with
  servers="acmed=https://127.0.0.1:$ACME/directory|$STATE/acmed/tls-ca.pem"
  if [ "$PEBBLE" = 1 ]; then
    start_pebble || exit 1
    servers="$servers;pebble=https://127.0.0.1:$PEB/dir|$SIGNET_PEBBLE_DIR/test/certs/pebble.minica.pem"
  fi
  if [ "$STEPCA" = 1 ]; then
    start_step_ca || exit 1
    servers="$servers;step-ca=https://127.0.0.1:$STEP/acme/acme/directory|$STATE/step-ca/root.pem"
  fi
  (cd "$root" && SIGNET_ACME_BENCH_SERVERS="$servers" SIGNET_ACME_BENCH_HTTP01="127.0.0.1:$H1" \
    SIGNET_ACME_BENCH_DOMAIN=signet.test cargo bench --locked -p signet-bench --bench acme_handlers -- "$@")
  exit $?
fi

if [ ${#BASELINES[@]} = 0 ]; then
  bench acmed "$STATE/acme-bench.out" "$@"
  rc=$?
  cat "$STATE/acme-bench.out"
  exit $rc
fi

# Same-run comparison: JSON reports under $STATE/compare, then a table.
OUTDIR="$STATE/compare"
mkdir -p "$OUTDIR"
failed=0
for r in $(seq 1 "$ROUNDS"); do
  for s in acmed "${BASELINES[@]}"; do
    echo "== round $r: $s" >&2
    case "$s" in
      pebble) start_pebble || { failed=1; continue; } ;;
      step-ca) start_step_ca || { failed=1; continue; } ;;
    esac
    bench "$s" "$OUTDIR/$s-$r.json" --output json --label "$s-$r" "$@" || failed=1
    case "$s" in
      pebble) stop_pebble ;;
      step-ca) stop_step_ca ;;
    esac
  done
done
python3 - "$OUTDIR" "$ROUNDS" acmed "${BASELINES[@]}" <<'EOF'
import json, statistics, sys
outdir, rounds, servers = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
phases = ["new_order", "authz", "challenge", "finalize", "download"]
med = {}
print(f"{'run':<10} {'iss/s':>7} {'mean ms':>8} {'p99 ms':>8}  " + " ".join(f"{p:>9}" for p in phases) + "  errors")
for s in servers:
    tput = []
    for r in range(1, rounds + 1):
        try:
            rep = json.load(open(f"{outdir}/{s}-{r}.json"))
        except (OSError, ValueError) as e:
            print(f"{s}-{r}: no report ({e})")
            continue
        sm = rep["summary"]
        tput.append(sm["throughput_per_sec"])
        errs = sum(e["count"] for e in rep["errors"].values()) if rep["errors"] else 0
        print(f"{s + '-' + str(r):<10} {sm['throughput_per_sec']:>7.0f} {sm['latency_ms']['mean']:>8.1f} {sm['latency_ms']['p99']:>8.1f}  "
              + " ".join(f"{sm['phase_mean_ms'].get(p, 0):>9.1f}" for p in phases) + f"  {errs}")
    if tput:
        med[s] = statistics.median(tput)
for b in servers[1:]:
    if "acmed" in med and med.get(b, 0) > 0:
        print(f"median issuances/s: acmed {med['acmed']:.0f}, {b} {med[b]:.0f}: acmed/{b} = {med['acmed'] / med[b]:.2f}")
EOF
exit $failed
