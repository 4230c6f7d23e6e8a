#!/usr/bin/env bash
# CT interop: real Certificate Transparency clients against the ctlogd that
# scripts/run starts (in a throw-away state directory on free loopback ports).
#
#   - ctclient (certificate-transparency-go): get-roots; upload of certificate
#     chains issued by the demo CA (ctclient verifies each SCT against the
#     log's public key); get-sth (STH signature verified); get-entries;
#     get-inclusion-proof for an uploaded chain (the proof verified against the
#     STH); get-consistency-proof between two tree sizes (verified).
#   - dedup: the same chain submitted again gets the same SCT.
#   - roots reload: a chain to a new root is refused, accepted after the root
#     is added to ctlogd's config and ctlogd gets SIGHUP.
#   - TesseraCT's fsck re-hashes every tile of the Static CT API view of the
#     same log and checks the checkpoint's signature; a second reader on
#     Sunlight's client library reads every entry and issuer from the tiles
#     and checks each SCT's inclusion.
#   - signetctl ct list / verify / consistency / inclusion, and verify
#     catching a corrupted tile.
#   - bad input gets 4xx with a reason, never a 5xx, and the log keeps serving.
#
# Needs SIGNET_CTCLIENT and SIGNET_CT_FSCK (scripts/lib.sh: ensure_ct_tools)
# and SIGNET_BIN_DIR (scripts/lib.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SIGNET_CTCLIENT:?run ensure_ct_tools from scripts/lib.sh first}"
: "${SIGNET_CT_FSCK:?run ensure_ct_tools from scripts/lib.sh first}"
: "${SIGNET_SUNLIGHT_READER:?run ensure_ct_tools from scripts/lib.sh first}"
: "${SIGNET_BIN_DIR:?source scripts/lib.sh first}"
N_CERTS="${SIGNET_CT_INTEROP_CERTS:-40}"

# shellcheck source=../lib/stack.sh
. "$here/../lib/stack.sh"
stack_tmp ct

# --- the stack, as scripts/run starts it ---------------------------------------
stack_start ctlogd
LOG_URL=$(ep '["ctlogd"]["url"]')
PUBKEY_B64=$(ep '["ctlogd"]["public_key"]')
ORIGIN=$(ep '["ctlogd"]["origin"]')
CT_CONFIG=$(ep '["ctlogd"]["config"]')
CA_ROOT=$(ep '["ca"]["root"]')
CA_ISSUING=$(ep '["ca"]["issuing"]')
# shellcheck disable=SC1091
. "$T/state/env"
CTLOGD_PID=$(cat "$T/state/run/ctlogd.pid")
echo "ctlogd up: $LOG_URL (origin $ORIGIN)"

{ echo "-----BEGIN PUBLIC KEY-----"; echo "$PUBKEY_B64" | fold -w 64; echo "-----END PUBLIC KEY-----"; } > "$T/log.pem"
ct() { "$SIGNET_CTCLIENT" "$1" --log_uri "${LOG_URL%/}" --pub_key "$T/log.pem" "${@:2}"; }

