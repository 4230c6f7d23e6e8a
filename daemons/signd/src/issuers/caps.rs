//! The Issuer, CrlSigner and OcspSigner capabilities.
//!
//! Each is one caller acting in one role for one CA. Every call re-checks that
//! the caller still holds the role; the DER it sends is validated, signed and
//! assembled on a signing thread, and the outcome (refusals with their reason)
//! is committed to the audit log before the caller hears it.

use std::rc::Rc;
use std::sync::Arc;
use std::time::SystemTime;

use futures::FutureExt;
use signet_ca::CaError;
use signet_ipc::server::{CrlSignerService, IssuerService, LocalResult, OcspSignerService};
use signet_ipc::{ErrorKind, IpcError, SignatureScheme};

use super::CaIssuer;
use crate::backend::SigningKey;
use crate::dispatch::{SignJob, Task, Work};
use crate::service::Caller;

/// Which capability, for role lists, audit names and errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Issuer,
    Crl,
    Ocsp,
}

impl Kind {
    /// The roles that may obtain this capability of `ca` (none: not offered).
    fn roles(self, ca: &CaIssuer) -> Option<&[String]> {
        match self {
            Kind::Issuer => Some(&ca.roles),
            Kind::Crl => Some(&ca.crl_roles),
            Kind::Ocsp => ca.ocsp.as_ref().map(|o| o.roles.as_slice()),
        }
    }

    /// The audit operation for obtaining the capability.
    fn obtain_operation(self) -> &'static str {
        match self {
            Kind::Issuer => "issuer",
            Kind::Crl => "crl-signer",
            Kind::Ocsp => "ocsp-signer",
        }
    }

    /// The key this capability signs with (the OCSP responder's: the current one).
    fn key_id(self, ca: &CaIssuer) -> String {
        match (self, &ca.ocsp) {
            (Kind::Ocsp, Some(o)) => o.current().key_id.clone(),
            _ => ca.key_id.clone(),
        }
    }
}

/// A call checked and ready for the dispatcher, with the answer it will
/// get; or, refused, the audited refusal.
type Prepared = Result<(SignJob, LocalResult<Vec<u8>>), LocalResult<Vec<u8>>>;

/// One caller, one role, one CA.
struct Cap {
    caller: Caller,
    role: String,
    ca: Arc<CaIssuer>,
    kind: Kind,
}

/// `Signd.issuer`.
pub(crate) fn issuer(caller: Caller, name: String) -> LocalResult<Rc<dyn IssuerService>> {
    async move { Ok(Rc::new(obtain(caller, name, Kind::Issuer).await?) as Rc<dyn IssuerService>) }.boxed_local()
}

/// `Signd.crlSigner`.
pub(crate) fn crl_signer(caller: Caller, name: String) -> LocalResult<Rc<dyn CrlSignerService>> {
    async move { Ok(Rc::new(obtain(caller, name, Kind::Crl).await?) as Rc<dyn CrlSignerService>) }.boxed_local()
}

/// `Signd.ocspSigner`.
pub(crate) fn ocsp_signer(caller: Caller, name: String) -> LocalResult<Rc<dyn OcspSignerService>> {
    async move { Ok(Rc::new(obtain(caller, name, Kind::Ocsp).await?) as Rc<dyn OcspSignerService>) }.boxed_local()
}

/// Hands out the capability if the caller holds one of its roles; otherwise
/// records the refusal and returns it.
async fn obtain(caller: Caller, name: String, kind: Kind) -> Result<Cap, IpcError> {
    let issuers = caller.shared.issuers.borrow().clone();
    let held = caller.held_roles();
    let role_for = |ca: &CaIssuer| kind.roles(ca).and_then(|roles| held.iter().find(|h| roles.contains(h)).cloned());
    let chosen = if name.is_empty() {
        issuers.iter().find_map(|ca| role_for(ca).map(|r| (ca.clone(), r))).ok_or_else(|| {
            IpcError::denied(format!(
                "uid {} holds no role of any issuer's {}",
                caller.peer.uid,
                kind.obtain_operation()
            ))
        })
    } else {
        match issuers.get(&name) {
            None => Err(IpcError::invalid(format!("no issuer `{name}` is configured"))),
            Some(ca) if kind.roles(ca).is_none() => {
                Err(IpcError::new(ErrorKind::Unsupported, format!("issuer `{name}` has no OCSP responder configured")))
            }
            Some(ca) => role_for(ca).map(|r| (ca.clone(), r)).ok_or_else(|| {
                IpcError::denied(format!(
                    "uid {} holds none of the roles ({}) that may obtain the {} of issuer `{name}`",
                    caller.peer.uid,
                    kind.roles(ca).unwrap_or_default().join(", "),
                    kind.obtain_operation()
                ))
            }),
        }
    };
    match chosen {
        Ok((ca, role)) => Ok(Cap { caller, role, ca, kind }),
        Err(e) => {
            let key = issuers.get(&name).map(|ca| kind.key_id(ca)).unwrap_or_default();
            caller.refuse("", kind.obtain_operation(), &key, e).await
        }
    }
}

