//! signd's service: policy checks, signing (see [`crate::dispatch`] for
//! where), and the audit record of every outcome, behind the plain-Rust traits of `signet_ipc::server`.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt;
use signet_ipc::server::{
    AdminService, CrlSignerService, IssuerService, LocalResult, LogSignerService, OcspSignerService, Session,
    SigndService, SignerService,
};
use signet_ipc::{
    AuditQuery, AuditRecord, CallerInfo, Health, IpcError, IssuingCaSpec, KeyInfo, KeySpec, PeerCredentials,
    SignatureScheme,
};

use crate::audit::{AuditLog, Entry};
use crate::config::Operation;
use crate::dispatch::{Dispatcher, SignJob, Task, Workers};
use crate::issuers::Issuers;
use crate::keys::KeyRing;
use crate::logs::Logs;
use crate::policy::{supplementary_groups, Policy, Role};
use crate::pool::Pool;

/// Everything the service needs; shared with worker threads.
pub struct State {
    /// The keys.
    pub keys: KeyRing,
    /// The audit log.
    pub audit: AuditLog,
    /// The signing threads.
    pub pool: Pool,
    /// The OCSP responders installed by rotation.
    pub responders: crate::issuers::rotate::ResponderStore,
    /// The issuing CAs made by rotation.
    pub issuing_cas: crate::issuers::rollover::IssuingCaStore,
    /// The CT logs added at run time.
    pub added_logs: crate::logs::added::LogStore,
}

impl Workers for State {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    fn audit(&self) -> &AuditLog {
        &self.audit
    }
}

/// The service, living on the capnp thread.
#[derive(Clone)]
pub struct Signd {
    shared: Rc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) state: Arc<State>,
    policy: RefCell<Arc<Policy>>,
    pub(crate) issuers: RefCell<Arc<Issuers>>,
    pub(crate) logs: RefCell<Arc<Logs>>,
    pub(crate) dispatch: Rc<Dispatcher<State>>,
    started: Instant,
}

impl Signd {
    /// A service over `state` enforcing `policy`.
    pub fn new(state: Arc<State>, policy: Policy) -> Self {
        let issuers = RefCell::new(Arc::new(Issuers::default()));
        let logs = RefCell::new(Arc::new(Logs::default()));
        let dispatch = Dispatcher::new(state.clone());
        let policy = RefCell::new(Arc::new(policy));
        Self { shared: Rc::new(Shared { state, policy, issuers, logs, dispatch, started: Instant::now() }) }
    }

    /// Replaces the CA issuers (see [`crate::issuers`]); capabilities already
    /// handed out keep the issuer they were obtained for.
    pub fn set_issuers(&self, issuers: Issuers) {
        *self.shared.issuers.borrow_mut() = Arc::new(issuers);
    }

    /// Replaces the CT logs (see [`crate::logs`]); capabilities already
    /// handed out keep the log they were obtained for.
    pub fn set_logs(&self, logs: Logs) {
        *self.shared.logs.borrow_mut() = Arc::new(logs);
    }

    /// Replaces the policy (SIGHUP). Capabilities already handed out re-check
    /// the new policy on their next call.
    pub fn set_policy(&self, policy: Policy) {
        *self.shared.policy.borrow_mut() = Arc::new(policy);
    }

    /// Current health.
    pub fn health(&self) -> Health {
        let (loaded, unavailable) = self.shared.state.keys.counts();
        Health {
            ok: true,
            version: env!("CARGO_PKG_VERSION").into(),
            keys_loaded: loaded,
            keys_unavailable: unavailable,
            uptime_secs: self.shared.started.elapsed().as_secs(),
            audit_records: self.shared.state.audit.count(),
        }
    }
}

impl SigndService for Signd {
    fn session(&self, peer: PeerCredentials) -> Rc<dyn Session> {
        Rc::new(Caller { shared: self.shared.clone(), peer, groups: supplementary_groups(peer.uid) })
    }

    fn idle_work(&self) -> bool {
        self.shared.dispatch.prepare_one()
    }
}

