#!/usr/bin/env bash
# OAuth interop: real OAuth 2.0 client libraries against the tokend that
# scripts/run starts (in a throw-away state directory on free loopback ports).
#
#   - authlib_client.py: authlib with every client authentication method
#     (tls_client_auth with a demo-CA certificate and self_signed_tls_client_auth
#     through requests' client certificates on the mtls_endpoint_aliases),
#     token exchange, introspection, revocation; each token verified by PyJWT
#     and jwcrypto through the JWKS URL, RFC 9068 claims and cnf.x5t#S256
#     checked; errors.
#   - authlib_browser.py: the code flow with PKCE through tokend's real sign-in
#     and consent pages (requests as the browser), ID tokens, userinfo,
#     refresh rotation and reuse detection, logout, CSRF and PKCE errors.
#   - node/openid_client.mjs: panva's certified libraries (openid-client v6,
#     oauth4webapi, jose): discovery, client_credentials with private_key_jwt,
#     PAR + code + PKCE through the real forms (fetch with a cookie jar), DPoP
#     for the code, userinfo and refresh, introspection, revocation, device flow;
#     mutual TLS (RFC 8705) through the discovered mtls_endpoint_aliases with
#     node:https as customFetch: tls_client_auth (a CSR made here, issued by
#     `signetctl cert issue --eku client-auth`) for client_credentials and the
#     code flow, certificate-bound tokens (userinfo refused without the
#     certificate), introspection; self_signed_tls_client_auth.
#   - browser_login.py: headless Chromium (Debian's) through Playwright: typing
#     into the sign-in page, consent, the redirect intercepted; JavaScript off.
#     Screenshots in ${SIGNET_ARTIFACT_DIR:-~/.cache/signet/artifacts}/oauth/.
#   - the demo client scripts/run prints works with the curl line it prints, and
#     so do its mutual-TLS lines (openssl, signetctl cert issue, curl --cert).
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
# The suites read the demo CA and the mTLS listener's trust bundle from it.
export SIGNET_ENDPOINTS="$T/state/endpoints.json"
echo "tokend up: $ISSUER (mTLS $(ep '["tokend"]["mtls_url"]'))"

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

# --- scripts/run's mutual-TLS lines, as printed (in $T/mtls-demo) ---------------------
mtls_demo() {
  local lines
  # The lines after "try:" under "mutual TLS", up to the next check's text; signetctl from PATH (state/env).
  lines=$(sed -n '/mutual TLS (RFC 8705)/,/people sign in/p' "$T/run.log" | sed -n '/try:/,/token$/p' |
    sed -e 's/^ *try: //' -e 's/^ *//')
  [ -n "$lines" ] || { echo "scripts/run printed no mutual-TLS lines"; return 1; }
  echo "$lines"
  mkdir -p "$T/mtls-demo"
  # Every line but the last command (curl) as printed; curl's answer alone in token.json.
  (cd "$T/mtls-demo" && bash -euo pipefail -c "${lines%%curl *}" && bash -euo pipefail -c "curl -fsS ${lines#*curl }" > token.json)
  python3 - "$T/mtls-demo" <<'PY'
import base64, hashlib, json, ssl, sys
d = sys.argv[1]
tok = json.load(open(f"{d}/token.json"))
payload = tok["access_token"].split(".")[1]
claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
der = ssl.PEM_cert_to_DER_cert(open(f"{d}/svc.pem").read())
x5t = base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()
assert tok["token_type"] == "Bearer" and claims["client_id"] == "svc", claims
assert claims["cnf"] == {"x5t#S256": x5t}, (claims, x5t)
PY
}
check "the mutual-TLS lines scripts/run prints: a demo-CA certificate gets a token bound to it" mtls_demo

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
