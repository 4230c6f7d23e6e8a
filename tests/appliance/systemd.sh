#!/usr/bin/env bash
# The appliance as docs/operations.md installs it, under a real systemd: PID 1 of
# a container (systemd-nspawn, its own network namespace) whose root is an
# overlay of this host's, so that scripts/install --prefix /usr writes to a
# throw-away layer and nothing of the host changes. Every step asserted:
#
#   1. scripts/install --no-build --prefix /usr into the container's root; the
#      container boots (systemd as PID 1, basic.target).
#   2. As docs/operations.md says: systemd-sysusers and systemd-tmpfiles
#      --create make the system users and groups and /run/signet,
#      /var/lib/signet; signd.socket starts and the first connection starts
#      signd.service (socket activation) as user signd; `signetctl setup` (the
#      system path: every daemon's role names its own user, acmed's key from
#      its credential) asks for signd's restart; after `systemctl restart
#      signd` and ocspd's sockets, setup's second run completes.
#   3. `systemctl enable --now signet.target` starts every daemon: each one
#      Type=notify and active (READY=1 reached), running as its own user, its
#      state directory made by systemd and owned by that user; signd, ocspd,
#      ctlogd and tokend in a network namespace of their own
#      (PrivateNetwork=yes) serving their activated listeners; acmed's TLS key
#      read from the credential systemd loaded.
#   4. The appliance at work through the units' sockets: certbot obtains a
#      certificate from acmed on 443 (http-01, an SCT from ctlogd embedded);
#      `openssl ocsp` on port 80 says good; ctlogd's get-sth on 8090 has it
#      logged; tokend, its issuer https://signet.test:8443 (a certificate setup
#      had the CA issue), gives a token verified against its JWKS; probed's
#      /api/checks are all up.
#   5. Operations: `systemctl reload` of signd, ctlogd, tokend, probed keeps
#      each process (SIGHUP) and it keeps answering; past WatchdogSec (30 s)
#      no daemon was restarted (the watchdog was fed) and none logged a
#      failure; `systemctl stop signet.target` stops every daemon cleanly
#      (Result=success, exit status 0).
#
# Needs root (mount, systemd-nspawn from systemd-container), SIGNET_CERTBOT
# (ensure_certbot) and SIGNET_BIN_DIR, CARGO_TARGET_DIR (scripts/lib.sh) with
# the release binaries built. KEEP=1 keeps the directory (the container's
# upper layer is on a tmpfs and goes with it).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SIGNET_CERTBOT:?run ensure_certbot from scripts/lib.sh first}"
: "${SIGNET_BIN_DIR:?source scripts/lib.sh first}"

# shellcheck source=../lib/stack.sh
. "$here/../lib/stack.sh"
stack_tmp systemd
C="$T/ct"              # a tmpfs: the overlay's upper and work directories, and its mount point
ROOT="$C/root"         # the container's root: this host's / with a writable layer over it
NSPAWN=""
LEADER=""
DAEMONS=(signd ocspd acmed ctlogd tokend probed)
ISOLATED=(signd ocspd ctlogd tokend)   # PrivateNetwork=yes in their units

container_cleanup() {
  if [ -n "$NSPAWN" ] && kill -0 "$NSPAWN" 2>/dev/null; then
    [ -z "$LEADER" ] || kill -RTMIN+4 "$LEADER" 2>/dev/null || true   # systemd: poweroff
    for _ in $(seq 1 100); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$NSPAWN" 2>/dev/null || true
    wait "$NSPAWN" 2>/dev/null || true
  fi
  if [ "${KEEP:-0}" = 1 ] && mountpoint -q "$C"; then cp -a "$C/up" "$T/upper" 2>/dev/null || true; fi
  ! mountpoint -q "$ROOT" || umount -l "$ROOT" || true
  ! mountpoint -q "$C" || umount -l "$C" || true
  stack_cleanup
}
trap container_cleanup EXIT

# in_ct CMD...: CMD inside the container (its mount, UTS, IPC, network and PID namespaces, its
# root), with a clean environment.
in_ct() {
  nsenter -t "$LEADER" -m -u -i -n -p -r -w env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 "$@"
}
eventually() { # SECONDS CMD...
  local deadline=$((SECONDS + $1)); shift
  until "$@" > /dev/null 2>&1; do [ $SECONDS -lt "$deadline" ] || { "$@"; return 1; }; sleep 0.2; done
}
prop() { in_ct systemctl show -P "$2" "$1"; }   # unit property

