@0xb563f6a66f5a9c50;
# The signd interface: the only way any Signet process reaches a private key.
#
# Evolution rules (Cap'n Proto wire compatibility; old clients must keep working):
#   1. Add fields, enumerants and methods only with the next unused ordinal (@N).
#      Never renumber, never reuse an ordinal, never change a field's type.
#   2. Never remove anything: rename it to `obsoleteXxx` and stop using it.
#   3. A new parameter must have a default that keeps the old behaviour.
#   4. Every method documents who may call it. Authorisation is decided by signd
#      from the caller's peer credentials (SO_PEERCRED), never from anything the
#      caller sends: the capability a caller holds *is* its permission.
#   5. Failures a caller can act on travel as `Error` (a kind plus detail) in the
#      result union, never as a bare RPC exception; an RPC exception means the
#      transport itself failed.


# The algorithm of a key pair.
enum KeyAlgorithm {
  ecP256 @0;
  ecP384 @1;
  ecP521 @2;
  ed25519 @3;
  rsa2048 @4;
  rsa3072 @5;
  rsa4096 @6;
  mlDsa44 @7;
  mlDsa65 @8;
  mlDsa87 @9;
}

# How to sign with a key. `default` means the key's own default scheme.
# The caller always sends the whole message; signd hashes as the scheme requires.
enum SignatureScheme {
  default @0;
  ecdsaSha256 @1;
  ecdsaSha384 @2;
  ecdsaSha512 @3;
  ed25519 @4;
  rsaPkcs1Sha256 @5;
  rsaPkcs1Sha384 @6;
  rsaPkcs1Sha512 @7;
  rsaPssSha256 @8;
  rsaPssSha384 @9;
  rsaPssSha512 @10;
  mlDsa44 @11;
  mlDsa65 @12;
  mlDsa87 @13;
}

enum ErrorKind {
  internal @0;          # a bug or an unexpected condition inside signd
  permissionDenied @1;  # the caller's role may not do this
  unknownKey @2;        # no key with that id
  wrongAlgorithm @3;    # the scheme does not fit the key
  invalidArgument @4;   # malformed request (bad id, empty batch, bad PKCS#8 ...)
  keyUnavailable @5;    # the key exists but could not be loaded (file damaged, token gone)
  backend @6;           # the crypto backend failed
  alreadyExists @7;     # a key with that id exists
  unavailable @8;       # signd cannot be reached
  tooLarge @9;          # message or batch over the configured limit
  unsupported @10;      # the backend or token cannot do this
  notFound @11;         # no such record (a certificate serial in ocspd ...)
  failedPrecondition @12; # well-formed, but the record's state does not allow it
                          # (releasing a certificate that is not on hold ...)
  alreadyRevoked @13;     # ocspd: the certificate is already revoked (the first
                          # revocation wins; only keyCompromise may raise its reason)
  shuttingDown @14;       # the daemon is stopping: calls it had are answered, new ones refused
}

struct Error {
  kind @0 :ErrorKind;
  detail @1 :Text;
}

struct KeyInfo {
  id @0 :Text;
  algorithm @1 :KeyAlgorithm;
  spki @2 :Data;             # SubjectPublicKeyInfo, DER
  createdUnixSecs @3 :Int64;
  roles @4 :List(Text);      # roles that may use the key
  backend @5 :Text;          # "openssl", later "nss"
  location @6 :Text;         # where the private key lives (file path, token:label)
  available @7 :Bool;        # loaded and checked against its public key
  problem @8 :Text;          # why it is unavailable, when it is
}

struct Caller {
  uid @0 :UInt32;
  gid @1 :UInt32;
  pid @2 :Int32;
  roles @3 :List(Text);      # roles granted to this caller by policy
  admin @4 :Bool;            # whether `Signd.admin` will succeed
}

struct Health {
  ok @0 :Bool;
  version @1 :Text;
  keysLoaded @2 :UInt32;
  keysUnavailable @3 :UInt32;
  uptimeSecs @4 :UInt64;
  auditRecords @5 :UInt64;
}

struct KeySpec {
  id @0 :Text;               # [A-Za-z0-9._-]{1,64}
  algorithm @1 :KeyAlgorithm;
  roles @2 :List(Text);
  backend @3 :Text;          # empty: the default backend
}

struct AuditQuery {
  afterSeq @0 :UInt64;       # 0: from the start (or the end, with newestFirst)
  limit @1 :UInt32 = 100;
  newestFirst @2 :Bool;
}