# issue N: a certificate from the demo CA, its chain (leaf, issuing CA, root) in $T/chain-N.pem.
issue() {
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/key-$1.pem" \
    -subj "/CN=ct$1.signet.test" -addext "subjectAltName=DNS:ct$1.signet.test" -out "$T/csr-$1.pem" 2>/dev/null
  signetctl cert issue --csr "$T/csr-$1.pem" --out "$T/leaf-$1.pem" >/dev/null 2>&1
  cat "$T/leaf-$1.pem" "$CA_ISSUING" "$CA_ROOT" > "$T/chain-$1.pem"
}
# add_chain FILE [ENDPOINT]: POSTs the chain's certificates as RFC 6962 JSON; prints the HTTP status, body in $T/resp.json.
add_chain() {
  python3 - "$1" > "$T/body.json" <<'PY'
import base64, re, sys
pems = re.findall(rb"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", open(sys.argv[1], "rb").read(), re.S)
print('{"chain":[%s]}' % ",".join('"%s"' % base64.b64encode(base64.b64decode(p)).decode() for p in pems))
PY
  curl -s -o "$T/resp.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$T/body.json" \
    "${LOG_URL}ct/v1/${2:-add-chain}"
}
sth_size() { curl -fs "${LOG_URL}ct/v1/get-sth" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tree_size"])'; }
sth_field() { curl -fs "${LOG_URL}ct/v1/get-sth" | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
wait_size() { # N: until the published tree has at least N entries (MMD is far longer; batches close in 100 ms)
  for _ in $(seq 1 100); do [ "$(sth_size)" -ge "$1" ] && return 0; sleep 0.1; done
  echo "tree size $(sth_size), expected >= $1"; return 1
}

# --- RFC 6962 with ctclient -------------------------------------------------------
check "ctclient get-roots lists the demo root" bash -c "
  $(declare -f ct); LOG_URL='$LOG_URL' T='$T' SIGNET_CTCLIENT='$SIGNET_CTCLIENT'
  ct get-roots > '$T/roots.txt' 2>&1 && grep -q 'Subject: CN=Signet Demo Root CA' '$T/roots.txt'"

for i in $(seq 1 "$N_CERTS"); do issue "$i"; done
upload_all() {
  for i in $(seq 1 "$N_CERTS"); do
    ct upload --cert_chain "$T/chain-$i.pem" > "$T/upload-$i.txt" 2>&1 || { cat "$T/upload-$i.txt"; return 1; }
  done
}
check "ctclient upload: $N_CERTS chains from the demo CA, each SCT verified by ctclient" upload_all

dedup() {
  local first second
  first=$(add_chain "$T/chain-1.pem"); cp "$T/resp.json" "$T/sct-1a.json"
  second=$(add_chain "$T/chain-1.pem"); cp "$T/resp.json" "$T/sct-1b.json"
  [ "$first" = 200 ] && [ "$second" = 200 ] && cmp "$T/sct-1a.json" "$T/sct-1b.json"
  # ... and it is the SCT ctclient got at its upload (same timestamp).
  local ts
  ts=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["timestamp"])' "$T/sct-1a.json")
  grep -q "$ts" "$T/upload-1.txt"
}
check "dedup: a chain submitted again gets its first SCT" dedup

check "tree integrates all $N_CERTS entries" wait_size "$N_CERTS"
check "ctclient get-sth (signature verified)" ct get-sth
check "ctclient get-entries 0..$((N_CERTS - 1))" bash -c "
  $(declare -f ct); LOG_URL='$LOG_URL' T='$T' SIGNET_CTCLIENT='$SIGNET_CTCLIENT'
  ct get-entries --first 0 --last $((N_CERTS - 1)) > '$T/entries.txt' 2>&1
  [ \$(grep -c '^Index=' '$T/entries.txt') -eq $N_CERTS ] || { cat '$T/entries.txt' | head -20; exit 1; }"

inclusion() { # i: the inclusion of chain i, with its SCT's timestamp and extensions (the leaf_index)
  add_chain "$T/chain-$1.pem" >/dev/null
  local ts ext
  ts=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["timestamp"])' "$T/resp.json")
  ext=$(python3 -c 'import base64,json,sys; print(base64.b64decode(json.load(open(sys.argv[1]))["extensions"]).hex())' "$T/resp.json")
  ct get-inclusion-proof --cert_chain "$T/chain-$1.pem" --timestamp "$ts" --extensions "$ext"
}
check "ctclient get-inclusion-proof for the first, a middle and the last chain (verified)" \
  bash -c "$(declare -f ct add_chain inclusion); LOG_URL='$LOG_URL' T='$T' SIGNET_CTCLIENT='$SIGNET_CTCLIENT'
    inclusion 1 && inclusion $((N_CERTS / 2)) && inclusion $N_CERTS"

