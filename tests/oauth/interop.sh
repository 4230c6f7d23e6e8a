#!/usr/bin/env bash
# OAuth interop: real OAuth 2.0 client libraries against the tokend that
# scripts/run starts (in a throw-away state directory on free loopback ports).
#
#   - authlib_client.py: authlib with every client authentication method,
#     token exchange, introspection, revocation; each token verified by PyJWT
#     and jwcrypto through the JWKS URL, RFC 9068 claims checked; errors.
#   - the demo client scripts/run prints works with the curl line it prints.
#
# Needs SIGNET_OAUTH_PYTHON (scripts/lib.sh: ensure_oauth_tools) and
# SIGNET_BIN_DIR (scripts/lib.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
: "${SIGNET_OAUTH_PYTHON:?run ensure_oauth_tools from scripts/lib.sh first}"
: "${SIGNET_BIN_DIR:?source scripts/lib.sh first}"

T=$(mktemp -d /tmp/signet-oauth-interop.XXXXXX)
RUN_PID=""
cleanup() {
  if [ -n "$RUN_PID" ]; then
    kill -TERM "$RUN_PID" 2>/dev/null || true
    wait "$RUN_PID" 2>/dev/null || true
  fi
  [ "${KEEP:-0}" = 1 ] && echo "kept $T" || rm -rf "$T"
}
trap cleanup EXIT

passed=0
failed=0
pass() { printf 'PASS  %s\n' "$1"; passed=$((passed + 1)); }
fail() { printf 'FAIL  %s\n' "$1"; failed=$((failed + 1)); }
check() { # name command...
  local name="$1" t0=$SECONDS; shift
  if "$@" > "$T/last.log" 2>&1; then pass "$name ($((SECONDS - t0)) s)"; else fail "$name ($((SECONDS - t0)) s)"; sed 's/^/      /' "$T/last.log" | tail -25; fi
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --- the stack, as scripts/run starts it ---------------------------------------
"$root/scripts/run" --state-dir "$T/state" --ocsp-port "$(free_port)" --acme-port "$(free_port)" \
  --dns-port "$(free_port)" --http01-port "$(free_port)" --tlsalpn01-port "$(free_port)" \
  --ct-port "$(free_port)" --probe-port "$(free_port)" --token-port "$(free_port)" > "$T/run.log" 2>&1 &
RUN_PID=$!
for _ in $(seq 1 3000); do # up to 5 min: scripts/run may have to build first
  [ -f "$T/state/endpoints.json" ] && grep -q tokend "$T/state/endpoints.json" && break
  kill -0 "$RUN_PID" 2>/dev/null || { echo "scripts/run exited:"; tail -40 "$T/run.log"; exit 1; }
  sleep 0.1
done
[ -f "$T/state/endpoints.json" ] || { echo "scripts/run did not come up:"; tail -40 "$T/run.log"; exit 1; }
ep() { python3 -c "import json,sys; d=json.load(open('$T/state/endpoints.json')); print(eval('d' + sys.argv[1]))" "$1"; }
ISSUER=$(ep '["tokend"]["issuer"]')
TOKEN_URL=$(ep '["tokend"]["token_url"]')
JWKS_URL=$(ep '["tokend"]["jwks_url"]')
# shellcheck disable=SC1091
. "$T/state/env"
echo "tokend up: $ISSUER"

# --- the demo client, as scripts/run printed it ------------------------------------
demo_client() {
  local id secret
  id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["client_id"])' "$T/state/tokend/demo-client.json")
  secret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$T/state/tokend/demo-client.json")
  curl -fsS -u "$id:$secret" -d grant_type=client_credentials "$TOKEN_URL" > "$T/demo-token.json"
  python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); assert t["token_type"]=="Bearer" and t["access_token"].count(".")==2, t' "$T/demo-token.json"
  curl -fsS "$JWKS_URL" | python3 -c 'import json,sys; assert json.load(sys.stdin)["keys"]'
  grep -qF -- "-d grant_type=client_credentials" "$T/run.log"
}
check "the demo client and the curl line scripts/run prints" demo_client

# --- authlib, PyJWT, jwcrypto -------------------------------------------------------
if "$SIGNET_OAUTH_PYTHON" "$here/authlib_client.py" "$ISSUER" "$SIGNET_BIN_DIR/signetctl" "$T" > "$T/authlib.log" 2>&1; then
  cat "$T/authlib.log"; pass "authlib suite"
else
  cat "$T/authlib.log"; fail "authlib suite"
fi

echo "oauth interop: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
