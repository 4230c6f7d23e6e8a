@0xa9a10d2f959f60be;
# The tokend admin interface: how operators (signetctl oauth ...) manage
# tokend's OAuth 2.0 clients and see (and refresh) the token signing keys
# tokend publishes. The keys themselves live in signd; tokend only lists them.
#
# Evolution rules: the same as signd.capnp (add with the next ordinal, never
# renumber or remove, new parameters default to the old behaviour, failures a
# caller can act on travel as `Error` in the result union). Authorisation is
# decided by tokend from the caller's peer credentials (SO_PEERCRED) against
# its config (`[admin]`), never from anything the caller sends.

using Signd = import "signd.capnp";

# A registered OAuth 2.0 client (RFC 6749 §2).
struct OauthClient {
  clientId @0 :Text;           # [A-Za-z0-9._-]{1,64}; empty in clientCreate: a random id
  name @1 :Text;               # a display name, up to 256 printable characters
  authMethod @2 :Text;         # client_secret_basic, client_secret_post, client_secret_jwt,
                               # private_key_jwt, tls_client_auth, self_signed_tls_client_auth
                               # or none (RFC 8414 / RFC 8705 names)
  secret @3 :Text;             # the client secret: only in the answers of clientCreate and
                               # clientRotateSecret, empty otherwise
  jwks @4 :Text;               # the client's public keys (private_key_jwt,
                               # self_signed_tls_client_auth): a JWKS document,
                               # or the https URL of one (http only on loopback), which tokend
                               # fetches, caches and fetches again for an unknown kid
  scopes @5 :List(Text);       # scopes it may ask for (RFC 6749 §3.3)
  audiences @6 :List(Text);    # audiences (RFC 8707 resources) its tokens may name; the first
                               # is the default
  grantTypes @7 :List(Text);   # grant types it may use; empty in clientCreate: client_credentials
  createdUnixSecs @8 :Int64;
  secretSetUnixSecs @9 :Int64; # when the secret was last set; 0 without a secret
  redirectUris @10 :List(Text);           # where the authorization endpoint may send the
                                          # browser back (compared exactly): absolute, no
                                          # fragment; https, http on a loopback host, or a
                                          # private-use scheme (RFC 8252 §7.1); at least one
                                          # with authorization_code, none without it
  postLogoutRedirectUris @11 :List(Text); # where RP-initiated logout may send the browser
                                          # afterwards; the same rules
  # tls_client_auth (RFC 8705 §2.1.2): exactly one of the next five names what the
  # client's certificate (chaining to tokend's [tls] client_ca_file) must hold; empty
  # for every other method. self_signed_tls_client_auth registers its certificates'
  # keys in `jwks` instead (§2.2).
  tlsSubjectDn @12 :Text;      # the subject DN, as an RFC 4514 string (compared per RFC 4517 §4.2.15)
  tlsSanDns @13 :Text;         # a dNSName SAN entry (case-insensitive)
  tlsSanUri @14 :Text;         # a uniformResourceIdentifier SAN entry
  tlsSanIp @15 :Text;          # an iPAddress SAN entry (IPv4 or IPv6, textual)
  tlsSanEmail @16 :Text;       # an rfc822Name SAN entry
}

# A local user, who signs in to tokend's login page with a password.
struct OauthUser {
  userName @0 :Text;           # [A-Za-z0-9._@-]{1,64}, not starting with '-'
  name @1 :Text;               # a display name (OIDC `name`), up to 256 printable characters
  email @2 :Text;              # an email address (OIDC `email`); empty: none
  groups @3 :List(Text);       # groups (OIDC `groups`), each [A-Za-z0-9._-]{1,64}
  password @4 :Text;           # only in the requests of userCreate and userSetPassword
                               # (8 to 1024 bytes); empty in every answer
  createdUnixSecs @5 :Int64;
  passwordSetUnixSecs @6 :Int64;
  disabled @7 :Bool;           # a disabled user cannot sign in
}

# A token signing key tokend publishes in its JWKS.
struct TokenKey {
  keyId @0 :Text;              # signd's key id, the JWS `kid`
  alg @1 :Text;                # its JOSE `alg`
  firstSeenUnixSecs @2 :Int64; # when tokend first listed it (published from then on)
  supersededUnixSecs @3 :Int64;# when a newer key took over signing; 0: not superseded
  signing @4 :Bool;            # whether it signs new tokens
}

