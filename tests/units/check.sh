#!/usr/bin/env bash
# Offline checks for units/ (no systemd PID 1 needed; run as root so tmpfiles can chown in its temp root).
#
# Everything runs against a throw-away root directory that looks like an installed host:
#   <root>/etc/systemd/system/        our .service/.socket/.target files
#   <root>/usr/lib/systemd/system/    this host's *.target files (sysinit.target, sockets.target, ...)
#   <root>/usr/lib/sysusers.d/, <root>/usr/lib/tmpfiles.d/   our sysusers.d/tmpfiles.d files
#   stub executables at the Signet install paths (SIGNET_BINARIES), real copies of system tools
#   (e.g. /bin/kill) for any other Exec*= path that exists on this host.
# `systemd-analyze verify --root=` then checks Exec*= paths, unit references and directive syntax
# inside that root. verify exits 0 on unknown keys / unparsable values (it only warns), so any
# output from it counts as a failure. Canary runs on deliberately broken copies prove each check can fail.
#
# Env: MAX_EXPOSURE (default 2.0), KEEP_ROOT=1 to keep the temp root for inspection.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
units_dir=$(cd "$here/../../units" && pwd)
max_exposure=${MAX_EXPOSURE:-2.0}

# The Signet install layout. Only these get stubs: a typo in an ExecStart= path stays missing.
SIGNET_BINARIES=(/usr/libexec/signet/signd /usr/libexec/signet/ocspd /usr/libexec/signet/acmed /usr/libexec/signet/ctlogd /usr/libexec/signet/probed /usr/libexec/signet/tokend /usr/bin/signetctl)
# What sysusers.d/signet.conf must produce.
DAEMON_USERS=(signd acmed ocspd ctlogd tokend probed)
CLIENT_MEMBERS=(acmed ctlogd ocspd probed tokend) # sorted
EXTRA_GROUPS=(signet-clients signet-admin)

passed=0
failed=0
pass() { printf 'PASS  %s\n' "$1"; passed=$((passed + 1)); }
fail() {
    printf 'FAIL  %s\n' "$1"
    if [[ -n ${2-} ]]; then sed 's/^/        /' <<<"$2"; fi
    failed=$((failed + 1))
}
finish() {
    echo "units: $passed passed, $failed failed"
    [[ $failed -eq 0 ]]
}

for tool in systemd-analyze systemd-sysusers systemd-tmpfiles; do
    if ! command -v "$tool" >/dev/null; then
        fail "tool $tool present" "not installed (apt-get install -y systemd)"
        finish || exit 1
    fi
done
echo "units dir: $units_dir ($(systemd-analyze --version | head -n1))"

tmp=$(mktemp -d)
if [[ ${KEEP_ROOT-} == 1 ]]; then echo "temp root kept: $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi

shopt -s nullglob
unit_files=("$units_dir"/*.service "$units_dir"/*.socket "$units_dir"/*.target)
units=()
for f in "${unit_files[@]}"; do units+=("$(basename "$f")"); done
echo "units: ${units[*]}"

# Exec*= paths of all units (prefixes - @ : + ! stripped; bare names are searched in $PATH by systemd).
exec_paths() {
    sed -n 's/^[[:space:]]*Exec[A-Za-z]*=[-@:+!|]*\([^[:space:]]*\).*/\1/p' "${unit_files[@]}" | sort -u
}

