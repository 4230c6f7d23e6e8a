#!/usr/bin/env bash
# lego's `--dns exec` program against signet-testdns: lego runs
# `EXEC_PATH present FQDN VALUE` and `EXEC_PATH cleanup FQDN VALUE` (FQDN is
# `_acme-challenge.DOMAIN.`); this publishes and withdraws `FQDN TXT "VALUE"`
# in the zone file SIGNET_TESTDNS_ZONE.
#
#   EXEC_PATH=tests/acme/lego-dns-exec.sh EXEC_SEQUENCE_INTERVAL=1 \
#   lego --dns exec --dns.resolvers 127.0.0.1:PORT --dns.propagation-disable-ans ...
#
# Only lego's default mode: EXEC_MODE=RAW passes a token, not the TXT value.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SIGNET_TESTDNS_ZONE:?set SIGNET_TESTDNS_ZONE to the signet-testdns zone file}"

usage() { echo "usage: $0 present|cleanup FQDN VALUE (EXEC_MODE=RAW is not supported)" >&2; exit 2; }
[ $# -eq 3 ] || usage
case $1 in
  present) op=add ;;
  cleanup) op=remove ;;
  *) usage ;;
esac
exec "$here/zone-txt.sh" "$op" "$SIGNET_TESTDNS_ZONE" "$2" "$3"