/// One connection's caller.
#[derive(Clone)]
pub(crate) struct Caller {
    pub(crate) shared: Rc<Shared>,
    pub(crate) peer: PeerCredentials,
    groups: Vec<u32>,
}

impl Caller {
    pub(crate) fn policy(&self) -> Arc<Policy> {
        self.shared.policy.borrow().clone()
    }

    /// Names of the roles this caller holds now, in policy order.
    pub(crate) fn held_roles(&self) -> Vec<String> {
        self.policy().roles_for(&self.peer, &self.groups).into_iter().map(|r| r.name.clone()).collect()
    }

    /// The role `name` if this caller holds it now.
    pub(crate) fn held_role(&self, policy: &Policy, name: &str) -> Option<Role> {
        policy.roles_for(&self.peer, &self.groups).into_iter().find(|r| r.name == name).cloned()
    }

    /// Records a refusal, waits for the commit, and returns the error.
    pub(crate) async fn refuse<T>(
        &self,
        role: &str,
        operation: &str,
        key_id: &str,
        e: IpcError,
    ) -> Result<T, IpcError> {
        let entry = self.shared.state.audit.entry(&self.peer, role, operation, key_id).failed(&e);
        tracing::info!(uid = self.peer.uid, pid = self.peer.pid, role, operation, key = key_id, error = %e, "refused");
        self.shared.state.audit.append_wait(vec![entry]).await?;
        Err(e)
    }
}

impl Session for Caller {
    fn whoami(&self) -> Result<CallerInfo, IpcError> {
        let policy = self.policy();
        let roles = policy.roles_for(&self.peer, &self.groups);
        Ok(CallerInfo {
            uid: self.peer.uid,
            gid: self.peer.gid,
            pid: self.peer.pid,
            admin: roles.iter().any(|r| r.admin),
            roles: roles.into_iter().map(|r| r.name.clone()).collect(),
        })
    }

    fn signer(&self, role: String) -> LocalResult<Rc<dyn SignerService>> {
        let me = self.clone();
        async move {
            let policy = me.policy();
            let held = policy.roles_for(&me.peer, &me.groups);
            let chosen =
                if role.is_empty() { held.first().copied() } else { held.into_iter().find(|r| r.name == role) };
            match chosen {
                Some(r) => Ok(Rc::new(Signer { caller: me.clone(), role: r.name.clone() }) as Rc<dyn SignerService>),
                None => {
                    let detail = if role.is_empty() {
                        format!("uid {} holds no role", me.peer.uid)
                    } else {
                        format!("uid {} does not hold role `{role}`", me.peer.uid)
                    };
                    me.refuse(&role, "signer", "", IpcError::denied(detail)).await
                }
            }
        }
        .boxed_local()
    }

    fn admin(&self) -> LocalResult<Rc<dyn AdminService>> {
        let me = self.clone();
        async move {
            let policy = me.policy();
            let role = policy.roles_for(&me.peer, &me.groups).into_iter().find(|r| r.admin).map(|r| r.name.clone());
            match role {
                Some(role) => Ok(Rc::new(Admin { caller: me.clone(), role }) as Rc<dyn AdminService>),
                None => {
                    let e = IpcError::denied(format!("uid {} holds no admin role", me.peer.uid));
                    me.refuse("", "admin", "", e).await
                }
            }
        }
        .boxed_local()
    }

    fn health(&self) -> Health {
        Signd { shared: self.shared.clone() }.health()
    }

    fn issuer(&self, name: String) -> LocalResult<Rc<dyn IssuerService>> {
        crate::issuers::issuer(self.clone(), name)
    }

    fn crl_signer(&self, name: String) -> LocalResult<Rc<dyn CrlSignerService>> {
        crate::issuers::crl_signer(self.clone(), name)
    }

    fn ocsp_signer(&self, name: String) -> LocalResult<Rc<dyn OcspSignerService>> {
        crate::issuers::ocsp_signer(self.clone(), name)
    }

    fn log_signer(&self, name: String) -> LocalResult<Rc<dyn LogSignerService>> {
        crate::logs::log_signer(self.clone(), name)
    }
}

