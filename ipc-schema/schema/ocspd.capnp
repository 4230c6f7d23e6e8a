@0xd2a1f0c3b7e49a61;
# The ocspd interface: how issuers (acmed, signetctl) tell ocspd what they
# issued and revoked, and read back status and CRLs.
#
# Evolution rules: the same as signd.capnp (add with the next ordinal, never
# renumber or remove, new parameters default to the old behaviour, failures a
# caller can act on travel as `Error` in the result union). Authorisation is
# decided by ocspd from the caller's peer credentials (SO_PEERCRED) against its
# config, never from anything the caller sends.

using Signd = import "signd.capnp";

# RFC 5280 CRLReason, with the same numbers (7 is not used).
enum RevocationReason {
  unspecified @0;
  keyCompromise @1;
  caCompromise @2;
  affiliationChanged @3;
  superseded @4;
  cessationOfOperation @5;
  certificateHold @6;
  unused7 @7;              # never valid; kept so ordinals equal the RFC codes
  removeFromCrl @8;
  privilegeWithdrawn @9;
  aaCompromise @10;
}

enum CertState {
  good @0;
  revoked @1;
  unknown @2;               # ocspd has no record of the serial
}

# What an issuer records about a certificate it has just issued.
struct IssuedCert {
  serial @0 :Data;          # the serial number's content octets (DER INTEGER value)
  notAfterUnixSecs @1 :Int64;
  crlShard @2 :UInt32;      # the shard named in the certificate's CRLDP (0 if unsharded)
}

struct CertStatus {
  serial @0 :Data;
  state @1 :CertState;
  notAfterUnixSecs @2 :Int64;
  crlShard @3 :UInt32;
  recordedUnixSecs @4 :Int64;
  revokedUnixSecs @5 :Int64;        # 0 unless revoked
  reason @6 :RevocationReason;      # meaningful only when revoked
  releasedUnixSecs @7 :Int64;       # when last released from hold (state good); 0 if never
}

struct Revocation {
  serial @0 :Data;
  reason @1 :RevocationReason;
  revokedUnixSecs @2 :Int64;        # 0: now
}

# Which CRL to fetch.
struct CrlSelector {
  union {
    full @0 :Void;
    shard @1 :UInt32;
    delta @2 :Void;
  }
}

struct IssuerInfo {
  name @0 :Text;
  caCertificate @1 :Data;           # DER
  responderCertificate @2 :Data;    # DER
  crlShards @3 :UInt32;             # 0: one CRL, no shards
  ocspUrl @4 :Text;
  crlUrl @5 :Text;                  # the full CRL's URL
}

struct OcspdHealth {
  ok @0 :Bool;
  version @1 :Text;
  issuers @2 :List(Text);
  certificates @3 :UInt64;
  revoked @4 :UInt64;
  uptimeSecs @5 :UInt64;
}

struct RegistryResult     { union { ok @0 :Registry;          err @1 :Signd.Error; } }
struct CertStatusResult   { union { ok @0 :CertStatus;        err @1 :Signd.Error; } }
struct IssuerInfoResult   { union { ok @0 :IssuerInfo;        err @1 :Signd.Error; } }

# The bootstrap capability, one per connection, bound to the caller's peer
# credentials.
interface Ocspd {
  # Anyone who can connect.
  health @0 () -> (health :OcspdHealth);
  # Callers listed in the issuer's `registrars` (ocspd config): a Registry for
  # that CA. An empty name picks the first issuer (by name) the caller may use.
  registry @1 (issuer :Text) -> (result :RegistryResult);
}

# The certificates of one CA.
interface Registry {
  # Records an issued certificate as good. Answered only once the record is
  # committed to disk: from then on OCSP answers good for it. Recording the same
  # serial again with the same data is a no-op; with different data, alreadyExists.
  recordIssued @0 (cert :IssuedCert) -> (result :CertStatusResult);
  # Revokes a recorded certificate. Answered once the revocation is committed;
  # OCSP and the CRLs show it within a second. Revoking again keeps the first
  # time, but may change the reason to keyCompromise (RFC 5280 5.3.1), and a
  # certificate on hold (certificateHold) may be revoked for good with any
  # other reason; notFound if the serial was never recorded. The reason
  # removeFromCRL is invalidArgument: a hold is released with releaseHold.
  revoke @1 (revocation :Revocation) -> (result :CertStatusResult);
  # The recorded status (state unknown if never recorded).
  status @2 (serial :Data) -> (result :CertStatusResult);
  # The newest CRL of the given kind, DER.
  crl @3 (which :CrlSelector) -> (result :Signd.DerResult);
  # The CA's certificates and URLs.
  info @4 () -> (result :IssuerInfoResult);
  # Releases a certificate from hold (revoked with reason certificateHold): it
  # is good again. Same callers as revoke (the issuer's registrars). Answered
  # once committed; OCSP answers good at once, the next full CRL and the
  # certificate's shard no longer list it, and every delta CRL whose base
  # listed it on hold lists it with reason removeFromCRL (RFC 5280 5.3.1)
  # until a base that does not list it is chosen. notFound if the serial was
  # never recorded; invalidArgument if it is not on hold (good, or revoked for
  # another reason: such a revocation is permanent).
  releaseHold @5 (serial :Data) -> (result :CertStatusResult);
  # Asks signd again for the CA's OCSP responder certificate and signs every
  # response from then on with it; the responses in the store are re-signed
  # by it in the background. For after signd's Admin.issueOcspResponder: no
  # restart, and no request fails meanwhile. Same callers as revoke. Returns
  # the CA's certificates and URLs as `info` then gives them.
  refreshResponder @6 () -> (result :IssuerInfoResult);
  # Serves issuer `name`, the successor signd made of this one (signd's
  # Admin.issueIssuingCa): its certificates and profile asked of signd, its
  # settings and registrars this issuer's, recorded in ocspd's store (so it
  # is served again after a restart with no config edit), OCSP answered and
  # CRLs published for it at once. This issuer stays served: it keeps
  # answering OCSP and publishing CRLs for what it issued. Same callers as
  # revoke; answered once recorded. Serving `name` already (a resent call)
  # returns its info; notFound if signd has no issuer `name`. Returns the new
  # issuer's certificates and URLs as `info` gives them.
  addSuccessor @7 (name :Text) -> (result :IssuerInfoResult);
}
