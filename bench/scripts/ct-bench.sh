#!/usr/bin/env bash
# The CT log benchmark and its same-run baseline, on this machine, in one run:
#
#   1. signd + ctlogd in a throw-away directory, configured as scripts/run
#      configures them (audit durability "process", [sequencing] max_age_ms
#      100, local tile storage), with ct-load's test root in `roots`;
#   2. ct-load submits distinct chains for --duration seconds at --writers
#      (or, with --sweep, at the count of a short sweep that gave the most
#      SCTs/s), accounting ctlogd's and signd's CPU; then reads full tiles at
#      random for --read-duration seconds;
#   3. the baseline: TesseraCT's POSIX log (v0.1.1, publication awaiter on,
#      its defaults otherwise) with nginx serving its directory, driven by
#      TesseraCT's own hammer as TesseraCT's published figures were
#      (write qps = checkpoint growth over the same window), then by ct-load
#      (same chains and options, more writers: see below), then nginx's tile
#      reads;
#   4. one summary line each and the ratios.
#
#   bench/scripts/ct-bench.sh [--writers N | --sweep "64 128 256"] [--duration S] [--warmup S]
#       [--readers N] [--read-duration S] [--hammer-writers N] [--baseline-writers N] [--no-baseline] [--perf S]
#       [--max-batch N] [--quiet-below LOAD] [--keep] [-- CT-LOAD-ARGS...]
#
# TesseraCT answers add-chain only once a checkpoint covers the entry
# (publication awaiter, checkpoints every 1.5 s), so in a closed loop it needs
# many more writers than ctlogd: --hammer-writers (default 4096, as the
# published figures used) and --baseline-writers (ct-load's writers against
# TesseraCT; default 16384: on 2 cores here 4096 gave 1,624/s, 8192 2,282/s,
# 16384 3,388/s with pushbacks starting; raising TesseraCT's pushback limits
# to 40000 made it slower, 2,685/s with timeouts).
# --perf S records `perf record --call-graph dwarf` of ctlogd (and signd) for S
# seconds in the middle of the write run, and of ctlogd in the read run (keep
# S below --read-duration), and prints the top frames. --max-batch sets ctlogd's
# [sequencing] max_batch (default: ctlogd's own default, as scripts/run).
# --quiet-below LOAD waits (up to an hour) until the 1-minute load average is
# below LOAD before starting: the two cores here are shared with other work.
# Binaries come from $CARGO_TARGET_DIR/release (build them first:
# cargo build --release -p signd -p ctlogd -p signetctl -p signet-bench --bin ct-load).
# SIGNET_BENCH_DIR picks where the temporary directory goes (default /tmp: a
# real disk here; tiles and LMDB are fsynced).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$root/scripts/lib.sh"

WRITERS=""
SWEEP=""
DURATION=60
WARMUP=5
READERS=64
READ_DURATION=20
HAMMER_WRITERS=4096
BASE_WRITERS=16384
BASELINE=1
PERF=0
MAX_BATCH=""
KEEP=0
QUIET=""
while [ $# -gt 0 ]; do
  case "$1" in
    --writers) WRITERS="$2"; shift 2 ;;
    --sweep) SWEEP="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --readers) READERS="$2"; shift 2 ;;
    --read-duration) READ_DURATION="$2"; shift 2 ;;
    --hammer-writers) HAMMER_WRITERS="$2"; shift 2 ;;
    --baseline-writers) BASE_WRITERS="$2"; shift 2 ;;
    --no-baseline) BASELINE=0; shift ;;
    --perf) PERF="$2"; shift 2 ;;
    --max-batch) MAX_BATCH="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --quiet-below) QUIET="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ct-bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
EXTRA=("$@")
[ -n "$WRITERS" ] || [ -n "$SWEEP" ] || WRITERS=512

BIN="$SIGNET_BIN_DIR"
for b in signd ctlogd signetctl ct-load; do
  [ -x "$BIN/$b" ] || { echo "$BIN/$b is missing: cargo build --release -p signd -p ctlogd -p signetctl -p signet-bench --bin ct-load" >&2; exit 1; }
done
[ "$BASELINE" = 0 ] || ensure_tesseract_bench

if [ -n "$QUIET" ]; then
  for _ in $(seq 1 240); do
    python3 -c "import sys; sys.exit(0 if float(open('/proc/loadavg').read().split()[0]) < $QUIET else 1)" && break
    sleep 15
  done