/// A Signer capability: one caller acting in one role.
struct Signer {
    caller: Caller,
    role: String,
}

impl Signer {
    /// The role as policy defines it now, if the caller still holds it and it allows `op`.
    fn check(&self, op: Operation) -> Result<Role, IpcError> {
        let role = self
            .caller
            .held_role(&self.caller.policy(), &self.role)
            .ok_or_else(|| IpcError::denied(format!("role `{}` is no longer held", self.role)))?;
        if !role.allows(op) {
            return Err(IpcError::denied(format!("role `{}` may not {op:?}", self.role)));
        }
        Ok(role)
    }

    /// Everything that must hold before signing with `key_id`.
    ///
    /// A role that may not `sign` but may `sign-jws` signs only JWS signing
    /// inputs for the key (crate::jws): each of `messages` is checked.
    fn check_sign(
        &self,
        key_id: &str,
        scheme: SignatureScheme,
        messages: &[&[u8]],
    ) -> Result<(Arc<dyn crate::backend::SigningKey>, SignatureScheme), IpcError> {
        let (role, jws_only) = match self.check(Operation::Sign) {
            Ok(role) => (role, false),
            Err(refused) => (self.check(Operation::SignJws).map_err(|_| refused)?, true),
        };
        let key = self.caller.shared.state.keys.require(key_id)?;
        if !role.may_use(key_id, &key.info.roles) {
            return Err(IpcError::denied(format!("role `{}` may not use key `{key_id}`", self.role)));
        }
        // CA and OCSP responder keys sign only through the issuer roles (see
        // crate::issuers), CT log keys only through the LogSigner (crate::logs).
        self.caller.shared.issuers.borrow().check_raw_signing(key_id, &self.role)?;
        self.caller.shared.logs.borrow().check_raw_signing(key_id, &self.role)?;
        let handle = key.signer()?.clone();
        let scheme = handle.algorithm().resolve(scheme)?;
        if jws_only {
            for m in messages {
                crate::jws::check_signing_input(m, key_id, handle.algorithm(), scheme)?;
            }
        }
        Ok((handle, scheme))
    }

    fn entry(&self, operation: &str, key_id: &str) -> Entry {
        self.caller.shared.state.audit.entry(&self.caller.peer, &self.role, operation, key_id)
    }
}

impl SignerService for Signer {
    fn list_keys(&self) -> LocalResult<Vec<KeyInfo>> {
        let outcome = self.check(Operation::List).map(|role| {
            self.caller
                .shared
                .state
                .keys
                .list()
                .into_iter()
                .filter(|k| role.may_use(&k.info.id, &k.info.roles))
                .map(|k| k.info.clone())
                .collect()
        });
        futures::future::ready(outcome).boxed_local()
    }

    fn public_key(&self, key_id: String) -> LocalResult<KeyInfo> {
        let outcome = self.check(Operation::PublicKey).and_then(|role| {
            let key = self.caller.shared.state.keys.require(&key_id)?;
            if role.may_use(&key_id, &key.info.roles) {
                Ok(key.info.clone())
            } else {
                Err(IpcError::denied(format!("role `{}` may not use key `{key_id}`", self.role)))
            }
        });
        futures::future::ready(outcome).boxed_local()
    }

    fn sign(&self, key_id: String, scheme: SignatureScheme, message: Vec<u8>) -> LocalResult<Vec<u8>> {
        let checked = self.check_sign(&key_id, scheme, &[&message]);
        let entry = self.entry("sign", &key_id);
        let caller = self.caller.clone();
        async move {
            let (handle, scheme) = match checked {
                Ok(c) => c,
                Err(e) => return caller.refuse(&entry.role, "sign", &key_id, e).await,
            };
            let (reply, rx) = tokio::sync::oneshot::channel();
            caller.shared.dispatch.submit(SignJob { key: handle, task: Task::Sign { scheme, message }, entry, reply });
            rx.await.map_err(|_| IpcError::internal("signing thread stopped"))?
        }
        .boxed_local()
    }

