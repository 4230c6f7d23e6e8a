#!/usr/bin/env bash
# Signet's ocspd against the `openssl ocsp` responder, same load generator,
# same machine, same run. For docs/performance.md.
#
#   bench/scripts/ocsp-compare.sh [--duration S] [--connections N] [--leaves N]
#                                 [--only-nonce | --only-static] [--rounds N]
#                                 [--signd "BIN..."] [--ocspd BIN]
#
# 1. The baseline: bench/scripts/ocsp-baseline.sh (openssl ocsp, single
#    process and -multi 2, in its own network namespace), GET and POST.
# 2. Signet: a fresh signd + ocspd on a temporary directory, a CA made by
#    `signetctl ca init` (P-256), N leaves issued with `signetctl cert issue`
#    and recorded in ocspd, then ocsp-load against ocspd: pre-signed
#    responses over GET and POST, and requests with a nonce (each one a fresh
#    P-256 signature from signd).
# 3. The limit: nginx (Debian's, as many workers as CPUs) serving one of those
#    pre-signed responses as a static file for every GET under /ocsp/, against
#    ocspd answering that one request over GET: same generator, same
#    connections, the same bytes on the wire.
# Prints one line per run and a summary with the ratios.
#
# --only-nonce runs the nonce requests alone (no baseline, no nginx), --rounds
# times; --signd names signd binaries to take turns in each round (signd is
# restarted on the same state, ocspd reconnects): an A/B of two builds of
# signd in one window, e.g. --signd "/tmp/signd-main $SIGNET_BIN_DIR/signd".
#
# --ocspd BIN runs that ocspd binary instead of the build's (an A/B of two
# builds of ocspd: run the script once with each, in turn).
#
# --only-static runs the limit alone (no baseline, no nonces): ocspd and
# nginx in turn, --rounds times, each with the CPU its server processes
# spent per response (utime + stime from /proc, over the measured run and
# its warm-up).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

duration=10 connections=64 leaves=100 only_nonce=0 only_static=0 rounds=1 signds="" ocspd_bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --leaves) leaves="$2"; shift 2 ;;
    --only-nonce) only_nonce=1; shift ;;
    --only-static) only_static=1 leaves=1; shift ;;
    --rounds) rounds="$2"; shift 2 ;;
    --signd) signds="$2"; shift 2 ;;
    --ocspd) ocspd_bin="$2"; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ocsp-compare: unknown argument $1" >&2; exit 2 ;;
  esac
done