# A consistency proof between the tree now and after more entries.
OLD_SIZE=$(sth_size); OLD_HASH=$(sth_field sha256_root_hash)
for i in $(seq $((N_CERTS + 1)) $((N_CERTS + 5))); do issue "$i"; ct upload --cert_chain "$T/chain-$i.pem" >/dev/null 2>&1; done
wait_size $((OLD_SIZE + 5)) >/dev/null
NEW_SIZE=$(sth_size); NEW_HASH=$(sth_field sha256_root_hash)
check "ctclient get-consistency-proof $OLD_SIZE -> $NEW_SIZE (verified)" \
  ct get-consistency-proof --prev_size "$OLD_SIZE" --prev_hash "$OLD_HASH" --size "$NEW_SIZE" --tree_hash "$NEW_HASH"
wrong_hash() { ! ct get-consistency-proof --prev_size "$OLD_SIZE" --prev_hash "$NEW_HASH" --size "$NEW_SIZE" --tree_hash "$NEW_HASH"; }
check "canary: ctclient refuses a consistency proof against a wrong previous hash" wrong_hash

# --- roots reload on SIGHUP --------------------------------------------------------
roots_reload() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/r2.key" -out "$T/r2.pem" \
    -subj "/CN=Second test root" -days 1500 -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/l2.key" -subj "/CN=l2.signet.test" \
    -out "$T/l2.csr" 2>/dev/null
  printf 'subjectAltName=DNS:l2.signet.test\nbasicConstraints=critical,CA:FALSE\n' > "$T/l2.ext"
  openssl x509 -req -in "$T/l2.csr" -CA "$T/r2.pem" -CAkey "$T/r2.key" -days 10 -extfile "$T/l2.ext" \
    -out "$T/l2.pem" 2>/dev/null
  cat "$T/l2.pem" "$T/r2.pem" > "$T/chain-r2.pem"
  local before after
  before=$(add_chain "$T/chain-r2.pem"); echo "before reload: $before $(cat "$T/resp.json")"
  [ "$before" = 400 ] || return 1
  sed -i "s|^roots = \[\(.*\)\]|roots = [\1, \"$T/r2.pem\"]|" "$CT_CONFIG"
  kill -HUP "$CTLOGD_PID"
  for _ in $(seq 1 50); do
    after=$(add_chain "$T/chain-r2.pem"); [ "$after" = 200 ] && break; sleep 0.1
  done
  echo "after reload: $after $(cat "$T/resp.json")"
  [ "$after" = 200 ]
}
check "roots: a chain to an unknown root gets 400, and 200 once the root is added and ctlogd gets SIGHUP" roots_reload

# --- the next temporal shard, added while the log runs ------------------------------
# The demo log takes NotAfter in [1 Jan this year, 1 Jan the year after next);
# `signetctl ct shard add` adds its successor (key in signd, no restart). A chain
# whose NotAfter is past the demo log's window is refused there and logged by
# the new shard, whose SCT ctclient verifies with the new shard's key.
next_shard() {
  local end next_end days st
  curl -fs "${LOG_URL}log.v3.json" > "$T/demo.v3.json" || return 1
  end=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["temporal_interval"]["end_exclusive"])' \
    "$T/demo.v3.json") || { cat "$T/demo.v3.json"; return 1; }
  next_end="$((${end:0:4} + 2))${end:4}"
  signetctl --json ct shard add --name next --not-after-start "$end" --not-after-end "$next_end" > "$T/next.json" ||
    { cat "$T/next.json"; return 1; }
  NEXT_URL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$T/next.json")
  { echo "-----BEGIN PUBLIC KEY-----"
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["log_list_entry"]["key"])' "$T/next.json" | fold -w 64
    echo "-----END PUBLIC KEY-----"; } > "$T/next.pem"
  signetctl --json ct shard list > "$T/shards.json" && cat "$T/shards.json" || return 1
  python3 - "$T/shards.json" "$end" "$next_end" <<'PY' || return 1
