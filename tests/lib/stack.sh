# Sourced by the interop suites (tests/acme, tests/ct, tests/oauth): a
# throw-away directory, the PASS/FAIL bookkeeping, and the stack scripts/run
# starts there on free loopback ports.
#
#   stack_tmp NAME       T=/tmp/signet-NAME-interop.XXXXXX, removed on exit (KEEP=1 keeps it)
#   stack_start DAEMON   scripts/run --state-dir $T/state with every port free, in the
#                        background (RUN_PID, stopped on exit); returns once
#                        $T/state/endpoints.json names DAEMON. The ports are in
#                        OCSP_PORT ACME_PORT DNS_PORT HTTP01_PORT TLSALPN01_PORT CT_PORT
#                        PROBE_PORT TOKEN_PORT TOKEN_MTLS_PORT, their options in
#                        STACK_PORT_ARGS; scripts/run's output is in $T/run.log.
#   stack_run DIR LOG [OPTION...], stack_wait DIR LOG [DAEMON]
#                        the two halves of stack_start, for another state directory
#   ep '["ctlogd"]["url"]'   a value from endpoints.json
#   check NAME CMD...    runs CMD, PASS or FAIL with its time (output shown on failure)
#   pass NAME, fail NAME, free_port; counters `passed` and `failed`
# shellcheck shell=bash

stack_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUN_PID=""
passed=0
failed=0

stack_cleanup() {
  if [ -n "$RUN_PID" ]; then
    kill -TERM "$RUN_PID" 2>/dev/null || true
    wait "$RUN_PID" 2>/dev/null || true
  fi
  [ "${KEEP:-0}" = 1 ] && echo "kept $T" || rm -rf "$T"
}

stack_tmp() { # name
  T=$(mktemp -d "/tmp/signet-$1-interop.XXXXXX")
  trap stack_cleanup EXIT
}

pass() { printf 'PASS  %s\n' "$1"; passed=$((passed + 1)); }
fail() { printf 'FAIL  %s\n' "$1"; failed=$((failed + 1)); }
check() { # name command...
  local name="$1" t0=$SECONDS; shift
  if "$@" > "$T/last.log" 2>&1; then pass "$name ($((SECONDS - t0)) s)"; else fail "$name ($((SECONDS - t0)) s)"; sed 's/^/      /' "$T/last.log" | tail -25; fi
}

# A free loopback port outside the kernel's ephemeral range, never one given
# before in $T (tests/lib/free_port.py says why).
free_port() { SIGNET_PORTS_GIVEN="${T:+$T/ports-given}" python3 "$stack_root/tests/lib/free_port.py"; }

stack_start() { # daemon
  OCSP_PORT=$(free_port); ACME_PORT=$(free_port); DNS_PORT=$(free_port); HTTP01_PORT=$(free_port)
  TLSALPN01_PORT=$(free_port); CT_PORT=$(free_port); PROBE_PORT=$(free_port); TOKEN_PORT=$(free_port)
  TOKEN_MTLS_PORT=$(free_port)
  STACK_PORT_ARGS=(--ocsp-port "$OCSP_PORT" --acme-port "$ACME_PORT" --dns-port "$DNS_PORT"
    --http01-port "$HTTP01_PORT" --tlsalpn01-port "$TLSALPN01_PORT" --ct-port "$CT_PORT"
    --probe-port "$PROBE_PORT" --token-port "$TOKEN_PORT" --token-mtls-port "$TOKEN_MTLS_PORT")
  stack_run "$T/state" "$T/run.log" "${STACK_PORT_ARGS[@]}"
  stack_wait "$T/state" "$T/run.log" "$1" || exit 1
}

# stack_run DIR LOG [OPTION...]: scripts/run --state-dir DIR in the background (RUN_PID),
# its output in LOG.
stack_run() {
  local dir="$1" log="$2"; shift 2
  "$stack_root/scripts/run" --state-dir "$dir" "$@" > "$log" 2>&1 &
  RUN_PID=$!
}

# stack_wait DIR LOG [DAEMON]: until DIR/endpoints.json is there (naming DAEMON, if
# given), up to 5 min (scripts/run may have to build first); 1, with the end of LOG, if
# scripts/run (RUN_PID) exits or does not come up.
stack_wait() {
  local dir="$1" log="$2" daemon="${3:-}"
  for _ in $(seq 1 3000); do
    [ -f "$dir/endpoints.json" ] && { [ -z "$daemon" ] || grep -q "\"$daemon\"" "$dir/endpoints.json"; } && return 0
    kill -0 "$RUN_PID" 2>/dev/null || { echo "scripts/run exited:"; tail -40 "$log"; return 1; }
    sleep 0.1
  done
  echo "scripts/run did not come up:"; tail -40 "$log"; return 1
}

ep() { python3 -c "import json,sys; d=json.load(open('$T/state/endpoints.json')); print(eval('d' + sys.argv[1]))" "$1"; }
