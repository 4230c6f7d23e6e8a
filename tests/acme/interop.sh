#!/usr/bin/env bash
# ACME interop: certbot and lego, unmodified, against the stack scripts/run
# starts (signd, ocspd, acmed, the demo DNS server), in a throw-away state
# directory on free loopback ports. Each client obtains certificates with
# http-01, dns-01 (through the real DNS server and the hooks beside this
# file), tls-alpn-01 (lego; certbot has no tls-alpn-01) and for an IP address;
# renews with ARI (certbot asks renewalInfo; lego also sends `replaces`); revokes; then `openssl ocsp` must say revoked
# and the CRL named in the certificate must list it. Every issued chain is
# checked with `openssl verify`. Certificate Transparency: the SCT embedded in
# certificates from each client verifies against ctlogd's public key with an
# independent verifier (Python cryptography, verify_sct.py beside this file),
# and the precertificate is in the log at the SCT's leaf_index. Then each registers an account bound with an
# external account binding key made by `signetctl acme eab create` (the stack
# does not require EAB, so the checks above run without it; acmed verifies any
# binding a client sends).
#
# Needs SIGNET_CERTBOT and SIGNET_LEGO (scripts/lib.sh: ensure_certbot, ensure_lego)
# and SIGNET_BIN_DIR (scripts/lib.sh) for signetctl.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SIGNET_CERTBOT:?run ensure_certbot from scripts/lib.sh first}"
: "${SIGNET_LEGO:?run ensure_lego from scripts/lib.sh first}"
: "${SIGNET_BIN_DIR:?source scripts/lib.sh first}"

# shellcheck source=../lib/stack.sh
. "$here/../lib/stack.sh"
stack_tmp acme

# --- the stack, as scripts/run starts it ---------------------------------------
stack_start acmed
DIRECTORY=$(ep '["acmed"]["directory"]')
CA_BUNDLE=$(ep '["acmed"]["ca_bundle"]')
CHAIN=$(ep '["acmed"]["chain"]')
ZONE=$(ep '["acmed"]["dns_zone"]')
ISSUING=$(ep '["ca"]["issuing"]')
CA_ROOT=$(ep '["ca"]["root"]')
OCSP_URL=$(ep '["ocspd"]["url"]')
ADMIN_SOCKET=$(ep '["acmed"]["admin_socket"]')
CT_URL=$(ep '["ctlogd"]["url"]')
CT_KEY=$(ep '["ctlogd"]["public_key"]')
export SIGNET_TESTDNS_ZONE="$ZONE"
echo "stack up: $DIRECTORY (dns 127.0.0.1:$DNS_PORT, http-01 :$HTTP01_PORT, tls-alpn-01 :$TLSALPN01_PORT)"