import json, sys
logs = {l["name"]: l for l in json.load(open(sys.argv[1]))["logs"]}
end, next_end = sys.argv[2:]
assert logs["demo"]["not_after_end"] == end and not logs["demo"]["added"], logs["demo"]
n = logs["next"]
assert (n["not_after_start"], n["not_after_end"], n["added"]) == (end, next_end, True), n
PY
  days=$(( ($(date -ud "$end" +%s) - $(date -u +%s)) / 86400 + 30 ))
  openssl x509 -req -in "$T/l2.csr" -CA "$T/r2.pem" -CAkey "$T/r2.key" -days "$days" -extfile "$T/l2.ext" \
    -out "$T/l3.pem" 2>/dev/null && cat "$T/l3.pem" "$T/r2.pem" > "$T/chain-next.pem" || return 1
  st=$(add_chain "$T/chain-next.pem"); echo "demo log: $st $(cat "$T/resp.json")"
  [ "$st" = 400 ] || return 1
  st=$(LOG_URL=$NEXT_URL add_chain "$T/chain-next.pem"); echo "next shard: $st $(cat "$T/resp.json")"
  [ "$st" = 200 ] || return 1
  "$SIGNET_CTCLIENT" upload --log_uri "${NEXT_URL%/}" --pub_key "$T/next.pem" --cert_chain "$T/chain-next.pem"
}
check "signetctl ct shard add: the next temporal shard beside the demo log takes what the demo log's window refuses" \
  next_shard

# --- bad input ---------------------------------------------------------------------
status_of() { curl -s -o "$T/bad.txt" -w '%{http_code}' "$@"; }
bad_input() {
  local s ok=0
  expect() { # want got what
    if [ "$2" = "$1" ]; then echo "ok  $3: $2 $(head -c 120 "$T/bad.txt")"; else echo "BAD $3: got $2, want $1 $(head -c 200 "$T/bad.txt")"; ok=1; fi
  }
  s=$(status_of -H 'Content-Type: application/json' --data-binary 'not json' "${LOG_URL}ct/v1/add-chain"); expect 400 "$s" "garbage JSON"
  s=$(status_of -H 'Content-Type: application/json' --data-binary '{"chain":["AAAA"]}' "${LOG_URL}ct/v1/add-chain"); expect 400 "$s" "a chain that does not parse"
  head -c $((10 * 1024 * 1024)) /dev/zero > "$T/big.bin"
  s=$(status_of -H 'Content-Type: application/json' --data-binary @"$T/big.bin" "${LOG_URL}ct/v1/add-chain"); expect 400 "$s" "a 10 MB body"
  s=$(add_chain "$T/chain-2.pem" add-pre-chain); cp "$T/resp.json" "$T/bad.txt"; expect 400 "$s" "a certificate (no poison) to add-pre-chain"
  # The leaf alone (no issuer): it does not chain to a root.
  s=$(add_chain "$T/leaf-3.pem"); cp "$T/resp.json" "$T/bad.txt"; expect 400 "$s" "a leaf without its issuers"
  s=$(status_of "${LOG_URL}ct/v1/get-entries?start=100000&end=100010"); expect 400 "$s" "get-entries past the tree"
  s=$(status_of "${LOG_URL}ct/v1/get-entries?start=5&end=2"); expect 400 "$s" "get-entries with end < start"
  s=$(status_of --path-as-is "${LOG_URL}tile/../../etc/passwd"); [[ $s == 40[04] ]] && s=4xx; expect 4xx "$s" "a tile path with .."
  s=$(status_of "${LOG_URL}tile/0/x001"); expect 400 "$s" "a malformed tile path"
  s=$(status_of "${LOG_URL}tile/0/999"); expect 404 "$s" "a tile beyond the tree"
  s=$(status_of -X DELETE "${LOG_URL}ct/v1/get-sth"); expect 405 "$s" "DELETE get-sth"
  s=$(status_of "${LOG_URL}ct/v1/get-sth"); expect 200 "$s" "the log still serves"
  return $ok
}
check "bad input: 400/404/405 with a reason, never a 5xx; the log keeps serving" bad_input

