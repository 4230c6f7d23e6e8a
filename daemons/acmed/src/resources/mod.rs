//! The ACME resources (RFC 8555 §7): the routes, and the handlers of
//! accounts, orders, authorizations, challenges, finalization, certificates,
//! revocation, key change, and ARI renewal information (RFC 9773).
//!
//! The rules of the resources' states (what status an order has now, what a
//! validation's outcome does to its authorization, ...) are signet-acme's
//! ([`signet_acme::state`]); the handlers read the records, apply the rules
//! at the time of acmed's [`Clock`](signet_types::Clock), and store the
//! result. State changes are single LMDB write transactions that re-check
//! the state they change (two requests racing on one order cannot both
//! finalize it).
//!
//! - `routes`: which handler answers a request (the signed-request pipeline
//!   they go through is [`crate::server`]'s);
//! - `account`: newAccount, account updates, the orders list, keyChange;
//! - `order`: newOrder, the order, finalize;
//! - `authz`: authorizations, challenges and their validation;
//! - `cert`: certificate download, revokeCert, renewalInfo;
//! - `views`: the JSON a client is shown of each;
//! - [`inflight`]: validations and finalizations in progress (in memory).

mod account;
mod authz;
mod cert;
pub mod inflight;
mod order;
mod routes;
mod views;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand_core::{OsRng, RngCore};
use signet_acme::{Problem, ProblemType};
use time::OffsetDateTime;

pub use cert::cert_identifiers;
pub use inflight::{Claim, InFlight};

use crate::db::Id;
use crate::server::problem_with_status;

fn ts(secs: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(secs).ok()
}

fn new_id() -> Id {
    let mut id = [0u8; 16];
    OsRng.fill_bytes(&mut id);
    id
}

fn new_token() -> String {
    let mut t = [0u8; 32];
    OsRng.fill_bytes(&mut t);
    URL_SAFE_NO_PAD.encode(t)
}

fn not_found(what: &str) -> Problem {
    problem_with_status(ProblemType::Malformed, 404, format!("no such {what}"))
}

fn forbidden(what: &str) -> Problem {
    Problem::new(ProblemType::Unauthorized, format!("the {what} belongs to another account"))
}
