#!/usr/bin/env bash
# tokend's OAuth 2.0 benchmark and its same-run baseline (Ory Hydra), on this
# machine, in one run:
#
#   1. signd (audit durability "process", as scripts/run) with a `tokend` role
#      (sign-jws, list, public-key) for the current user, and tokend on
#      loopback signing ES256 through it; clients made with
#      `signetctl --json oauth client create`;
#   2. token-load at each --concurrency (default 32 and 100) for:
#      client_credentials with client_secret_basic; with private_key_jwt (an
#      ES256 assertion with a fresh jti signed by token-load per request);
#      introspection of one token (client_secret_basic);
#   2b. authcode-load (tokend's authorization code flow with PKCE: each
#      browser signs in once through the real forms, then GET /authorize with
#      its session → 302 with a code → POST /token; a public client, openid),
#      at each --concurrency, and once with a sign-in (argon2id) every flow;
#   3. tokend again on a fresh state directory with `[tokens] algorithm =
#      "ML-DSA-44"` (an ml-dsa-44 key with role tokend): client_credentials;
#   4. the baseline: Ory Hydra (the newest v2 the Go module proxy serves,
#      built once into $SIGNET_CACHE/bin/hydra by ensure_hydra) in memory
#      (DSN=memory, `serve all --dev`), JWT access tokens
#      (STRATEGIES_ACCESS_TOKEN=jwt), its access-token key set replaced by an
#      ES256 key through its admin API, a client_secret_basic client made
#      through the admin API: client_credentials, then introspection (Hydra's
#      admin endpoint, which takes no client authentication);
#   5. one JSON line per run in $OUT/results.jsonl and a summary table with
#      tokend's figures as ratios to the same-run Hydra figure.
#
#   bench/scripts/token-bench.sh [--concurrency "32 100"] [--duration S] [--warmup S]
#       [--threads N] [--no-hydra] [--no-tokend] [--hydra-pbkdf2-iterations N] [--keep] [--out DIR]
#   bench/scripts/token-bench.sh --grid [--grid-filter REGEX] [--grid-algs ES256,...] [--duration S]
#       [--warmup S] [--no-hydra] [--keep] [--out DIR]
#
# --grid: seed 002's grid of sequential latencies instead (docs/performance.md):
#   1. the criterion bench `tokend_grid` (bench/benches/tokend_grid.rs: real
#      signd and tokend, one request at a time over HTTPS; client_credentials per
#      client authentication method x token algorithm, the authorization code
#      flow and introspection per algorithm), through `cargo bench` (its log
#      in $OUT/grid.log; --grid-filter is criterion's filter, --grid-algs its
#      TOKEND_GRID_ALGS);
#   2. token-load at c = 1 (one request at a time on one keep-alive
#      connection, the mean latency) against tokend ES256 on its plain listener
#      (client_secret_basic, client_secret_post, private_key_jwt) and against
#      Hydra (the same three methods, started as in 4. above);
#   3. the table in the seed's shape (rows: algorithm; columns: the
#      method; ms, mean) with Hydra's figures of the same run, in $OUT/grid.md.
#
# Hydra hashes client secrets with PBKDF2 (25,000 iterations by default) and
# checks one per client_secret_basic request; --hydra-pbkdf2-iterations sets
# OAUTH2_HASHERS_PBKDF2_ITERATIONS (1: Hydra without that cost, for
# comparison; tokend stores SHA-256 of a 256-bit secret it generated).
#
# token-load runs beside the servers on the same cores; --threads is its tokio
# worker count (default 1, leaving the other core(s) to the servers).
# Binaries come from $CARGO_TARGET_DIR/release (build them first:
# cargo build --release -p signd -p tokend -p signetctl -p signet-bench --bin token-load --bin authcode-load).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$root/scripts/lib.sh"

CONC="32 100"
DURATION=10
WARMUP=2
THREADS=1
HYDRA=1
TOKEND=1
PBKDF2=""
KEEP=0
OUT=""
GRID=0
GRID_FILTER=""
GRID_ALGS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --concurrency) CONC="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --no-hydra) HYDRA=0; shift ;;
    --no-tokend) TOKEND=0; shift ;;
    --hydra-pbkdf2-iterations) PBKDF2="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --out) OUT="$2"; shift 2 ;;
    --grid) GRID=1; shift ;;
    --grid-filter) GRID_FILTER="$2"; shift 2 ;;
    --grid-algs) GRID_ALGS="$2"; shift 2 ;;
    -h|--help) sed -n '2,56p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "token-bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