fi

T=$(mktemp -d "${SIGNET_BENCH_DIR:-/tmp}/signet-ct-bench.XXXXXX")
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -f "$T/nginx/nginx.pid" ] && kill -TERM "$(cat "$T/nginx/nginx.pid")" 2>/dev/null
  if [ "$KEEP" = 1 ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
forget() { # pid: no longer ours to stop
  local keep=() p
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}
stop() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; forget "$1"; }
port() { python3 "$SIGNET_ROOT/tests/lib/free_port.py"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
HZ=$(getconf CLK_TCK)
ME=$(id -u)

say "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
say "commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- daemons bench || echo ' (+ local changes)'), directory $T"

"$BIN/ct-load" --init-pki --pki-dir "$T/pki" > /dev/null

# --- signd and ctlogd, configured as scripts/run does -------------------------
SIGND_SOCK="$T/run/signd.sock"
mkdir -p "$T/run" "$T/signd" "$T/logs"
cat > "$T/signd.toml" <<TOML
socket = "$SIGND_SOCK"
socket_mode = "0660"
state_dir = "$T/signd"

[audit]
durability = "process"
flush_interval_ms = 200

[roles.admin]
users = [$ME]
admin = true
keys = ["*"]
TOML
start_signd() {
  "$BIN/signd" --config "$T/signd.toml" 2>> "$T/logs/signd.log" &
  SIGND_PID=$!
  PIDS+=("$SIGND_PID")
  for _ in $(seq 1 200); do
    [ -S "$SIGND_SOCK" ] && "$BIN/signetctl" --socket "$SIGND_SOCK" health > /dev/null 2>&1 && return 0
    kill -0 "$SIGND_PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "signd did not start; see $T/logs/signd.log" >&2
  exit 1
}
start_signd
"$BIN/signetctl" --socket "$SIGND_SOCK" key generate ct-bench --algorithm ecdsa-p256 > /dev/null
printf '\n[logs.bench]\nkey = "ct-bench"\nroles = ["admin"]\n' >> "$T/signd.toml"
stop "$SIGND_PID"
start_signd

CT_PORT=$(port)
CT_URL="http://127.0.0.1:$CT_PORT/bench/"
{
  cat <<TOML
state_dir = "$T/ctlogd/db"
signd_socket = "$SIGND_SOCK"
listen = "127.0.0.1:$CT_PORT"
roots = ["$T/pki/root.pem"]

[sequencing]
max_age_ms = 100
TOML
  [ -z "$MAX_BATCH" ] || echo "max_batch = $MAX_BATCH"
  cat <<TOML

[logs.bench]
description = "ct-bench log"
storage = { dir = "$T/ctlogd/bench" }
TOML
} > "$T/ctlogd.toml"
"$BIN/ctlogd" --config "$T/ctlogd.toml" 2>> "$T/logs/ctlogd.log" &
CTLOGD_PID=$!
PIDS+=("$CTLOGD_PID")
for _ in $(seq 1 200); do
  curl -fs "${CT_URL}ct/v1/get-sth" -o /dev/null && break
  kill -0 "$CTLOGD_PID" 2>/dev/null || { echo "ctlogd exited; see $T/logs/ctlogd.log" >&2; exit 1; }
  sleep 0.05
done
curl -fs "${CT_URL}ct/v1/get-sth" -o /dev/null || { echo "ctlogd did not start; see $T/logs/ctlogd.log" >&2; exit 1; }

# ct_load NAME ARGS...: one ct-load run, JSON in $T/NAME.json, text summary on stderr.
ct_load() {
  local name="$1"; shift
  local rc=0
  "$BIN/ct-load" --pki-dir "$T/pki" --output json "$@" "${EXTRA[@]}" > "$T/$name.json" 2> "$T/$name.err" || rc=$?
  grep -v '^$' "$T/$name.err" | sed 's/^/    /' >&2 || true
  return $rc
}
j() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"d": d}))' "$@"; }

if [ -n "$SWEEP" ]; then
  best=0
  for n in $SWEEP; do
    ct_load "sweep-$n" --url "$CT_URL" --writers "$n" --duration 15 --warmup 3 --verify-every 0 || true
    q=$(j "$T/sweep-$n.json" 'd["scts_per_sec"]' 2>/dev/null || echo 0)
    say "sweep: $n writers: $q SCTs/s"
    if python3 -c "import sys; sys.exit(0 if float('$q') > float('$best') else 1)"; then best=$q; WRITERS=$n; fi
  done
  say "sweep: $WRITERS writers gave the most ($best SCTs/s)"
