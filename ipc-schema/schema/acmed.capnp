@0xd9e732be9c001b5f;
# The acmed admin interface: how operators (signetctl acme ...) manage what
# acmed keeps beside the ACME protocol, starting with the keys of external
# account binding (RFC 8555 §7.3.4).
#
# Evolution rules: the same as signd.capnp (add with the next ordinal, never
# renumber or remove, new parameters default to the old behaviour, failures a
# caller can act on travel as `Error` in the result union). Authorisation is
# decided by acmed from the caller's peer credentials (SO_PEERCRED) against its
# config (`[admin]`), never from anything the caller sends.

using Signd = import "signd.capnp";

# An external account binding key: a MAC key handed to a customer out of band.
# newAccount must carry a binding MACed with it (HS256/384/512 over the account
# key); a key binds one account, once.
struct EabKey {
  keyId @0 :Text;              # the `kid` clients send: [A-Za-z0-9._-]{1,64}
  hmacKey @1 :Data;            # the MAC key: only in eabCreate's answer, empty otherwise
  createdUnixSecs @2 :Int64;
  boundAccount @3 :Text;       # the URL of the account it bound; empty while unbound
  note @4 :Text;               # the operator's note
}

struct AcmedHealth {
  ok @0 :Bool;
  version @1 :Text;
  uptimeSecs @2 :UInt64;
  accounts @3 :UInt64;
  eabKeys @4 :UInt64;
  externalAccountRequired @5 :Bool;   # acmed's `external_account_required`
}

struct AcmeAdminResult  { union { ok @0 :AcmeAdmin;        err @1 :Signd.Error; } }
struct EabKeyResult     { union { ok @0 :EabKey;           err @1 :Signd.Error; } }
struct EabKeyListResult { union { ok @0 :List(EabKey);     err @1 :Signd.Error; } }

# The bootstrap capability, one per connection, bound to the caller's peer
# credentials.
interface Acmed {
  # Anyone who can connect.
  health @0 () -> (health :AcmedHealth);
  # Callers admitted by acmed's `[admin]` (default: the uid acmed runs as, and
  # root): the admin capability. Otherwise permissionDenied (and logged).
  admin @1 () -> (result :AcmeAdminResult);
}

# acmed administration. Every call re-checks that the caller is still admitted
# (SIGHUP reloads `[admin]`); a change is committed to acmed's store before it
# is answered.
interface AcmeAdmin {
  # Creates a key with a random 256-bit MAC key, under `keyId`, or under a
  # random id when `keyId` is empty. The answer is the only time the MAC key
  # leaves acmed. alreadyExists if the id is taken; invalidArgument for a bad
  # id or a note with control characters or over 1024 bytes.
  eabCreate @0 (keyId :Text, note :Text) -> (result :EabKeyResult);
  # Every key, ordered by id, without MAC keys.
  eabList @1 () -> (result :EabKeyListResult);
  # One key, without its MAC key; notFound if there is none.
  eabShow @2 (keyId :Text) -> (result :EabKeyResult);
  # Deletes a key that has not bound an account, so it never can; answers with
  # the key as it was (without its MAC key). notFound if there is none. A bound
  # key is refused with alreadyExists: it has bound its one account already and
  # can never bind another, it stays as the record of which account it bound,
  # and that account keeps working either way.
  eabDelete @3 (keyId :Text) -> (result :EabKeyResult);
  # Issues from CA `name` from now on: the successor signd made of the issuer
  # acmed issues from (signd's Admin.issueIssuingCa, served by ocspd after
  # its Registry.addSuccessor). acmed asks signd for its certificate and
  # profile, checks that the same CA signed it as the current one, commits
  # the switch to its store (it holds after a restart, over the config's
  # `issuer`), and only then issues from it: orders finalized after the
  # answer are signed by `name` and recorded in ocspd under it, their chain
  # is `name`'s. Finalizations already under way finish with the CA they
  # began with; certificates issued before keep their chain, and their
  # revocation goes to the issuer that signed them. Naming the issuer in use
  # changes nothing. Returns the name of the issuer in use.
  useIssuer @4 (name :Text) -> (result :Signd.TextResult);
}