BIN="$CARGO_TARGET_DIR/release"
for b in signd tokend signetctl token-load authcode-load; do
  [ -x "$BIN/$b" ] || { echo "$BIN/$b missing: cargo build --release -p signd -p tokend -p signetctl -p signet-bench --bin token-load --bin authcode-load" >&2; exit 1; }
done
have curl || { echo "token-bench.sh needs curl" >&2; exit 1; }

DIR="$(mktemp -d "${SIGNET_BENCH_DIR:-/tmp}/token-bench.XXXXXX")"
OUT="${OUT:-$DIR/out}"
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$KEEP" = 1 ]; then echo "kept $DIR"; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

free_port() { python3 "$SIGNET_ROOT/tests/lib/free_port.py"; }
wait_http() { # url pid name
  for _ in $(seq 1 400); do
    curl -fs "$1" -o /dev/null && return 0
    kill -0 "$2" 2>/dev/null || { echo "$3 exited during startup; see $DIR/$3.log" >&2; tail -20 "$DIR/$3.log" >&2; exit 1; }
    sleep 0.05
  done
  echo "$3 did not become ready ($1); see $DIR/$3.log" >&2
  exit 1
}

# --- signd ---
ME="$(id -u)"
cat > "$DIR/signd.toml" <<TOML
socket = "$DIR/signd.sock"
socket_mode = "0600"
state_dir = "$DIR/signd"

[audit]
durability = "process"
flush_interval_ms = 200

[roles.admin]
users = [$ME]
admin = true
keys = ["*"]

[roles.tokend]
users = [$ME]
operations = ["sign-jws", "list", "public-key"]
TOML
RUST_LOG=warn "$BIN/signd" --config "$DIR/signd.toml" 2> "$DIR/signd.log" &
SIGND_PID=$!
PIDS+=("$SIGND_PID")
for _ in $(seq 1 200); do
  [ -S "$DIR/signd.sock" ] && "$BIN/signetctl" --socket "$DIR/signd.sock" health >/dev/null 2>&1 && break
  sleep 0.05
done
export SIGNET_SIGND_SOCKET="$DIR/signd.sock"
"$BIN/signetctl" health >/dev/null

# --- tokend ---
TOKEND_PID=""
start_tokend() { # name algorithm
  local name="$1" alg="$2"
  TOKEND_PORT="$(free_port)"
  mkdir -p "$DIR/$name"
  cat > "$DIR/$name/tokend.toml" <<TOML
issuer = "http://127.0.0.1:$TOKEND_PORT"
listen = "127.0.0.1:$TOKEND_PORT"
state_dir = "$DIR/$name/db"
signd_socket = "$DIR/signd.sock"
signd_role = "tokend"
admin_socket = "$DIR/$name/admin.sock"

[tokens]
algorithm = "$alg"
TOML
  RUST_LOG=warn "$BIN/tokend" --config "$DIR/$name/tokend.toml" 2> "$DIR/$name.log" &
  TOKEND_PID=$!
  PIDS+=("$TOKEND_PID")
  wait_http "http://127.0.0.1:$TOKEND_PORT/healthz" "$TOKEND_PID" "$name"
  export SIGNET_TOKEND_SOCKET="$DIR/$name/admin.sock"
  TOKEN_URL="http://127.0.0.1:$TOKEND_PORT/token"
}
stop_tokend() {
  kill -TERM "$TOKEND_PID" 2>/dev/null || true
  wait "$TOKEND_PID" 2>/dev/null || true
}
# A client as `signetctl --json oauth client create` prints it; prints its secret.
create_client() { # id args...
  local id="$1"; shift
  "$BIN/signetctl" --json oauth client create "$id" "$@" > "$DIR/client-$id.json"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("secret") or "")' "$DIR/client-$id.json"
}
# One token-load run, accounting the CPU of the servers named ("NAME=PID ..."); its JSON line goes to $RESULTS.
load() { # label servers args...
  local label="$1" s pids=()
  for s in $2; do pids+=(--pid "$s"); done
  shift 2
  echo
  "$BIN/token-load" --label "$label" --duration "$DURATION" --warmup "$WARMUP" --threads "$THREADS" \
    "${pids[@]}" "$@" | tee "$DIR/last.txt" | grep -v '^{'
  grep '^{' "$DIR/last.txt" >> "$RESULTS"
}

