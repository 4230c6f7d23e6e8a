# Shared setup for scripts/run and scripts/test. Source it; do not run it.
# Installs what is missing on a Debian 12 machine, and builds Signet once.

set -euo pipefail

SIGNET_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SIGNET_CACHE="${SIGNET_CACHE:-$HOME/.cache/signet}"
# One target directory per checkout: cargo names a workspace member's artifacts
# by its path relative to the workspace, so two checkouts sharing a target
# directory can pick up each other's builds. Keyed by the checkout's path.
SIGNET_CHECKOUT_KEY="$(printf '%s' "$SIGNET_ROOT" | sha256sum | cut -c1-12)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$SIGNET_CACHE/target-$SIGNET_CHECKOUT_KEY}"
# The fuzz targets' (nightly, sanitizers): one per checkout too.
SIGNET_FUZZ_TARGET_DIR="$SIGNET_CACHE/fuzz-target-$SIGNET_CHECKOUT_KEY"
# clippy's (scripts/test runs it beside the suites, and cargo locks a target
# directory while it builds there): one per checkout too.
SIGNET_CLIPPY_TARGET_DIR="$SIGNET_CACHE/clippy-target-$SIGNET_CHECKOUT_KEY"
export SIGNET_BIN_DIR="$CARGO_TARGET_DIR/release"

# Debian packages Signet needs to build and test, as "command-or-file:package".
SIGNET_APT_NEEDS=(
  "capnp:capnproto"
  "softhsm2-util:softhsm2"
  "certutil:libnss3-tools"
  "/usr/include/nss/nss.h:libnss3-dev"
  "pkcs11-tool:opensc"
  "p11-kit:p11-kit"
  "/usr/lib/x86_64-linux-gnu/pkcs11/p11-kit-client.so:p11-kit-modules"
  "systemd-analyze:systemd"
  "systemd-nspawn:systemd-container"
  "setpriv:util-linux"
  "openssl:openssl"
  "/usr/include/openssl/ssl.h:libssl-dev"
  "pkg-config:pkg-config"
  "cc:gcc"
  "make:make"
  "perl:perl"
  "valgrind:valgrind"
  "curl:curl"
  # probed's integration test probes a real nginx over HTTP and HTTPS.
  "/usr/sbin/nginx:nginx-light"
  # tokend's LDAP test runs its own slapd (a directory on loopback) and loads it with ldapadd.
  "/usr/sbin/slapd:slapd"
  "ldapadd:ldap-utils"
  # tests/oauth/browser_login.py drives tokend's sign-in page in headless Chromium (Playwright).
  "/usr/bin/chromium:chromium"
)

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

