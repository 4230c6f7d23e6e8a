#!/usr/bin/env bash
# The life of a certificate, end to end, through the stack scripts/run starts
# (signd, ocspd, acmed, ctlogd, probed, tokend, the demo DNS; a throw-away
# state directory on free loopback ports), every step asserted:
#
#   1. certbot obtains a certificate from acmed (http-01); it carries the SCT
#      list extension with an SCT from ctlogd that verifies against the log's
#      key (Python cryptography, tests/acme/verify_sct.py), the precertificate
#      logged at the SCT's leaf_index.
#   2. `openssl ocsp` says good.
#   3. probed gets a check of that certificate's OCSP status (added to its
#      config, SIGHUP) and a webhook to a small local receiver; the check is up
#      on the status page, in /api/checks and in /metrics (probe_ocsp_status 0).
#   4. tokend gives a client presenting that certificate (tls_client_auth, its
#      SAN) a token bound to it (cnf.x5t#S256, RFC 8705).
#   5. certbot revokes it (keyCompromise).
#   6. Within 1 s of the revocation's answer: `openssl ocsp` says revoked, the
#      CRL shard named in the certificate lists its serial (signature checked
#      by openssl crl), and tokend refuses the certificate (invalid_client: it
#      asks ocspd, [tls] ocsp_url).
#   7. probed's check goes down (status page, /api/checks, probe_ocsp_status 1)
#      and its webhook delivers the `down` event.
#   8. The log entry stays provable: ctclient's inclusion proof for the
#      precertificate's leaf hash verifies against the signed tree head.
#   9. signd unavailable (killed with SIGKILL): ocspd, acmed, ctlogd and tokend
#      answer /healthz 503 naming signd; a fresh OCSP answer is tryLater, a
#      token request temporarily_unavailable; probed's signd check goes down and
#      its webhook fires. signd started again: every /healthz is ok within a few
#      seconds, with no daemon restarted, and tokens, OCSP with a nonce and
#      certbot's issuance work again.
#
# Needs SIGNET_CERTBOT (ensure_certbot), SIGNET_CTCLIENT (ensure_ct_tools) and
# SIGNET_BIN_DIR (scripts/lib.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SIGNET_CERTBOT:?run ensure_certbot from scripts/lib.sh first}"
: "${SIGNET_CTCLIENT:?run ensure_ct_tools from scripts/lib.sh first}"
: "${SIGNET_BIN_DIR:?source scripts/lib.sh first}"

# shellcheck source=../lib/stack.sh
. "$here/../lib/stack.sh"
stack_tmp life
HOOK_PID=""
SIGND2_PID=""
life_cleanup() {
  [ -z "$HOOK_PID" ] || kill "$HOOK_PID" 2>/dev/null || true
  [ -z "$SIGND2_PID" ] || kill "$SIGND2_PID" 2>/dev/null || true
  stack_cleanup
}
trap life_cleanup EXIT

# --- the stack, as scripts/run starts it ---------------------------------------
stack_start tokend
DIRECTORY=$(ep '["acmed"]["directory"]')
CA_BUNDLE=$(ep '["acmed"]["ca_bundle"]')
CHAIN=$(ep '["acmed"]["chain"]')
ISSUING=$(ep '["ca"]["issuing"]')
OCSP_URL=$(ep '["ocspd"]["url"]')
CT_URL=$(ep '["ctlogd"]["url"]')
CT_KEY=$(ep '["ctlogd"]["public_key"]')
PROBE_URL=$(ep '["probed"]["url"]')
PROBE_API=$(ep '["probed"]["api"]')
PROBE_METRICS=$(ep '["probed"]["metrics"]')
PROBE_CONFIG=$(ep '["probed"]["config"]')
MTLS_TOKEN_URL=$(ep '["tokend"]["mtls_token_url"]')
MTLS_CA=$(ep '["tokend"]["mtls_ca_bundle"]')
# shellcheck disable=SC1091
. "$T/state/env"
PYTHON="${SIGNET_CERTBOT_PYTHON:-$(dirname "$SIGNET_CERTBOT")/python}"
NAME=life.signet.test
LIVE="$T/certbot/conf/live/life"
echo "stack up: $DIRECTORY, ocspd $OCSP_URL, ctlogd $CT_URL, probed $PROBE_URL, tokend $MTLS_TOKEN_URL"