# --- Hydra ---
# Hydra in memory with JWT access tokens whose key set is ES256; HYDRA_PID, HPUB, HADM, HTOKEN_URL.
start_hydra() {
  ensure_hydra
  HPUB="$(free_port)"
  HADM="$(free_port)"
  local hydra_env=()
  [ -z "$PBKDF2" ] || hydra_env=("OAUTH2_HASHERS_PBKDF2_ITERATIONS=$PBKDF2")
  env "${hydra_env[@]}" DSN=memory STRATEGIES_ACCESS_TOKEN=jwt LOG_LEVEL=error URLS_SELF_ISSUER="http://127.0.0.1:$HPUB" \
    SECRETS_SYSTEM="token-bench-system-secret-$(openssl rand -hex 16)" \
    SERVE_PUBLIC_PORT="$HPUB" SERVE_PUBLIC_HOST=127.0.0.1 SERVE_ADMIN_PORT="$HADM" SERVE_ADMIN_HOST=127.0.0.1 \
    "$SIGNET_HYDRA" serve all --dev --sqa-opt-out > "$DIR/hydra.log" 2>&1 &
  HYDRA_PID=$!
  PIDS+=("$HYDRA_PID")
  wait_http "http://127.0.0.1:$HADM/health/ready" "$HYDRA_PID" hydra
  say "Hydra ($("$SIGNET_HYDRA" version | sed -n 's/^Version: *//p')) $HYDRA_PID, public $HPUB, admin $HADM"
  # Its access tokens' key set: ES256 instead of the RS256 key it generates by default.
  curl -s -X DELETE "http://127.0.0.1:$HADM/admin/keys/hydra.jwt.access-token" -o /dev/null
  curl -fs -X POST -H 'Content-Type: application/json' "http://127.0.0.1:$HADM/admin/keys/hydra.jwt.access-token" \
    -d '{"alg":"ES256","use":"sig","kid":"bench-es256"}' -o /dev/null
  HTOKEN_URL="http://127.0.0.1:$HPUB/oauth2/token"
}
# A client_credentials client through Hydra's admin API: id, auth method, then its secret or JWKS (a JSON object).
hydra_client() { # id method secret-or-jwks
  local creds
  case "$2" in
    private_key_jwt) creds="\"jwks\":$3,\"token_endpoint_auth_signing_alg\":\"ES256\"" ;;
    *) creds="\"client_secret\":\"$3\"" ;;
  esac
  curl -fs -X POST -H 'Content-Type: application/json' "http://127.0.0.1:$HADM/admin/clients" -o /dev/null -d \
    "{\"client_id\":\"$1\",$creds,\"grant_types\":[\"client_credentials\"],
      \"token_endpoint_auth_method\":\"$2\",\"scope\":\"bench.read\",
      \"audience\":[\"https://api.bench.test\"],\"access_token_strategy\":\"jwt\"}"
}
# The alg of the access token in a token response on standard input ("opaque" if it is no JWT).
token_alg() {
  python3 -c 'import json,sys,base64; t=json.load(sys.stdin)["access_token"].split(".")
print(json.loads(base64.urlsafe_b64decode(t[0]+"="*(-len(t[0])%4)))["alg"] if len(t)==3 else "opaque")'
}