fi

# --- ctlogd: writes, then tile reads -----------------------------------------
say "ctlogd: $WRITERS writers, $DURATION s after $WARMUP s warmup (load $(cut -d' ' -f1-3 /proc/loadavg))"
# perf_in DELAY NAME PIDS: `perf record` of PIDS for $PERF seconds after DELAY, into $T/perf-NAME.data.
perf_in() {
  ( sleep "$1"; perf record -F 499 --call-graph dwarf,16384 -o "$T/perf-$2.data" -p "$3" -- sleep "$PERF" \
      > "$T/perf-$2.log" 2>&1 ) &
  PERF_PID=$!
}
# perf_top NAME: where the time went, by function, self time and with callees.
perf_top() {
  [ -f "$T/perf-$1.data" ] || return 0
  perf report -i "$T/perf-$1.data" --no-children --sort comm,dso,symbol --percent-limit 0.8 --stdio -g none 2>/dev/null |
    grep -E '^ +[0-9]' | cut -c1-140 > "$T/perf-$1-self.txt" || true
  perf report -i "$T/perf-$1.data" --children --sort symbol --percent-limit 2 --stdio -g none 2>/dev/null |
    grep -E '^ +[0-9]' | cut -c1-140 > "$T/perf-$1-children.txt" || true
  say "perf ($1): top frames by self time (all of $T/perf-$1-self.txt, with callees in perf-$1-children.txt)"
  head -25 "$T/perf-$1-self.txt" >&2
}
PERF_PID=""
[ "$PERF" = 0 ] || perf_in $((WARMUP + DURATION / 3)) write "$CTLOGD_PID,$SIGND_PID"
rc=0
ct_load write --url "$CT_URL" --writers "$WRITERS" --duration "$DURATION" --warmup "$WARMUP" \
  --server-pid "ctlogd=$CTLOGD_PID,signd=$SIGND_PID" || rc=$?
[ -z "$PERF_PID" ] || wait "$PERF_PID" || true
PERF_PID=""
say "ctlogd: tile reads, $READERS readers, $READ_DURATION s (load $(cut -d' ' -f1-3 /proc/loadavg))"
[ "$PERF" = 0 ] || perf_in 3 read "$CTLOGD_PID"
ct_load read --url "$CT_URL" --read-tiles --writers "$READERS" --duration "$READ_DURATION" --warmup 2 \
  --server-pid "ctlogd=$CTLOGD_PID" || rc=$?
[ -z "$PERF_PID" ] || wait "$PERF_PID" || true
if [ "$PERF" != 0 ]; then perf_top write; perf_top read; fi
stop "$CTLOGD_PID"
stop "$SIGND_PID"

# --- the baseline: TesseraCT's POSIX log ------------------------------------
if [ "$BASELINE" = 1 ]; then
  TD="$SIGNET_TESSERACT_DIR/internal/hammer/testdata"
  NGINX_PORT=$(port)
  mkdir -p "$T/nginx"
  # One storage directory at a time behind nginx: $T/tess/current links to it.
  cat > "$T/nginx/nginx.conf" <<NGINX
