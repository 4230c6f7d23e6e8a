#!/usr/bin/env bash
# Adds or removes one `NAME TXT "VALUE"` line of a signet-testdns zone file.
#
#   zone-txt.sh add|remove ZONE NAME VALUE
#
# Atomic: edits are serialised by a lock (flock on ZONE.lock) and written to a
# temporary file beside ZONE, then renamed over it, so signet-testdns never
# reads half an edit and concurrent hooks do not lose each other's lines.
# NAME is case-insensitive and may end in a dot; `add` of a line already there
# and `remove` of one that is not are no-ops. Other lines are kept as they are.
set -euo pipefail

usage() { echo "usage: $0 add|remove ZONE NAME VALUE" >&2; exit 2; }
[ $# -eq 4 ] || usage
op=$1 zone=$2 value=$4
case $op in add | remove) ;; *) usage ;; esac
name=$(printf '%s' "$3" | tr '[:upper:]' '[:lower:]')
name=${name%.}
# An ACME TXT value is base64url; refuse anything the zone format would need to quote.
if ! [[ $name =~ ^[a-z0-9_*.-]+$ ]]; then echo "$0: bad name '$3'" >&2; exit 2; fi
if ! [[ $value =~ ^[A-Za-z0-9._~+/=:-]+$ ]]; then echo "$0: bad TXT value '$value'" >&2; exit 2; fi

dir=$(dirname "$zone")
exec 9>>"$zone.lock"
flock 9
tmp=$(mktemp "$dir/.zone-txt.XXXXXX")
trap 'rm -f "$tmp"' EXIT
[ -e "$zone" ] || : >"$zone"

# Copies the zone without this record (matched as signet-testdns matches it).
awk -v n="$name" -v v="$value" '
  { owner = tolower($1); sub(/\.$/, "", owner) }
  NF == 3 && owner == n && toupper($2) == "TXT" && ($3 == "\"" v "\"" || $3 == v) { next }
  { print }
' "$zone" >"$tmp"
if [ "$op" = add ]; then
  printf '%s TXT "%s"\n' "$name" "$value" >>"$tmp"
fi
chmod 0644 "$tmp"
mv -f "$tmp" "$zone"
trap - EXIT
echo "zone-txt: $op $name TXT \"$value\" ($zone)" >&2