struct TokendHealth {
  ok @0 :Bool;
  version @1 :Text;
  uptimeSecs @2 :UInt64;
  clients @3 :UInt64;
  signingKey @4 :Text;         # the key new tokens are signed with; empty: none yet
}

struct TokendAdminResult   { union { ok @0 :TokendAdmin;       err @1 :Signd.Error; } }
struct OauthClientResult   { union { ok @0 :OauthClient;       err @1 :Signd.Error; } }
struct OauthClientListResult { union { ok @0 :List(OauthClient); err @1 :Signd.Error; } }
struct TokenKeyListResult  { union { ok @0 :List(TokenKey);    err @1 :Signd.Error; } }
struct OauthUserResult     { union { ok @0 :OauthUser;         err @1 :Signd.Error; } }
struct OauthUserListResult { union { ok @0 :List(OauthUser);   err @1 :Signd.Error; } }

# The bootstrap capability, one per connection, bound to the caller's peer
# credentials.
interface Tokend {
  # Anyone who can connect.
  health @0 () -> (health :TokendHealth);
  # Callers admitted by tokend's `[admin]` (default: the uid tokend runs as,
  # and root): the admin capability. Otherwise permissionDenied (and logged).
  admin @1 () -> (result :TokendAdminResult);
}

# tokend administration. Every call re-checks that the caller is still
# admitted (SIGHUP reloads `[admin]`); a change is committed to tokend's store
# before it is answered. No answer but clientCreate's and clientRotateSecret's
# carries a secret; no answer carries a user's password (tokend keeps only its
# argon2id hash).
interface TokendAdmin {
  # Registers a client. tokend generates the secret (256 random bits,
  # base64url) for the client_secret_* methods; the answer is the only time it
  # leaves tokend (client_secret_basic/post: only its SHA-256 is kept).
  # private_key_jwt needs `jwks` ({"keys": [...]}, at least one key); none
  # takes no jwks and no client_credentials grant. `audiences` must not be
  # empty; `secret` must be (tokend makes every secret); the times are
  # ignored. alreadyExists if the id is taken; invalidArgument for a bad id,
  # name, method, scope, audience or grant type.
  clientCreate @0 (client :OauthClient) -> (result :OauthClientResult);
  # Every client, ordered by id, without secrets.
  clientList @1 () -> (result :OauthClientListResult);
  # One client, without its secret; notFound if there is none.
  clientShow @2 (clientId :Text) -> (result :OauthClientResult);
  # Deletes a client: its tokens already issued stay valid until they expire
  # (or are revoked). Answers with the client as it was. notFound if there is none.
  clientDelete @3 (clientId :Text) -> (result :OauthClientResult);
  # Replaces a client's secret with a new random one (the old one stops
  # working at once); the answer carries the new secret, once.
  # invalidArgument for private_key_jwt and none clients; notFound if there is none.
  clientRotateSecret @4 (clientId :Text) -> (result :OauthClientResult);
  # The published signing keys, as of tokend's last refresh.
  keyList @5 () -> (result :TokenKeyListResult);
  # Reads signd's key list again now and applies the rotation rules (a new key
  # is published at once and signs after `key_publish_seconds`); answers with
  # the published keys. unavailable if signd cannot be reached.
  keyRefresh @6 () -> (result :TokenKeyListResult);

  # Creates a local user with `password` (hashed with argon2id; the times and
  # `disabled` are ignored: a new user is enabled). alreadyExists if the name
  # is taken; invalidArgument for a bad name, display name, email, group or
  # password.
  userCreate @7 (user :OauthUser) -> (result :OauthUserResult);
  # Every user, ordered by name.
  userList @8 () -> (result :OauthUserListResult);
  # One user; notFound if there is none.
  userShow @9 (userName :Text) -> (result :OauthUserResult);
  # Deletes a user, ends its sessions and revokes its refresh tokens (and the
  # access tokens issued from them). Answers with the user as it was.
  userDelete @10 (userName :Text) -> (result :OauthUserResult);
  # Replaces a user's password; ends its sessions and revokes its refresh
  # tokens, as userDelete.
  userSetPassword @11 (userName :Text, password :Text) -> (result :OauthUserResult);
  # Disables (ending its sessions and revoking its refresh tokens, as
  # userDelete) or enables a user.
  userSetDisabled @12 (userName :Text, disabled :Bool) -> (result :OauthUserResult);
}
