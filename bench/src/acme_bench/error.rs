//! Why an issuance failed, and the category it is counted under.

use signet_acme::Problem;

/// Why a request or an issuance failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with a problem document (RFC 8555 §6.7).
    #[error("{url}: HTTP {status}: {}: {}", .problem.kind, .problem.detail.as_deref().unwrap_or(""))]
    Problem {
        /// The request URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The problem.
        problem: Box<Problem>,
    },
    /// The server answered an error status without a problem document.
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        /// The request URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// A resource became invalid (an authorization whose challenge failed,
    /// an order the server gave up on), with the server's reason if it gave one.
    #[error("{what} became invalid: {}", .problem.as_ref().map_or_else(|| "no error given".to_owned(), |p| format!("{}: {}", p.kind, p.detail.as_deref().unwrap_or(""))))]
    Invalid {
        /// "authorization", "order" or "challenge".
        what: &'static str,
        /// The resource's `error` member.
        problem: Option<Box<Problem>>,
    },
    /// Connecting, TLS, or HTTP framing failed.
    #[error("transport: {0}")]
    Transport(String),
    /// A request took longer than `--timeout`.
    #[error("timeout: {0}")]
    Timeout(String),
    /// Polling did not reach a final status before `--poll-timeout`.
    #[error("still {status} after polling {what} for {secs} s")]
    PollTimeout {
        /// What was polled.
        what: &'static str,
        /// Its last status.
        status: String,
        /// How long.
        secs: u64,
    },
    /// The server's answer did not make sense as ACME (bad JSON, a missing header, ...).
    #[error("protocol: {0}")]
    Protocol(String),
    /// Key generation, CSR building or JWS signing failed on this side.
    #[error("client crypto: {0}")]
    Crypto(String),
    /// Publishing the challenge response failed on this side.
    #[error("challenge setup: {0}")]
    ChallengeSetup(String),
    /// `--verify-cert` refused the certificate.
    #[error("certificate verification: {0}")]
    Verify(String),
}

impl Error {
    /// The key errors are counted under: the ACME problem type's short name
    /// (`badNonce`, `incorrectResponse`, ...; an unknown type's whole URI)
    /// when the server gave one, else a fixed category of this client.
    pub fn category(&self) -> String {
        let problem_name = |p: &Problem| p.kind.name().map_or_else(|| p.kind.uri(), str::to_owned);
        match self {
            Error::Problem { problem, .. } => problem_name(problem),
            Error::Invalid { problem: Some(problem), .. } => problem_name(problem),
            Error::Invalid { what, problem: None } => format!("{what}Invalid"),
            Error::Status { status, .. } => format!("http{status}"),
            Error::Transport(_) => "transport".into(),
            Error::Timeout(_) => "timeout".into(),
            Error::PollTimeout { .. } => "pollTimeout".into(),
            Error::Protocol(_) => "protocol".into(),
            Error::Crypto(_) => "clientCrypto".into(),
            Error::ChallengeSetup(_) => "challengeSetup".into(),
            Error::Verify(_) => "verify".into(),
        }
    }

    /// Is this the server refusing a nonce (to be retried once with a fresh one)?
    pub fn is_bad_nonce(&self) -> bool {
        matches!(self, Error::Problem { problem, .. } if problem.kind == signet_acme::ProblemType::BadNonce)
    }

    /// A failure of key generation, CSR building or signing on this side.
    pub fn crypto(e: impl std::fmt::Display) -> Error {
        Error::Crypto(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use signet_acme::ProblemType;

    use super::*;

    #[test]
    fn categories_name_the_problem_type() {
        let problem = |kind| Box::new(Problem::new(kind, "x"));
        let e = Error::Problem { url: "u".into(), status: 400, problem: problem(ProblemType::BadNonce) };
        assert_eq!(e.category(), "badNonce");
        assert!(e.is_bad_nonce());
        let e = Error::Invalid { what: "authorization", problem: Some(problem(ProblemType::IncorrectResponse)) };
        assert_eq!(e.category(), "incorrectResponse");
        assert!(!e.is_bad_nonce());
        assert!(e.to_string().contains("incorrectResponse: x"), "{e}");
        let e = Error::Invalid { what: "order", problem: None };
        assert_eq!(e.category(), "orderInvalid");
        let other = Problem::new(ProblemType::Other("urn:example:oops".into()), "x");
        let e = Error::Problem { url: "u".into(), status: 500, problem: Box::new(other) };
        assert_eq!(e.category(), "urn:example:oops");
        assert_eq!(Error::Status { url: "u".into(), status: 502, body: String::new() }.category(), "http502");
    }
}