# make_root DIR: build the fake installed host described at the top.
make_root() {
    local r=$1 p
    mkdir -p "$r"/etc/systemd/system "$r"/usr/lib/systemd/system "$r"/usr/bin "$r"/usr/sbin \
        "$r"/usr/lib/sysusers.d "$r"/usr/lib/tmpfiles.d
    ln -s usr/bin "$r/bin" # usr-merged, like Debian 12
    ln -s usr/sbin "$r/sbin"
    cp /usr/lib/systemd/system/*.target "$r"/usr/lib/systemd/system/
    cp "${unit_files[@]}" "$r"/etc/systemd/system/
    cp "$units_dir"/sysusers.d/*.conf "$r"/usr/lib/sysusers.d/
    cp "$units_dir"/tmpfiles.d/*.conf "$r"/usr/lib/tmpfiles.d/
    for p in "${SIGNET_BINARIES[@]}"; do
        mkdir -p "$r$(dirname "$p")"
        printf '#!/bin/sh\nexit 0\n' >"$r$p"
        chmod 0755 "$r$p"
    done
    while read -r p; do
        [[ $p == /* && ! -e $r$p && -x $p ]] || continue
        mkdir -p "$r$(dirname "$p")"
        cp -L "$p" "$r$p"
    done < <(exec_paths)
}

# verify_clean ROOT: 0 if systemd-analyze verify exits 0 AND prints nothing; output in $out.
verify_clean() {
    local rc=0
    out=$(systemd-analyze verify --root="$1" "${units[@]}" 2>&1) || rc=$?
    [[ $rc -eq 0 && -z $out ]]
}

# exposure ROOT UNIT: sets $score to the overall exposure number (empty if not found or if
# systemd-analyze failed) and $sec_out to the full output.
exposure() {
    local rc=0
    score=
    sec_out=$(systemd-analyze security --offline=yes --root="$1" "$2" 2>&1) || rc=$?
    if [[ $rc -ne 0 ]]; then sec_out+=$'\n'"(systemd-analyze security exited $rc)"; return 0; fi
    score=$(sed -n "s/.*Overall exposure level for ${2//./\\.}: \([0-9][0-9.]*\).*/\1/p" <<<"$sec_out")
}
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'; }

root=$tmp/root
make_root "$root"

# 1. Unit files verify cleanly inside the fake root.
echo "-- systemd-analyze verify --root=<tmp> ${units[*]}"
echo "   Exec*= paths: $(exec_paths | tr '\n' ' ')"
if verify_clean "$root"; then pass "verify: ${units[*]}"; else fail "verify: ${units[*]}" "$out"; fi

# 2. Canaries: verify must catch a misspelt directive, a missing ExecStart= binary, a dangling unit reference.
canary() { # canary NAME EDIT-COMMAND...
    local name=$1 c=$tmp/canary-$1
    shift
    make_root "$c"
    "$@" "$c"
    if verify_clean "$c"; then
        fail "canary $name: verify did not notice" "$out"
    else
        pass "canary $name: verify rejects it ($(head -n1 <<<"$out"))"
    fi
}
misspell() { sed -i 's/^\[Service\]$/[Service]\nProtectHomee=yes/' "$1/etc/systemd/system/signd.service"; }
no_binary() { rm "$1/usr/libexec/signet/signd"; }
dangling() { sed -i 's/^Requires=signd\.socket$/Requires=signdx.socket/' "$1/etc/systemd/system/signd.service"; }
canary misspelt-key misspell
canary missing-binary no_binary
canary dangling-reference dangling

# 3. sysusers.d parses and creates exactly the expected users and groups.
echo "-- systemd-sysusers --root=<tmp> (dry run, then for real)"
conf=$root/usr/lib/sysusers.d/signet.conf
rc=0
out=$(systemd-sysusers --root="$root" --dry-run 2>&1) || rc=$?
if [[ $rc -eq 0 ]] && ! grep -q 'signet\.conf:[0-9]' <<<"$out"; then
    pass "sysusers.d/signet.conf parses (--dry-run)"
else
    fail "sysusers.d/signet.conf parses (--dry-run, rc=$rc)" "$out"
fi
rc=0
out=$(systemd-sysusers --root="$root" 2>&1) || rc=$?
problems=()
[[ $rc -eq 0 ]] || problems+=("systemd-sysusers exited $rc: $out")
for u in "${DAEMON_USERS[@]}"; do
    uid=$(awk -F: -v u="$u" '$1 == u { print $3 }' "$root/etc/passwd" 2>/dev/null || true)
    pgid=$(awk -F: -v u="$u" '$1 == u { print $4 }' "$root/etc/passwd" 2>/dev/null || true)
    gid=$(awk -F: -v u="$u" '$1 == u { print $3 }' "$root/etc/group" 2>/dev/null || true)
    [[ -n $uid ]] || { problems+=("no user $u"); continue; }
    [[ -n $gid && $pgid == "$gid" ]] || problems+=("user $u has no own primary group $u")
    [[ $uid -lt 1000 ]] || problems+=("user $u uid $uid is not a system uid")