# --- 1. the container's root, the install, the boot ----------------------------------------
[ "$(id -u)" = 0 ] || { echo "systemd.sh: needs root (mount, systemd-nspawn)"; exit 1; }
mkdir -p "$C"
mount -t tmpfs -o size=3g,mode=0755 signet-ct "$C"
mkdir "$C/up" "$C/work" "$ROOT"
# The upper layer is on another filesystem than /, so the layers do not overlap; the lower
# layer shows / without the filesystems mounted on it (/proc, /sys, /dev, /run and this tmpfs).
mount -t overlay signet-ct -o "lowerdir=/,upperdir=$C/up,workdir=$C/work" "$ROOT"
systemd-id128 new > "$ROOT/etc/machine-id"
printf '127.0.0.1 signet.test www.signet.test\n' >> "$ROOT/etc/hosts"
INSTALL=(env CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(dirname "$SIGNET_BIN_DIR")}" "$stack_root/scripts/install"
  --no-build --prefix /usr --destdir "$ROOT")
check "scripts/install --no-build --prefix /usr into the container's root" "${INSTALL[@]}"

# basic.target: sockets, timers and sysinit, none of the host's services (its nginx would
# take port 80). --keep-unit --register=no: no machined on this host.
systemd-nspawn -D "$ROOT" --private-network --register=no --keep-unit --quiet -M "signet-test-$$" \
  -b -- systemd.unit=basic.target > "$T/boot.log" 2>&1 &
NSPAWN=$!
booted() {
  local p
  for p in $(pgrep -P "$NSPAWN"); do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = systemd ] && LEADER=$p; done
  [ -n "$LEADER" ] || { tail -5 "$T/boot.log"; return 1; }
  local s; s=$(in_ct systemctl is-system-running 2>&1) || true
  echo "system: $s"
  [ "$s" = running ] || [ "$s" = degraded ]
}
check "the container boots: systemd is its PID 1, in a network namespace of its own" eventually 60 booted
[ -n "$LEADER" ] || { echo "no container: stopping here"; exit 1; }

# --- 2. the documented setup ---------------------------------------------------------------
sysusers() {
  in_ct systemd-sysusers && in_ct systemd-tmpfiles --create && in_ct systemctl daemon-reload || return 1
  local u
  for u in "${DAEMONS[@]}"; do in_ct id "$u" || return 1; done
  in_ct getent group signet-clients signet-admin &&
    [ "$(in_ct stat -c '%a %U' /run/signet /var/lib/signet)" = "$(printf '755 root\n755 root')" ]
}
check "systemd-sysusers, systemd-tmpfiles --create: a user per daemon, signet-clients, signet-admin, /run/signet, /var/lib/signet" sysusers

# A DNS server for acmed's lookups (www.signet.test), as a unit of the container's.
printf 'signet.test A 127.0.0.1\n*.signet.test A 127.0.0.1\n' > "$ROOT/etc/signet-test.zone"
dns() {
  in_ct systemd-run --unit=signet-testdns --quiet "$SIGNET_BIN_DIR/signet-testdns" --listen 127.0.0.1:53 \
    --zone /etc/signet-test.zone
}
check "a test DNS server for signet.test in the container (systemd-run)" dns

signd_up() {
  in_ct systemctl start signd.socket || return 1
  eventually 20 in_ct signetctl health || return 1
  [ "$(prop signd.service ActiveState)" = active ] && [ "$(prop signd.service TriggeredBy)" = signd.socket ] &&
    in_ct ps -o user= -p "$(prop signd.service MainPID)" | grep -qx signd
}
check "systemctl start signd.socket; the first connection starts signd.service (user signd)" signd_up