impl Cap {
    /// The capability is still usable: the caller holds the role, and the role
    /// still admits it.
    fn check(&self) -> Result<(), IpcError> {
        let still = self.caller.held_role(&self.caller.policy(), &self.role).is_some()
            && self.kind.roles(&self.ca).is_some_and(|r| r.contains(&self.role));
        if still {
            Ok(())
        } else {
            Err(IpcError::denied(format!("role `{}` is no longer held", self.role)))
        }
    }

    /// Validates, signs and assembles (see [`crate::dispatch`]), auditing the outcome
    /// as `operation`.
    fn sign(&self, operation: &'static str, der: Vec<u8>, work: Work) -> LocalResult<Vec<u8>> {
        self.sign_with_key(operation, self.kind.key_id(&self.ca), der, work)
    }

    /// [`Cap::sign`] with the key `key_id`.
    fn sign_with_key(&self, operation: &'static str, key_id: String, der: Vec<u8>, work: Work) -> LocalResult<Vec<u8>> {
        match self.prepare(operation, key_id, der, work) {
            Ok((job, answer)) => {
                self.caller.shared.dispatch.submit(job);
                answer
            }
            Err(refused) => refused,
        }
    }

    /// A call checked and ready for the dispatcher, with where its answer
    /// will come from; or its refusal, audited.
    fn prepare(&self, operation: &'static str, key_id: String, der: Vec<u8>, work: Work) -> Prepared {
        let caller = self.caller.clone();
        let role = self.role.clone();
        let ready = self.check().and_then(|()| Ok(caller.shared.state.keys.require(&key_id)?.signer()?.clone()));
        let handle = match ready {
            Ok(h) => h,
            Err(e) => return Err(async move { caller.refuse(&role, operation, &key_id, e).await }.boxed_local()),
        };
        let entry = caller.shared.state.audit.entry(&caller.peer, &role, operation, &key_id);
        let (reply, rx) = tokio::sync::oneshot::channel();
        let job = SignJob { key: handle, task: Task::Assemble { der, work }, entry, reply };
        let answer = async move { rx.await.map_err(|_| IpcError::internal("signing thread stopped"))? };
        Ok((job, answer.boxed_local()))
    }

    fn ca_certificate(&self) -> LocalResult<Vec<u8>> {
        let outcome = self.check().map(|()| self.ca.certificate.clone());
        futures::future::ready(outcome).boxed_local()
    }

    fn profile(&self) -> LocalResult<String> {
        let outcome = self.check().and_then(|()| {
            toml::to_string(&self.ca.profile)
                .map_err(|e| IpcError::internal(format!("cannot encode the profile of `{}`: {e}", self.ca.name)))
        });
        futures::future::ready(outcome).boxed_local()
    }
}

/// A validation failure as a typed refusal: undecodable input is
/// `InvalidArgument`, anything the policy forbids is `PermissionDenied`.
fn refusal(ca: &str, what: &str, e: CaError) -> IpcError {
    let kind = match e {
        CaError::Malformed { .. } => ErrorKind::InvalidArgument,
        _ => ErrorKind::PermissionDenied,
    };
    IpcError::new(kind, format!("issuer `{ca}` refused the {what}: {e}"))
}

