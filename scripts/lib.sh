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