# --- --grid ---
# The criterion grid, then token-load at c = 1 against tokend ES256 and Hydra; the table in $OUT/grid.md.
grid() {
  local commit loadavg filter=() c1=(--concurrency 1)
  commit="$(git -C "$root" rev-parse --short HEAD)"
  git -C "$root" diff --quiet HEAD 2>/dev/null || commit="$commit+uncommitted"
  loadavg="$(cut -d' ' -f1-3 /proc/loadavg)"
  say "grid: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $commit, load average $loadavg"
  echo "{\"grid\":{\"phase\":\"start\",\"date\":\"$(date -u +%FT%TZ)\",\"epoch\":$(date +%s),\"commit\":\"$commit\",\"loadavg\":\"$loadavg\"}}" >> "$RESULTS"
  [ -z "$GRID_FILTER" ] || filter=("$GRID_FILTER")
  (cd "$root" && env ${GRID_ALGS:+TOKEND_GRID_ALGS="$GRID_ALGS"} \
    cargo bench -p signet-bench --bench tokend_grid -- --noplot "${filter[@]}") 2>&1 | tee "$OUT/grid.log"
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "the tokend_grid bench failed; see $OUT/grid.log" >&2; exit 1; }
  echo "{\"grid\":{\"phase\":\"criterion done\",\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}}" >> "$RESULTS"

  # token-load, one request at a time: tokend ES256 on its plain listener.
  "$BIN/signetctl" key generate tok-es256 --algorithm ecdsa-p256 --role tokend > /dev/null
  start_tokend tokend-es256 ES256
  local basic post
  basic="$(create_client bench-basic --auth-method client_secret_basic --scope bench.read --audience https://api.bench.test)"
  post="$(create_client bench-post --auth-method client_secret_post --scope bench.read --audience https://api.bench.test)"
  openssl ecparam -genkey -name prime256v1 -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$DIR/assertion.pem"
  "$BIN/token-load" --url "$TOKEN_URL" --client-id bench-jwt --assertion-key "$DIR/assertion.pem" --kid bench-jwt-1 \
    --jwks-out "$DIR/bench-jwt.jwks"
  create_client bench-jwt --auth-method private_key_jwt --jwks "$DIR/bench-jwt.jwks" --scope bench.read \
    --audience https://api.bench.test > /dev/null
  load "tokend ES256 client_secret_basic" "tokend=$TOKEND_PID signd=$SIGND_PID" --url "$TOKEN_URL" "${c1[@]}" \
    --client-id bench-basic --client-secret "$basic" --scope bench.read
  load "tokend ES256 client_secret_post" "tokend=$TOKEND_PID signd=$SIGND_PID" --url "$TOKEN_URL" "${c1[@]}" \
    --auth post --client-id bench-post --client-secret "$post" --scope bench.read
  load "tokend ES256 private_key_jwt" "tokend=$TOKEND_PID signd=$SIGND_PID" --url "$TOKEN_URL" "${c1[@]}" \
    --client-id bench-jwt --assertion-key "$DIR/assertion.pem" --kid bench-jwt-1 --scope bench.read
  stop_tokend

  # The same three against Hydra (it has no tls_client_auth or self_signed_tls_client_auth).
  if [ "$HYDRA" = 1 ]; then
    start_hydra
    local hsecret halg
    hsecret="$(openssl rand -hex 24)"
    hydra_client bench-basic client_secret_basic "$hsecret"
    hydra_client bench-post client_secret_post "$hsecret"
    hydra_client bench-jwt private_key_jwt "$(cat "$DIR/bench-jwt.jwks")"
    halg="$(curl -fs -u "bench-basic:$hsecret" -d grant_type=client_credentials -d scope=bench.read "$HTOKEN_URL" | token_alg)"
    [ "$halg" = ES256 ] || { echo "Hydra's access tokens are $halg, not ES256" >&2; exit 1; }
    echo "{\"hydra_access_token_alg\":\"$halg\"}" >> "$RESULTS"
    load "hydra ES256 client_secret_basic" "hydra=$HYDRA_PID" --url "$HTOKEN_URL" "${c1[@]}" \
      --client-id bench-basic --client-secret "$hsecret" --scope bench.read
    load "hydra ES256 client_secret_post" "hydra=$HYDRA_PID" --url "$HTOKEN_URL" "${c1[@]}" \
      --auth post --client-id bench-post --client-secret "$hsecret" --scope bench.read
    load "hydra ES256 private_key_jwt" "hydra=$HYDRA_PID" --url "$HTOKEN_URL" "${c1[@]}" \
      --client-id bench-jwt --assertion-key "$DIR/assertion.pem" --kid bench-jwt-1 --scope bench.read
  fi
  echo "{\"grid\":{\"phase\":\"end\",\"date\":\"$(date -u +%FT%TZ)\",\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}}" >> "$RESULTS"

  echo
  say "the grid (ms, mean; $OUT/grid.md)"
  python3 "$here/token_grid_table.py" "$RESULTS" "$CARGO_TARGET_DIR/criterion/tokend_grid" | tee "$OUT/grid.md"
}

