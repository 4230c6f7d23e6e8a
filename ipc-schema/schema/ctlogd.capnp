@0xb755e268c8471df0;
# The ctlogd admin interface: how operators (signetctl ct shard ...) change
# the set of logs ctlogd serves while it serves, starting with a new temporal
# shard.
#
# Evolution rules: the same as signd.capnp (add with the next ordinal, never
# renumber or remove, new parameters default to the old behaviour, failures a
# caller can act on travel as `Error` in the result union). Authorisation is
# decided by ctlogd from the caller's peer credentials (SO_PEERCRED) against
# its config (`[admin]`), never from anything the caller sends.

using Signd = import "signd.capnp";

# A shard to add.
struct ShardSpec {
  name @0 :Text;                   # its URL path segment: [A-Za-z0-9._-]{1,64}, not starting with '.'
  signdLog @1 :Text;               # its log in signd (Admin.addCtLog); empty: `name`
  notAfterStartUnixSecs @2 :Int64; # start <= NotAfter < end
  notAfterEndUnixSecs @3 :Int64;
  description @4 :Text;            # empty: "Signet CT log <name>"
}

# A log ctlogd serves.
struct Shard {
  name @0 :Text;
  logId @1 :Data;                  # SHA-256 of the public key
  publicKey @2 :Data;              # SubjectPublicKeyInfo, DER
  hasWindow @3 :Bool;              # whether it is a temporal shard
  notAfterStartUnixSecs @4 :Int64;
  notAfterEndUnixSecs @5 :Int64;
  url @6 :Text;                    # submission and monitoring prefix, ending in '/'
  treeSize @7 :UInt64;             # of its published tree head
  addedAtRunTime @8 :Bool;         # added by addShard (kept in ctlogd's store), not configured
  logListEntry @9 :Text;           # its log.v3.json (a log-list v3 entry), JSON
}

struct CtlogdHealth {
  ok @0 :Bool;
  version @1 :Text;
  uptimeSecs @2 :UInt64;
  logs @3 :UInt32;
}

struct CtAdminResult   { union { ok @0 :CtAdmin;        err @1 :Signd.Error; } }
struct ShardResult     { union { ok @0 :Shard;          err @1 :Signd.Error; } }
struct ShardListResult { union { ok @0 :List(Shard);    err @1 :Signd.Error; } }

# The bootstrap capability, one per connection, bound to the caller's peer
# credentials.
interface Ctlogd {
  # Anyone who can connect.
  health @0 () -> (health :CtlogdHealth);
  # Callers admitted by ctlogd's `[admin]` (default: the uid ctlogd runs as,
  # and root): the admin capability. Otherwise permissionDenied (and logged).
  admin @1 () -> (result :CtAdminResult);
}

# ctlogd administration. Every call re-checks that the caller is still
# admitted; a change is committed to ctlogd's store before it is answered.
interface CtAdmin {
  # Adds a temporal shard with no restart: its key from signd (the log must
  # be there: Admin.addCtLog), its storage (a directory `shards/<name>` in
  # ctlogd's state_dir), its definition committed to ctlogd's store, then
  # served under `<public_url>/<name>/`, listed in /logs.json and in the
  # metrics; submissions whose NotAfter is in its window go to it. Refused:
  # a name already served (alreadyExists, unless the same shard is asked for
  # again: then it is returned as the first call did), a window that
  # overlaps a served log's (failedPrecondition, naming it; a log with no
  # window takes every NotAfter), a bad name or window (invalidArgument), a
  # log signd does not hold or will not let ctlogd use (its error).
  addShard @0 (spec :ShardSpec) -> (result :ShardResult);
  # Every log served, configured ones and added ones, by name.
  listShards @1 () -> (result :ShardListResult);
}
