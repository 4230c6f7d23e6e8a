#!/usr/bin/env bash
# scripts/lib.sh's reuse of a cached build across fresh clones: the old file
# times it sets, and every case in which it must leave the times alone (a
# stale cached build is worse than a slow one). Runs on a scratch git
# repository with a fake target directory; no cargo.
source "$(dirname "$0")/../../scripts/lib.sh"
set +e

fails=0
check() { # name condition...
  local name="$1"; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
mtime() { stat -c %Y "$SIGNET_ROOT/$1"; }
old() { [ "$(mtime "$1")" -lt 1000000000 ]; }
recent() { [ "$(mtime "$1")" -gt $(( $(date +%s) - 600 )) ]; }
fresh_times() { (cd "$SIGNET_ROOT" && git ls-files -z | xargs -0 touch && touch . src schema); }

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
SIGNET_ROOT="$scratch/repo"
target="$scratch/target"
mkdir -p "$SIGNET_ROOT/src" "$SIGNET_ROOT/schema" "$target/release/.fingerprint/x-1"
git() { command git -c user.name=t -c user.email=t@example.org "$@"; }
(
  cd "$SIGNET_ROOT" && git init -q . && echo a >src/a.rs && echo b >src/b.rs && echo s >schema/s.capnp && git add . && git commit -qm one
) || exit 1
first="$(git -C "$SIGNET_ROOT" rev-parse HEAD)"

# A build of the first commit, recorded; then a commit that changes b.rs.
touch -d '-1 min' "$target/release/.fingerprint/x-1/lib"
stamp_build "$first" "$target"
check "stamp_build records the commit built" [ "$(cat "$target/$SIGNET_BUILT_FROM")" = "$first" ]
(cd "$SIGNET_ROOT" && echo b2 >src/b.rs && echo c >src/c.rs && git add . && git commit -qm two) || exit 1
second="$(git -C "$SIGNET_ROOT" rev-parse HEAD)"

fresh_times
reuse_build_times "$target" 2>/dev/null
check "an unchanged file gets the old time" old src/a.rs
check "a changed file keeps a recent time" recent src/b.rs
check "an added file keeps a recent time" recent src/c.rs
check "a directory holding only unchanged files gets the old time (rerun-if-changed on a directory)" old schema
check "a directory holding a changed file keeps a recent time" recent src

fresh_times
mkdir -p "$scratch/unstamped/release/.fingerprint/x-1"
reuse_build_times "$target" "$scratch/unstamped" 2>/dev/null
check "a second target directory without a stamp: times left alone" recent src/a.rs

fresh_times
reuse_build_times "$target" "$scratch/no-such-target" 2>/dev/null
check "a second target directory not built yet is passed over: the first one's build reused" old src/a.rs
check "... and a changed file still keeps a recent time" recent src/b.rs

fresh_times
reuse_build_times "$scratch/no-such-target" 2>/dev/null
check "no target directory built yet: times left alone" recent src/a.rs

fresh_times
echo dirty >>"$SIGNET_ROOT/src/a.rs"
reuse_build_times "$target" 2>/dev/null
check "a dirty tree: times left alone" recent src/b.rs
git -C "$SIGNET_ROOT" checkout -q -- src/a.rs

fresh_times
touch "$target/release/.fingerprint/x-1/lib"  # built by hand since the stamp
reuse_build_times "$target" 2>/dev/null
check "something built since the stamp: times left alone" recent src/a.rs

# A stamp from a commit that is not an ancestor of HEAD.
stamp_build "$second" "$target"
(cd "$SIGNET_ROOT" && git checkout -q "$first") || exit 1
fresh_times
reuse_build_times "$target" 2>/dev/null
check "a stamp from another line of history: times left alone" recent src/a.rs
(cd "$SIGNET_ROOT" && git checkout -q -) || exit 1

# stamp_build refuses a tree that changed during the run.
rm -f "$target/$SIGNET_BUILT_FROM"
echo dirty >>"$SIGNET_ROOT/src/a.rs"
stamp_build "$second" "$target"
check "stamp_build records nothing when the tree ends dirty" [ ! -e "$target/$SIGNET_BUILT_FROM" ]
git -C "$SIGNET_ROOT" checkout -q -- src/a.rs
stamp_build "$first" "$target"
check "stamp_build records nothing when HEAD moved during the run" [ ! -e "$target/$SIGNET_BUILT_FROM" ]
stamp_build "" "$target"
check "stamp_build records nothing for a run that began dirty" [ ! -e "$target/$SIGNET_BUILT_FROM" ]

echo "build-times: $fails failed"
[ "$fails" -eq 0 ]