if [ "$GRID" = 1 ]; then
  grid
  exit 0
fi

say "signd $SIGND_PID, temporary directory $DIR"
if [ "$TOKEND" = 1 ]; then
  "$BIN/signetctl" key generate tok-es256 --algorithm ecdsa-p256 --role tokend > /dev/null
  start_tokend tokend-es256 ES256
  say "tokend (ES256) $TOKEND_PID on $TOKEN_URL"
  BASIC_SECRET="$(create_client bench-basic --auth-method client_secret_basic --scope bench.read --audience https://api.bench.test)"
  openssl ecparam -genkey -name prime256v1 -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$DIR/assertion.pem"
  "$BIN/token-load" --url "$TOKEN_URL" --client-id bench-jwt --assertion-key "$DIR/assertion.pem" --kid bench-jwt-1 \
    --jwks-out "$DIR/bench-jwt.jwks"
  create_client bench-jwt --auth-method private_key_jwt --jwks "$DIR/bench-jwt.jwks" --scope bench.read \
    --audience https://api.bench.test > /dev/null
  # A token answers before anything is timed.
  curl -fs -u "bench-basic:$BASIC_SECRET" -d grant_type=client_credentials "$TOKEN_URL" -o /dev/null

  for c in $CONC; do
    load "tokend ES256 client_secret_basic" "tokend=$TOKEND_PID signd=$SIGND_PID" --url "$TOKEN_URL" --concurrency "$c" \
      --client-id bench-basic --client-secret "$BASIC_SECRET" --scope bench.read
    load "tokend ES256 private_key_jwt" "tokend=$TOKEND_PID signd=$SIGND_PID" --url "$TOKEN_URL" --concurrency "$c" \
      --client-id bench-jwt --assertion-key "$DIR/assertion.pem" --kid bench-jwt-1 --scope bench.read
    load "tokend introspect ES256" "tokend=$TOKEND_PID signd=$SIGND_PID" --url "$TOKEN_URL" --concurrency "$c" --mode introspect \
      --client-id bench-basic --client-secret "$BASIC_SECRET"
  done

  # The authorization code flow: a user, a public client, browsers that sign in once.
  python3 -c 'import secrets; print(secrets.token_urlsafe(16))' > "$DIR/user-password"
  "$BIN/signetctl" oauth user create bench-user --password-file "$DIR/user-password" > /dev/null
  create_client bench-web --auth-method none --grant-type authorization_code --scope openid \
    --audience https://api.bench.test --redirect-uri http://127.0.0.1:9/callback > /dev/null
  flows() { # label login-every concurrency
    echo
    "$BIN/authcode-load" --label "$1" --login-every "$2" --concurrency "$3" --duration "$DURATION" --warmup "$WARMUP" \
      --threads "$THREADS" --pid "tokend=$TOKEND_PID" --pid "signd=$SIGND_PID" --issuer "${TOKEN_URL%/token}" \
      --client-id bench-web --redirect-uri http://127.0.0.1:9/callback --user bench-user \
      --password-file "$DIR/user-password" | tee "$DIR/last.txt" | grep -v '^{'
    grep '^{' "$DIR/last.txt" >> "$RESULTS"
  }
  for c in $CONC; do
    flows "tokend ES256 authorization_code+PKCE (signed in once)" 0 "$c"
  done
  flows "tokend ES256 authorization_code+PKCE (argon2id sign-in every flow)" 1 32
  stop_tokend

  "$BIN/signetctl" key generate tok-mldsa44 --algorithm ml-dsa-44 --role tokend > /dev/null
  start_tokend tokend-mldsa44 ML-DSA-44
  say "tokend (ML-DSA-44) $TOKEND_PID on $TOKEN_URL"
  BASIC_SECRET="$(create_client bench-basic --auth-method client_secret_basic --scope bench.read --audience https://api.bench.test)"
  alg="$(curl -fs -u "bench-basic:$BASIC_SECRET" -d grant_type=client_credentials "$TOKEN_URL" |
    python3 -c 'import json,sys,base64; t=json.load(sys.stdin)["access_token"].split(".")[0]; print(json.loads(base64.urlsafe_b64decode(t+"="*(-len(t)%4)))["alg"])')"
  [ "$alg" = "ML-DSA-44" ] || { echo "tokend signed $alg, not ML-DSA-44" >&2; exit 1; }
  for c in $CONC; do
    load "tokend ML-DSA-44 client_secret_basic" "tokend=$TOKEND_PID signd=$SIGND_PID" --url "$TOKEN_URL" --concurrency "$c" \
      --client-id bench-basic --client-secret "$BASIC_SECRET" --scope bench.read
  done
  stop_tokend