daemon on;
user root;
worker_processes auto;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  keepalive_timeout 120s;
  open_file_cache max=100000 inactive=60s;
  open_file_cache_valid 1s;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    root $T/tess/current;
    location = /checkpoint { open_file_cache off; }
  }
}
NGINX
  mkdir -p "$T/tess"
  /usr/sbin/nginx -c "$T/nginx/nginx.conf" -p "$T/nginx"
  NGINX_URL="http://127.0.0.1:$NGINX_PORT/"
  nginx_pids() { pgrep -P "$(cat "$T/nginx/nginx.pid")" | paste -sd, -; }

  openssl ecparam -name prime256v1 -genkey -noout -out "$T/tess/key.pem" 2>/dev/null
  TESS_KEY=$(openssl ec -in "$T/tess/key.pem" -pubout -outform DER 2>/dev/null | base64 -w0)
  cat "$TD/test_root_ca_cert.pem" "$T/pki/root.pem" > "$T/tess/roots.pem"
  ORIGIN="ct-bench/tesseract"

  # start_tesseract NAME: a fresh POSIX log in $T/tess/NAME, served by nginx.
  start_tesseract() {
    mkdir -p "$T/tess/$1"
    ln -sfn "$T/tess/$1" "$T/tess/current"
    TESS_PORT=$(port)
    "$SIGNET_TESSERACT_POSIX" --http_endpoint="127.0.0.1:$TESS_PORT" --storage_dir="$T/tess/$1" \
      --roots_pem_file="$T/tess/roots.pem" --origin="$ORIGIN" --private_key="$T/tess/key.pem" \
      --enable_publication_awaiter=true > "$T/logs/tesseract-$1.log" 2>&1 &
    TESS_PID=$!
    PIDS+=("$TESS_PID")
    for _ in $(seq 1 200); do
      [ -f "$T/tess/$1/checkpoint" ] && curl -fs "${NGINX_URL}checkpoint" -o /dev/null &&
        curl -s -o /dev/null "http://127.0.0.1:$TESS_PORT/ct/v1/get-roots" && return 0
      kill -0 "$TESS_PID" 2>/dev/null || break
      sleep 0.1
    done
    echo "TesseraCT did not start; see $T/logs/tesseract-$1.log" >&2
    exit 1
  }
  tess_size() { sed -n 2p "$T/tess/current/checkpoint"; }

  # 1) TesseraCT's own hammer, as its published figures were measured.
  start_tesseract hammer
  say "TesseraCT + hammer: $HAMMER_WRITERS writers, $DURATION s after $WARMUP s warmup (load $(cut -d' ' -f1-3 /proc/loadavg))"
  (cd "$SIGNET_TESSERACT_DIR" && exec "$SIGNET_TESSERACT_HAMMER" --log_url="$NGINX_URL" \
    --write_log_url="http://127.0.0.1:$TESS_PORT/" --origin="$ORIGIN" --log_public_key="$TESS_KEY" \
    --intermediate_ca_cert_path="$TD/test_intermediate_ca_cert.pem" \
    --intermediate_ca_key_path="$TD/test_intermediate_ca_private_key.pem" \
    --cert_sign_private_key_path="$TD/test_leaf_cert_signing_private_key.pem" \
    --num_writers="$HAMMER_WRITERS" --max_write_ops=100000 --num_readers_random=4 --num_readers_full=4 \
    --max_read_ops=20 --num_mmd_verifiers=0 --dup_chance=0 --show_ui=false \
    --max_runtime="$((WARMUP + DURATION + 5))s") > "$T/logs/hammer.log" 2>&1 &
  HAMMER_PID=$!
  PIDS+=("$HAMMER_PID")
  sleep "$WARMUP"
  s0=$(tess_size); t0=$(date +%s.%N); c0=$(cpu_ticks "$TESS_PID"); h0=$(cpu_ticks "$HAMMER_PID")
  sleep "$DURATION"
  s1=$(tess_size); t1=$(date +%s.%N); c1=$(cpu_ticks "$TESS_PID"); h1=$(cpu_ticks "$HAMMER_PID")
  stop "$HAMMER_PID"
  python3 - "$s0" "$s1" "$t0" "$t1" "$c0" "$c1" "$h0" "$h1" "$HZ" "$HAMMER_WRITERS" > "$T/hammer.json" <<'PY'
import json, sys
s0, s1, t0, t1, c0, c1, h0, h1, hz, w = sys.argv[1:]
n, secs = int(s1) - int(s0), float(t1) - float(t0)
cpu, hcpu = (int(c1) - int(c0)) / int(hz), (int(h1) - int(h0)) / int(hz)
print(json.dumps({"entries": n, "seconds": round(secs, 2), "qps": round(n / secs, 1), "writers": int(w),
                  "posix_cpu_seconds": cpu, "posix_cpu_ms_per_entry": round(cpu * 1e3 / n, 4) if n else None,
                  "hammer_cpu_seconds": hcpu}))
