#!/usr/bin/env bash
# OAuth interop: real OAuth 2.0 client libraries against the tokend that
# scripts/run starts (in a throw-away state directory on free loopback ports).
#
#   - authlib_client.py: authlib with every client authentication method,
#     token exchange, introspection, revocation; each token verified by PyJWT
#     and jwcrypto through the JWKS URL, RFC 9068 claims checked; errors.
#   - authlib_browser.py: the code flow with PKCE through tokend's real sign-in
#     and consent pages (requests as the browser), ID tokens, userinfo,
#     refresh rotation and reuse detection, logout, CSRF and PKCE errors.
#   - the demo client scripts/run prints works with the curl line it prints.
#
# Needs SIGNET_OAUTH_PYTHON (scripts/lib.sh: ensure_oauth_tools) and
# SIGNET_BIN_DIR (scripts/lib.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SIGNET_OAUTH_PYTHON:?run ensure_oauth_tools from scripts/lib.sh first}"
: "${SIGNET_BIN_DIR:?source scripts/lib.sh first}"

# shellcheck source=../lib/stack.sh
. "$here/../lib/stack.sh"
stack_tmp oauth
stack_start tokend
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

# --- the browser flows: authlib as the client, requests as the browser ------------
if "$SIGNET_OAUTH_PYTHON" "$here/authlib_browser.py" "$ISSUER" "$SIGNET_BIN_DIR/signetctl" "$T" > "$T/browser.log" 2>&1; then
  cat "$T/browser.log"; pass "authlib browser suite"
else
  cat "$T/browser.log"; fail "authlib browser suite"
fi

echo "oauth interop: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
