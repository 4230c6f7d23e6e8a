#!/usr/bin/env bash
# scripts/run on a state directory it made before: stopped with a TERM (what
# Ctrl-C does), run again with no options it comes up on the ports of its
# first run (they are in the configurations and in the demo CA's OCSP and CRL
# URLs); an option naming another port, or not a port at all, is refused
# before anything starts, with the option and the port it must be. A state
# whose first run stopped before writing any configuration takes a new port.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/stack.sh
. "$here/../lib/stack.sh"
stack_tmp run-state
set +e

daemons_left() { pgrep -f -- "--config $T/" >/dev/null; }
stop_run() { kill -TERM "$RUN_PID" 2>/dev/null; wait "$RUN_PID"; local rc=$?; RUN_PID=""; return $rc; }

# --- the first run, every port chosen -------------------------------------------
stack_start tokend
first_ocsp=$(ep '["ocspd"]["url"]')
check "the first run records its ports in the state directory" grep -qx "OCSP_PORT=$OCSP_PORT" "$T/state/ports"
stopped() { stop_run; ! daemons_left; }
check "a TERM stops scripts/run and every daemon it started" stopped

# --- again, no options -----------------------------------------------------------
rm -f "$T/state/endpoints.json"
stack_run "$T/state" "$T/run2.log"
check "run again without options, it comes up" stack_wait "$T/state" "$T/run2.log"
check "on the first run's ports (endpoints.json names the same OCSP URL)" [ "$(ep '["ocspd"]["url"]')" = "$first_ocsp" ]
check "ocspd serves the demo CRL on the first run's port" curl -fsS -o /dev/null "http://127.0.0.1:$OCSP_PORT/crl/demo.crl"
check "acmed's directory answers on the first run's port" \
  curl -fsS -o /dev/null --cacert "$(ep '["acmed"]["ca_bundle"]')" "https://127.0.0.1:$ACME_PORT/directory"
check "the second run stops as the first did" stopped

# --- options that cannot be ------------------------------------------------------
other=$(free_port)
refused() { # expected-message options...
  local want="$1"; shift
  timeout 60 "$stack_root/scripts/run" --state-dir "$T/state" "$@" > "$T/refused.log" 2>&1
  local rc=$?
  cat "$T/refused.log"
  [ "$rc" = 2 ] && grep -qF -- "$want" "$T/refused.log" && ! daemons_left && [ ! -f "$T/state/run/signd.pid" ]
}
check "another --ocsp-port is refused, naming the state's" refused "--ocsp-port $OCSP_PORT (not $other)" --ocsp-port "$other"
check "the same --ocsp-port is not a conflict (refused only for the bad --ct-port beside it)" \
  refused "--ct-port takes a port number (1-65535), not 'x'" --ocsp-port "$OCSP_PORT" --ct-port x
check "a port out of range is refused" refused "not '70000'" --probe-port 70000
check "an unknown port option is refused" refused "unknown argument --nope-port" --nope-port 1
check "the refusals left the recorded ports as they were" grep -qx "OCSP_PORT=$OCSP_PORT" "$T/state/ports"

# --- a state whose first run stopped before writing any configuration -------------
# (its ports are named nowhere yet, so a new port option is taken, and recorded)
mkdir -p "$T/early"
printf 'OCSP_PORT=%s\n' "$OCSP_PORT" > "$T/early/ports"
early() {
  # (the first run's other ports, free again: none of the defaults; the last --ocsp-port wins)
  stack_run "$T/early" "$T/early.log" "${STACK_PORT_ARGS[@]}" --ocsp-port "$other"
  stack_wait "$T/early" "$T/early.log" &&
    grep -qx "OCSP_PORT=$other" "$T/early/ports" && curl -fsS -o /dev/null "http://127.0.0.1:$other/crl/demo.crl"
}
check "before any configuration is written, a new --ocsp-port is taken and recorded" early
check "and that run stops as the others did" stopped

echo "scripts/run state: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