struct AuditRecord {
  seq @0 :UInt64;
  timeUnixNanos @1 :Int64;
  operation @2 :Text;        # sign, sign-batch, generate, import, signer, admin,
                             # issue-cert, sign-crl, sign-ocsp, issuer, crl-signer, ocsp-signer,
                             # sign-ct, log-signer ...
  keyId @3 :Text;
  uid @4 :UInt32;
  pid @5 :Int32;
  role @6 :Text;
  messageSha256 @7 :Data;    # empty when no message was involved
  ok @8 :Bool;
  outcome @9 :Text;          # "ok" or the error kind and detail; issue-cert, sign-crl
                             # and sign-ocsp successes add what was signed:
                             # "ok serial=<hex>", "ok crl-number=<hex> revoked=<n>",
                             # "ok serial=<hex> status=good|revoked|unknown";
                             # sign-ct: "ok scts=<n> tree-heads=<m>", plus
                             # " tree-size=<largest>" when m > 0 (messageSha256:
                             # over the call's inputs, concatenated)
}

struct CallerResult    { union { ok @0 :Caller;              err @1 :Error; } }
struct SignerResult    { union { ok @0 :Signer;              err @1 :Error; } }
struct AdminResult     { union { ok @0 :Admin;               err @1 :Error; } }
struct KeyResult       { union { ok @0 :KeyInfo;             err @1 :Error; } }
struct KeyListResult   { union { ok @0 :List(KeyInfo);       err @1 :Error; } }
struct SignResult      { union { ok @0 :Data;                err @1 :Error; } }
struct SignBatchResult { union { ok @0 :List(Data);          err @1 :Error; } }
struct SignEachResult  { union { ok @0 :List(SignResult);    err @1 :Error; } }
struct AuditResult     { union { ok @0 :List(AuditRecord);   err @1 :Error; } }
struct IssuerResult    { union { ok @0 :Issuer;              err @1 :Error; } }
struct CrlSignerResult { union { ok @0 :CrlSigner;           err @1 :Error; } }
struct OcspSignerResult { union { ok @0 :OcspSigner;         err @1 :Error; } }
struct LogSignerResult { union { ok @0 :LogSigner;           err @1 :Error; } }
# A signed object (Certificate, CertificateList, OCSPResponse) or a certificate, DER.
struct DerResult       { union { ok @0 :Data;                err @1 :Error; } }
struct TextResult      { union { ok @0 :Text;                err @1 :Error; } }

# The bootstrap capability. signd creates one per connection, bound to the
# caller's peer credentials.
interface Signd {
  # Anyone who can connect: who signd thinks the caller is.
  whoami @0 () -> (result :CallerResult);
  # Callers granted `role` by policy: a Signer limited to that role's keys and
  # operations. An empty role picks the caller's first role.
  signer @1 (role :Text) -> (result :SignerResult);
  # Callers granted an admin role: key management and the audit log.
  admin @2 () -> (result :AdminResult);
  # Anyone who can connect.
  health @3 () -> (health :Health);
  # Callers holding a role listed in the named CA issuer's `roles` (signd
  # config `[issuers.<name>]`): an Issuer that signs end-entity certificates
  # of that CA only. An empty name picks the first issuer (by name) the caller
  # may use. Refusals are audited (operation "issuer").
  issuer @4 (name :Text) -> (result :IssuerResult);
  # Callers holding a role listed in the issuer's `crl_roles`: a CrlSigner for
  # that CA's CRLs. Empty name as for `issuer`. Audited as "crl-signer".
  crlSigner @5 (name :Text) -> (result :CrlSignerResult);
  # Callers holding a role listed in the issuer's `ocsp.roles`: an OcspSigner
  # for that CA's delegated OCSP responder. Empty name as for `issuer`.
  # Audited as "ocsp-signer".
  ocspSigner @6 (name :Text) -> (result :OcspSignerResult);
  # Callers holding a role listed in the named CT log's `roles` (signd config
  # `[logs.<name>]`): a LogSigner that signs that log's SCTs and tree heads
  # only. An empty name picks the first log (by name) the caller may use.
  # Refusals are audited (operation "log-signer").
  logSigner @7 (name :Text) -> (result :LogSignerResult);
}