done
for g in "${EXTRA_GROUPS[@]}"; do
    grep -q "^$g:" "$root/etc/group" 2>/dev/null || problems+=("no group $g")
done
members=$(awk -F: '$1 == "signet-clients" { print $4 }' "$root/etc/group" 2>/dev/null | tr ',' '\n' | sort | paste -sd,)
want=$(IFS=,; echo "${CLIENT_MEMBERS[*]}")
[[ $members == "$want" ]] || problems+=("signet-clients members '$members', want '$want'")
if [[ ${#problems[@]} -eq 0 ]]; then
    pass "sysusers: users ${DAEMON_USERS[*]}; groups ${EXTRA_GROUPS[*]}; signet-clients = $want"
else
    fail "sysusers: expected users and groups" "$(printf '%s\n' "${problems[@]}")"
fi

# 4. Every User=/Group=/SocketUser=/SocketGroup= in the units exists after sysusers.
problems=()
while IFS='=' read -r key name; do
    case $key in
    User | SocketUser) grep -q "^$name:" "$root/etc/passwd" || problems+=("$key=$name: no such user") ;;
    *) grep -q "^$name:" "$root/etc/group" || problems+=("$key=$name: no such group") ;;
    esac
done < <(grep -hE '^(User|Group|SocketUser|SocketGroup)=' "${unit_files[@]}" | sort -u)
if [[ ${#problems[@]} -eq 0 ]]; then
    pass "unit users/groups are all created by sysusers.d"
else
    fail "unit users/groups are all created by sysusers.d" "$(printf '%s\n' "${problems[@]}")"
fi

# 5. tmpfiles.d parses and creates the paths with the intended owners/modes. (systemd 252's
#    systemd-tmpfiles has no --dry-run; --create inside the temp root is the real thing.)
echo "-- systemd-tmpfiles --root=<tmp> --create"
mkdir -p "$root/etc/signet"
install -m 0644 /dev/null "$root/etc/signet/signd.toml" # a world-readable config, to be fixed by `z`
install -m 0644 /dev/null "$root/etc/signet/ocspd.toml"
install -m 0644 /dev/null "$root/etc/signet/acmed.toml"
install -m 0644 /dev/null "$root/etc/signet/ctlogd.toml"
install -m 0644 /dev/null "$root/etc/signet/probed.toml"
rc=0
out=$(systemd-tmpfiles --root="$root" --create 2>&1) || rc=$?
# stat_names PATH: "mode user group", names resolved through the temp root's passwd/group.
stat_names() {
    local m u g
    read -r m u g < <(stat -c '%a %u %g' "$1")
    u=$(awk -F: -v id="$u" '$3 == id { print $1 }' "$root/etc/passwd"); [[ -n $u ]] || u=root
    g=$(awk -F: -v id="$g" '$3 == id { print $1 }' "$root/etc/group"); [[ -n $g ]] || g=root
    echo "$m $u $g"
}
problems=()
[[ $rc -eq 0 && -z $out ]] || problems+=("systemd-tmpfiles exited $rc: $out")
while read -r path want; do
    if [[ ! -e $root$path ]]; then problems+=("$path missing"); continue; fi
    got=$(stat_names "$root$path")
    [[ $got == "$want" ]] || problems+=("$path is '$got', want '$want'")
done <<'EOF'
/run/signet 755 root root
/var/lib/signet 755 root root
/etc/signet/signd.toml 640 root signd
/etc/signet/ocspd.toml 640 root ocspd
/etc/signet/acmed.toml 640 root acmed
/etc/signet/ctlogd.toml 640 root ctlogd
/etc/signet/probed.toml 640 root probed
EOF
if [[ ${#problems[@]} -eq 0 ]]; then
    pass "tmpfiles.d/signet.conf: /run/signet, /var/lib/signet, /etc/signet/signd.toml"
else
    fail "tmpfiles.d/signet.conf" "$(printf '%s\n' "${problems[@]}")"
fi

# 6. The install-layout facts the daemons and clients rely on.
problems=()
need() { # need FILE REGEX
    grep -qE "^$2\$" "$units_dir/$1" || problems+=("$1: no line matching ^$2\$")
}
need signd.socket 'ListenStream=/run/signet/signd\.sock'
need signd.socket 'FileDescriptorName=signd'
need signd.socket 'SocketMode=0660'
need signd.socket 'SocketUser=signd'
need signd.socket 'SocketGroup=signet-clients'
need signd.socket 'PartOf=signet\.target'
need signd.socket 'WantedBy=.*\bsignet\.target\b.*'
need signd.service 'Type=notify'
need signd.service 'WatchdogSec=30s'
need signd.service 'Restart=on-failure'
need signd.service 'ExecStart=/usr/libexec/signet/signd( .*)?'
need signd.service 'ExecReload=/bin/kill -HUP \$MAINPID'
need signd.service 'User=signd'
need signd.service 'StateDirectory=signet/signd'
need signd.service 'StateDirectoryMode=0700'
need signd.service 'PrivateNetwork=yes'
need signd.service 'CapabilityBoundingSet='
need signd.service 'PartOf=signet\.target'
need signd.service 'WantedBy=.*\bsignet\.target\b.*'
need ocspd.socket 'ListenStream=/run/signet/ocspd\.sock'
need ocspd.socket 'FileDescriptorName=ocspd'
need ocspd.socket 'SocketGroup=signet-clients'
need ocspd-http.socket 'FileDescriptorName=ocspd-http'
need ocspd.service 'Type=notify'
need ocspd.service 'ExecStart=/usr/libexec/signet/ocspd( .*)?'
need ocspd.service 'Sockets=ocspd\.socket ocspd-http\.socket'
need ocspd.service 'User=ocspd'
need ocspd.service 'StateDirectory=signet/ocspd'
need ocspd.service 'PrivateNetwork=yes'
need ocspd.service 'PartOf=signet\.target'
need acmed-https.socket 'FileDescriptorName=acmed-https'
need acmed-admin.socket 'ListenStream=/run/signet/acmed\.sock'
need acmed-admin.socket 'FileDescriptorName=acmed-admin'
need acmed-admin.socket 'SocketGroup=signet-admin'
need acmed-admin.socket 'SocketMode=0660'
need acmed.service 'Type=notify'
need acmed.service 'ExecStart=/usr/libexec/signet/acmed( .*)?'
need acmed.service 'ExecReload=/bin/kill -HUP \$MAINPID'
need acmed.service 'Sockets=acmed-https\.socket acmed-admin\.socket'
need acmed.service 'User=acmed'
need acmed.service 'StateDirectory=signet/acmed'
need acmed.service 'LoadCredential=tls-key:.*'
need acmed.service 'PartOf=signet\.target'
need ctlogd-http.socket 'FileDescriptorName=ctlogd-http'
need ctlogd-admin.socket 'FileDescriptorName=ctlogd-admin'
need ctlogd.service 'Type=notify'
need ctlogd.service 'WatchdogSec=30s'
need ctlogd.service 'ExecStart=/usr/libexec/signet/ctlogd( .*)?'
need ctlogd.service 'ExecReload=/bin/kill -HUP \$MAINPID'
need ctlogd.service 'Sockets=ctlogd-http\.socket ctlogd-admin\.socket'
need ctlogd.service 'User=ctlogd'
need ctlogd.service 'StateDirectory=signet/ctlogd'
need ctlogd.service 'PrivateNetwork=yes'
need ctlogd.service 'PartOf=signet\.target'
need tokend-http.socket 'FileDescriptorName=tokend-http'
need tokend-admin.socket 'FileDescriptorName=tokend-admin'
need tokend-https.socket 'FileDescriptorName=tokend-https'
need tokend.service 'Sockets=tokend-http\.socket tokend-admin\.socket tokend-https\.socket'
need tokend.service 'ExecStart=/usr/libexec/signet/tokend( .*)?'
need tokend.service 'User=tokend'
need tokend.service 'PrivateNetwork=yes'
need probed-http.socket 'FileDescriptorName=probed-http'
need probed.service 'Type=notify'
need probed.service 'WatchdogSec=30s'
need probed.service 'ExecStart=/usr/libexec/signet/probed( .*)?'
need probed.service 'ExecReload=/bin/kill -HUP \$MAINPID'
need probed.service 'Sockets=probed-http\.socket'
need probed.service 'User=probed'
need probed.service 'StateDirectory=signet/probed'
need probed.service 'PartOf=signet\.target'
if [[ ${#problems[@]} -eq 0 ]]; then
    pass "install layout: socket path/name/owner/mode, notify+watchdog, state dir, signet.target"
else
    fail "install layout" "$(printf '%s\n' "${problems[@]}")"
fi

# 7. [Install] sections: `systemctl --root= enable` (works without PID 1) creates exactly the
#    expected symlinks. (Re-running verify afterwards would be pointless: systemd-analyze 252 with
#    --root= does not load .wants/ symlinks or .d/ drop-ins, so it cannot see cycles they create.)
echo "-- systemctl --root=<tmp> enable signd.service signet.target"
eroot=$tmp/enable-root
make_root "$eroot"
rc=0
out=$(systemctl --root="$eroot" enable signd.service signet.target 2>&1) || rc=$?
got=$(cd "$eroot/etc/systemd/system" && find . -type l -printf '%P\n' | sort | paste -sd' ')
want="multi-user.target.wants/signet.target signet.target.wants/signd.service signet.target.wants/signd.socket sockets.target.wants/signd.socket"
if [[ $rc -eq 0 && $got == "$want" ]]; then
    pass "enable: $got"
else
    fail "enable: got '$got', want '$want' (rc=$rc)" "$out"
fi

# 8. Security exposure of signd.service, and a canary proving the threshold check can fail.
echo "-- systemd-analyze security --offline=yes --root=<tmp> signd.service (max $max_exposure)"
exposure "$root" signd.service
if [[ -z $score ]]; then
    fail "signd.service exposure: no 'Overall exposure level' in output" "$sec_out"
elif le "$score" "$max_exposure"; then
    pass "signd.service exposure $score <= $max_exposure"
    grep '✗' <<<"$sec_out" | sed 's/^/        /' || true
else
    fail "signd.service exposure $score > $max_exposure" "$(grep -E '✗|Overall' <<<"$sec_out")"
fi
exposure "$root" ocspd.service
if [[ -n $score ]] && le "$score" "$max_exposure"; then
    pass "ocspd.service exposure $score <= $max_exposure"
else
    fail "ocspd.service exposure '${score}' > $max_exposure" "$(grep -E '✗|Overall' <<<"$sec_out")"
fi
# acmed keeps the host network (validation connects out), and still fits the bound.
exposure "$root" acmed.service
if [[ -n $score ]] && le "$score" "$max_exposure"; then
    pass "acmed.service exposure $score <= $max_exposure"
else
    fail "acmed.service exposure '${score}' > $max_exposure" "$(grep -E '✗|Overall' <<<"$sec_out")"
fi
exposure "$root" ctlogd.service
if [[ -n $score ]] && le "$score" "$max_exposure"; then
    pass "ctlogd.service exposure $score <= $max_exposure"
else
    fail "ctlogd.service exposure '${score}' > $max_exposure" "$(grep -E '✗|Overall' <<<"$sec_out")"
fi
# probed keeps the host network (probing connects out), like acmed, and fits the bound.
exposure "$root" probed.service
if [[ -n $score ]] && le "$score" "$max_exposure"; then
    pass "probed.service exposure $score <= $max_exposure"
else
    fail "probed.service exposure '${score}' > $max_exposure" "$(grep -E '✗|Overall' <<<"$sec_out")"
fi
exposure "$root" tokend.service
if [[ -n $score ]] && le "$score" "$max_exposure"; then
    pass "tokend.service exposure $score <= $max_exposure"
else
    fail "tokend.service exposure '${score}' > $max_exposure" "$(grep -E '✗|Overall' <<<"$sec_out")"
fi
printf '[Unit]\nDescription=unhardened canary\n[Service]\nExecStart=/usr/libexec/signet/signd\n' \
    >"$root/etc/systemd/system/canary-weak.service"
exposure "$root" canary-weak.service
if [[ -n $score ]] && ! le "$score" "$max_exposure"; then
    pass "canary unhardened service: exposure $score > $max_exposure is rejected"
else
    fail "canary unhardened service: exposure '${score}' not rejected" "$sec_out"
fi

finish