BIN="$SIGNET_BIN_DIR"
ensure_openssl
# The one build every script and test shares (scripts/lib.sh): no second feature set.
build_all >&2
LOAD="$BIN/ocsp-load"
work="$(mktemp -d)"
PIDS=()
cleanup() { [ ${#PIDS[@]} -eq 0 ] || kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

results="$work/results.jsonl"
: > "$results"
# CPU ticks (utime + stime) of the processes named, children's threads included.
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo "$t"; }
run_load() { # label url dir method [server pids...]
  local out label="$1" url="$2" dir="$3" method="$4" t0 t1
  shift 4
  t0=$(ticks "$@")
  out="$("$LOAD" --url "$url" --requests-dir "$dir" --method "$method" --connections "$connections" \
    --duration "$duration" --warmup 2 --output json)"
  t1=$(ticks "$@")
  printf '{"label":"%s","server_cpu_s":%s,"load":%s}\n' "$label" \
    "$(python3 -c "import os; print(($t1 - $t0) / os.sysconf('SC_CLK_TCK'))")" "$out" | tee -a "$results" >&2
}

# --- the baseline -------------------------------------------------------------
[ "$only_nonce" = 1 ] || [ "$only_static" = 1 ] || for m in get post; do
  bash "$SIGNET_ROOT/bench/scripts/ocsp-baseline.sh" --duration "$duration" --connections "$connections" \
    --leaves "$leaves" --method "$m" --json --ocsp-load "$LOAD" \
    | while read -r line; do
        label="openssl-$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["responder"].replace(" ", "_"))' "$line")-$m"
        printf '{"label":"%s","load":%s}\n' "$label" "$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])["load"]))' "$line")" | tee -a "$results" >&2
      done
done

# --- Signet -----------------------------------------------------------------
port=$(python3 "$SIGNET_ROOT/tests/lib/free_port.py")
mkdir -p "$work/run"
cat > "$work/signd.toml" <<TOML
socket = "$work/run/signd.sock"
state_dir = "$work/signd"
[audit]
durability = "process"
flush_interval_ms = 200
[roles.admin]
users = [$(id -u)]
admin = true
keys = ["*"]
TOML
export SIGNET_SIGND_SOCKET="$work/run/signd.sock" SIGNET_OCSPD_SOCKET="$work/run/ocspd.sock"
wait_for() { for _ in $(seq 1 200); do [ -S "$1" ] && return 0; sleep 0.05; done; echo "no $1" >&2; exit 1; }
"$BIN/signd" --config "$work/signd.toml" 2>"$work/signd.log" & PIDS+=($!)
wait_for "$work/run/signd.sock"
"$BIN/signetctl" ca init --dir "$work/ca" --ocsp-url "http://127.0.0.1:$port/ocsp" \
  --crl-url "http://127.0.0.1:$port/crl/demo/{shard}.crl" --crl-shards 4 --issuer-role admin --ocsp-role admin >/dev/null
cat "$work/ca/signd-issuer.toml" >> "$work/signd.toml"
kill "${PIDS[0]}"; wait "${PIDS[0]}" || true; PIDS=()
rm -f "$work/run/signd.sock"
"$BIN/signd" --config "$work/signd.toml" 2>"$work/signd.log" & PIDS+=($!)
wait_for "$work/run/signd.sock"
cat > "$work/ocspd.toml" <<TOML
socket = "$work/run/ocspd.sock"
state_dir = "$work/ocspd"
signd_socket = "$work/run/signd.sock"
listen = "127.0.0.1:$port"
[issuers.demo]
registrars = { users = [$(id -u)] }
TOML
"${ocspd_bin:-$BIN/ocspd}" --config "$work/ocspd.toml" 2>"$work/ocspd.log" & PIDS+=($!)
OCSPD_PID=$!
for _ in $(seq 1 200); do curl -fs "http://127.0.0.1:$port/crl/demo.crl" -o /dev/null && break; sleep 0.05; done

say "issuing $leaves certificates through signd and recording them in ocspd"
mkdir -p "$work/req-cached" "$work/req-nonce"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/leaf.key" \
  -subj /CN=bench.test -addext subjectAltName=DNS:bench.test -out "$work/leaf.csr" 2>/dev/null
for i in $(seq 1 "$leaves"); do
  "$BIN/signetctl" cert issue --csr "$work/leaf.csr" --out "$work/leaf.pem" 2>/dev/null
  openssl ocsp -issuer "$work/ca/issuing.pem" -cert "$work/leaf.pem" -no_nonce -reqout "$work/req-cached/$i.der"
  openssl ocsp -issuer "$work/ca/issuing.pem" -cert "$work/leaf.pem" -reqout "$work/req-nonce/$i.der"
done

if [ "$only_nonce" = 1 ]; then
  for r in $(seq 1 "$rounds"); do
    for b in ${signds:-$BIN/signd}; do
      if [ -n "$signds" ]; then
        kill "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true
        rm -f "$work/run/signd.sock"
        "$b" --config "$work/signd.toml" 2>>"$work/signd.log" & PIDS[0]=$!
        wait_for "$work/run/signd.sock"
        # ocspd reconnects on its next signature; let it before the clock starts.
        for _ in 1 2 3; do
          curl -s --data-binary @"$work/req-nonce/1.der" -H 'Content-Type: application/ocsp-request' \
            "http://127.0.0.1:$port/ocsp" -o /dev/null; sleep 0.5
        done
      fi
      run_load "signet-ocspd-nonce-post-$(basename "$(dirname "$b")")-$(basename "$b")" \
        "http://127.0.0.1:$port/ocsp" "$work/req-nonce" post
    done
  done
elif [ "$only_static" = 0 ]; then
  run_load signet-ocspd-get "http://127.0.0.1:$port/ocsp" "$work/req-cached" get "$OCSPD_PID"
  run_load signet-ocspd-post "http://127.0.0.1:$port/ocsp" "$work/req-cached" post "$OCSPD_PID"
  run_load signet-ocspd-nonce-post "http://127.0.0.1:$port/ocsp" "$work/req-nonce" post "$OCSPD_PID"
fi

# --- the limit: nginx serving one pre-signed response as a static file ------
if [ "$only_nonce" = 1 ]; then
  python3 - "$results" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    x = r["load"]
    rate, p99 = float(x["responses_per_sec"]), x["p99_us"] / 1000
    print(f"{r['label']:60} {rate:10.0f} resp/s  p99 {p99:.2f} ms  errors {x['errors']}")
PY
  exit 0
fi
mkdir -p "$work/req-one" "$work/nginx/logs" "$work/nginx/www"
cp "$work/req-cached/1.der" "$work/req-one/1.der"
curl -fs --data-binary @"$work/req-one/1.der" -H 'Content-Type: application/ocsp-request' \
  "http://127.0.0.1:$port/ocsp" -o "$work/nginx/www/response.der"
nport=$(python3 "$SIGNET_ROOT/tests/lib/free_port.py")
n="$work/nginx"
# As root, nginx's workers would drop to `nobody`, who may not read the mode-0700 work dir.
run_as=""; [ "$(id -u)" != 0 ] || run_as="user root;"
cat > "$n/nginx.conf" <<CONF
daemon off;
$run_as
worker_processes auto;
pid $n/nginx.pid;
error_log $n/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $n/cb; proxy_temp_path $n/px; fastcgi_temp_path $n/fc;
  uwsgi_temp_path $n/uw; scgi_temp_path $n/sc;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$nport;
    root $n/www;
    location /ocsp/ { default_type application/ocsp-response; try_files /response.der =404; }
  }
}
CONF
/usr/sbin/nginx -p "$n" -c "$n/nginx.conf" -e "$n/logs/error.log" & PIDS+=($!)
NGINX_PID=$!
for _ in $(seq 1 200); do curl -fs "http://127.0.0.1:$nport/ocsp/x" -o /dev/null && break; sleep 0.05; done
cmp <(curl -fs "http://127.0.0.1:$nport/ocsp/x") "$n/www/response.der" || { echo "nginx does not serve the response" >&2; exit 1; }
NGINX_PIDS=("$NGINX_PID" $(pgrep -P "$NGINX_PID"))
for r in $(seq 1 "$rounds"); do
  run_load signet-ocspd-get-one "http://127.0.0.1:$port/ocsp" "$work/req-one" get "$OCSPD_PID"
  run_load nginx-static-get-one "http://127.0.0.1:$nport/ocsp" "$work/req-one" get "${NGINX_PIDS[@]}"
