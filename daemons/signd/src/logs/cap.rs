//! The LogSigner capability: one caller, acting in one role, for one CT log.
//!
//! Every call re-checks that the caller still holds the role. A `signMany`
//! is checked whole on a signing thread ([`super::input`]), then signed on as
//! many signing threads as it has shares; its one audit record ("sign-ct",
//! refusals with their reason) is committed before the caller hears the
//! answer.

use std::rc::Rc;
use std::sync::Arc;

use futures::FutureExt;
use signet_ipc::server::{LocalResult, LogSignerService};
use signet_ipc::{IpcError, SignatureScheme};

use super::{input, CtLog};
use crate::backend::SigningKey;
use crate::service::Caller;

/// The audit operation of obtaining the capability.
const OBTAIN: &str = "log-signer";
/// The audit operation of a `signMany`.
const SIGN: &str = "sign-ct";
/// The fewest inputs worth a signing thread of their own.
const MIN_SHARE: usize = 16;

/// `Signd.logSigner`.
pub(crate) fn log_signer(caller: Caller, name: String) -> LocalResult<Rc<dyn LogSignerService>> {
    async move { Ok(Rc::new(obtain(caller, name).await?) as Rc<dyn LogSignerService>) }.boxed_local()
}

/// One caller, one role, one log.
struct Cap {
    caller: Caller,
    role: String,
    log: Arc<CtLog>,
}

/// Hands out the capability if the caller holds one of the log's roles;
/// otherwise records the refusal and returns it.
async fn obtain(caller: Caller, name: String) -> Result<Cap, IpcError> {
    let logs = caller.shared.logs.borrow().clone();
    let held = caller.held_roles();
    let role_for = |log: &CtLog| held.iter().find(|h| log.roles.contains(h)).cloned();
    let chosen = if name.is_empty() {
        logs.iter()
            .find_map(|log| role_for(log).map(|r| (log.clone(), r)))
            .ok_or_else(|| IpcError::denied(format!("uid {} holds no role of any CT log", caller.peer.uid)))
    } else {
        match logs.get(&name) {
            None => Err(IpcError::invalid(format!("no CT log `{name}` is configured"))),
            Some(log) => role_for(log).map(|r| (log.clone(), r)).ok_or_else(|| {
                IpcError::denied(format!(
                    "uid {} holds none of the roles ({}) that may obtain the log-signer of CT log `{name}`",
                    caller.peer.uid,
                    log.roles.join(", ")
                ))
            }),
        }
    };
    match chosen {
        Ok((log, role)) => Ok(Cap { caller, role, log }),
        Err(e) => {
            let key = logs.get(&name).map(|log| log.key_id.clone()).unwrap_or_default();
            caller.refuse("", OBTAIN, &key, e).await
        }
    }
}

impl Cap {
    /// The capability is still usable: the caller holds the role, and the
    /// log still admits it.
    fn check(&self) -> Result<(), IpcError> {
        if self.caller.held_role(&self.caller.policy(), &self.role).is_some() && self.log.roles.contains(&self.role) {
            Ok(())
        } else {
            Err(IpcError::denied(format!("role `{}` is no longer held", self.role)))
        }
    }

    /// The log key's signing handle, if the caller may use it now.
    fn key(&self) -> Result<Arc<dyn SigningKey>, IpcError> {
        self.check()?;
        Ok(self.caller.shared.state.keys.require(&self.log.key_id)?.signer()?.clone())
    }
}

impl LogSignerService for Cap {
    fn sign_many(&self, inputs: Vec<Vec<u8>>) -> LocalResult<Vec<Vec<u8>>> {
        let ready = if inputs.is_empty() { Err(IpcError::invalid("no inputs to sign")) } else { self.key() };
        let (caller, role, log) = (self.caller.clone(), self.role.clone(), self.log.clone());
        async move {
            let key = match ready {
                Ok(k) => k,
                Err(e) => return caller.refuse(&role, SIGN, &log.key_id, e).await,
            };
            let state = caller.shared.state.clone();
            let mut entry = state.audit.entry(&caller.peer, &role, SIGN, &log.key_id);
            let stopped = || IpcError::internal("signing thread stopped");
            // Checked whole on a signing thread (parsing certificates is not
            // for the serving thread), and hashed for the audit record.
            let (inputs, hash, checked) = state
                .pool
                .run(move || {
                    let hash = inputs_sha256(&inputs);
                    let checked = input::check_all(&inputs);
                    (inputs, hash, checked)
                })
                .await
                .ok_or_else(stopped)?;
            entry.message_sha256 = hash;
            let outcome = match checked {
                Err(why) => Err(IpcError::invalid(format!("CT log `{}` refused the inputs: {why}", log.name))),
                Ok(summary) => sign_shares(&state, key, inputs).await.map(|sigs| (sigs, summary)),
            };
            match outcome {
                Ok((signatures, summary)) => {
                    entry.outcome = summary.outcome();
                    state.audit.append_wait(vec![entry]).await?;
                    Ok(signatures)
                }
                Err(e) => {
                    tracing::info!(uid = caller.peer.uid, pid = caller.peer.pid, role = %role, operation = SIGN, key = %log.key_id, error = %e, "refused");
                    state.audit.append_wait(vec![entry.failed(&e)]).await?;
                    Err(e)
                }
            }
        }
        .boxed_local()
    }

    fn public_key(&self) -> LocalResult<Vec<u8>> {
        let outcome = self.check().map(|()| self.log.spki.clone());
        futures::future::ready(outcome).boxed_local()
    }
}

/// Signs `inputs` (already checked) with `key`, ECDSA with SHA-256, split
/// in one share per signing thread; the signatures in order.
async fn sign_shares(
    state: &crate::service::State,
    key: Arc<dyn SigningKey>,
    inputs: Vec<Vec<u8>>,
) -> Result<Vec<Vec<u8>>, IpcError> {
    let share = inputs.len().div_ceil(state.pool.threads().max(1)).max(MIN_SHARE);
    let mut inputs = inputs.into_iter();
    let mut pending = Vec::new();
    loop {
        let part: Vec<Vec<u8>> = inputs.by_ref().take(share).collect();
        if part.is_empty() {
            break;
        }
        let key = key.clone();
        pending.push(state.pool.run(move || {
            part.iter().map(|m| key.sign(SignatureScheme::EcdsaSha256, m)).collect::<Result<Vec<_>, _>>()
        }));
    }
    let mut signatures = Vec::new();
    for part in futures::future::join_all(pending).await {
        signatures.extend(part.ok_or_else(|| IpcError::internal("signing thread stopped"))??);
    }
    Ok(signatures)
}

/// SHA-256 over the inputs, concatenated (the audit record's message hash).
fn inputs_sha256(inputs: &[Vec<u8>]) -> Vec<u8> {
    let mut h = openssl::sha::Sha256::new();
    for i in inputs {
        h.update(i);
    }
    h.finish().to_vec()
}