# --- checks on an issued certificate --------------------------------------------
# verify_chain CERT [NAME]: the chain verifies to the root, for NAME if given.
verify_chain() {
  local cert="$1" name="${2:-}"
  local args=(-CAfile "$CA_BUNDLE" -untrusted "$CHAIN")
  if [ -n "$name" ]; then
    if [[ "$name" =~ ^[0-9.]+$ ]]; then args+=(-verify_ip "$name"); else args+=(-verify_hostname "$name"); fi
  fi
  openssl verify "${args[@]}" "$cert"
}
ocsp_status() { # CERT -> good|revoked|unknown
  openssl ocsp -issuer "$ISSUING" -cert "$1" -url "$OCSP_URL" -CAfile "$CA_BUNDLE" -no_nonce 2>&1 | awk -v c="$1" '$1 == c":" {print $2}'
}
expect_ocsp() { # CERT good|revoked
  local got
  for _ in $(seq 1 30); do got=$(ocsp_status "$1"); [ "$got" = "$2" ] && return 0; sleep 0.1; done
  echo "openssl ocsp says ${got:-nothing} for $1, expected $2"; return 1
}
# in_crl CERT: the CRL at the certificate's CRL distribution point lists its serial (within 3 s).
in_crl() {
  local cert="$1" url serial
  url=$(openssl x509 -in "$cert" -noout -ext crlDistributionPoints | grep -o 'URI:[^ ]*' | head -1 | cut -c5-)
  serial=$(openssl x509 -in "$cert" -noout -serial | cut -d= -f2)
  for _ in $(seq 1 30); do
    curl -fs "$url" -o "$T/crl.der" && openssl crl -inform DER -in "$T/crl.der" -CAfile "$CHAIN" -noout -text 2>/dev/null > "$T/crl.txt" &&
      grep -qi "Serial Number: $serial" "$T/crl.txt" && return 0
    sleep 0.1
  done
  echo "serial $serial not in the CRL at $url"; return 1
}
# sct_verifies CERT [ISSUER [KEY]]: its embedded SCT verifies with the log's key, by
# Python cryptography in certbot's venv, and the precertificate is in the log.
PYTHON="${SIGNET_CERTBOT_PYTHON:-$(dirname "$SIGNET_CERTBOT")/python}"
sct_verifies() {
  "$PYTHON" "$here/verify_sct.py" --cert "$1" --issuer "${2:-$ISSUING}" --log-url "$CT_URL" --log-key "${3:-$CT_KEY}"
}
# sct_refused CERT: the verifier says no when the issuer key hash or the log key is wrong.
sct_refused() {
  local other
  other=$(openssl ecparam -name prime256v1 -genkey 2>/dev/null | openssl ec -pubout -outform DER 2>/dev/null | base64 -w0)
  if sct_verifies "$1" "$CA_ROOT"; then echo "verified with the root as issuer"; return 1; fi
  if sct_verifies "$1" "$ISSUING" "$other"; then echo "verified with another key"; return 1; fi
}
metric() { curl -fs --cacert "$CA_BUNDLE" "https://127.0.0.1:$ACME_PORT/metrics" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 {print $2}'; }
replacing_orders() { metric acme_orders_replacing_total; }

# --- certbot --------------------------------------------------------------------
CB=(env REQUESTS_CA_BUNDLE="$CA_BUNDLE" "$SIGNET_CERTBOT" --config-dir "$T/certbot/conf" --work-dir "$T/certbot/work"
    --logs-dir "$T/certbot/logs" --non-interactive --server "$DIRECTORY")
cb_obtain() { # certname args...
  local name="$1"; shift
  "${CB[@]}" certonly --agree-tos -m admin@signet.test --cert-name "$name" "$@"
}
cb_live() { echo "$T/certbot/conf/live/$1"; }

check "certbot: http-01 for www.signet.test" \
  cb_obtain www --standalone --http-01-address 127.0.0.1 --http-01-port "$HTTP01_PORT" -d www.signet.test
check "certbot: the http-01 chain verifies for www.signet.test" verify_chain "$(cb_live www)/fullchain.pem" www.signet.test
check "certbot: openssl ocsp says good" expect_ocsp "$(cb_live www)/cert.pem" good
check "certbot: the embedded SCT verifies with ctlogd's key (Python cryptography); the precertificate is in the log at its leaf_index" \
  sct_verifies "$(cb_live www)/cert.pem"
check "certbot: ... and the verifier refuses it for another issuer (key hash) or another log's key" \
  sct_refused "$(cb_live www)/cert.pem"
check "certbot: dns-01 for a wildcard and its base name (manual hooks, real DNS)" \
  cb_obtain wild --manual --preferred-challenges dns \
  --manual-auth-hook "$here/certbot-dns-hook.sh auth" --manual-cleanup-hook "$here/certbot-dns-hook.sh cleanup" \
  -d '*.dns.signet.test' -d dns.signet.test
check "certbot: the dns-01 chain verifies for a name under the wildcard" verify_chain "$(cb_live wild)/fullchain.pem" anything.dns.signet.test
check "certbot: the wildcard certificate's SCT verifies and its precertificate is logged" sct_verifies "$(cb_live wild)/cert.pem"
check "certbot: IP address certificate (RFC 8738, http-01)" \
  cb_obtain ip --standalone --http-01-address 127.0.0.1 --http-01-port "$HTTP01_PORT" --ip-address 127.0.0.1
check "certbot: the IP chain verifies for 127.0.0.1" verify_chain "$(cb_live ip)/fullchain.pem" 127.0.0.1
check "certbot: revoke (keyCompromise)" \
  "${CB[@]}" revoke --cert-path "$(cb_live www)/cert.pem" --reason keycompromise --no-delete-after-revoke
check "certbot: openssl ocsp says revoked" expect_ocsp "$(cb_live www)/cert.pem" revoked
check "certbot: the CRL lists the revoked certificate" in_crl "$(cb_live www)/cert.pem"
# certbot 5.8 asks ARI (renewalInfo) when deciding to renew; it does not send
# `replaces` (lego does, below). A revoked certificate's window is now.
ari_before=$(metric acme_renewal_info_answered_total)
serial_before=$(openssl x509 -in "$(cb_live www)/cert.pem" -noout -serial)
check "certbot: renew (not forced) of the revoked certificate" \
  "${CB[@]}" renew --no-random-sleep-on-renew --cert-name www --standalone --http-01-address 127.0.0.1 --http-01-port "$HTTP01_PORT"
check "certbot: the renewal is a new certificate" test "$serial_before" != "$(openssl x509 -in "$(cb_live www)/cert.pem" -noout -serial)"
check "certbot: certbot asked acmed's renewalInfo (ARI)" test "$(metric acme_renewal_info_answered_total)" -gt "${ari_before:-0}"
check "certbot: the renewed certificate is good" expect_ocsp "$(cb_live www)/cert.pem" good

# --- lego -----------------------------------------------------------------------
LG=(env LEGO_CA_CERTIFICATES="$CA_BUNDLE" "$SIGNET_LEGO" --server "$DIRECTORY" --accept-tos -m admin@signet.test --path "$T/lego")
lg_cert() { echo "$T/lego/certificates/$1.crt"; }
check "lego: http-01 for web.signet.test" \
  "${LG[@]}" --domains web.signet.test --http --http.port "127.0.0.1:$HTTP01_PORT" run
check "lego: the http-01 chain verifies" verify_chain "$(lg_cert web.signet.test)" web.signet.test
check "lego: the embedded SCT verifies and the precertificate is logged" sct_verifies "$(lg_cert web.signet.test)"
check "lego: tls-alpn-01 for tls.signet.test" \
  "${LG[@]}" --domains tls.signet.test --tls --tls.port "127.0.0.1:$TLSALPN01_PORT" run
check "lego: the tls-alpn-01 chain verifies" verify_chain "$(lg_cert tls.signet.test)" tls.signet.test
check "lego: dns-01 through the real DNS server (exec provider)" \
  env EXEC_PATH="$here/lego-dns-exec.sh" EXEC_PROPAGATION_TIMEOUT=20 EXEC_POLLING_INTERVAL=1 EXEC_SEQUENCE_INTERVAL=1 \
  "${LG[@]}" --domains lego-dns.signet.test --dns exec --dns.resolvers "127.0.0.1:$DNS_PORT" \
  --dns.propagation-disable-ans --dns.propagation-rns run
check "lego: the dns-01 chain verifies" verify_chain "$(lg_cert lego-dns.signet.test)" lego-dns.signet.test
check "lego: IP address certificate with tls-alpn-01" \
  "${LG[@]}" --domains 127.0.0.1 --tls --tls.port "127.0.0.1:$TLSALPN01_PORT" run
check "lego: the IP chain verifies" verify_chain "$(lg_cert 127.0.0.1)" 127.0.0.1
before=$(replacing_orders)
serial_before=$(openssl x509 -in "$(lg_cert web.signet.test)" -noout -serial)
check "lego: renew sends ARI replaces" \
  "${LG[@]}" --domains web.signet.test --http --http.port "127.0.0.1:$HTTP01_PORT" renew --days 3650 --no-random-sleep
check "lego: the renewal is a new certificate" test "$serial_before" != "$(openssl x509 -in "$(lg_cert web.signet.test)" -noout -serial)"
check "lego: acmed counted an order replacing a certificate" test "$(replacing_orders)" -gt "${before:-0}"
check "lego: revoke" "${LG[@]}" --domains tls.signet.test revoke --keep
check "lego: openssl ocsp says revoked" expect_ocsp "$(lg_cert tls.signet.test)" revoked
check "lego: the CRL lists the revoked certificate" in_crl "$(lg_cert tls.signet.test)"

# --- external account binding -------------------------------------------------------
ctl() { SIGNET_ACMED_SOCKET="$ADMIN_SOCKET" "$SIGNET_BIN_DIR/signetctl" "$@"; }
eab_create() { ctl --json acme eab create --note "$1" > "$T/eab-$1.json"; } # NOTE
eab() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$T/eab-$1.json" "$2"; } # NOTE FIELD
eab_bound() { # NOTE: the key now names the account it bound
  ctl --json acme eab show "$(eab "$1" key_id)" |
    python3 -c 'import json,sys; a=json.load(sys.stdin)["bound_account"]; print(a); sys.exit(0 if a else 1)'
}
check "signetctl: an EAB key for certbot" eab_create certbot
check "certbot: register bound with it (--eab-kid, --eab-hmac-key)" \
  env REQUESTS_CA_BUNDLE="$CA_BUNDLE" "$SIGNET_CERTBOT" --config-dir "$T/certbot-eab/conf" --work-dir "$T/certbot-eab/work" \
  --logs-dir "$T/certbot-eab/logs" --non-interactive --server "$DIRECTORY" \
  register --agree-tos -m eab@signet.test --eab-kid "$(eab certbot key_id)" --eab-hmac-key "$(eab certbot hmac_key)"
check "signetctl: certbot's EAB key is bound to its account" eab_bound certbot
check "signetctl: an EAB key for lego" eab_create lego
check "lego: http-01 with an account bound by it (--eab --kid --hmac)" \
  env LEGO_CA_CERTIFICATES="$CA_BUNDLE" "$SIGNET_LEGO" --server "$DIRECTORY" --accept-tos -m eab@signet.test --path "$T/lego-eab" \
  --eab --kid "$(eab lego key_id)" --hmac "$(eab lego hmac_key)" --domains eab.signet.test --http --http.port "127.0.0.1:$HTTP01_PORT" run
check "signetctl: lego's EAB key is bound to its account" eab_bound lego

echo "acme interop: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