PY
  say "TesseraCT + hammer: $(cat "$T/hammer.json")"
  grep -E 'pushback|rror' "$T/logs/hammer.log" | sort | uniq -c | sort -rn | head -5 | sed 's/^/    /' >&2 || true
  stop "$TESS_PID"

  # 2) The same ct-load run as ctlogd got, against a fresh POSIX log.
  start_tesseract ctload
    say "TesseraCT + ct-load: $BASE_WRITERS writers, $DURATION s after $WARMUP s warmup (load $(cut -d' ' -f1-3 /proc/loadavg))"
  ct_load tess-write --url "http://127.0.0.1:$TESS_PORT/" --monitoring-url "$NGINX_URL" --log-key "$TESS_KEY" \
    --writers "$BASE_WRITERS" --duration "$DURATION" --warmup "$WARMUP" \
    --server-pid "tesseract-posix=$TESS_PID,$(nginx_pids | sed 's/\([0-9][0-9]*\)/nginx=\1/g')" || true
  say "nginx (TesseraCT's tiles): tile reads, $READERS readers, $READ_DURATION s"
  ct_load tess-read --url "$NGINX_URL" --read-tiles --writers "$READERS" --duration "$READ_DURATION" --warmup 2 \
    --server-pid "$(nginx_pids | sed 's/\([0-9][0-9]*\)/nginx=\1/g')" || true
  stop "$TESS_PID"
fi

# --- summary -------------------------------------------------------------------
python3 - "$T" "$BASELINE" "$WRITERS" "$HAMMER_WRITERS" "$DURATION" <<'PY'
import json, os, sys
t, baseline, writers, hwriters, duration = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4], sys.argv[5]
def load(name):
    try:
        return json.load(open(os.path.join(t, name + ".json")))
    except (OSError, ValueError):
        return None
def cpu(d, name):
    for s in d["cpu"]["servers"]:
        if s["name"] == name:
            return s["cpu_ms_per_op"]
    return None
def write_line(label, d):
    if not d:
        return f"SUMMARY {label}: no result"
    per = ", ".join(f'{s["name"]} {s["cpu_ms_per_op"]:.4f}' for s in d["cpu"]["servers"] if s["cpu_ms_per_op"] is not None)
    return (f'SUMMARY {label}: {d["scts_per_sec"]:.1f} SCTs/s ({d["scts"]} in {d["seconds"]:.0f} s, {d["options"]["writers"]} writers); '
            f'time-to-SCT p50 {d["sct_p50_us"]/1e3:.1f} ms p99 {d["sct_p99_us"]/1e3:.1f} ms; '
            f'time-to-integrate p50 {d["integrate_p50_us"]/1e3:.1f} ms p99 {d["integrate_p99_us"]/1e3:.1f} ms '
            f'({d["not_integrated"]} not seen); pushbacks {d["pushbacks"]}; errors {d["errors"]}; '
            f'server CPU ms/entry: {per}; ct-load {d["cpu"]["generator_cpu_percent"]}% of a core')
def read_line(label, d):
    if not d:
        return f"SUMMARY {label}: no result"
    per = ", ".join(f'{s["name"]} {s["cpu_ms_per_op"]:.4f}' for s in d["cpu"]["servers"] if s["cpu_ms_per_op"] is not None)
    return (f'SUMMARY {label}: {d["reads_per_sec"]:.1f} reads/s of full tiles (tree size {d["tree_size"]}, '
            f'{d["options"]["writers"]} readers); p50 {d["p50_us"]/1e3:.2f} ms p99 {d["p99_us"]/1e3:.2f} ms; errors {d["errors"]}; '
            f'server CPU ms/read: {per}')
w, r = load("write"), load("read")
print(write_line("ctlogd write", w))
print(read_line("ctlogd tile reads", r))
if baseline:
    h, tw, tr = load("hammer"), load("tess-write"), load("tess-read")
    if h:
        print(f'SUMMARY TesseraCT POSIX + its hammer ({hwriters} writers): {h["qps"]:.1f} entries/s '
              f'(checkpoint growth {h["entries"]} in {h["seconds"]:.0f} s); posix CPU {h["posix_cpu_ms_per_entry"]} ms/entry; '
              f'hammer {h["hammer_cpu_seconds"] / h["seconds"] * 100:.0f}% of a core')
    print(write_line("TesseraCT POSIX + ct-load", tw))
    print(read_line("nginx serving TesseraCT's tiles", tr))
    if w and h and h["qps"]:
        print(f'SUMMARY ratio ctlogd / TesseraCT (hammer): {w["scts_per_sec"] / h["qps"]:.2f}')
    if w and tw and tw["scts_per_sec"]:
        print(f'SUMMARY ratio ctlogd / TesseraCT (ct-load, same generator): {w["scts_per_sec"] / tw["scts_per_sec"]:.2f}')
    if r and tr and tr["reads_per_sec"]:
        print(f'SUMMARY ratio ctlogd / nginx tile reads: {r["reads_per_sec"] / tr["reads_per_sec"]:.2f}')
PY
say "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