# Signing within one role. Every call is checked against the role's keys and
# operations and recorded in the audit log, refusals included.
interface Signer {
  listKeys @0 () -> (result :KeyListResult);
  publicKey @1 (keyId :Text) -> (result :KeyResult);
  sign @2 (keyId :Text, scheme :SignatureScheme, message :Data) -> (result :SignResult);
  # Signs every message with the same key; the signatures come back in order.
  signBatch @3 (keyId :Text, scheme :SignatureScheme, messages :List(Data)) -> (result :SignBatchResult);
  # Several separate `sign` calls with the same key and scheme, carried in one
  # message: what the client sends when such calls queue up together. Each is
  # checked, signed and audited ("sign") exactly as its own `sign` call would
  # be, and each has its own outcome; `ok` holds them in order. `err` only
  # when the message as a whole is refused (malformed, or more calls than the
  # batch limit).
  signEach @4 (keyId :Text, scheme :SignatureScheme, messages :List(Data)) -> (result :SignEachResult);
}

# Key management for admin roles.
interface Admin {
  listKeys @0 () -> (result :KeyListResult);
  key @1 (keyId :Text) -> (result :KeyResult);
  generateKey @2 (spec :KeySpec) -> (result :KeyResult);
  # `pkcs8` is a PKCS#8 PrivateKeyInfo, PEM or DER.
  importKey @3 (spec :KeySpec, pkcs8 :Data) -> (result :KeyResult);
  audit @4 (query :AuditQuery) -> (result :AuditResult);
  # A new delegated OCSP responder for issuer `issuer` (one with an OCSP
  # responder configured): signd builds its certificate (the current
  # responder's subject, key `keyId`'s public key, id-kp-OCSPSigning,
  # id-pkix-ocsp-nocheck, `validityDays` days, 0: 365), signs it with the
  # CA key (audited: "issue-ocsp-responder"), keeps it in its store and makes
  # it the responder `responderCertificate` names and signs with, at once and
  # after a restart. The responders before it stay accepted: a ResponseData
  # naming one of them is signed with its key, so OCSP never stops while
  # ocspd switches. `keyId` must be a key signd holds that no issuer uses as
  # its CA key; naming the current responder's key again returns its
  # certificate (a resent call issues nothing). Returns the certificate, DER.
  issueOcspResponder @5 (issuer :Text, keyId :Text, validityDays :UInt32) -> (result :DerResult);
  # A new issuing CA beside issuer `issuer` (the rotation of an issuing CA):
  # signd builds an intermediate certificate for key `keyId` (subject
  # `subject`, CA:TRUE pathLen 0, `validityDays` days, 0: 3650) and signs it
  # with `rootKeyId`, which must be the key that signed `issuer`'s
  # certificate; then the new CA's delegated OCSP responder certificate for
  # `responderKeyId` (the current responder's subject, as
  # issueOcspResponder builds it, 365 days) signed by the new CA. Both are
  # kept in signd's store as issuer `newName`, with `issuer`'s profile and
  # roles; its CRL URL is `crlUrl` or, when that is empty, `issuer`'s with
  # ocspd's CRL path of `issuer` (/crl/<issuer>/, /crl/<issuer>.crl) made
  # `newName`'s. signd
  # serves it through `issuer`, `crlSigner` and `ocspSigner` at once and
  # after every restart (audited: "issue-issuing-ca"). `issuer` stays as it
  # is: its key keeps signing CRLs and OCSP for what it issued. `keyId` and
  # `responderKeyId` must be keys signd holds that no issuer uses; a name
  # already taken is alreadyExists, unless it is a CA this call made with the
  # same `keyId` (a resent call): its certificate comes back. Returns the new
  # CA's certificate, DER.
  issueIssuingCa @6 (issuer :Text, newName :Text, keyId :Text, rootKeyId :Text, responderKeyId :Text,
                     subject :Text, validityDays :UInt32, crlUrl :Text) -> (result :DerResult);
  # A new CT log (a temporal shard) named `name` whose log key is `keyId`
  # (an ECDSA P-256 key signd holds that no other log and no issuer uses),
  # with no restart: signd keeps it in its store (fsynced before the answer;
  # audited "add-ct-log") and serves its LogSigner at once and after a
  # restart, under the same rule as a log of the config: holders of one of
  # `roles` may obtain it. Empty `roles`: the roles of the configured logs.
  # A name the config or an earlier call gave another key: alreadyExists;
  # the same name and key again returns the key, as the first call did (a
  # resent call adds nothing). Returns the log key's SubjectPublicKeyInfo, DER.
  addCtLog @7 (name :Text, keyId :Text, roles :List(Text)) -> (result :DerResult);
}

