//! signd's configuration file (TOML, decoded strictly: an unknown key is an error).
//!
//! Plain data: the checks that need the rest of signd (users and groups resolved, issuer
//! certificates read) are `DaemonConfig::check_config` in the crate root, so this module
//! depends on no other module of signd.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use signet_ca::Profile;
use signet_runtime::config::SocketMode;

/// The whole of `signd.toml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The Unix socket to bind when not socket-activated (activation passes an fd named "signd").
    pub socket: PathBuf,
    /// Permissions of a socket signd binds itself, as an octal string (default "0660").
    #[serde(default)]
    pub socket_mode: SocketMode,
    /// Where keys (`keys/`) and the LMDB store (`db/`) live.
    pub state_dir: PathBuf,
    /// Signing threads; 0 means one per CPU.
    #[serde(default)]
    pub workers: usize,
    /// How long, in microseconds, the serving thread keeps polling its
    /// sockets after the last call in progress ends before it sleeps (0: never). A
    /// caller's next request inside the window is read without waking the
    /// thread, which saves tens of microseconds per call on a VM; the cost is
    /// at most this much CPU after each burst of calls.
    #[serde(default = "default_busy_poll_us")]
    pub busy_poll_us: u64,
    /// Limits on what a caller may send.
    #[serde(default)]
    pub limits: Limits,
    /// How the audit log is committed.
    #[serde(default)]
    pub audit: AuditConfig,
    /// CA issuers by name (see [`crate::issuers`]): `[issuers.<name>]`.
    #[serde(default)]
    pub issuers: BTreeMap<String, IssuerConfig>,
    /// Certificate Transparency logs by name (see [`crate::logs`]): `[logs.<name>]`.
    #[serde(default)]
    pub logs: BTreeMap<String, LogConfig>,
    /// Roles by name: who holds them and what they may do.
    #[serde(default)]
    pub roles: BTreeMap<String, RoleConfig>,
    /// The NSS backend (keys on an NSS token or an HSM); absent: OpenSSL only.
    #[serde(default)]
    pub nss: Option<NssConfig>,
}

/// `[issuers.<name>]`: one CA whose key signs through the issuer roles.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerConfig {
    /// The signd key id of the CA's private key.
    pub key: String,
    /// The CA's own certificate (PEM or DER); its public key must be `key`'s.
    pub certificate: PathBuf,
    /// The signature scheme (e.g. "ecdsa-sha384"); default: the key's default.
    #[serde(default)]
    pub scheme: Option<String>,
    /// The end-entity profile certificates must fit, inline (the fields of
    /// `signet_ca::Profile`). Give this or `profile_file`.
    #[serde(default)]
    pub profile: Option<Profile>,
    /// A TOML file holding the profile. Give this or `profile`.
    #[serde(default)]
    pub profile_file: Option<PathBuf>,
    /// Roles that may obtain this CA's `Issuer` (sign end-entity certificates).
    #[serde(default)]
    pub roles: Vec<String>,
    /// Roles that may obtain this CA's `CrlSigner`.
    #[serde(default)]
    pub crl_roles: Vec<String>,
    /// The delegated OCSP responder; absent: no `OcspSigner` for this CA.
    #[serde(default)]
    pub ocsp: Option<OcspConfig>,
    /// Roles that may still sign raw messages with this issuer's keys (CA and
    /// responder) through the plain `Signer`; by default none may.
    #[serde(default)]
    pub raw_signing_roles: Vec<String>,
}

/// `[issuers.<name>.ocsp]`: the CA's delegated OCSP responder.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OcspConfig {
    /// The signd key id of the responder's private key.
    pub key: String,
    /// The responder's certificate (PEM or DER), issued by the CA.
    pub certificate: PathBuf,
    /// The signature scheme; default: the key's default.
    #[serde(default)]
    pub scheme: Option<String>,
    /// Roles that may obtain this CA's `OcspSigner`.
    #[serde(default)]
    pub roles: Vec<String>,
}

/// `[logs.<name>]`: one Certificate Transparency log whose key signs, through
/// the `LogSigner` capability, only RFC 6962 SCT and tree head signature inputs.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// The signd key id of the log's private key; it must be an ECDSA P-256
    /// key (RFC 6962 §2.1.4), or signd does not start.
    pub key: String,
    /// Roles that may obtain this log's `LogSigner`.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Roles that may still sign raw messages with the log key through the
    /// plain `Signer`; by default none may.
    #[serde(default)]
    pub raw_signing_roles: Vec<String>,
}

/// `[nss]`: keys on an NSS token (softokn or a PKCS #11 module registered in
/// the database, such as an HSM).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NssConfig {
    /// The NSS database, `sql:DIR` (a bare directory means `sql:DIR`). It must
    /// exist: signd does not start without it.
    pub database: String,
    /// The label of the token new keys are generated on; empty or "internal"
    /// is NSS's own softokn.
    #[serde(default)]
    pub token: String,
    /// A file whose first line is the token's user PIN (for systemd,
    /// `LoadCredential=nss-pin:...` and `/run/credentials/signd.service/nss-pin`).
    /// Unreadable: signd does not start. Needed when the token requires a login.
    #[serde(default)]
    pub pin_file: Option<PathBuf>,
    /// Keys already on the token that signd serves.
    #[serde(default)]
    pub keys: Vec<NssKeyConfig>,
}

