#!/usr/bin/env bash
# probed's HTTP check against blackbox_exporter v0.28.0, the same nginx, the
# same load generator (probe-load), same run. For docs/performance.md.
#
#   bench/scripts/probe-compare.sh [--duration S] [--schedule-only]
#
# Debian's nginx (one worker, pinned to CPU 0) answers `200 ok` over HTTP/1.1
# and over h2c. Each prober gets CPU 1 to itself:
# - blackbox_exporter (GOMAXPROCS=1, pinned to CPU 1) is asked to probe nginx
#   through its /probe endpoint by probe-load (pinned to CPU 0), which counts
#   answers with `probe_success 1`; blackbox opens a new connection per probe;
# - probe-load (pinned to CPU 1) runs probed's own check against nginx with a
#   fresh connection per check (like for like), with connections reused
#   (HTTP/1.1), and over one h2c connection.
# Prints one JSON line per run and a summary with checks/s, CPU per check and
# the ratios to blackbox_exporter.
#
# Then the schedule (--scheduled N, default 10000; 0 skips it): the probed
# daemon (pinned to CPU 1) runs N HTTP checks of nginx every 10 s (jitter
# 1 s, connections reused); after a 30 s warm-up it is measured for --window
# seconds (default 60): its CPU (% of one core), resident memory (VmRSS and
# peak VmHWM), runs done and failed, and how late runs started
# (probed_schedule_lag_seconds: the share within 100 ms and the p99 bucket).
# --schedule-only skips the load-generator runs; --perf FILE records a perf
# profile (call graphs) of probed over the measured window; --probed BIN runs
# that probed binary instead of the one built here (an A/B against another
# commit's build).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

duration=10 scheduled=10000 window=60 schedule_only=0 perf_out= probed_bin=
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --scheduled) scheduled="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --schedule-only) schedule_only=1; shift ;;
    --perf) perf_out="$2"; shift 2 ;;
    --probed) probed_bin="$2"; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "probe-compare: unknown argument $1" >&2; exit 2 ;;
  esac
done

