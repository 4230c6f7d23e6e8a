//! What kind of failure an error is, and the errors of this crate's types.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::algorithm::{KeyAlgorithm, SignatureScheme};

/// What kind of failure an error is: the kind of signet-ipc's `IpcError`,
/// mirroring `ErrorKind` in the schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A bug or unexpected condition inside signd.
    Internal,
    /// The caller's role may not do this.
    PermissionDenied,
    /// No key with that id.
    UnknownKey,
    /// The scheme does not fit the key.
    WrongAlgorithm,
    /// A malformed request.
    InvalidArgument,
    /// The key exists but could not be loaded or checked.
    KeyUnavailable,
    /// The crypto backend failed.
    Backend,
    /// A key with that id already exists.
    AlreadyExists,
    /// signd cannot be reached, or the connection broke.
    Unavailable,
    /// A message or batch over the configured limit.
    TooLarge,
    /// The backend or token cannot do this.
    Unsupported,
    /// No such record (a certificate serial in ocspd, ...).
    NotFound,
    /// A well-formed request that the record's current state does not allow
    /// (releasing a certificate that is not on hold, ...).
    FailedPrecondition,
    /// The certificate is already revoked: the first revocation wins, and
    /// only keyCompromise may raise the reason of an earlier one.
    AlreadyRevoked,
    /// The daemon is stopping: it finishes the calls it has, and refuses new ones.
    /// Worth retrying once it is back (as [`ErrorKind::Unavailable`]).
    ShuttingDown,
}

impl ErrorKind {
    /// Every kind, in the schema's order.
    pub const ALL: [ErrorKind; 15] = [
        Self::Internal,
        Self::PermissionDenied,
        Self::UnknownKey,
        Self::WrongAlgorithm,
        Self::InvalidArgument,
        Self::KeyUnavailable,
        Self::Backend,
        Self::AlreadyExists,
        Self::Unavailable,
        Self::TooLarge,
        Self::Unsupported,
        Self::NotFound,
        Self::FailedPrecondition,
        Self::AlreadyRevoked,
        Self::ShuttingDown,
    ];

    /// The daemon is not there for now (unreachable, or stopping): the same
    /// call may succeed later, as opposed to a refusal that will not change.
    pub fn is_transient(self) -> bool {
        matches!(self, Self::Unavailable | Self::ShuttingDown)
    }

    /// A stable name for logs, JSON and exit-code mapping.
    pub fn name(self) -> &'static str {
        match self {
            Self::Internal => "internal",
            Self::PermissionDenied => "permission-denied",
            Self::UnknownKey => "unknown-key",
            Self::WrongAlgorithm => "wrong-algorithm",
            Self::InvalidArgument => "invalid-argument",
            Self::KeyUnavailable => "key-unavailable",
            Self::Backend => "backend",
            Self::AlreadyExists => "already-exists",
            Self::Unavailable => "unavailable",
            Self::TooLarge => "too-large",
            Self::Unsupported => "unsupported",
            Self::NotFound => "not-found",
            Self::FailedPrecondition => "failed-precondition",
            Self::AlreadyRevoked => "already-revoked",
            Self::ShuttingDown => "shutting-down",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is none of a type's names (parsing a [`KeyAlgorithm`],
/// a [`SignatureScheme`], ...). An [`ErrorKind::InvalidArgument`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{name}` ({expected})")]
pub struct UnknownName {
    /// What was parsed: "key algorithm", "signature scheme", ...
    pub what: &'static str,
    /// The name given.
    pub name: String,
    /// The names there are, for people: "expected one of a, b, c".
    pub expected: String,
}

impl UnknownName {
    /// `name` is not a `what`; `expected` lists the names there are.
    pub fn new(what: &'static str, name: &str, expected: String) -> Self {
        Self { what, name: name.to_owned(), expected }
    }

    /// [`ErrorKind::InvalidArgument`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidArgument
    }
}

/// A scheme that cannot be used with a key ([`KeyAlgorithm::resolve`]). An
/// [`ErrorKind::WrongAlgorithm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("scheme {scheme} cannot be used with a {key} key")]
pub struct SchemeMismatch {
    /// The scheme asked for, with `Default` resolved to the key's default.
    pub scheme: SignatureScheme,
    /// The key's algorithm.
    pub key: KeyAlgorithm,
}

impl SchemeMismatch {
    /// [`ErrorKind::WrongAlgorithm`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::WrongAlgorithm
    }
}