/// `[[nss.keys]]`: an existing token key served under a signd key id.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NssKeyConfig {
    /// The signd key id.
    pub id: String,
    /// The key's nickname (CKA_LABEL) on the token; give this or `cka_id`.
    #[serde(default)]
    pub nickname: Option<String>,
    /// The key's CKA_ID, hex; give this or `nickname`.
    #[serde(default)]
    pub cka_id: Option<String>,
    /// Roles that may use the key (besides roles whose `keys` patterns match it).
    #[serde(default)]
    pub roles: Vec<String>,
}

fn default_busy_poll_us() -> u64 {
    signet_ipc::server::DEFAULT_BUSY_POLL.as_micros() as u64
}

/// Limits on requests.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// The largest single message to sign, in bytes.
    pub max_message_bytes: usize,
    /// The most messages in one batch.
    pub max_batch: usize,
    /// The largest Cap'n Proto frame; a larger one closes the connection.
    pub max_frame_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_message_bytes: 16 << 20, max_batch: 10_000, max_frame_bytes: 64 << 20 }
    }
}

/// Audit log durability.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// "process": a record is committed to LMDB before the signature is
    /// returned, so it survives a crash or kill -9 of signd, and the file is
    /// fsynced every `flush_interval_ms`; a power loss can lose the last
    /// interval. "sync": every group commit is fsynced before any signature in
    /// it is returned (each commit then waits for a disk flush).
    pub durability: Durability,
    /// fsync interval for "process" durability, in milliseconds.
    pub flush_interval_ms: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self { durability: Durability::Process, flush_interval_ms: 200 }
    }
}

/// See [`AuditConfig::durability`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Survives a process crash; fsynced periodically.
    Process,
    /// fsynced before acknowledging.
    Sync,
}

/// One role.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleConfig {
    /// Users holding the role, by name or uid.
    #[serde(default)]
    pub users: Vec<Principal>,
    /// Groups whose members (primary or supplementary) hold the role, by name or gid.
    #[serde(default)]
    pub groups: Vec<Principal>,
    /// Keys the role may use, by id; `*` matches everything, a trailing `*` a
    /// prefix. A key is also usable by every role named in its own `roles` list.
    #[serde(default)]
    pub keys: Vec<String>,
    /// Signer operations allowed: "sign", "list", "public-key".
    #[serde(default = "default_operations")]
    pub operations: Vec<Operation>,
    /// Whether the role may manage keys and read the audit log.
    #[serde(default)]
    pub admin: bool,
}

fn default_operations() -> Vec<Operation> {
    vec![Operation::Sign, Operation::List, Operation::PublicKey]
}

pub use signet_runtime::principals::Principal;

/// What a signer may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    /// Sign and sign batches.
    Sign,
    /// List the role's keys.
    List,
    /// Read a key's public half.
    PublicKey,
    /// Sign JWS signing inputs only (tokend's role): each message must be
    /// `BASE64URL(header).BASE64URL(payload)` whose header names the key
    /// (`kid`) and an `alg` that fits it, over a JSON object (crate::jws).
    SignJws,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_config() {
        let c: Config = toml::from_str(
            r#"
            socket = "/run/signet/signd.sock"
            state_dir = "/var/lib/signet/signd"
            [audit]
            durability = "sync"
            [roles.admin]
            users = ["root", 1000]
            admin = true
            keys = ["*"]
            [roles.issuer]
            groups = ["signet-acmed"]
            keys = ["ca-*"]
            operations = ["sign"]
            "#,
        )
        .unwrap();
        assert_eq!(c.audit.durability, Durability::Sync);
        assert_eq!(c.roles["admin"].users, vec![Principal::Name("root".into()), Principal::Id(1000)]);
        assert_eq!(c.roles["issuer"].operations, vec![Operation::Sign]);
        assert_eq!(c.roles["admin"].operations.len(), 3);
        assert!(c.nss.is_none());
    }

    #[test]
    fn parses_nss() {
        let c: Config = toml::from_str(
            r#"
            socket = "/s"
            state_dir = "/d"
            [nss]
            database = "sql:/var/lib/signet/nssdb"
            token = "signet"
            pin_file = "/run/credentials/signd.service/nss-pin"
            [[nss.keys]]
            id = "ca-root"
            nickname = "Signet Root"
            roles = ["issuer"]
            [[nss.keys]]
            id = "ocsp"
            cka_id = "0a1b"
            "#,
        )
        .unwrap();
        let nss = c.nss.unwrap();
        assert_eq!(nss.token, "signet");
        assert_eq!(nss.keys.len(), 2);
        assert_eq!(nss.keys[1].cka_id.as_deref(), Some("0a1b"));
        let e =
            toml::from_str::<Config>("socket = \"/s\"\nstate_dir = \"/d\"\n[nss]\ndatabase = \"x\"\npin = \"1234\"\n")
                .unwrap_err();
        assert!(e.to_string().contains("pin"), "{e}");
    }

    #[test]
    fn unknown_keys_are_errors() {
        let e = toml::from_str::<Config>("socket = \"/s\"\nstate_dir = \"/d\"\nsokcet = 1\n").unwrap_err();
        assert!(e.to_string().contains("sokcet"), "{e}");
        let e = toml::from_str::<Config>("socket = \"/s\"\nstate_dir = \"/d\"\n[roles.a]\nuser = []\n").unwrap_err();
        assert!(e.to_string().contains("user"), "{e}");
    }
}