    fn sign_batch(&self, key_id: String, scheme: SignatureScheme, messages: Vec<Vec<u8>>) -> LocalResult<Vec<Vec<u8>>> {
        let checked = if messages.is_empty() {
            Err(IpcError::invalid("empty batch"))
        } else {
            self.check_sign(&key_id, scheme, &messages.iter().map(Vec::as_slice).collect::<Vec<_>>())
        };
        let template = self.entry("sign-batch", &key_id);
        let caller = self.caller.clone();
        async move {
            let (handle, scheme) = match checked {
                Ok(c) => c,
                Err(e) => return caller.refuse(&template.role, "sign-batch", &key_id, e).await,
            };
            // Split the batch so every worker signs a share of it.
            let workers = caller.shared.state.pool.threads().max(1);
            let chunk = messages.len().div_ceil(workers).max(16);
            let mut pending = Vec::new();
            let mut messages = messages.into_iter();
            loop {
                let part: Vec<Vec<u8>> = messages.by_ref().take(chunk).collect();
                if part.is_empty() {
                    break;
                }
                let (tx, rx) = tokio::sync::oneshot::channel();
                let (handle, audit, template) = (handle.clone(), caller.shared.state.audit.clone(), template.clone());
                caller.shared.state.pool.spawn(move || {
                    let mut sigs = Vec::with_capacity(part.len());
                    let mut entries = Vec::with_capacity(part.len());
                    let mut failure = None;
                    for m in &part {
                        let mut entry = template.clone();
                        entry.message_sha256 = crate::audit::message_sha256(m);
                        match handle.sign(scheme, m) {
                            Ok(s) => sigs.push(s),
                            Err(e) => {
                                entry = entry.failed(&e);
                                failure = Some(e);
                            }
                        }
                        entries.push(entry);
                        if failure.is_some() {
                            break;
                        }
                    }
                    let outcome = match failure {
                        Some(e) => Err(e),
                        None => Ok(sigs),
                    };
                    audit.append(entries, Box::new(move |committed| drop(tx.send(committed.and(outcome)))));
                });
                pending.push(rx);
            }
            let mut out = Vec::new();
            for rx in pending {
                out.extend(rx.await.map_err(|_| IpcError::internal("signing thread stopped"))??);
            }
            Ok(out)
        }
        .boxed_local()
    }
}

/// The Admin capability.
struct Admin {
    caller: Caller,
    role: String,
}

impl Admin {
    fn still_admin(&self) -> Result<(), IpcError> {
        match self.caller.held_role(&self.caller.policy(), &self.role) {
            Some(r) if r.admin => Ok(()),
            _ => Err(IpcError::denied(format!("role `{}` no longer grants admin", self.role))),
        }
    }

    fn create(&self, spec: KeySpec, pkcs8: Option<Vec<u8>>) -> LocalResult<KeyInfo> {
        let caller = self.caller.clone();
        let role = self.role.clone();
        let allowed = self.still_admin();
        async move {
            let operation = if pkcs8.is_some() { "import" } else { "generate" };
            if let Err(e) = allowed {
                return caller.refuse(&role, operation, &spec.id, e).await;
            }
            let state = caller.shared.state.clone();
            let id = spec.id.clone();
            let worker_state = state.clone();
            let outcome = state
                .pool
                .run(move || worker_state.keys.create(&spec, pkcs8.as_deref()))
                .await
                .unwrap_or_else(|| Err(IpcError::internal("signing thread stopped")));
            let mut entry = caller.shared.state.audit.entry(&caller.peer, &role, operation, &id);
            if let Err(e) = &outcome {
                entry = entry.failed(e);
            }
            caller.shared.state.audit.append_wait(vec![entry]).await?;
            if outcome.is_ok() {
                tracing::info!(key = %id, uid = caller.peer.uid, operation, "key created");
            }
            outcome
        }
        .boxed_local()
    }
}

impl AdminService for Admin {
    fn list_keys(&self) -> LocalResult<Vec<KeyInfo>> {
        let outcome = self
            .still_admin()
            .map(|()| self.caller.shared.state.keys.list().into_iter().map(|k| k.info.clone()).collect());
        futures::future::ready(outcome).boxed_local()
    }