SETUP=(signetctl --json setup --hostname signet.test --dns-resolver 127.0.0.1:53 --http01-port 5002)
field() { python3 -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print(v if not isinstance(v, list) else len(v))' "$@"; }
setup_first() {
  in_ct "${SETUP[@]}" > "$T/setup1.json" || { cat "$T/setup1.json"; return 1; }
  cat "$T/setup1.json"
  [ "$(field complete < "$T/setup1.json")" = False ] && grep -q 'restart signd' "$T/setup1.json" &&
    in_ct grep -q '^\[roles\.ctlogd\]' /etc/signet/signd.toml
}
check "signetctl setup (first run, the system path): keys in signd, the CA, the configs; asks for signd's restart" setup_first
restart_signd() {
  local before; before=$(prop signd.service MainPID)
  in_ct systemctl restart signd && [ "$(prop signd.service MainPID)" != "$before" ] && in_ct signetctl health &&
    in_ct systemctl start ocspd.socket ocspd-http.socket &&
    eventually 20 in_ct curl -fs http://127.0.0.1/crl/signet.crl -o /dev/null
}
check "systemctl restart signd; ocspd's sockets started; the first CRL request starts ocspd" restart_signd
setup_second() {
  in_ct "${SETUP[@]}" > "$T/setup2.json" || { cat "$T/setup2.json"; return 1; }
  cat "$T/setup2.json"
  [ "$(field complete < "$T/setup2.json")" = True ] &&
    [ "$(in_ct stat -c '%a %U' /etc/signet/acmed/tls-key.pem)" = "600 root" ]
}
check "signetctl setup (second run): acmed's TLS certificate; complete" setup_second
configs() {
  local d
  for d in signd ocspd ctlogd tokend probed; do
    in_ct "/usr/libexec/signet/$d" --config "/etc/signet/$d.toml" --check-config || return 1
  done
}
# acmed.toml names its key where acmed.service receives it, a credential: its start checks it.
check "every config but acmed's passes its daemon's --check-config" configs

# --- 3. every daemon under systemd ----------------------------------------------------------
START=$SECONDS
all_started() {
  in_ct systemctl enable --now signet.target || return 1
  local d
  for d in "${DAEMONS[@]}"; do
    eventually 30 test "$(prop "$d.service" ActiveState)" = active || { in_ct systemctl status "$d" --no-pager; return 1; }
  done
}
check "systemctl enable --now signet.target: every daemon active" all_started
as_units_say() {
  local d pid net1 net
  net1=$(in_ct readlink /proc/1/ns/net)
  for d in "${DAEMONS[@]}"; do
    pid=$(prop "$d.service" MainPID)
    [ "$(prop "$d.service" Type)" = notify ] && [ "$(prop "$d.service" WatchdogUSec)" = 30s ] ||
      { echo "$d: Type $(prop "$d.service" Type), watchdog $(prop "$d.service" WatchdogUSec)"; return 1; }
    [ "$(in_ct ps -o user= -p "$pid")" = "$d" ] || { echo "$d runs as $(in_ct ps -o user= -p "$pid")"; return 1; }
    [ "$(in_ct stat -c %U "/var/lib/signet/$d")" = "$d" ] || { echo "/var/lib/signet/$d not $d's"; return 1; }
    net=$(in_ct readlink "/proc/$pid/ns/net")
    if printf '%s\n' "${ISOLATED[@]}" | grep -qx "$d"; then
      [ "$net" != "$net1" ] || { echo "$d shares the host network"; return 1; }
    else
      [ "$net" = "$net1" ] || { echo "$d has no network"; return 1; }
    fi
    echo "$d: pid $pid, user $d, network $net"
  done
  in_ct test -s /run/credentials/acmed.service/tls-key
}
check "each daemon Type=notify with WatchdogSec=30s, as its own user, its state directory its own; signd, ocspd, ctlogd, tokend in a network namespace of their own; acmed's key a credential" as_units_say

# --- 4. the appliance at work --------------------------------------------------------------
LIVE=/root/certbot/conf/live/signet
certbot() {
  in_ct env REQUESTS_CA_BUNDLE=/etc/signet/ca/root.pem "$SIGNET_CERTBOT" --config-dir /root/certbot/conf \
    --work-dir /root/certbot/work --logs-dir /root/certbot/logs --non-interactive \
    --server https://signet.test/directory certonly --agree-tos -m admin@signet.test --cert-name signet \
    --standalone --http-01-address 127.0.0.1 --http-01-port 5002 -d www.signet.test &&
    in_ct openssl verify -CAfile /etc/signet/ca/root.pem -untrusted /etc/signet/ca/chain.pem \
      -verify_hostname www.signet.test "$LIVE/fullchain.pem" &&
    in_ct openssl x509 -in "$LIVE/cert.pem" -noout -text | grep -q 'CT Precertificate SCTs'
}
check "certbot obtains www.signet.test from acmed on 443 (http-01), its chain to the CA's root, an SCT from ctlogd in it" certbot
ocsp_good() {
  in_ct openssl ocsp -issuer /etc/signet/ca/issuing.pem -cert "$LIVE/cert.pem" -url http://127.0.0.1/ocsp \
    -CAfile /etc/signet/ca/chain.pem -no_nonce > "$T/ocsp.txt" 2>&1
  cat "$T/ocsp.txt"
  grep -q ": good" "$T/ocsp.txt" && grep -q "Response verify OK" "$T/ocsp.txt"
}
check "openssl ocsp on port 80 says good (response verified)" ocsp_good
sth() {
  in_ct curl -fs http://127.0.0.1:8090/signet/ct/v1/get-sth > "$T/sth.json" && cat "$T/sth.json" &&
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if s["tree_size"] >= 1 else 1)' "$T/sth.json"
}
check "ctlogd's get-sth on 8090: the precertificate logged" eventually 10 sth
token() {
  in_ct signetctl --json oauth client create svc --auth-method client_secret_basic --scope signet.read \
    --audience https://api.signet.test > "$T/client.json" || { cat "$T/client.json"; return 1; }
  local secret; secret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$T/client.json")
  local tls=(curl -fs --cacert /etc/signet/ca/root.pem)
  in_ct "${tls[@]}" https://signet.test:8443/.well-known/oauth-authorization-server > "$T/meta.json" || return 1
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["issuer"], m["token_endpoint"]); sys.exit(0 if m["issuer"] == "https://signet.test:8443" else 1)' "$T/meta.json" || return 1
  in_ct "${tls[@]}" -u "svc:$secret" -d grant_type=client_credentials https://signet.test:8443/token > "$T/token.json" &&
    in_ct "${tls[@]}" https://signet.test:8443/jwks > "$T/jwks.json" || return 1
  [ "$(in_ct stat -c '%a %U %G' /etc/signet/tokend/tls-key.pem)" = "640 root tokend" ] || return 1
  python3 "$stack_root/tests/lib/es256_token.py" "$T/token.json" "$T/jwks.json"
}
check "tokend: a client (signetctl oauth over its admin socket); its issuer https://signet.test:8443 (setup's certificate from the CA, its key readable by group tokend); a client_credentials token over HTTPS verified against its JWKS" token
all_up() {
  in_ct curl -fs http://127.0.0.1:8095/api/checks > "$T/checks.json" || return 1
  python3 "$stack_root/tests/lib/checks_up.py" "$T/checks.json" signd ocspd ctlogd tokend acmed acmed_tls signet_ocsp signet_crl signet_ct
}
check "probed's /api/checks on 8095: every check up (each daemon, acmed's TLS, the CA's OCSP and CRL, the CT log)" eventually 60 all_up