fi

if [ "$HYDRA" = 1 ]; then
  start_hydra
  HSECRET="$(openssl rand -hex 24)"
  hydra_client bench-basic client_secret_basic "$HSECRET"
  HYDRA_ALG="$(curl -fs -u "bench-basic:$HSECRET" -d grant_type=client_credentials -d scope=bench.read "$HTOKEN_URL" | token_alg)"
  say "Hydra's access tokens: $HYDRA_ALG${PBKDF2:+; PBKDF2 iterations $PBKDF2}"
  [ -z "$PBKDF2" ] || HYDRA_ALG="$HYDRA_ALG pbkdf2=$PBKDF2"
  echo "{\"hydra_access_token_alg\":\"$HYDRA_ALG\"}" >> "$RESULTS"
  for c in $CONC; do
    load "hydra $HYDRA_ALG client_secret_basic" "hydra=$HYDRA_PID" --url "$HTOKEN_URL" --concurrency "$c" \
      --client-id bench-basic --client-secret "$HSECRET" --scope bench.read
    load "hydra introspect $HYDRA_ALG" "hydra=$HYDRA_PID" --url "$HTOKEN_URL" --concurrency "$c" --mode introspect \
      --introspect-url "http://127.0.0.1:$HADM/admin/oauth2/introspect" --introspect-auth none \
      --client-id bench-basic --client-secret "$HSECRET" --scope bench.read
  done
fi

echo
say "summary (results in $RESULTS)"
python3 - "$RESULTS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = [r["token_load"] for r in rows if "token_load" in r]
hydra = {}
for r in runs:
    if r["label"].startswith("hydra"):
        kind = "introspect" if r["mode"] == "introspect" else "token"
        hydra[(kind, r["concurrency"])] = r["requests_per_s"]
print(f'{"run":<42} {"c":>4} {"req/s":>9} {"p50 ms":>8} {"p99 ms":>8} {"max ms":>8} {"errors":>6} {"server CPU ms/req":>17} {"x Hydra":>8}')
for r in runs:
    kind = "introspect" if r["mode"] == "introspect" else "token"
    base = hydra.get((kind, r["concurrency"]))
    ratio = f'{r["requests_per_s"] / base:.1f}' if base and not r["label"].startswith("hydra") else ""
    cpu = r["cpu"]["servers_cpu_ms_per_op"]
    print(f'{r["label"]:<42} {r["concurrency"]:>4} {r["requests_per_s"]:>9.0f} {r["p50_ms"]:>8.2f} {r["p99_ms"]:>8.2f} '
          f'{r["max_ms"]:>8.2f} {r["error_count"]:>6} {cpu:>17.4f} {ratio:>8}')
for r in (r["authcode_load"] for r in rows if "authcode_load" in r):
    cpu = r["cpu"]["servers_cpu_ms_per_op"]
    print(f'{r["label"][:42]:<42} {r["concurrency"]:>4} {r["per_sec"]:>9.0f} {r["p50_ms"]:>8.2f} {r["p99_ms"]:>8.2f} '
          f'{r["max_ms"]:>8.2f} {sum(r["errors"].values()):>6} {cpu:>17.4f} {"flows/s":>8}')
PY