# Certificate issuance for one CA. signd parses every TBSCertificate and
# refuses (permissionDenied, or invalidArgument if it does not decode) anything
# that is not a well-formed end-entity certificate of this CA within the
# issuer's profile: no CA:TRUE or keyCertSign/cRLSign, validity within the
# profile's maximum, only allowed EKUs and subject key algorithms, issuer name,
# AKI and signature algorithm those of the CA. The reason is in the detail.
# Every call re-checks that the caller still holds one of the issuer's roles
# and is audited ("issue-cert", with the serial in the outcome).
interface Issuer {
  # Signs `tbs` (a DER TBSCertificate) with the CA key; returns the whole
  # Certificate, DER.
  signTbsCertificate @0 (tbs :Data) -> (result :DerResult);
  # The CA's own certificate, DER (the issuer of what `signTbsCertificate` returns).
  caCertificate @1 () -> (result :DerResult);
  # The issuer's end-entity profile as TOML (the fields of signet_ca::Profile),
  # so a front end builds what signd will sign.
  profile @2 () -> (result :TextResult);
}

# CRL signing for one CA: only a v2 TBSCertList naming this CA (issuer name,
# AKI, signature algorithm) with a cRLNumber and a nextUpdate after thisUpdate.
# Holders of a role in the issuer's `crl_roles`. Audited ("sign-crl").
interface CrlSigner {
  # Signs `tbs` (a DER TBSCertList); returns the CertificateList, DER.
  signTbsCertList @0 (tbs :Data) -> (result :DerResult);
  # The CA's own certificate, DER.
  caCertificate @1 () -> (result :DerResult);
  # The issuer's end-entity profile as TOML, for its CRL distribution point
  # URL and shard count.
  profile @2 () -> (result :TextResult);
}

# OCSP response signing with one CA's delegated responder key: only a
# ResponseData whose responderID is the responder and that holds exactly one
# SingleResponse about a certificate of this CA. Holders of a role in the
# issuer's `ocsp.roles`. Audited ("sign-ocsp").
interface OcspSigner {
  # Signs `responseData` (DER); returns a successful OCSPResponse (DER) whose
  # BasicOCSPResponse carries the responder certificate.
  signResponseData @0 (responseData :Data) -> (result :DerResult);
  # The responder's certificate, DER.
  responderCertificate @1 () -> (result :DerResult);
  # The CA's own certificate, DER (the issuer of the responder certificate).
  caCertificate @2 () -> (result :DerResult);
  # Several separate `signResponseData` calls carried in one message: what
  # the client sends when such calls for one CA queue up together. Each is
  # checked, signed and audited ("sign-ocsp") exactly as its own call would
  # be, and each has its own outcome (`ok` holds them in order, each an
  # OCSPResponse). `err` only when the message as a whole is refused
  # (malformed, or more calls than the batch limit).
  signEach @3 (responseData :List(Data)) -> (result :SignEachResult);
}

# Signing for one Certificate Transparency log (RFC 6962) with its log key
# (ECDSA P-256). Holders of a role in the log's `roles`; every call re-checks
# that the caller still holds it.
interface LogSigner {
  # One DER ECDSA-Sig-Value per input, in order: each input is hashed with
  # SHA-256 and signed with the log key (RFC 6962 §2.1.4). Every input must be
  # a well-formed RFC 6962 `digitally-signed` input, else the whole call is
  # refused (invalidArgument, naming the input's index and why):
  #   - an SCT's (§3.2): version v1 (0), signature_type certificate_timestamp
  #     (0), a uint64 timestamp, then an x509_entry (0) whose ASN.1Cert
  #     decodes as a DER Certificate, or a precert_entry (1) with a 32-byte
  #     issuer_key_hash and a TBSCertificate that decodes as DER, then
  #     CtExtensions<0..2^16-1>, and nothing after;
  #   - a tree head's (§3.5): version v1 (0), signature_type tree_hash (1),
  #     uint64 timestamp, uint64 tree_size, 32-byte root hash: 50 bytes.
  # More inputs than signd's batch limit: tooLarge. One audit record per call
  # ("sign-ct", see AuditRecord.outcome).
  signMany @0 (inputs :List(Data)) -> (result :SignBatchResult);
  # The log key's SubjectPublicKeyInfo, DER (its SHA-256 is the log ID).
  publicKey @1 () -> (result :DerResult);
}
