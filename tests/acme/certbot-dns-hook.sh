#!/usr/bin/env bash
# certbot's manual dns-01 hooks against signet-testdns: publish and withdraw
# `_acme-challenge.DOMAIN TXT "VALIDATION"` in the zone file SIGNET_TESTDNS_ZONE.
#
#   certbot certonly --manual --preferred-challenges dns \
#     --manual-auth-hook    "tests/acme/certbot-dns-hook.sh auth" \
#     --manual-cleanup-hook "tests/acme/certbot-dns-hook.sh cleanup" ...
#
# certbot sets CERTBOT_DOMAIN and CERTBOT_VALIDATION. Without an argument the
# hook is a cleanup when CERTBOT_AUTH_OUTPUT is set (certbot sets it for cleanup
# hooks only), else an auth.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SIGNET_TESTDNS_ZONE:?set SIGNET_TESTDNS_ZONE to the signet-testdns zone file}"
: "${CERTBOT_DOMAIN:?certbot sets CERTBOT_DOMAIN}"
: "${CERTBOT_VALIDATION:?certbot sets CERTBOT_VALIDATION}"

action=${1:-}
if [ -z "$action" ]; then
  if [ -n "${CERTBOT_AUTH_OUTPUT+set}" ]; then action=cleanup; else action=auth; fi
fi
case $action in
  auth) op=add ;;
  cleanup) op=remove ;;
  *) echo "usage: $0 [auth|cleanup]" >&2; exit 2 ;;
esac
# A wildcard's authorization is for the base name; strip "*." should it come through.
exec "$here/zone-txt.sh" "$op" "$SIGNET_TESTDNS_ZONE" "_acme-challenge.${CERTBOT_DOMAIN#\*.}" "$CERTBOT_VALIDATION"