done

python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def rate(r):
    return float(r["load"]["responses_per_sec"])
def cpu_us(r):
    # The CPU covers the warm-up too, whose responses the generator does
    # not count: count them at the measured rate.
    l = r["load"]
    n = rate(r) * (float(l["seconds"]) + float(l["options"]["warmup"]))
    cpu = r.get("server_cpu_s")
    return cpu * 1e6 / n if n and cpu else float("nan")
by = {}
for r in rows:
    by.setdefault(r["label"], []).append(r)
print(f"{'run':34} {'resp/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'server CPU µs/resp':>19}")
for r in rows:
    l = r["load"]
    print(f"{r['label']:34} {rate(r):10.0f} {l['p50_us'] / 1000:8.2f} {l['p99_us'] / 1000:8.2f} {cpu_us(r):19.1f}")
bases = sorted({r["label"].rsplit("-", 1)[0] for r in rows if r["label"].startswith("openssl-")})
for m in ("get", "post"):
    s = by.get(f"signet-ocspd-{m}")
    for base in (f"{b}-{m}" for b in bases):
        if s and base in by:
            print(f"ratio signet-ocspd-{m} / {base}: {rate(s[0]) / rate(by[base][0]):.1f}x")
s, n = by.get("signet-ocspd-get-one", []), by.get("nginx-static-get-one", [])
for i, (a, b) in enumerate(zip(s, n), 1):
    print(f"ratio signet-ocspd-get-one / nginx-static-get-one, round {i}: {rate(a) / rate(b):.2f}x "
          f"(server CPU a response {cpu_us(a) / cpu_us(b):.2f}x nginx's)")
PY