have() {
  case "$1" in
    /*) [ -e "$1" ] ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}

# Installs the missing Debian packages (apt-get update only if something is missing).
ensure_packages() {
  local missing=() need
  for need in "${SIGNET_APT_NEEDS[@]}"; do
    have "${need%%:*}" || missing+=("${need#*:}")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Python's `cryptography` parses certificates, CRLs and OCSP responses strictly:
# the CA tests use it as a second opinion beside OpenSSL.
ensure_python_tools() {
  python3 -c 'import cryptography' 2>/dev/null && return 0
  say "installing Python cryptography"
  python3 -m pip install --quiet cryptography 2>/dev/null && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-cryptography >/dev/null || true
}

ensure_rust() {
  if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "Signet needs a Rust toolchain (1.85 or newer): install rustup, then rerun." >&2
    exit 1
  fi
}

# OpenSSL for every build the scripts run. The workspace's `openssl` crate is
# `vendored`: openssl-src compiles the OpenSSL it bundles, but configures it
# without `enable-ec_nistp_64_gcc_128`, so P-384 and P-521 run on OpenSSL's
# generic code (about 4x slower to sign, docs/performance.md) and openssl-src
# takes no extra Configure arguments. So the scripts build the same sources (the
# openssl-src crate Cargo.lock names) with openssl-src's own options for
# x86_64 Linux plus that one, once, into $SIGNET_CACHE/openssl-VERSION-nistp,
# and point openssl-sys at it (OPENSSL_NO_VENDOR wins over the `vendored`
# feature). A plain `cargo build` still gets the vendored build. The install also
# has bin/openssl, which bench/scripts/curve-bench.sh times as the baseline.
# SIGNET_OPENSSL_EXTRA replaces the extra options (empty: openssl-src's options
# alone, into openssl-VERSION-plain; for A/B measurements only).
SIGNET_OPENSSL_EXTRA_DEFAULT="enable-ec_nistp_64_gcc_128"
ensure_openssl() {
  local extra="${SIGNET_OPENSSL_EXTRA-$SIGNET_OPENSSL_EXTRA_DEFAULT}" flavour=nistp
  [ -n "$extra" ] || flavour=plain
  [ "$extra" = "$SIGNET_OPENSSL_EXTRA_DEFAULT" ] || [ -z "$extra" ] || flavour=custom
  local crate_version version
  crate_version="$(awk '/^name = "openssl-src"$/ { found = 1; next }
    found && /^version = / { gsub(/^version = "|"$/, ""); print; exit }' "$SIGNET_ROOT/Cargo.lock")"
  [ -n "$crate_version" ] || { echo "ensure_openssl: openssl-src is not in Cargo.lock" >&2; return 1; }
  version="${crate_version#*+}"
  # openssl-src 300.x's Configure line for x86_64-unknown-linux-gnu (its src/lib.rs, with
  # openssl-sys's `legacy` feature on), and the flags the cc crate gives it (-O2).
  local args=(--openssldir=/usr/local/ssl no-shared no-module no-tests no-comp no-zlib no-zlib-dynamic
    --libdir=lib no-ssl3 no-md2 no-rc5 no-weak-ssl-ciphers no-camellia no-idea no-seed linux-x86_64
    -O2 -ffunction-sections -fdata-sections -fPIC -m64)
  # shellcheck disable=SC2206 # the extra options are words
  args+=($extra)
  local dest="$SIGNET_CACHE/openssl-$version-$flavour"
  local stamp="openssl-src $crate_version: ${args[*]}"
  if [ "$(cat "$dest/.signet-build" 2>/dev/null)" != "$stamp" ]; then
    mkdir -p "$SIGNET_CACHE"
    # One build at a time (two scripts starting together wait for the first).
    (
      flock 9
      [ "$(cat "$dest/.signet-build" 2>/dev/null)" != "$stamp" ] || exit 0
      say "building OpenSSL $version ($flavour) into $dest (once, a few minutes)"
      # The sources: the openssl-src crate Cargo.lock names (fetched on a fresh clone).
      local manifest work
      (cd "$SIGNET_ROOT" && cargo fetch --locked -q) || exit 1
      manifest="$(cd "$SIGNET_ROOT" && cargo metadata --format-version 1 --locked 2>/dev/null | python3 -c '
import json, sys
print(next((p["manifest_path"] for p in json.load(sys.stdin)["packages"]
            if p["name"] == "openssl-src" and p["version"] == sys.argv[1]), ""))' "$crate_version")"
      [ -n "$manifest" ] || { echo "ensure_openssl: cargo metadata names no openssl-src $crate_version" >&2; exit 1; }
      work="$(mktemp -d "$SIGNET_CACHE/.openssl-build.XXXXXX")"
      cp -R "$(dirname "$manifest")/openssl" "$work/src"
      # Built with its final prefix, installed under $work (DESTDIR), then renamed into
      # place: an interrupted build leaves no half install behind.
      if ! (cd "$work/src" &&
        CC=cc AR=ar RANLIB=ranlib perl ./Configure --prefix="$dest" "${args[@]}" &&
        make depend && make -j"$(nproc)" build_libs && make -j"$(nproc)" build_programs &&
        make DESTDIR="$work/dest" install_sw) >"$work/build.log" 2>&1; then
        mv "$work/build.log" "$dest.build.log"
        rm -rf "$work"
        echo "ensure_openssl: the OpenSSL build failed; the end of $dest.build.log:" >&2
        tail -n 30 "$dest.build.log" >&2
        exit 1
      fi
      printf '%s\n' "$stamp" >"$work/dest$dest/.signet-build"
      rm -rf "$dest.old" "$dest.build.log"
      [ ! -e "$dest" ] || mv "$dest" "$dest.old"
      mv "$work/dest$dest" "$dest"
      rm -rf "$dest.old" "$work"
    ) 9>"$SIGNET_CACHE/.openssl-build.lock" || return 1
  fi
  export OPENSSL_NO_VENDOR=1 OPENSSL_DIR="$dest" OPENSSL_STATIC=1
  unset OPENSSL_LIB_DIR OPENSSL_INCLUDE_DIR
}

# Builds every library (libpki's .so and .a among them), binary and example of
# the workspace in the one profile Signet uses (release); extra cargo arguments
# (scripts/test: --bench '*') add targets.
# The examples are there for their features as much as for themselves: with
# resolver 2 a build that includes examples also turns on the features the
# dev-dependencies ask for, so this build, `cargo test --workspace`, the
# benchmarks and the C suite's builds resolve one feature set and share every
# compiled crate. (`cargo build -p X` resolves another set, and rebuilds.)
build_all() {
  say "building (release, target dir $CARGO_TARGET_DIR)"
  (cd "$SIGNET_ROOT" && cargo build --release --workspace --lib --bins --examples --locked "$@")
}

# --- a cached build kept across fresh clones ---------------------------------
# A fresh clone gives every file the clone's time, and cargo decides what to
# rebuild by time, so it rebuilds every workspace crate (about 19 minutes on
# 2 slow cores) even when the cached target directory holds a build of the very
# same sources. So: a run of scripts/test that began and ended on a clean tree
# at one commit records that commit in each target directory it built
# (`stamp_build`); the next run, `reuse_build_times`, if its own tree is clean,
# that commit is an ancestor of HEAD, and nothing was built in those
# directories since (no fingerprint newer than the stamp: no `cargo build` by
# hand, from a dirty tree or another commit), gives every tracked file an old
# time and the files changed since that commit the present time. Cargo then
# rebuilds only what changed. Otherwise the times stay as they are and cargo
# decides as it always does. A target directory that does not exist yet is
# passed over: nothing in it can be taken for fresh, and the run builds it whole.
SIGNET_BUILT_FROM="signet-built-from"
SIGNET_OLD_TIME="@946684800"  # 2000-01-01, older than any build

# HEAD's commit if the tracked files are exactly HEAD's; nothing otherwise.
clean_head() {
  [ -d "$SIGNET_ROOT/.git" ] || return 0
  [ -z "$(git -C "$SIGNET_ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] || return 0
  git -C "$SIGNET_ROOT" rev-parse -q --verify 'HEAD^{commit}' 2>/dev/null || true
}

reuse_build_times() { # target-dir...
  local head dir from froms=()
  head="$(clean_head)"
  [ -n "$head" ] || return 0
  for dir in "$@"; do
    [ -e "$dir" ] || continue
    from="$(cat "$dir/$SIGNET_BUILT_FROM" 2>/dev/null)" || return 0
    git -C "$SIGNET_ROOT" merge-base --is-ancestor "$from" "$head" 2>/dev/null || return 0
    [ -z "$(find "$dir" -path '*/.fingerprint/*' -newer "$dir/$SIGNET_BUILT_FROM" -print -quit 2>/dev/null)" ] || return 0
    froms+=("$from")
  done
  [ ${#froms[@]} -gt 0 ] || return 0
  (
    cd "$SIGNET_ROOT"
    # Files and the directories holding them (a build script may watch a
    # directory: ipc-schema's `rerun-if-changed=schema`); what changed since,
    # and the directories it was added to or removed from, get the present time.
    git ls-files -z | xargs -0 -r touch -h -c -d "$SIGNET_OLD_TIME"
    git -c core.quotePath=false ls-files | parent_dirs | xargs -d '\n' -r touch -h -c -d "$SIGNET_OLD_TIME"
    changed="$(for from in "${froms[@]}"; do git -c core.quotePath=false diff --name-only "$from" "$head" --; done)"
    [ -z "$changed" ] || printf '%s\n' "$changed" | xargs -d '\n' -r touch -h -c
    [ -z "$changed" ] || printf '%s\n' "$changed" | parent_dirs | xargs -d '\n' -r touch -h -c
  )
  say "reusing the cached build of ${froms[0]:0:12}: $(for from in "${froms[@]}"; do git -C "$SIGNET_ROOT" diff --name-only "$from" "$head" --; done | sort -u | wc -l) files changed since"
}

# Every directory above each path read from stdin, and ".", once each.
parent_dirs() {
  awk -F/ '{ p = $1; for (i = 2; i <= NF; i++) { print p; p = p "/" $i } } END { print "." }' | sort -u
}

stamp_build() { # start-commit target-dir...: records the build if the tree is still clean at start-commit
  local start="$1" dir; shift
  [ -n "$start" ] && [ "$(clean_head)" = "$start" ] || return 0
  for dir in "$@"; do
    if [ -d "$dir" ]; then printf '%s\n' "$start" >"$dir/$SIGNET_BUILT_FROM"; fi
  done
}

# Go, for the interop peers: lego and Pebble now, and the CT, OAuth, object-store
# and prober tools to come are all Go programs, built from their modules.
# A `go` on PATH is used when it is new enough; otherwise Go $SIGNET_GO_VERSION
# is installed under $SIGNET_CACHE/go. The network here reaches package
# registries only (go.dev is out of reach), so the toolchain comes through the
# Go module proxy: Debian's golang-go (Go 1.19 on Debian 12, too old for the
# peers' modules) is installed as a bootstrap, and it downloads the module
# golang.org/toolchain@v0.0.1-goVERSION.OS-ARCH, the module `GOTOOLCHAIN=`
# uses: a whole Go distribution, checked against the checksum database.
SIGNET_GO_VERSION="${SIGNET_GO_VERSION:-1.26.8}"
SIGNET_GO_MIN="1.24"

# The version a go binary reports ("1.26.8"), or nothing. GOTOOLCHAIN=local:
# a newer go must report itself, not switch to the toolchain a go.mod names.
go_version_of() {
  { (cd / && GOTOOLCHAIN=local "$1" version 2>/dev/null) || true; } | sed -n 's/^go version go\([0-9][0-9.]*\).*/\1/p'
}