    fn key(&self, key_id: String) -> LocalResult<KeyInfo> {
        let outcome =
            self.still_admin().and_then(|()| Ok(self.caller.shared.state.keys.require(&key_id)?.info.clone()));
        futures::future::ready(outcome).boxed_local()
    }

    fn generate_key(&self, spec: KeySpec) -> LocalResult<KeyInfo> {
        self.create(spec, None)
    }

    fn import_key(&self, spec: KeySpec, pkcs8: Vec<u8>) -> LocalResult<KeyInfo> {
        self.create(spec, Some(pkcs8))
    }

    fn audit(&self, query: AuditQuery) -> LocalResult<Vec<AuditRecord>> {
        let outcome = self.still_admin().and_then(|()| self.caller.shared.state.audit.query(&query));
        futures::future::ready(outcome).boxed_local()
    }

    /// See `crate::issuers::rotate`: built and signed on a signing thread,
    /// committed, audited, and only then the issuer's responder.
    fn issue_ocsp_responder(&self, issuer: String, key_id: String, validity_days: u32) -> LocalResult<Vec<u8>> {
        use crate::issuers::rotate::{self, Target};
        const OPERATION: &str = "issue-ocsp-responder";
        let caller = self.caller.clone();
        let role = self.role.clone();
        let issuers = caller.shared.issuers.borrow().clone();
        let target = self.still_admin().and_then(|()| rotate::target(&issuers, &issuer, &key_id, validity_days));
        async move {
            let ca = match target {
                Ok(Target::Current(der)) => return Ok(der),
                Ok(Target::Issue(ca)) => ca,
                Err(e) => return caller.refuse(&role, OPERATION, &key_id, e).await,
            };
            let state = caller.shared.state.clone();
            let (worker_state, worker_ca, worker_key) = (state.clone(), ca.clone(), key_id.clone());
            let outcome = state
                .pool
                .run(move || {
                    let (key, record) = rotate::issue(
                        &worker_ca,
                        &worker_key,
                        validity_days,
                        &worker_state.keys,
                        std::time::SystemTime::now(),
                    )?;
                    worker_state
                        .responders
                        .add(&worker_ca.name, record)
                        .map_err(|e| IpcError::internal(format!("recording the responder: {e}")))?;
                    Ok(key)
                })
                .await
                .unwrap_or_else(|| Err(IpcError::internal("signing thread stopped")));
            let mut entry = state.audit.entry(&caller.peer, &role, OPERATION, &ca.key_id);
            match &outcome {
                Ok(_) => entry.outcome = format!("ok issuer={} responder={key_id}", ca.name),
                Err(e) => entry = entry.failed(e),
            }
            state.audit.append_wait(vec![entry]).await?;
            let key = outcome?;
            let der = key.certificate.clone();
            if let Some(ocsp) = &ca.ocsp {
                ocsp.install(key);
            }
            tracing::info!(issuer = %ca.name, key = %key_id, uid = caller.peer.uid, "new OCSP responder in use");
            Ok(der)
        }
        .boxed_local()
    }

