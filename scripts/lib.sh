# Shared setup for scripts/run and scripts/test. Source it; do not run it.
# Installs what is missing on a Debian 12 machine, and builds Signet once.

set -euo pipefail

SIGNET_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SIGNET_CACHE="${SIGNET_CACHE:-$HOME/.cache/signet}"
# One target directory per checkout: cargo names a workspace member's artifacts
# by its path relative to the workspace, so two checkouts sharing a target
# directory can pick up each other's builds. Keyed by the checkout's path.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$SIGNET_CACHE/target-$(printf '%s' "$SIGNET_ROOT" | sha256sum | cut -c1-12)}"
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
  "setpriv:util-linux"
  "openssl:openssl"
  "/usr/include/openssl/ssl.h:libssl-dev"
  "pkg-config:pkg-config"
  "cc:gcc"
  "make:make"
  "perl:perl"
  "valgrind:valgrind"
  "curl:curl"
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

# Builds every binary of the workspace in the one profile Signet uses (release).
build_all() {
  say "building (release, target dir $CARGO_TARGET_DIR)"
  (cd "$SIGNET_ROOT" && cargo build --release --workspace --bins --locked)
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

# lego, built from its Go module: `go install ...@latest` is refused by the
# module proxy here, so download one version and build its cmd/lego in the
# module cache (about 8 minutes on 2 cores, at low priority).
SIGNET_LEGO_VERSION="${SIGNET_LEGO_VERSION:-4.25.2}"
ensure_lego() {
  export SIGNET_LEGO="$SIGNET_CACHE/bin/lego"
  if [ -x "$SIGNET_LEGO" ] && "$SIGNET_LEGO" --version 2>/dev/null | grep -q "$SIGNET_LEGO_VERSION"; then
    return 0
  fi
  if ! command -v go >/dev/null 2>&1; then
    echo "lego needs a Go toolchain (go on PATH): install Go, then rerun." >&2
    return 1
  fi
  say "building lego $SIGNET_LEGO_VERSION into $SIGNET_LEGO (about 8 minutes on 2 cores)"
  local module="github.com/go-acme/lego/v4@v$SIGNET_LEGO_VERSION" dir
  # Outside any Go module, so the download is not recorded in one.
  dir="$(cd / && GO111MODULE=on go mod download -json "$module" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
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

# Pebble (Let's Encrypt's test ACME server), the same-run baseline of
# bench/scripts/acme-bench.sh --pebble; not needed by scripts/test.
SIGNET_PEBBLE_VERSION="${SIGNET_PEBBLE_VERSION:-2.10.1}"
ensure_pebble() {
  export SIGNET_PEBBLE="$SIGNET_CACHE/bin/pebble-$SIGNET_PEBBLE_VERSION"
  if [ ! -x "$SIGNET_PEBBLE" ]; then
    if ! command -v go >/dev/null 2>&1; then
      echo "Pebble needs a Go toolchain (go on PATH): install Go, then rerun." >&2
      return 1
    fi
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
