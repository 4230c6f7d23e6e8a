#!/usr/bin/env bash
# The soak: the whole appliance (signd, ocspd, ctlogd, acmed, probed, tokend,
# the demo DNS) as scripts/run sets it up in a throw-away state directory on
# free loopback ports, under a mixed load (issuance and revocation through
# acmed, OCSP, CT add-chain and reads, client_credentials and refresh tokens,
# probed's API) while one daemon at a time is killed with SIGKILL and
# restarted; afterwards nothing acknowledged may be missing and no serial
# issued twice. See bench/src/bin/soak.rs for what is counted and verified.
#
#   bench/scripts/soak.sh [--duration S] [--kill-every S] [SOAK-ARGS...]
#     defaults: 600 s of load, a kill every 30 s (soak's own defaults).
#     KEEP=1 keeps the directory (state, logs/ of every daemon).
#     SOAK_DAEMONS=DIR starts the daemons from DIR instead of this checkout's
#     build (an A/B run: DIR holds the other commit's binaries, all of them).
#
# scripts/run initialises the state (CA, CT log, token keys, demo clients and
# user, probes) and is stopped again; soak then starts every daemon itself
# from those configs, so that it can kill and restart them. Exits as soak does
# (0: nothing lost; 1: something acknowledged missing, a serial duplicated or
# a daemon not back; 2: the run could not start).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../../scripts/lib.sh
source "$root/scripts/lib.sh"
set -euo pipefail
ensure_openssl
# shellcheck source=../../tests/lib/stack.sh
. "$root/tests/lib/stack.sh"
stack_tmp soak
stack_start tokend
# scripts/run has set the state up; its daemons stop with it.
kill -TERM "$RUN_PID"
wait "$RUN_PID" 2>/dev/null || true
RUN_PID=""
echo "soak: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
st=0
SIGNET_BIN_DIR="${SOAK_DAEMONS:-$SIGNET_BIN_DIR}" "$SIGNET_BIN_DIR/soak" --state-dir "$T/state" "$@" || st=$?
echo "soak: load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$st" -ne 0 ]; then
  for log in "$T"/state/logs/*.log; do
    echo "--- the end of $log"
    tail -15 "$log"
  done
fi
exit "$st"