ms() { date +%s%3N; }
ocsp_status() { # CERT -> good|revoked|unknown
  openssl ocsp -issuer "$ISSUING" -cert "$1" -url "$OCSP_URL" -CAfile "$CA_BUNDLE" -no_nonce 2>&1 |
    awk -v c="$1" '$1 == c":" {print $2}'
}
# within MS NAME CMD...: CMD passes within MS milliseconds of $REVOKED_AT (tried every 50 ms).
within() {
  local limit="$1" what="$2"; shift 2
  while :; do
    if "$@" > "$T/within.log" 2>&1; then
      local took=$(($(ms) - REVOKED_AT))
      echo "$what: after $took ms"
      [ "$took" -le "$limit" ] || { echo "$what took over $limit ms"; return 1; }
      return 0
    fi
    [ $(($(ms) - REVOKED_AT)) -le $((limit + 2000)) ] || { cat "$T/within.log"; echo "$what: not within $limit ms"; return 1; }
    sleep 0.05
  done
}
is_revoked() { [ "$(ocsp_status "$LIVE/cert.pem")" = revoked ]; }
in_shard() { # the CRL at the certificate's distribution point (its shard) lists its serial
  local url serial
  url=$(openssl x509 -in "$LIVE/cert.pem" -noout -ext crlDistributionPoints | grep -o 'URI:[^ ]*' | head -1 | cut -c5-)
  serial=$(openssl x509 -in "$LIVE/cert.pem" -noout -serial | cut -d= -f2)
  case "$url" in */demo.crl | "") echo "not a shard URL: '$url'"; return 1 ;; esac
  curl -fs "$url" -o "$T/shard.crl"
  openssl crl -inform DER -in "$T/shard.crl" -CAfile "$CHAIN" -noout -text > "$T/shard.txt" 2>&1
  grep -q "verify OK" "$T/shard.txt" || { cat "$T/shard.txt"; return 1; }
  grep -qi "Serial Number: $serial" "$T/shard.txt"
}
# token: client_credentials for client `life` over mutual TLS with certbot's certificate; body in $T/token.json.
token() {
  curl -s -o "$T/token.json" -w '%{http_code}' --cacert "$MTLS_CA" --cert "$LIVE/fullchain.pem" --key "$LIVE/privkey.pem" \
    -d grant_type=client_credentials -d client_id=life "$MTLS_TOKEN_URL"
}
token_refused() {
  local st; st=$(token)
  [ "$st" = 401 ] && grep -q '"error":"invalid_client"' "$T/token.json" && ! grep -q access_token "$T/token.json" ||
    { echo "HTTP $st: $(cat "$T/token.json")"; return 1; }
  cat "$T/token.json"
}
bound_token() {
  local st x5t cnf; st=$(token)
  [ "$st" = 200 ] || { echo "HTTP $st: $(cat "$T/token.json")"; return 1; }
  x5t=$(openssl x509 -in "$LIVE/cert.pem" -outform DER | openssl dgst -sha256 -binary | base64 -w0 | tr '+/' '-_' | tr -d '=')
  cnf=$(python3 -c '
import base64, json, sys
t = json.load(open(sys.argv[1]))["access_token"].split(".")[1]
print(json.loads(base64.urlsafe_b64decode(t + "=" * (-len(t) % 4)))["cnf"]["x5t#S256"])' "$T/token.json")
  echo "cnf.x5t#S256 $cnf, the certificate's SHA-256 thumbprint $x5t"
  [ "$cnf" = "$x5t" ]
}
# probed: the check's state in /api/checks, its row on the status page, its gauges in /metrics.
probe_state() { curl -fs "$PROBE_API/life_ocsp" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
metric() { curl -fs "$PROBE_METRICS" | awk -v m="$1{" 'index($0, m) == 1 && index($0, "check=\"life_ocsp\"") {print $2}'; }
probed_says() { # up|down, ocsp status gauge 0|1
  local state gauge
  state=$(probe_state) && [ "$state" = "$1" ] || { echo "state ${state:-none}"; return 1; }
  curl -fs "$PROBE_URL" | grep -q "id=\"check-life_ocsp\" data-state=\"$1\"" || { echo "status page row not $1"; return 1; }
  gauge=$(metric probe_ocsp_status)
  [ -n "$gauge" ] && awk -v g="$gauge" -v w="$2" 'BEGIN { exit !(g + 0 == w + 0) }' ||
    { echo "probe_ocsp_status ${gauge:-none}"; return 1; }
  echo "probed: $state, probe_ocsp_status $gauge, probe_state $(metric probe_state)"
}
eventually() { # SECONDS CMD...
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -lt "$deadline" ] || return 1; sleep 0.2; done
}

# --- 1. certbot, and the SCT from ctlogd ----------------------------------------
CB=(env REQUESTS_CA_BUNDLE="$CA_BUNDLE" "$SIGNET_CERTBOT" --config-dir "$T/certbot/conf" --work-dir "$T/certbot/work"
    --logs-dir "$T/certbot/logs" --non-interactive --server "$DIRECTORY")
check "certbot obtains $NAME from acmed (http-01)" \
  "${CB[@]}" certonly --agree-tos -m admin@signet.test --cert-name life \
  --standalone --http-01-address 127.0.0.1 --http-01-port "$HTTP01_PORT" -d "$NAME"
check "the chain verifies for $NAME" \
  openssl verify -CAfile "$CA_BUNDLE" -untrusted "$CHAIN" -verify_hostname "$NAME" "$LIVE/fullchain.pem"
check "the certificate carries the SCT list extension" \
  bash -c "openssl x509 -in '$LIVE/cert.pem' -noout -text | grep -q 'CT Precertificate SCTs'"
check "its SCT is ctlogd's and verifies with the log key; the precertificate is logged at its leaf_index" \
  "$PYTHON" "$here/../acme/verify_sct.py" --cert "$LIVE/cert.pem" --issuer "$ISSUING" --log-url "$CT_URL" \
  --log-key "$CT_KEY" --leaf-hash-out "$T/leaf-hash"

# --- 2. OCSP good -----------------------------------------------------------------
check "openssl ocsp says good" test "$(ocsp_status "$LIVE/cert.pem")" = good

# --- 3. probed watches it, with a webhook -----------------------------------------
HOOK_PORT=$(free_port)
python3 - "$HOOK_PORT" "$T/hooks.jsonl" > "$T/hooks.log" 2>&1 <<'PY' &
import http.server, sys
port, out = int(sys.argv[1]), sys.argv[2]
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(out, "ab") as f:
            f.write(body.replace(b"\n", b" ") + b"\n")
        self.send_response(204)
        self.end_headers()
http.server.HTTPServer(("127.0.0.1", port), Hook).serve_forever()
PY
HOOK_PID=$!
cat >> "$PROBE_CONFIG" <<TOML

# Added by tests/appliance/life.sh: certbot's certificate's OCSP status, and a webhook.
[checks.life_ocsp]
kind = "ocsp"
description = "OCSP status of certbot's $NAME"
certificate = "$LIVE/cert.pem"
issuer = "$ISSUING"
interval = "1s"
jitter = "100ms"
down_after = 1

[checks.life_signd]
kind = "signd"
description = "signd over its socket, every second"
socket = "$T/state/run/signd.sock"
interval = "1s"
jitter = "100ms"
down_after = 1

[[webhooks]]
url = "http://127.0.0.1:$HOOK_PORT/hook"
checks = ["life_ocsp", "life_signd"]
TOML
check "probed --check-config accepts the added check and webhook" "$SIGNET_BIN_DIR/probed" --config "$PROBE_CONFIG" --check-config
check "SIGHUP to probed" kill -HUP "$(cat "$T/state/run/probed.pid")"
check "probed: the check is up (status page, /api/checks; /metrics probe_ocsp_status 0)" eventually 20 probed_says up 0

# --- 4. tokend: a token bound to the certificate ----------------------------------
check "signetctl oauth client create life (tls_client_auth, SAN $NAME)" \
  signetctl oauth client create life --auth-method tls_client_auth --tls-san-dns "$NAME" \
  --scope demo.read --audience https://api.signet.test
check "tokend gives the certificate's holder a token with cnf.x5t#S256 of that certificate" bound_token

# --- 5./6. revocation, seen within a second everywhere ----------------------------
check "certbot revokes it (keyCompromise)" \
  "${CB[@]}" revoke --cert-path "$LIVE/cert.pem" --reason keycompromise --no-delete-after-revoke
REVOKED_AT=$(ms)
check "within 1 s: openssl ocsp says revoked" within 1000 "OCSP revoked" is_revoked
check "within 1 s: the certificate's CRL shard lists its serial (signature verified)" within 1000 "CRL shard" in_shard
check "within 1 s: tokend refuses the certificate (invalid_client, no token)" within 1000 "tokend refuses" token_refused

# --- 7. probed: down, and the webhook -----------------------------------------------
check "probed: the check is down (status page, /api/checks; /metrics probe_ocsp_status 1)" eventually 20 probed_says down 1
hook_down() {
  python3 - "$T/hooks.jsonl" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
down = [e for e in events if e["check"] == "life_ocsp" and e["event"] == "down"]
assert down, events
assert down[0]["state"] == "down" and down[0]["kind"] == "ocsp" and "revoked" in down[0]["message"], down
print(down[0])
PY
}
check "probed's webhook delivered the down event to the local receiver" eventually 20 hook_down

# --- 8. the log entry stays provable -------------------------------------------------
{ echo "-----BEGIN PUBLIC KEY-----"; echo "$CT_KEY" | fold -w 64; echo "-----END PUBLIC KEY-----"; } > "$T/log.pem"
proven() {
  "$SIGNET_CTCLIENT" get-inclusion-proof --log_uri "${CT_URL%/}" --pub_key "$T/log.pem" \
    --leaf_hash "$(cat "$T/leaf-hash")" 2>&1 | tee "$T/proof.txt"
  grep -q "^Verified that hash" "$T/proof.txt"
}
check "ctclient: the precertificate's inclusion proof verifies against the signed tree head" proven

# --- 9. signd unavailable, then back ---------------------------------------------
healthz() { # URL -> "CODE BODY" (acmed's over TLS)
  curl -s --cacert "$CA_BUNDLE" -w '%{http_code} ' -o "$T/healthz.txt" "$1"; tr '\n' '|' < "$T/healthz.txt"
}
HEALTHZ=("${OCSP_URL%/ocsp}/healthz" "${DIRECTORY%/directory}/healthz" "${CT_URL%/demo/}/healthz"
         "$(ep '["tokend"]["token_url"]' | sed 's|/token$||')/healthz")
all_name_signd() {
  local u out ok=0
  for u in "${HEALTHZ[@]}"; do
    out=$(healthz "$u"); echo "$u: $out"
    case "$out" in "503 unhealthy|"*"signd: "*) ;; *) ok=1 ;; esac
  done
  return $ok
}
all_ok() {
  local u out ok=0
  for u in "${HEALTHZ[@]}"; do out=$(healthz "$u"); echo "$u: $out"; [ "$out" = "200 ok|" ] || ok=1; done
  return $ok
}
demo_token() { # -> HTTP code; body in $T/demo-token.json
  local secret
  secret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$T/state/tokend/demo-client.json")
  curl -s -o "$T/demo-token.json" -w '%{http_code}' -u "demo:$secret" -d grant_type=client_credentials \
    "$(ep '["tokend"]["token_url"]')"
}
token_unavailable() {
  local st; st=$(demo_token); cat "$T/demo-token.json"
  [ "$st" = 503 ] && grep -q '"error":"temporarily_unavailable"' "$T/demo-token.json"
}
token_ok() { local st; st=$(demo_token); echo "HTTP $st"; [ "$st" = 200 ] && grep -q access_token "$T/demo-token.json"; }
fresh_ocsp() { # with a nonce: a fresh signature
  openssl ocsp -issuer "$ISSUING" -cert "$LIVE/cert.pem" -url "$OCSP_URL" -CAfile "$CA_BUNDLE" 2>&1 | tee "$T/fresh.txt"
}
ocsp_try_later() { fresh_ocsp || true; grep -qi "trylater" "$T/fresh.txt"; }
ocsp_fresh_ok() { fresh_ocsp && grep -q "Response verify OK" "$T/fresh.txt" && ! grep -q WARNING "$T/fresh.txt"; }
hook_event() { # CHECK EVENT: the webhook delivered EVENT for CHECK (an `up` only after a `down`)
  python3 - "$T/hooks.jsonl" "$1" "$2" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
mine = [e["event"] for e in events if e["check"] == sys.argv[2]]
want = ["down"] if sys.argv[3] == "down" else ["down", sys.argv[3]]
it = iter(mine)
assert all(w in it for w in want), mine
print(mine)
PY
}
signd_check() { curl -fs "$PROBE_API/life_signd" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
signd_check_is() { local s; s=$(signd_check); echo "life_signd: $s"; [ "$s" = "$1" ]; }
names_signd_in_log() { grep -q "signd is unavailable" "$T/state/logs/$1.log"; }

check "probed's signd check is up" eventually 20 signd_check_is up
check "every daemon's /healthz is ok with signd up" all_ok
SIGND_PID=$(cat "$T/state/run/signd.pid")
check "signd killed with SIGKILL" kill -9 "$SIGND_PID"
check "ocspd, acmed, ctlogd and tokend answer /healthz 503 naming signd" eventually 10 all_name_signd
for d in ocspd acmed ctlogd tokend; do
  check "$d logs that signd is unavailable" names_signd_in_log "$d"
done
check "a fresh OCSP answer (nonce) is tryLater while signd is down" ocsp_try_later
check "a token request is temporarily_unavailable while signd is down" token_unavailable
check "probed's signd check goes down" eventually 20 signd_check_is down
check "probed's webhook delivered the signd check's down event" eventually 20 hook_event life_signd down

"$SIGNET_BIN_DIR/signd" --config "$T/state/signd.toml" 2>> "$T/state/logs/signd.log" &
SIGND2_PID=$!
check "signd started again" eventually 20 signetctl health
check "within 10 s every /healthz is ok again, no daemon restarted" eventually 10 all_ok
check "tokens are issued again" token_ok
check "fresh OCSP answers (nonce) are signed again" ocsp_fresh_ok
check "certbot obtains a second certificate after signd's return" \
  "${CB[@]}" certonly --agree-tos -m admin@signet.test --cert-name back \
  --standalone --http-01-address 127.0.0.1 --http-01-port "$HTTP01_PORT" -d "back.$NAME"
check "probed's signd check is up again, and its webhook says resolved" eventually 20 hook_event life_signd resolved

echo "life: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