# Whether version $1 >= version $2 (dotted numbers).
version_at_least() {
  [ -n "$1" ] && [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

# Makes `go` (>= $SIGNET_GO_MIN) available and exports GOPATH, GOMODCACHE and
# GOCACHE under $SIGNET_CACHE/go (unless set already), so the peers' module
# downloads and builds are cached with the rest of Signet's.
ensure_go() {
  local home="$SIGNET_CACHE/go"
  export GOPATH="${GOPATH:-$home/path}"
  export GOMODCACHE="${GOMODCACHE:-$GOPATH/pkg/mod}"
  export GOCACHE="${GOCACHE:-$home/build}"
  local have
  have="$(go_version_of go)"
  version_at_least "$have" "$SIGNET_GO_MIN" && return 0
  local goroot="$home/go$SIGNET_GO_VERSION"
  if [ "$(go_version_of "$goroot/bin/go")" != "$SIGNET_GO_VERSION" ]; then
    install_go "$goroot" || return 1
  fi
  # The distribution finds its own root from its binary; a GOROOT for the older go would mislead it.
  unset GOROOT
  export PATH="$goroot/bin:$PATH"
}

# The directory of Go module $1 (MODULE@vVERSION) in the module cache, downloaded
# if missing; outside any Go module, so the download is not recorded in one. Any
# further arguments are NAME=VALUE settings for `go` (e.g. GONOSUMDB=...).
go_module_dir() {
  local module="$1"; shift
  (cd / && env GO111MODULE=on "$@" go mod download -json "$module" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
}

# Installs Go $SIGNET_GO_VERSION into $1 through the module proxy (see above).
install_go() {
  local goroot="$1" boot="" candidate started
  started=$(date +%s)
  # Any go that talks to the module proxy will do as the bootstrap (Go 1.19 does, in module mode).
  for candidate in "$(command -v go || true)" /usr/lib/go/bin/go /usr/lib/go-*/bin/go; do
    [ -n "$candidate" ] && [ -n "$(go_version_of "$candidate")" ] && { boot="$candidate"; break; }
  done
  if [ -z "$boot" ]; then
    say "installing Debian's golang-go (only to download Go $SIGNET_GO_VERSION)"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go >/dev/null
    boot=/usr/lib/go/bin/go
  fi
  local arch
  arch="$(dpkg --print-architecture 2>/dev/null || uname -m)"
  case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
  local module="golang.org/toolchain@v0.0.1-go$SIGNET_GO_VERSION.linux-$arch"
  say "installing Go $SIGNET_GO_VERSION into $goroot (module $module, bootstrap go $(go_version_of "$boot"))"
  mkdir -p "$SIGNET_CACHE/go"
  # What interrupted installs left (an hour old: not one running beside this one).
  find "$SIGNET_CACHE/go" -maxdepth 1 -name '.install.*' -mmin +60 -exec rm -rf {} + 2>/dev/null || true
  local tmp dir
  tmp="$(mktemp -d "$SIGNET_CACHE/go/.install.XXXXXX")"
  # A module cache of its own, writable (-modcacherw) so the distribution can be moved out of it.
  dir="$(cd / && env -u GOROOT GO111MODULE=on GOFLAGS=-modcacherw GOTOOLCHAIN=local GOPATH="$tmp/path" \
    GOMODCACHE="$tmp/mod" GOCACHE="$tmp/build" "$boot" mod download -json "$module" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')" || true
  if [ -z "$dir" ] || [ ! -f "$dir/bin/go" ]; then
    echo "go mod download $module gave no Go distribution" >&2
    rm -rf "$tmp"
    return 1
  fi
  mv "$dir" "$tmp/go"
  # Module zips keep no file modes: make the commands executable, as GOTOOLCHAIN does.
  chmod -R a+rX "$tmp/go"
  chmod a+x "$tmp/go/bin/"* "$tmp/go/pkg/tool/"*/*
  if [ "$(go_version_of "$tmp/go/bin/go")" != "$SIGNET_GO_VERSION" ]; then
    echo "the downloaded Go does not run: $tmp/go/bin/go version" >&2
    rm -rf "$tmp"
    return 1
  fi
  # Renamed into place whole, so an interrupted install leaves no half a Go behind.
  rm -rf "$goroot"
  mv "$tmp/go" "$goroot"
  rm -rf "$tmp"
  say "Go $SIGNET_GO_VERSION installed in $(( $(date +%s) - started ))s"
}

# ACME peers for acmed's interop tests (see /work/shared/interop.md). Each is
# cached under $SIGNET_CACHE and skipped when it is already there and runs.

# certbot in its own virtualenv; the same venv has the Python `acme` library
# (`$SIGNET_CERTBOT_PYTHON -c 'import acme'`), a library client for edge cases.
# acme is pinned to certbot's version: pip would otherwise take a newer acme.
SIGNET_CERTBOT_VERSION="${SIGNET_CERTBOT_VERSION:-5.8.0}"
ensure_certbot() {
  local venv="$SIGNET_CACHE/certbot-venv"
  export SIGNET_CERTBOT="$venv/bin/certbot"
  export SIGNET_CERTBOT_PYTHON="$venv/bin/python"
  if [ -x "$SIGNET_CERTBOT" ] && [ "$("$SIGNET_CERTBOT_PYTHON" -c \
      'import acme, certbot, importlib.metadata as m; print(certbot.__version__, m.version("acme"))' \
      2>/dev/null)" = "$SIGNET_CERTBOT_VERSION $SIGNET_CERTBOT_VERSION" ]; then
    return 0
  fi
  say "installing certbot $SIGNET_CERTBOT_VERSION in $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "certbot==$SIGNET_CERTBOT_VERSION" "acme==$SIGNET_CERTBOT_VERSION"
  "$SIGNET_CERTBOT" --version >/dev/null
}

# The OAuth client libraries tokend's interop suite drives (tests/oauth): authlib,
# PyJWT and jwcrypto (the one JOSE library here that verifies ML-DSA), in their
# own virtualenv; Playwright for Python drives Debian's Chromium
# (tests/oauth/browser_login.py; never `playwright install`, which downloads a
# browser of its own).
SIGNET_OAUTH_PACKAGES="authlib==1.9.10 pyjwt[crypto]==2.15.1 jwcrypto==1.6.1 requests==2.34.2 playwright==1.65.2"
ensure_oauth_tools() {
  local venv="$SIGNET_CACHE/oauth-venv"
  export SIGNET_OAUTH_PYTHON="$venv/bin/python"
  if [ -x "$SIGNET_OAUTH_PYTHON" ] && [ "$(cat "$venv/.signet-packages" 2>/dev/null)" = "$SIGNET_OAUTH_PACKAGES" ] &&
    "$SIGNET_OAUTH_PYTHON" -c 'import authlib, jwt, jwcrypto, requests, playwright' 2>/dev/null; then
    return 0
  fi
  say "installing authlib, PyJWT, jwcrypto and Playwright in $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $SIGNET_OAUTH_PACKAGES
  echo "$SIGNET_OAUTH_PACKAGES" > "$venv/.signet-packages"
}

# panva's certified OAuth/OIDC libraries (openid-client, oauth4webapi, jose)
# for tests/oauth/node, installed by `npm ci` from the committed lock file into
# $SIGNET_CACHE/oauth-node/<hash of the lock file>; SIGNET_OAUTH_NODE_MODULES
# is its node_modules. They need Node 20 or newer (the machine's /usr/bin/node).
ensure_oauth_node() {
  local src="$SIGNET_ROOT/tests/oauth/node" major
  major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
  if [ "$major" -lt 20 ]; then
    echo "tests/oauth/node needs Node 20 or newer (node is ${major:-missing})" >&2
    return 1
  fi
  local dir
  dir="$SIGNET_CACHE/oauth-node/$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -c1-12)"
  export SIGNET_OAUTH_NODE_MODULES="$dir/node_modules"
  [ -f "$dir/.installed" ] && return 0
  say "installing openid-client, oauth4webapi and jose (npm ci) into $dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) || { rm -rf "$dir"; return 1; }
  touch "$dir/.installed"
}

# lego, built from its Go module: `go install ...@latest` is refused by the
# module proxy here, so download one version and build its cmd/lego in the
# module cache (about 8 minutes on 2 cores, at low priority).
SIGNET_LEGO_VERSION="${SIGNET_LEGO_VERSION:-4.25.2}"
ensure_lego() {
  export SIGNET_LEGO="$SIGNET_CACHE/bin/lego"
  if [ -x "$SIGNET_LEGO" ] && "$SIGNET_LEGO" --version 2>/dev/null | grep -q "$SIGNET_LEGO_VERSION"; then
    return 0
  fi
  ensure_go || return 1
  say "building lego $SIGNET_LEGO_VERSION into $SIGNET_LEGO (about 8 minutes on 2 cores)"
  local module="github.com/go-acme/lego/v4@v$SIGNET_LEGO_VERSION" dir
  dir="$(go_module_dir "$module")"
  if [ -z "$dir" ] || [ ! -d "$dir/cmd/lego" ]; then
    echo "go mod download $module gave no module directory" >&2
    return 1
  fi
  mkdir -p "$SIGNET_CACHE/bin"
  # Built to a temporary name and renamed, so an interrupted build leaves no binary.
  # (-buildvcs=false: the module cache is no VCS checkout; the version is compiled in.)
  (cd "$dir" && GO111MODULE=on nice -n 10 go build -buildvcs=false -trimpath -o "$SIGNET_LEGO.tmp" ./cmd/lego)
  mv -f "$SIGNET_LEGO.tmp" "$SIGNET_LEGO"
  "$SIGNET_LEGO" --version >/dev/null
}

# Certificate Transparency peers for tests/ct/interop.sh, each built once into
# $SIGNET_CACHE/bin: ctclient (certificate-transparency-go, RFC 6962: upload,
# get-sth, get-entries, inclusion and consistency proofs, each verified by the
# client) and TesseraCT's fsck (re-hashes every tile of a Static CT API log and
# checks the checkpoint signature); and tests/ct/sunlight-reader, a second
# static-ct-api reader on Sunlight's client library.
SIGNET_CTGO_VERSION="${SIGNET_CTGO_VERSION:-1.4.0}"
SIGNET_TESSERACT_VERSION="${SIGNET_TESSERACT_VERSION:-0.1.1}"
ensure_ct_tools() {
  export SIGNET_CTCLIENT="$SIGNET_CACHE/bin/ctclient-$SIGNET_CTGO_VERSION"
  export SIGNET_CT_FSCK="$SIGNET_CACHE/bin/tesseract-fsck-$SIGNET_TESSERACT_VERSION"
  # A second static-ct-api reader on Sunlight's client library (tests/ct/sunlight-reader),
  # cached by the hash of its source.
  local src="$SIGNET_ROOT/tests/ct/sunlight-reader"
  export SIGNET_SUNLIGHT_READER="$SIGNET_CACHE/bin/sunlight-reader-$(cat "$src/main.go" "$src/go.mod" "$src/go.sum" | sha256sum | cut -c1-12)"
  [ -x "$SIGNET_CTCLIENT" ] && [ -x "$SIGNET_CT_FSCK" ] && [ -x "$SIGNET_SUNLIGHT_READER" ] && return 0
  ensure_go || return 1
  mkdir -p "$SIGNET_CACHE/bin"
  local dir
  if [ ! -x "$SIGNET_CTCLIENT" ]; then
    say "building ctclient v$SIGNET_CTGO_VERSION into $SIGNET_CTCLIENT"
    (cd / && GO111MODULE=on GOBIN="$SIGNET_CACHE/bin/.ctclient" nice -n 10 \
      go install "github.com/google/certificate-transparency-go/client/ctclient@v$SIGNET_CTGO_VERSION") || return 1
    mv -f "$SIGNET_CACHE/bin/.ctclient/ctclient" "$SIGNET_CTCLIENT"
  fi
  if [ ! -x "$SIGNET_CT_FSCK" ]; then
    say "building TesseraCT fsck v$SIGNET_TESSERACT_VERSION into $SIGNET_CT_FSCK"
    dir="$(cd / && GO111MODULE=on GONOSUMDB=github.com/transparency-dev/tesseract go mod download -json \
      "github.com/transparency-dev/tesseract@v$SIGNET_TESSERACT_VERSION" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
    [ -n "$dir" ] && [ -d "$dir/cmd/fsck" ] || { echo "no module directory for tesseract v$SIGNET_TESSERACT_VERSION" >&2; return 1; }
    (cd "$dir" && GO111MODULE=on GONOSUMDB=github.com/transparency-dev/tesseract nice -n 10 \
      go build -buildvcs=false -trimpath -o "$SIGNET_CT_FSCK.tmp" ./cmd/fsck) || return 1
    mv -f "$SIGNET_CT_FSCK.tmp" "$SIGNET_CT_FSCK"
  fi
  if [ ! -x "$SIGNET_SUNLIGHT_READER" ]; then
    say "building tests/ct/sunlight-reader (filippo.io/sunlight v0.8.1) into $SIGNET_SUNLIGHT_READER"
    (cd "$src" && GO111MODULE=on nice -n 10 go build -trimpath -o "$SIGNET_SUNLIGHT_READER.tmp" .) || return 1
    mv -f "$SIGNET_SUNLIGHT_READER.tmp" "$SIGNET_SUNLIGHT_READER"
  fi
}

# versitygw, an S3-compatible gateway over a local directory: the real object
# store ctlogd's S3 storage tests run against (cargo test reads
# $SIGNET_VERSITYGW; set, the tests fail rather than skip without it).
SIGNET_VERSITYGW_VERSION="${SIGNET_VERSITYGW_VERSION:-1.8.0}"
ensure_versitygw() {
  export SIGNET_VERSITYGW="$SIGNET_CACHE/bin/versitygw-$SIGNET_VERSITYGW_VERSION"
  [ -x "$SIGNET_VERSITYGW" ] && return 0
  ensure_go || return 1
  say "building versitygw v$SIGNET_VERSITYGW_VERSION into $SIGNET_VERSITYGW"
  local dir
  dir="$(go_module_dir "github.com/versity/versitygw@v$SIGNET_VERSITYGW_VERSION")"
  [ -n "$dir" ] && [ -d "$dir/cmd/versitygw" ] || { echo "no module directory for versitygw v$SIGNET_VERSITYGW_VERSION" >&2; return 1; }
  mkdir -p "$SIGNET_CACHE/bin"
  (cd "$dir" && GO111MODULE=on nice -n 10 go build -buildvcs=false -trimpath -o "$SIGNET_VERSITYGW.tmp" ./cmd/versitygw) || return 1
  mv -f "$SIGNET_VERSITYGW.tmp" "$SIGNET_VERSITYGW"
}

# TesseraCT's POSIX log and its load generator (the hammer), the same-run
# baseline of bench/scripts/ct-bench.sh; not needed by scripts/test. Both are
# built once into $SIGNET_CACHE/bin (`go install` of v0.1.1 works through the
# proxy here; newer versions need unreleased dependencies it refuses), with
# the module directory exported for the hammer's test CA (testdata/). nginx
# (Debian) serves the POSIX log's read path, as a static file server must.
ensure_tesseract_bench() {
  export SIGNET_TESSERACT_POSIX="$SIGNET_CACHE/bin/tesseract-posix-$SIGNET_TESSERACT_VERSION"
  export SIGNET_TESSERACT_HAMMER="$SIGNET_CACHE/bin/tesseract-hammer-$SIGNET_TESSERACT_VERSION"
  have nginx || have /usr/sbin/nginx || {
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    say "installing Debian's nginx (the static file server in front of TesseraCT's POSIX log)"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
  }
  ensure_go || return 1
  local gonosumdb=github.com/transparency-dev/tesseract
  SIGNET_TESSERACT_DIR="$(cd / && GO111MODULE=on GONOSUMDB=$gonosumdb go mod download -json \
    "github.com/transparency-dev/tesseract@v$SIGNET_TESSERACT_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  export SIGNET_TESSERACT_DIR
  [ -n "$SIGNET_TESSERACT_DIR" ] && [ -d "$SIGNET_TESSERACT_DIR/internal/hammer/testdata" ] ||
    { echo "no module directory for tesseract v$SIGNET_TESSERACT_VERSION" >&2; return 1; }
  [ -x "$SIGNET_TESSERACT_POSIX" ] && [ -x "$SIGNET_TESSERACT_HAMMER" ] && return 0
  mkdir -p "$SIGNET_CACHE/bin"
  local gobin
  gobin="$(mktemp -d "$SIGNET_CACHE/bin/.tesseract.XXXXXX")"
  say "building TesseraCT v$SIGNET_TESSERACT_VERSION posix and hammer into $SIGNET_CACHE/bin"
  (cd / && GO111MODULE=on GONOSUMDB=$gonosumdb GOBIN="$gobin" nice -n 10 go install \
    "github.com/transparency-dev/tesseract/cmd/tesseract/posix@v$SIGNET_TESSERACT_VERSION" \
    "github.com/transparency-dev/tesseract/internal/hammer@v$SIGNET_TESSERACT_VERSION") || { rm -rf "$gobin"; return 1; }
  mv -f "$gobin/posix" "$SIGNET_TESSERACT_POSIX"
  mv -f "$gobin/hammer" "$SIGNET_TESSERACT_HAMMER"
  rm -rf "$gobin"
}

# Pebble (Let's Encrypt's test ACME server), the same-run baseline of
# bench/scripts/acme-bench.sh --pebble; not needed by scripts/test.
SIGNET_PEBBLE_VERSION="${SIGNET_PEBBLE_VERSION:-2.10.1}"
ensure_pebble() {
  ensure_go || return 1
  export SIGNET_PEBBLE="$SIGNET_CACHE/bin/pebble-$SIGNET_PEBBLE_VERSION"
  if [ ! -x "$SIGNET_PEBBLE" ]; then
    say "building Pebble $SIGNET_PEBBLE_VERSION into $SIGNET_PEBBLE"
    mkdir -p "$SIGNET_CACHE/bin"
    local gobin
    gobin="$(mktemp -d)"
    (cd / && GO111MODULE=on GOBIN="$gobin" go install "github.com/letsencrypt/pebble/v2/cmd/pebble@v$SIGNET_PEBBLE_VERSION")
    mv -f "$gobin/pebble" "$SIGNET_PEBBLE"
    rmdir "$gobin"
  fi
  # Its test TLS certificate (localhost, 127.0.0.1) and the CA that signed it.
  SIGNET_PEBBLE_DIR="$(cd / && GO111MODULE=on go mod download -json "github.com/letsencrypt/pebble/v2@v$SIGNET_PEBBLE_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  export SIGNET_PEBBLE_DIR
  [ -f "$SIGNET_PEBBLE_DIR/test/certs/pebble.minica.pem" ] || { echo "no Pebble module directory" >&2; return 1; }
}

# step-ca (Smallstep's CA, the production ACME CA people run instead), the
# second same-run baseline of bench/scripts/acme-bench.sh --step-ca; not
# needed by scripts/test. Built without cgo: its YubiKey KMS wants libpcsclite.
SIGNET_STEPCA_VERSION="${SIGNET_STEPCA_VERSION:-0.30.2}"
ensure_step_ca() {
  ensure_go || return 1
  export SIGNET_STEPCA="$SIGNET_CACHE/bin/step-ca-$SIGNET_STEPCA_VERSION"
  [ -x "$SIGNET_STEPCA" ] && return 0
  say "building step-ca $SIGNET_STEPCA_VERSION into $SIGNET_STEPCA (once, a few minutes)"
  mkdir -p "$SIGNET_CACHE/bin"
  local gobin
  gobin="$(mktemp -d)"
  (cd / && CGO_ENABLED=0 GO111MODULE=on GOBIN="$gobin" go install "github.com/smallstep/certificates/cmd/step-ca@v$SIGNET_STEPCA_VERSION") ||
    { rm -rf "$gobin"; return 1; }
  mv -f "$gobin/step-ca" "$SIGNET_STEPCA"
  rmdir "$gobin"
}

# Prometheus's blackbox_exporter, the baseline of bench/scripts/probe-compare.sh:
# `go install` is refused for it here, so download the module and build it in the
# module cache, once, into $SIGNET_CACHE/bin.
SIGNET_BLACKBOX_VERSION="${SIGNET_BLACKBOX_VERSION:-0.28.0}"
ensure_blackbox() {
  export SIGNET_BLACKBOX="$SIGNET_CACHE/bin/blackbox_exporter-$SIGNET_BLACKBOX_VERSION"
  [ -x "$SIGNET_BLACKBOX" ] && return 0
  ensure_go || return 1
  say "building blackbox_exporter v$SIGNET_BLACKBOX_VERSION into $SIGNET_BLACKBOX"
  local dir
  dir="$(go_module_dir "github.com/prometheus/blackbox_exporter@v$SIGNET_BLACKBOX_VERSION")"
  [ -n "$dir" ] && [ -f "$dir/main.go" ] ||
    { echo "go mod download gave no blackbox_exporter v$SIGNET_BLACKBOX_VERSION" >&2; return 1; }
  mkdir -p "$SIGNET_CACHE/bin"
  (cd "$dir" && GO111MODULE=on nice -n 10 go build -buildvcs=false -trimpath -o "$SIGNET_BLACKBOX.tmp" .) || return 1
  mv -f "$SIGNET_BLACKBOX.tmp" "$SIGNET_BLACKBOX"
}

# Ory Hydra, the same-run baseline of bench/scripts/token-bench.sh; not needed
# by scripts/test. v2.3.0 is the newest v2 the module proxy serves. Its go.mod
# replaces github.com/ory/hydra-client-go/v2 with ./internal/httpclient, a
# directory the module zip leaves out, so `go install` and a build in the
# module cache both fail; the module is copied out and the generated client
# put there from the newest hydra-client-go the proxy has (v2.2.1; v2.3.0's is
# refused). Built once into $SIGNET_CACHE/bin, with SQLite (cgo).
SIGNET_HYDRA_VERSION="${SIGNET_HYDRA_VERSION:-2.3.0}"
SIGNET_HYDRA_CLIENT_VERSION="${SIGNET_HYDRA_CLIENT_VERSION:-2.2.1}"
ensure_hydra() {
  export SIGNET_HYDRA="$SIGNET_CACHE/bin/hydra-$SIGNET_HYDRA_VERSION"
  [ -x "$SIGNET_HYDRA" ] && return 0
  ensure_go || return 1
  local dir client src started
  started=$(date +%s)
  say "building Ory Hydra v$SIGNET_HYDRA_VERSION into $SIGNET_HYDRA"
  dir="$(cd / && GO111MODULE=on go mod download -json "github.com/ory/hydra/v2@v$SIGNET_HYDRA_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  client="$(cd / && GO111MODULE=on go mod download -json "github.com/ory/hydra-client-go/v2@v$SIGNET_HYDRA_CLIENT_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  [ -n "$dir" ] && [ -f "$dir/main.go" ] && [ -n "$client" ] && [ -f "$client/go.mod" ] ||
    { echo "no module directories for hydra v$SIGNET_HYDRA_VERSION / hydra-client-go v$SIGNET_HYDRA_CLIENT_VERSION" >&2; return 1; }
  mkdir -p "$SIGNET_CACHE/bin"
  src="$(mktemp -d "$SIGNET_CACHE/bin/.hydra.XXXXXX")"
  cp -r "$dir/." "$src/"
  chmod -R u+w "$src"
  rm -rf "$src/internal/httpclient"
  cp -r "$client" "$src/internal/httpclient"
  chmod -R u+w "$src/internal/httpclient"
  # -mod=mod: go.sum may lack the sums of the replaced client's own requirements.
  # The sqlite tags (cgo, as Hydra's own builds): DSN=memory is an in-memory SQLite.
  (cd "$src" && GO111MODULE=on GOFLAGS=-mod=mod CGO_ENABLED=1 nice -n 10 go build -buildvcs=false -trimpath \
    -tags sqlite,sqlite_omit_load_extension -o "$SIGNET_HYDRA.tmp" .) || { rm -rf "$src"; return 1; }
  rm -rf "$src"
  mv -f "$SIGNET_HYDRA.tmp" "$SIGNET_HYDRA"
  say "Hydra built in $(( $(date +%s) - started ))s"
}