    /// See `crate::issuers::rollover`: built and signed on a signing thread,
    /// committed, audited, and only then served.
    fn issue_issuing_ca(&self, spec: IssuingCaSpec) -> LocalResult<Vec<u8>> {
        use crate::issuers::rollover::{self, Target};
        const OPERATION: &str = "issue-issuing-ca";
        let caller = self.caller.clone();
        let role = self.role.clone();
        let issuers = caller.shared.issuers.borrow().clone();
        let target = self.still_admin().and_then(|()| rollover::target(&issuers, &spec));
        async move {
            let base = match target {
                Ok(Target::Current(der)) => return Ok(der),
                Ok(Target::Issue(base)) => base,
                Err(e) => return caller.refuse(&role, OPERATION, &spec.root_key_id, e).await,
            };
            let state = caller.shared.state.clone();
            let (worker_state, worker_base, worker_spec) = (state.clone(), base.clone(), spec.clone());
            let outcome = state
                .pool
                .run(move || {
                    let (ca, record) =
                        rollover::issue(&worker_base, &worker_spec, &worker_state.keys, std::time::SystemTime::now())?;
                    let added = worker_state
                        .issuing_cas
                        .add(&record)
                        .map_err(|e| IpcError::internal(format!("recording the issuing CA: {e}")))?;
                    if !added {
                        return Err(IpcError::new(
                            signet_ipc::ErrorKind::AlreadyExists,
                            format!("issuer `{}` was made meanwhile", record.name),
                        ));
                    }
                    Ok(ca)
                })
                .await
                .unwrap_or_else(|| Err(IpcError::internal("signing thread stopped")));
            let mut entry = state.audit.entry(&caller.peer, &role, OPERATION, &spec.root_key_id);
            match &outcome {
                Ok(ca) => {
                    entry.outcome = format!(
                        "ok issuer={} based-on={} key={} serial={}",
                        ca.name,
                        base.name,
                        ca.key_id,
                        certificate_serial(&ca.certificate)
                    )
                }
                Err(e) => entry = entry.failed(e),
            }
            state.audit.append_wait(vec![entry]).await?;
            let ca = outcome?;
            let der = ca.certificate.clone();
            let (name, key) = (ca.name.clone(), ca.key_id.clone());
            let next = caller.shared.issuers.borrow().with(ca);
            *caller.shared.issuers.borrow_mut() = Arc::new(next);
            tracing::info!(issuer = %name, based_on = %base.name, key = %key, uid = caller.peer.uid, "new issuing CA served");
            Ok(der)
        }
        .boxed_local()
    }

    /// See `crate::logs::added`: the key checked and the log recorded on a
    /// signing thread, audited, and only then among the logs.
    fn add_ct_log(&self, name: String, key_id: String, roles: Vec<String>) -> LocalResult<Vec<u8>> {
        use crate::logs::added::{self, Target};
        const OPERATION: &str = "add-ct-log";
        let caller = self.caller.clone();
        let role = self.role.clone();
        let logs = caller.shared.logs.borrow().clone();
        let issuers = caller.shared.issuers.borrow().clone();
        let target = self
            .still_admin()
            .and_then(|()| added::target(&logs, &issuers, &name, &key_id, roles, std::time::SystemTime::now()));
        async move {
            let stored = match target {
                Ok(Target::Current(spki)) => return Ok(spki),
                Ok(Target::Add(stored)) => stored,
                Err(e) => return caller.refuse(&role, OPERATION, &key_id, e).await,
            };
            let state = caller.shared.state.clone();
            let (worker_state, worker_name, worker_stored) = (state.clone(), name.clone(), stored.clone());
            let outcome = state
                .pool
                .run(move || added::add(&worker_name, &worker_stored, &worker_state.keys, &worker_state.added_logs))
                .await
                .unwrap_or_else(|| Err(IpcError::internal("signing thread stopped")));
            let mut entry = state.audit.entry(&caller.peer, &role, OPERATION, &key_id);
            match &outcome {
                Ok(_) => entry.outcome = format!("ok log={name} roles={}", stored.roles.join(",")),
                Err(e) => entry = entry.failed(e),
            }
            state.audit.append_wait(vec![entry]).await?;
            let log = outcome?;
            let spki = log.spki.clone();
            // Another call may have added logs meanwhile: add to the current set.
            let now = caller.shared.logs.borrow().clone();
            *caller.shared.logs.borrow_mut() = std::sync::Arc::new(now.with(log));
            tracing::info!(log = %name, key = %key_id, uid = caller.peer.uid, "CT log added");
            Ok(spki)
        }
        .boxed_local()
    }
}

/// A certificate's serial number, hex (empty when it does not parse).
fn certificate_serial(der: &[u8]) -> String {
    use signet_ca::der::Decode;
    signet_ca::x509_cert::Certificate::from_der(der)
        .map(|c| hex::encode(c.tbs_certificate.serial_number.as_bytes()))
        .unwrap_or_default()
}