/// Assembly of what signd just signed cannot fail on validated input; if it
/// does, that is a bug.
fn assembly(e: CaError) -> IpcError {
    IpcError::internal(format!("assembling the signed object: {e}"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sign_with(key: &dyn SigningKey, scheme: SignatureScheme, tbs: &[u8]) -> Result<Vec<u8>, IpcError> {
    key.sign(scheme, tbs)
}

impl IssuerService for Cap {
    fn sign_tbs_certificate(&self, tbs: Vec<u8>) -> LocalResult<Vec<u8>> {
        let ca = self.ca.clone();
        self.sign(
            "issue-cert",
            tbs,
            Box::new(move |key, tbs| {
                let parsed = signet_ca::validate_end_entity_tbs(tbs, &ca.policy, SystemTime::now())
                    .map_err(|e| refusal(&ca.name, "TBSCertificate", e))?;
                let scheme = ca.issuer().scheme;
                let sig = sign_with(key, scheme, tbs)?;
                let cert = signet_ca::assemble_certificate(tbs, scheme, &sig).map_err(assembly)?;
                Ok((cert, format!("serial={}", hex(&parsed.serial))))
            }),
        )
    }

    fn ca_certificate(&self) -> LocalResult<Vec<u8>> {
        Cap::ca_certificate(self)
    }

    fn profile(&self) -> LocalResult<String> {
        Cap::profile(self)
    }
}

impl CrlSignerService for Cap {
    fn sign_tbs_cert_list(&self, tbs: Vec<u8>) -> LocalResult<Vec<u8>> {
        let ca = self.ca.clone();
        self.sign(
            "sign-crl",
            tbs,
            Box::new(move |key, tbs| {
                let parsed =
                    signet_ca::validate_tbs_crl(tbs, ca.issuer()).map_err(|e| refusal(&ca.name, "TBSCertList", e))?;
                let scheme = ca.issuer().scheme;
                let sig = sign_with(key, scheme, tbs)?;
                let crl = signet_ca::assemble_crl(tbs, scheme, &sig).map_err(assembly)?;
                Ok((crl, format!("crl-number={} revoked={}", hex(&parsed.crl_number), parsed.revoked_count)))
            }),
        )
    }

    fn ca_certificate(&self) -> LocalResult<Vec<u8>> {
        Cap::ca_certificate(self)
    }

    fn profile(&self) -> LocalResult<String> {
        Cap::profile(self)
    }
}

impl OcspSignerService for Cap {
    fn sign_response_data(&self, response_data: Vec<u8>) -> LocalResult<Vec<u8>> {
        match self.prepare_ocsp(response_data) {
            Ok((job, answer)) => {
                self.caller.shared.dispatch.submit(job);
                answer
            }
            Err(refused) => refused,
        }
    }

    /// Each call is checked and audited as its own; those ready to sign go
    /// to the dispatcher together, to be shared among the signing threads.
    fn sign_each(
        &self,
        response_data: Vec<Vec<u8>>,
    ) -> futures::future::LocalBoxFuture<'static, Vec<Result<Vec<u8>, IpcError>>> {
        let mut jobs = Vec::with_capacity(response_data.len());
        let answers: Vec<LocalResult<Vec<u8>>> = response_data
            .into_iter()
            .map(|data| match self.prepare_ocsp(data) {
                Ok((job, answer)) => {
                    jobs.push(job);
                    answer
                }
                Err(refused) => refused,
            })
            .collect();
        self.caller.shared.dispatch.submit_together(jobs);
        futures::future::join_all(answers).boxed_local()
    }

    fn responder_certificate(&self) -> LocalResult<Vec<u8>> {
        self.responder_certificate_der()
    }

    fn ca_certificate(&self) -> LocalResult<Vec<u8>> {
        Cap::ca_certificate(self)
    }
}

impl Cap {
    /// A `signResponseData` call checked and ready for the dispatcher, or its refusal.
    fn prepare_ocsp(&self, response_data: Vec<u8>) -> Prepared {
        let ca = self.ca.clone();
        let Some(ocsp) = &ca.ocsp else {
            let e = IpcError::new(ErrorKind::Unsupported, format!("issuer `{}` has no OCSP responder", ca.name));
            return Err(futures::future::ready(Err(e)).boxed_local());
        };
        // The responder the ResponseData names signs it: the current one, or
        // one before it while ocspd has not yet switched (see rotate.rs).
        let responder = ocsp.for_response_data(&response_data);
        self.prepare(
            "sign-ocsp",
            responder.key_id.clone(),
            response_data,
            Box::new(move |key, data| {
                let Some(ocsp) = &ca.ocsp else {
                    return Err(IpcError::new(
                        ErrorKind::Unsupported,
                        format!("issuer `{}` has no OCSP responder", ca.name),
                    ));
                };
                // The responder speaks for this CA only: every CertID must name
                // it (issuer name and key hashes), whatever the serial.
                let parsed = signet_ca::validate_ocsp_response_data(data, &responder.responder, &ocsp.ca_hashes)
                    .map_err(|e| refusal(&ca.name, "OCSP ResponseData", e))?;
                let scheme = responder.responder.scheme;
                let sig = sign_with(key, scheme, data)?;
                let response = signet_ca::assemble_ocsp_response(data, scheme, &sig, &[&responder.certificate])
                    .map_err(assembly)?;
                let note = parsed
                    .responses
                    .iter()
                    .map(|r| {
                        let status = match r.status {
                            signet_ca::CertStatusInfo::Good => "good",
                            signet_ca::CertStatusInfo::Revoked { .. } => "revoked",
                            signet_ca::CertStatusInfo::Unknown => "unknown",
                        };
                        format!("serial={} status={status}", hex(&r.serial))
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                Ok((response, note))
            }),
        )
    }

    fn responder_certificate_der(&self) -> LocalResult<Vec<u8>> {
        let outcome = self.check().and_then(|()| {
            self.ca
                .ocsp
                .as_ref()
                .map(|o| o.current().certificate.clone())
                .ok_or_else(|| IpcError::new(ErrorKind::Unsupported, "no OCSP responder"))
        });
        futures::future::ready(outcome).boxed_local()
    }
}