ensure_blackbox
ensure_packages
ensure_openssl   # the libcrypto scripts/run and scripts/test build with
(cd "$SIGNET_ROOT" && cargo build --release --locked -p signet-bench -p probed --bin probe-load --bin probed >&2)
LOAD="$SIGNET_BIN_DIR/probe-load"
work="$(mktemp -d)"
PIDS=()
cleanup() { [ ${#PIDS[@]} -eq 0 ] || kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 "$SIGNET_ROOT/tests/lib/free_port.py"; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "nothing on port $1" >&2; exit 1; }

h1=$(free_port) h2c=$(free_port) bb=$(free_port)
mkdir -p "$work/nginx"
cat > "$work/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 65536; }
http {
  access_log off;
  client_body_temp_path $work/nginx; proxy_temp_path $work/nginx; fastcgi_temp_path $work/nginx;
  uwsgi_temp_path $work/nginx; scgi_temp_path $work/nginx;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$h1; location / { return 200 "ok\n"; } }
  server { listen 127.0.0.1:$h2c http2; http2_max_concurrent_streams 1024; location / { return 200 "ok\n"; } }
}
NGINX
taskset -c 0 "$(command -v nginx || echo /usr/sbin/nginx)" -c "$work/nginx.conf" & PIDS+=($!)
cat > "$work/blackbox.yml" <<YAML
modules:
  http_2xx:
    prober: http
    timeout: 5s
    http:
      preferred_ip_protocol: ip4
YAML
GOMAXPROCS=1 taskset -c 1 "$SIGNET_BLACKBOX" --config.file "$work/blackbox.yml" \
  --web.listen-address "127.0.0.1:$bb" --log.level=warn 2>"$work/blackbox.log" & PIDS+=($!)
bb_pid=$!
wait_port "$h1"; wait_port "$h2c"; wait_port "$bb"
nginx_pid=$(cat "$work/nginx/nginx.pid")
nginx_worker=$(pgrep -P "$nginx_pid" | head -1)

results="$work/results.jsonl"
: > "$results"
if [ "$schedule_only" = 0 ]; then
run() { # label cpu args...
  local label="$1" cpu="$2" out
  shift 2
  out="$(taskset -c "$cpu" "$LOAD" --duration "$duration" --warmup 2 --output json "$@")"
  printf '{"label":"%s",%s\n' "$label" "${out#\{}" | tee -a "$results" >&2
}

run blackbox_fresh 0 --url "http://127.0.0.1:$bb/probe?module=http_2xx&target=http://127.0.0.1:$h1/" \
  --expect-body "probe_success 1" --concurrency 16 --server-pid "blackbox=$bb_pid" --server-pid "nginx=$nginx_worker"
run probed_fresh 1 --url "http://127.0.0.1:$h1/" --fresh --concurrency 16 --server-pid "nginx=$nginx_worker"
run probed_reused_h1 1 --url "http://127.0.0.1:$h1/" --concurrency 64 --server-pid "nginx=$nginx_worker"
run probed_reused_h2c 1 --url "http://127.0.0.1:$h2c/" --http-version 2 --concurrency 512 \
  --server-pid "nginx=$nginx_worker"

python3 - "$results" <<'PY'
import json, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[r["label"]] = r["probe_load"]
def prober_cpu_us(label, r):
    # blackbox's own CPU per probe; for probed, probe-load is the prober.
    if label.startswith("blackbox"):
        s = [x for x in r["cpu"]["servers"] if x["name"] == "blackbox"][0]
        return s["cpu_ms_per_op"] * 1000
    return r["own_cpu_us_per_check"]
base = runs["blackbox_fresh"]
base_cpu = prober_cpu_us("blackbox_fresh", base)
print(f"{'run':<20} {'checks/s':>10} {'p99 ms':>8} {'prober CPU/check':>17} {'x blackbox (rate)':>18} {'x blackbox (CPU)':>17}")
for label, r in runs.items():
    cpu = prober_cpu_us(label, r)
    print(f"{label:<20} {r['checks_per_second']:>10.0f} {r['p99_ms']:>8.2f} {cpu:>14.1f} µs "
          f"{r['checks_per_second'] / base['checks_per_second']:>17.1f}x {base_cpu / cpu if cpu else float('nan'):>16.1f}x")
PY
fi

[ "$scheduled" -gt 0 ] || exit 0

# --- the schedule ---------------------------------------------------------------
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
pp=$(free_port)
mkdir -p "$work/probed"
{
  printf 'state_dir = "%s"\nlisten = "127.0.0.1:%s"\n[http]\nmax_connections = 64\n' "$work/probed" "$pp"
  printf '[defaults]\ninterval = "10s"\njitter = "1s"\ntimeout = "5s"\n'
  for i in $(seq 1 "$scheduled"); do
    printf '[checks.c%05d]\nkind = "http"\nurl = "http://127.0.0.1:%s/c%d"\nexpect_status = [200]\n' "$i" "$h1" "$i"
  done
} > "$work/probed.toml"
taskset -c 1 "${probed_bin:-$SIGNET_BIN_DIR/probed}" --config "$work/probed.toml" 2>"$work/probed.log" & PIDS+=($!)
probed_pid=$!
wait_port "$pp"
sleep 30
scrape() { curl -sf "http://127.0.0.1:$pp/metrics" | grep -E '^(probed_schedule_lag_seconds|probe_runs)'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$probed_pid/stat"; }
scrape > "$work/m0"; c0=$(cpu_ticks); t0=$(date +%s.%N)
if [ -n "$perf_out" ]; then
  perf record -g -p "$probed_pid" -o "$perf_out" -- sleep "$window" >/dev/null 2>&1
else
  sleep "$window"
fi
scrape > "$work/m1"; c1=$(cpu_ticks); t1=$(date +%s.%N)
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$probed_pid/status")
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$probed_pid/status")
python3 - "$work/m0" "$work/m1" "$c0" "$c1" "$t0" "$t1" "$rss" "$hwm" "$scheduled" <<'PY'
import json, re, sys
m0, m1, c0, c1, t0, t1, rss, hwm, n = sys.argv[1:]
def parse(path):
    buckets, runs = {}, {"success": 0, "failure": 0}
    for line in open(path):
        m = re.match(r'probed_schedule_lag_seconds_bucket\{.*le="([^"]+)"\} (\S+)', line)
        if m:
            buckets[m.group(1)] = float(m.group(2))
        m = re.match(r'probe_runs_total\{.*result="(\w+)".*\} (\S+)', line)
        if m:
            runs[m.group(1)] += float(m.group(2))
    return buckets, runs
(b0, r0), (b1, r1) = parse(m0), parse(m1)
secs = float(t1) - float(t0)
delta = {k: b1[k] - b0.get(k, 0) for k in b1}
total = delta.get("+Inf", 0)
within = delta.get("0.1", 0) / total if total else 0
p99 = next((k for k in sorted((k for k in delta if k != "+Inf"), key=float) if delta[k] >= 0.99 * total), "+Inf")
report = {
    "checks": int(n), "interval_s": 10, "window_s": round(secs, 1),
    "runs": int(r1["success"] - r0["success"] + r1["failure"] - r0["failure"]),
    "failed": int(r1["failure"] - r0["failure"]),
    "cpu_percent_of_one_core": round((int(c1) - int(c0)) / 100 / secs * 100, 2),
    "rss_mib": round(int(rss) / 1024, 1), "peak_rss_mib": round(int(hwm) / 1024, 1),
    "lag_within_100ms": round(within, 5), "lag_p99_bucket_s": p99,
}
print(json.dumps({"probed_schedule": report}))
ok = report["lag_within_100ms"] >= 0.99 and report["cpu_percent_of_one_core"] <= 10 and report["peak_rss_mib"] <= 200
print(f"schedule: {n} checks / 10 s: {report['runs'] / secs:.0f} runs/s, {report['failed']} failed, "
      f"CPU {report['cpu_percent_of_one_core']}% of a core, RSS {report['rss_mib']} MiB (peak {report['peak_rss_mib']}), "
      f"{within * 100:.2f}% of runs started within 100 ms (p99 <= {p99} s): "
      f"{'meets' if ok else 'misses'} the target (p99 <= 100 ms, <= 10% of a core, <= 200 MiB)")
PY