# --- 5. operations -------------------------------------------------------------------------
reloads() {
  local d before
  for d in signd ctlogd tokend probed; do
    before=$(prop "$d.service" MainPID)
    in_ct systemctl reload "$d" || return 1
    [ "$(prop "$d.service" MainPID)" = "$before" ] && [ "$(prop "$d.service" ActiveState)" = active ] ||
      { echo "$d after reload: pid $(prop "$d.service" MainPID), $(prop "$d.service" ActiveState)"; return 1; }
  done
  in_ct signetctl health && eventually 10 sth && eventually 10 in_ct curl -fs http://127.0.0.1:8095/healthz
}
check "systemctl reload signd, ctlogd, tokend, probed: the same processes, still answering" reloads
watchdog() {
  local wait=$((START + 40 - SECONDS)) d
  [ "$wait" -le 0 ] || sleep "$wait"
  for d in "${DAEMONS[@]}"; do
    [ "$(prop "$d.service" NRestarts)" = 0 ] && [ "$(prop "$d.service" ActiveState)" = active ] ||
      { echo "$d: $(prop "$d.service" NRestarts) restarts, $(prop "$d.service" ActiveState)"; return 1; }
  done
  ! in_ct journalctl --no-pager -q -u 'signd*' -u 'ocspd*' -u 'acmed*' -u 'ctlogd*' -u 'tokend*' -u 'probed*' |
    grep -Ei 'watchdog timeout|failed with result|core-dump'
}
check "past WatchdogSec (40 s after start): no daemon restarted, no watchdog timeout in the journal" watchdog
journal() {
  local d
  for d in "${DAEMONS[@]}"; do in_ct journalctl --no-pager -q -u "$d" | grep -q . || { echo "no journal for $d"; return 1; }; done
}
check "each daemon logs to the journal" journal
stopped() {
  in_ct systemctl stop signet.target || return 1
  local d
  for d in "${DAEMONS[@]}"; do
    [ "$(prop "$d.service" ActiveState)" = inactive ] && [ "$(prop "$d.service" Result)" = success ] &&
      [ "$(prop "$d.service" ExecMainStatus)" = 0 ] ||
      { echo "$d: $(prop "$d.service" ActiveState) $(prop "$d.service" Result) status $(prop "$d.service" ExecMainStatus)"; return 1; }
  done
}
check "systemctl stop signet.target: every daemon stopped cleanly (Result=success, exit status 0)" stopped

echo
echo "systemd: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