# --- the Static CT API view of the same tree -------------------------------------
check "TesseraCT fsck: every tile re-hashed, checkpoint signature verified" \
  "$SIGNET_CT_FSCK" --monitoring_url "$LOG_URL" --origin "$ORIGIN" --public_key "$PUBKEY_B64" --N 4 --ui=false
sunlight_reader() {
  # Every SCT ctclient got (asked again: dedup answers the same SCT), TLS-encoded.
  : > "$T/scts.txt"
  for i in $(seq 1 "$N_CERTS"); do
    add_chain "$T/chain-$i.pem" >/dev/null
    python3 - "$T/resp.json" >> "$T/scts.txt" <<'PY'
import base64, json, sys
r = json.load(open(sys.argv[1]))
ext, sig = base64.b64decode(r["extensions"]), base64.b64decode(r["signature"])
sct = bytes([r["sct_version"]]) + base64.b64decode(r["id"]) + r["timestamp"].to_bytes(8, "big") \
    + len(ext).to_bytes(2, "big") + ext + sig
print(base64.b64encode(sct).decode())
PY
  done
  "$SIGNET_SUNLIGHT_READER" -monitoring "$LOG_URL" -key "$T/log.pem" -scts "$T/scts.txt" | tee "$T/sunlight.txt"
  grep -q "$N_CERTS SCTs verified" "$T/sunlight.txt"
}
check "Sunlight's client: every entry, leaf_index and issuer read from the tiles; each SCT's inclusion checked" sunlight_reader

# --- signetctl ct, the operator's view -----------------------------------------------
check "signetctl ct list: the demo log, its checkpoint verified" bash -c "
  signetctl ct list > '$T/list.txt' && grep -q 'Signet demo log' '$T/list.txt' && grep -q '$(ep '["ctlogd"]["log_id"]')' '$T/list.txt'"
check "signetctl ct verify: every tile, entry and issuer up to the checkpoint" bash -c "
  signetctl ct verify > '$T/verify.txt' && grep -q '^verified [0-9]* entries, root' '$T/verify.txt' && cat '$T/verify.txt'"
check "signetctl ct consistency $OLD_SIZE -> now" bash -c "
  signetctl ct consistency --from $OLD_SIZE | grep -q '^verified consistency from $OLD_SIZE to'"
check "signetctl ct inclusion of leaf 3" bash -c "signetctl ct inclusion --index 3 | grep -q '^verified inclusion of leaf 3'"
corrupt_tile() {
  # A byte of the data tile the checkpoint covers changed on disk (the tree is
  # under 256 entries: one partial tile): verify must fail and name it.
  local tile size
  size=$(sth_size)
  tile="$T/state/ctlogd/demo/tile/data/000.p/$size"
  [ -f "$tile" ] || { echo "no $tile"; ls -R "$T/state/ctlogd/demo/tile/data" | head; return 1; }
  cp "$tile" "$T/tile.bak"
  printf '\xff' | dd of="$tile" bs=1 seek=40 conv=notrunc 2>/dev/null
  local rc=0; signetctl ct verify > "$T/verify-bad.txt" 2>&1 || rc=$?
  cp "$T/tile.bak" "$tile"
  cat "$T/verify-bad.txt"
  [ "$rc" -eq 1 ] && grep -q 'tile/data' "$T/verify-bad.txt"
}
check "canary: signetctl ct verify fails (exit 1) on a corrupted data tile, naming it" corrupt_tile
check "the checkpoint and get-sth are the same tree" bash -c "
  size=\$(curl -fs '${LOG_URL}checkpoint' | sed -n 2p)
  [ \"\$size\" = \"\$(curl -fs '${LOG_URL}ct/v1/get-sth' | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"tree_size\"])')\" ]"

echo "ct interop: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
