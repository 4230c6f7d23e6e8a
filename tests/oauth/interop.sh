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
#   - node/openid_client.mjs: panva's certified libraries (openid-client v6,
#     oauth4webapi, jose): discovery, client_credentials with private_key_jwt,
#     PAR + code + PKCE through the real forms (fetch with a cookie jar), DPoP
#     for the code, userinfo and refresh, introspection, revocation, device flow.
#   - browser_login.py: headless Chromium (Debian's) through Playwright: typing
#     into the sign-in page, consent, the redirect intercepted; JavaScript off.
#     Screenshots in ${SIGNET_ARTIFACT_DIR:-~/.cache/signet/artifacts}/oauth/.
#   - the demo client scripts/run prints works with the curl line it prints.
#
# Run it by hand (after a release build of the workspace's binaries):
#   (source scripts/lib.sh; ensure_packages; ensure_oauth_tools; ensure_oauth_node; bash tests/oauth/interop.sh)
# Needs SIGNET_OAUTH_PYTHON (ensure_oauth_tools), SIGNET_OAUTH_NODE_MODULES
# (ensure_oauth_node), /usr/bin/chromium (ensure_packages) and SIGNET_BIN_DIR
# (scripts/lib.sh). A missing tool is a failure, not a skip.
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

# One suite of checks: its output shown, PASS or FAIL by its exit status.
suite() { # name log command...
  local name="$1" log="$2"; shift 2
  if "$@" > "$log" 2>&1; then cat "$log"; pass "$name"; else cat "$log"; fail "$name"; fi
}

# --- authlib, PyJWT, jwcrypto -------------------------------------------------------
suite "authlib suite" "$T/authlib.log" \
  "$SIGNET_OAUTH_PYTHON" "$here/authlib_client.py" "$ISSUER" "$SIGNET_BIN_DIR/signetctl" "$T"

# --- the browser flows: authlib as the client, requests as the browser ------------
suite "authlib browser suite" "$T/browser.log" \
  "$SIGNET_OAUTH_PYTHON" "$here/authlib_browser.py" "$ISSUER" "$SIGNET_BIN_DIR/signetctl" "$T"

# --- openid-client, oauth4webapi, jose (Node) ----------------------------------------
node_suite() {
  [ -d "${SIGNET_OAUTH_NODE_MODULES:-}/openid-client" ] || { echo "no openid-client: run ensure_oauth_node (scripts/lib.sh)"; return 1; }
  command -v node >/dev/null || { echo "no node on PATH"; return 1; }
  # ESM resolves packages next to the script: a copy beside a link to the cached node_modules.
  mkdir -p "$T/node"
  ln -sfn "$SIGNET_OAUTH_NODE_MODULES" "$T/node/node_modules"
  cp "$here/node/openid_client.mjs" "$T/node/"
  node "$T/node/openid_client.mjs" "$ISSUER" "$SIGNET_BIN_DIR/signetctl" "$T"
}
suite "openid-client suite" "$T/node.log" node_suite

# --- headless Chromium through Playwright -------------------------------------------
suite "Chromium sign-in suite" "$T/chromium.log" \
  "$SIGNET_OAUTH_PYTHON" "$here/browser_login.py" "$ISSUER" "$SIGNET_BIN_DIR/signetctl" "$T"

echo "oauth interop: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
