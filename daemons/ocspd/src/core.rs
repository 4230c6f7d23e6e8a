//! What ocspd does, independent of how it is asked: record issuance and
//! revocation, answer OCSP requests, keep responses and CRLs signed.
//!
//! Every signature comes from signd (the issuer's `OcspSigner` and
//! `CrlSigner`); ocspd builds the DER with `signet-ca` and stores what signd
//! returns. LMDB writes run on tokio's blocking pool.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use signet_ca::ocsp::OcspHash;
use signet_ca::{
    build_multi_response_data, build_response_data, CertIdentity, CertStatusInfo, CrlReason, Issuer, OcspIssuer,
    OcspRequest, OcspResponseParams, Profile, Responder, SingleResponseParams,
};
use signet_ipc::{
    CertStatus, CrlSelector, ErrorKind, IpcError, IssuedCert, IssuerInfo, OcspdHealth, Revocation, RevocationReason,
    SigndClient,
};
use signet_runtime::principals::ResolvedPrincipals;
use signet_store::{StoreError, WriteTxn};
use signet_types::Clock;
use tokio::sync::{Notify, SemaphorePermit};

use crate::config::{ClientRate, IssuerSettings};
use crate::db::{response_key, unknown_status, CertRecord, CrlKind, Db, Released, Revoked, StoredCrl, StoredResponse};
use crate::limit::ClientLimiter;

/// One CA ocspd serves, as loaded from signd at start.
#[derive(Debug)]
pub struct LoadedIssuer {
    /// The issuer's name (signd's and ocspd's config).
    pub name: String,
    /// The configured issuer whose settings and registrars it has: its own
    /// name, or for a successor (`addSuccessor`) that of the issuer it follows.
    pub settings_from: String,
    /// Its id in the store.
    pub id: u32,
    /// Its settings.
    pub settings: IssuerSettings,
    /// The CA certificate, DER.
    pub ca_der: Vec<u8>,
    /// The responder: its identity in responses and its certificate;
    /// `refreshResponder` replaces it.
    pub responder: std::sync::RwLock<Arc<ResponderCert>>,
    /// CertID hashes of the CA, for matching requests.
    pub ocsp_issuer: OcspIssuer,
    /// The CA as CRL issuer.
    pub ca: Issuer,
    /// The end-entity profile (CRL URL and shards).
    pub profile: Profile,
    /// Who may record and revoke; SIGHUP re-reads it from the config.
    pub registrars: std::sync::RwLock<ResolvedPrincipals>,
    /// Where OCSP is answered.
    pub ocsp_url: String,
    /// Where the full CRL is served.
    pub crl_url: String,
    /// Where the delta CRL is served (the full CRL's freshestCRL).
    pub delta_crl_url: String,
    /// Woken when a revocation needs new CRLs.
    pub crl_dirty: Notify,
}

/// An OCSP responder as ocspd names it in responses.
#[derive(Debug)]
pub struct ResponderCert {
    /// Its identity in responses (ResponderID byKey) and scheme.
    pub responder: Responder,
    /// Its certificate, DER.
    pub der: Vec<u8>,
}

impl ResponderCert {
    /// From the certificate signd gives.
    pub fn from_der(der: Vec<u8>) -> Result<Self, signet_ca::CaError> {
        Ok(Self { responder: Responder::from_certificate_der(&der, signet_ipc::SignatureScheme::Default)?, der })
    }
}

impl LoadedIssuer {
    /// The responder in use.
    pub fn responder(&self) -> Arc<ResponderCert> {
        self.responder.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Whether a caller with these credentials is one of the issuer's registrars.
    pub fn admits(&self, uid: u32, gid: u32, groups: &[u32]) -> bool {
        self.registrars.read().unwrap_or_else(std::sync::PoisonError::into_inner).admits(uid, gid, groups)
    }

    /// The CRL shard URL (as in certificates' CRLDP) for `shard`.
    pub fn shard_url(&self, shard: u32) -> Option<String> {
        self.profile
            .crl_url
            .as_ref()
            .filter(|_| self.profile.crl_shards > 0)
            .map(|u| u.replace(signet_ca::profile::SHARD_PLACEHOLDER, &shard.to_string()))
    }

    /// What ocspd tells registrars about this CA.
    pub fn info(&self) -> IssuerInfo {
        IssuerInfo {
            name: self.name.clone(),
            ca_certificate: self.ca_der.clone(),
            responder_certificate: self.responder().der.clone(),
            crl_shards: self.profile.crl_shards,
            ocsp_url: self.ocsp_url.clone(),
            crl_url: self.crl_url.clone(),
        }
    }
}

/// How long HTTP caches may keep a response (RFC 5019 6.2): Last-Modified is
/// thisUpdate, Expires nextUpdate, and max-age never reaches past nextUpdate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freshness {
    /// thisUpdate, Unix seconds.
    pub this_update: i64,
    /// nextUpdate, Unix seconds.
    pub next_update: i64,
    /// The longest max-age (the issuer's `cache_max_age_seconds`).
    pub max_age_cap: u64,
}

impl Freshness {
    /// max-age at `now`: the cap, or the seconds left to nextUpdate if fewer.
    pub fn max_age(&self, now: i64) -> u64 {
        self.max_age_cap.min((self.next_update - now).max(0) as u64)
    }
}

/// How an OCSP request was answered, for the HTTP layer and metrics.
#[derive(Debug)]
pub enum OcspAnswer {
    /// A signed response; `cache` says whether and for how long HTTP caches
    /// may keep it.
    Signed {
        /// The OCSPResponse, DER.
        der: Vec<u8>,
        /// Its HTTP entity tag.
        etag: String,
        /// When HTTP caches may keep it, for how long (not for a nonce or
        /// an `unknown` status).
        cache: Option<Freshness>,
        /// good, revoked or unknown; "cached" for a pre-signed response,
        /// "several" for one about several certificates.
        status: &'static str,
        /// Whether it came pre-signed from the store.
        presigned: bool,
    },
    /// An error status: malformedRequest, unauthorized, tryLater, internalError.
    Error(signet_ca::OcspErrorStatus),
}

/// ocspd's shared state.
pub struct Core {
    /// The store.
    pub db: Db,
    /// signd.
    pub signd: SigndClient,
    /// The CAs served; `addSuccessor` adds to them.
    issuers: std::sync::RwLock<Arc<Vec<Arc<LoadedIssuer>>>>,
    /// The base URL of the HTTP side, for the URLs of issuers added later.
    pub(crate) public_url: String,
    started: Instant,
    /// Signatures on the request path in progress, at most `max_fresh_signatures`.
    fresh_signatures: tokio::sync::Semaphore,
    /// What one client may cause of them, if limited.
    client_limit: Option<ClientLimiter>,
    /// Where "now" comes from.
    clock: Clock,
}

fn to_time(secs: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs.max(0) as u64)
}

fn store_err(e: StoreError) -> IpcError {
    match e.refuses_writes() {
        // Not a bug, and it passes once space is freed or the disk is writable again.
        Some(_) => IpcError::new(ErrorKind::Unavailable, format!("ocspd store: {e}")),
        None => IpcError::internal(format!("ocspd store: {e}")),
    }
}

/// RFC 5280 certificateHold: the one reason a revocation can be undone.
pub(crate) const CERTIFICATE_HOLD: u8 = 6;

fn reason_name(code: u8) -> String {
    RevocationReason::from_code(code).map_or_else(|| format!("reason {code}"), |r| r.name().to_owned())
}

fn never_recorded(iss: &LoadedIssuer, serial: &[u8]) -> IpcError {
    IpcError::new(
        ErrorKind::NotFound,
        format!("serial {} was never recorded for issuer `{}`", hex::encode(serial), iss.name),
    )
}

/// What a revocation `asked` makes of a record revoked as `current`: the
/// revocation to store, or, refused, the revocation that stands.
fn revocation_after(current: Option<Revoked>, asked: Revoked) -> Result<Revoked, Revoked> {
    match current {
        None => Ok(asked),
        // A hold becomes a revocation for good (any other reason); the
        // certificate has been unusable since the hold, so the time stays.
        Some(r) if r.reason == CERTIFICATE_HOLD && asked.reason != CERTIFICATE_HOLD => {
            Ok(Revoked { reason: asked.reason, ..r })
        }
        // RFC 5280 5.3.1: the reason may become keyCompromise; the time stays.
        Some(r) if r.reason != KEY_COMPROMISE && asked.reason == KEY_COMPROMISE => {
            Ok(Revoked { reason: KEY_COMPROMISE, ..r })
        }
        Some(r) => Err(r),
    }
}

/// RFC 5280 keyCompromise: the one reason a revocation may be raised to.
const KEY_COMPROMISE: u8 = 1;

fn already_revoked(iss: &LoadedIssuer, serial: &[u8], r: Revoked) -> IpcError {
    IpcError::new(
        ErrorKind::AlreadyRevoked,
        format!(
            "serial {} of issuer `{}` is already revoked ({}, since {}); only key-compromise may raise the reason",
            hex::encode(serial),
            iss.name,
            reason_name(r.reason),
            r.time
        ),
    )
}

pub(crate) fn crl_reason(code: u8) -> Option<CrlReason> {
    Some(match code {
        0 => CrlReason::Unspecified,
        1 => CrlReason::KeyCompromise,
        2 => CrlReason::CaCompromise,
        3 => CrlReason::AffiliationChanged,
        4 => CrlReason::Superseded,
        5 => CrlReason::CessationOfOperation,
        6 => CrlReason::CertificateHold,
        8 => CrlReason::RemoveFromCRL,
        9 => CrlReason::PrivilegeWithdrawn,
        10 => CrlReason::AaCompromise,
        _ => return None,
    })
}

fn status_info(rec: Option<&CertRecord>) -> CertStatusInfo {
    match rec {
        None => CertStatusInfo::Unknown,
        Some(CertRecord { revoked: Some(r), .. }) => {
            CertStatusInfo::Revoked { time: to_time(r.time), reason: crl_reason(r.reason) }
        }
        Some(_) => CertStatusInfo::Good,
    }
}

fn status_name(s: &CertStatusInfo) -> &'static str {
    match s {
        CertStatusInfo::Good => "good",
        CertStatusInfo::Revoked { .. } => "revoked",
        CertStatusInfo::Unknown => "unknown",
    }
}

/// The OCSP error status for a signature signd did not give (logged).
fn signing_failed(iss: &LoadedIssuer, e: &IpcError) -> signet_ca::OcspErrorStatus {
    tracing::warn!(issuer = %iss.name, error = %e, "cannot sign an OCSP response");
    if e.kind.is_transient() {
        signet_ca::OcspErrorStatus::TryLater
    } else {
        signet_ca::OcspErrorStatus::InternalError
    }
}

/// Commits `f` through the store's group commit: concurrent registrars'
/// writes share one transaction and one disk flush, and each returns once
/// its own writes are durable.
async fn commit<R: Send + 'static>(
    db: &Db,
    f: impl for<'t> FnOnce(&mut WriteTxn<'t>) -> Result<R, StoreError> + Send + 'static,
) -> Result<R, IpcError> {
    db.write_grouped(f).await.map_err(store_err)
}

/// Runs a blocking store operation off the async threads.
async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, StoreError> + Send + 'static,
) -> Result<R, IpcError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| IpcError::internal(format!("store task failed: {e}")))?
        .map_err(store_err)
}

impl Core {
    /// Assembles the core; at most `max_fresh_signatures` OCSP signatures
    /// are made on the request path at once; times come from `clock`.
    pub fn new(
        db: Db,
        signd: SigndClient,
        issuers: Vec<Arc<LoadedIssuer>>,
        max_fresh_signatures: usize,
        clock: Clock,
    ) -> Self {
        let fresh_signatures = tokio::sync::Semaphore::new(max_fresh_signatures.max(1));
        Self {
            db,
            signd,
            issuers: std::sync::RwLock::new(Arc::new(issuers)),
            public_url: String::new(),
            started: Instant::now(),
            fresh_signatures,
            client_limit: None,
            clock,
        }
    }

    /// The base URL of the HTTP side (`Config::public_url`), for issuers added later.
    pub fn with_public_url(mut self, url: String) -> Self {
        self.public_url = url;
        self
    }

    /// The CAs served now.
    pub fn issuers(&self) -> Arc<Vec<Arc<LoadedIssuer>>> {
        self.issuers.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Serves `iss` too, unless an issuer of that name is served already
    /// (then that one is returned).
    pub(crate) fn add_issuer(&self, iss: Arc<LoadedIssuer>) -> Result<Arc<LoadedIssuer>, Arc<LoadedIssuer>> {
        let mut all = self.issuers.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(existing) = all.iter().find(|i| i.name == iss.name) {
            return Err(existing.clone());
        }
        let mut next = Vec::clone(&all);
        next.push(iss.clone());
        *all = Arc::new(next);
        Ok(iss)
    }

    /// Unix seconds now, whole, by the core's clock.
    pub fn now_secs(&self) -> i64 {
        self.clock.unix_seconds()
    }

    /// Limits the signatures one client may cause on the request path.
    pub fn with_client_limit(mut self, rate: Option<ClientRate>) -> Self {
        self.client_limit = rate.map(ClientLimiter::new);
        self
    }

    /// Forgets per-client state of clients that have been quiet (see
    /// [`ClientLimiter::forget_idle`]); run now and then.
    pub fn forget_idle_clients(&self) {
        if let Some(l) = &self.client_limit {
            l.forget_idle();
        }
    }

    /// The issuer named `name`, or the first `admitted` one for an empty name.
    pub fn issuer_for(
        &self,
        name: &str,
        admitted: impl Fn(&LoadedIssuer) -> bool,
    ) -> Result<Arc<LoadedIssuer>, IpcError> {
        let issuers = self.issuers();
        let found = if name.is_empty() {
            issuers.iter().find(|i| admitted(i))
        } else {
            issuers.iter().find(|i| i.name == name)
        };
        match found {
            Some(i) if admitted(i) => Ok(i.clone()),
            Some(i) => Err(IpcError::denied(format!("not a registrar of issuer `{}`", i.name))),
            None if name.is_empty() => Err(IpcError::denied("not a registrar of any issuer ocspd serves")),
            None => Err(IpcError::new(ErrorKind::NotFound, format!("ocspd serves no issuer `{name}`"))),
        }
    }

    /// ocspd's health.
    pub fn health(&self) -> OcspdHealth {
        let (certificates, revoked) = self.db.counts().unwrap_or((0, 0));
        OcspdHealth {
            ok: true,
            version: env!("CARGO_PKG_VERSION").into(),
            issuers: self.issuers().iter().map(|i| i.name.clone()).collect(),
            certificates,
            revoked,
            uptime_secs: self.started.elapsed().as_secs(),
        }
    }

    /// Signs a response about `cert_id` through signd.
    async fn sign(
        &self,
        iss: &LoadedIssuer,
        cert_id: &CertIdentity,
        status: CertStatusInfo,
        nonce: Option<&[u8]>,
    ) -> Result<StoredResponse, IpcError> {
        let now = self.now_secs();
        let next = now + iss.settings.response_validity_seconds as i64;
        let params = OcspResponseParams {
            cert_id,
            status,
            produced_at: to_time(now),
            this_update: to_time(now),
            next_update: Some(to_time(next)),
            nonce,
        };
        let data = build_response_data(&iss.responder().responder, &params)
            .map_err(|e| IpcError::internal(format!("cannot build an OCSP response: {e}")))?;
        let der = self.signd.sign_ocsp_response(&iss.name, data).await?;
        Ok(StoredResponse { etag: crate::db::etag(&der), der, this_update: now, next_update: next })
    }

    /// Signs one response about several certificates of `iss` through signd.
    async fn sign_several(
        &self,
        iss: &LoadedIssuer,
        cert_ids: &[CertIdentity],
        statuses: &[CertStatusInfo],
        nonce: Option<&[u8]>,
    ) -> Result<StoredResponse, IpcError> {
        let now = self.now_secs();
        let next = now + iss.settings.response_validity_seconds as i64;
        let singles: Vec<_> = cert_ids
            .iter()
            .zip(statuses)
            .map(|(cert_id, &status)| SingleResponseParams {
                cert_id,
                status,
                this_update: to_time(now),
                next_update: Some(to_time(next)),
            })
            .collect();
        let data = build_multi_response_data(&iss.responder().responder, to_time(now), &singles, nonce)
            .map_err(|e| IpcError::internal(format!("cannot build an OCSP response: {e}")))?;
        let der = self.signd.sign_ocsp_response(&iss.name, data).await?;
        Ok(StoredResponse { etag: crate::db::etag(&der), der, this_update: now, next_update: next })
    }

    fn cert_id(iss: &LoadedIssuer, hash: OcspHash, serial: &[u8]) -> Result<CertIdentity, IpcError> {
        CertIdentity::new(hash, &iss.ca_der, serial).map_err(|e| IpcError::invalid(format!("serial: {e}")))
    }

    /// Signs the current status of `serial` for each hash; failures are logged
    /// and left out (the response is then signed on demand later).
    async fn sign_all(
        &self,
        iss: &LoadedIssuer,
        serial: &[u8],
        rec: &CertRecord,
        hashes: &[OcspHash],
    ) -> Vec<(Vec<u8>, Option<StoredResponse>)> {
        let mut out = Vec::new();
        for &h in hashes {
            let key = response_key(iss.id, h, serial);
            let signed = match Self::cert_id(iss, h, serial) {
                Ok(id) => self.sign(iss, &id, status_info(Some(rec)), None).await,
                Err(e) => Err(e),
            };
            match signed {
                Ok(r) => out.push((key, Some(r))),
                Err(e) => {
                    tracing::warn!(issuer = %iss.name, serial = %hex::encode(serial), error = %e, "cannot pre-sign an OCSP response; it will be signed on demand");
                    out.push((key, None));
                }
            }
        }
        out
    }

    /// Records an issued certificate; returns once committed.
    pub async fn record_issued(&self, iss: Arc<LoadedIssuer>, cert: IssuedCert) -> Result<CertStatus, IpcError> {
        if iss.profile.crl_shards > 0 && cert.crl_shard >= iss.profile.crl_shards {
            return Err(IpcError::invalid(format!(
                "CRL shard {} is out of range: issuer `{}` has {} shards",
                cert.crl_shard, iss.name, iss.profile.crl_shards
            )));
        }
        if iss.profile.crl_shards == 0 && cert.crl_shard != 0 {
            return Err(IpcError::invalid(format!("issuer `{}` has no CRL shards; crlShard must be 0", iss.name)));
        }
        // Validates the serial's encoding before anything is stored.
        Self::cert_id(&iss, OcspHash::Sha1, &cert.serial)?;
        let (db, id) = (&self.db, iss.id);
        // A read is a memory lookup in the map: no need to leave this thread.
        let existing = db.store.read(|t| db.cert_and_release(t, id, &cert.serial)).map_err(store_err)?;
        if let Some((rec, released)) = existing {
            return if rec.not_after == cert.not_after_unix_secs && rec.shard == cert.crl_shard {
                Ok(rec.status(&cert.serial, released.as_ref()))
            } else {
                Err(IpcError::new(
                    ErrorKind::AlreadyExists,
                    format!("serial {} is already recorded with other data", hex::encode(&cert.serial)),
                ))
            };
        }
        let rec = CertRecord {
            not_after: cert.not_after_unix_secs,
            shard: cert.crl_shard,
            recorded: self.now_secs(),
            revoked: None,
        };
        let signed = self.sign_all(&iss, &cert.serial, &rec, &[OcspHash::Sha1]).await;
        let (db, serial) = (self.db.clone(), cert.serial.clone());
        let stored = commit(&self.db, move |t| {
            if let Some(now) = db.cert_w(t, id, &serial)? {
                // Recorded concurrently: keep what is there.
                return Ok(now);
            }
            db.put_cert(t, id, &serial, &rec)?;
            for (key, r) in &signed {
                if let Some(r) = r {
                    db.put_response(t, key, r)?;
                }
            }
            Ok(rec)
        })
        .await?;
        // A record found here was recorded a moment ago, so it has no release yet.
        Ok(stored.status(&cert.serial, None))
    }

    /// Revokes a recorded certificate; returns once committed and the
    /// responses are re-signed (or dropped, if signd could not sign).
    ///
    /// The first revocation wins: a certificate already revoked is refused
    /// with `alreadyRevoked`, except that a hold may become a revocation for
    /// good, and any other reason may be raised to keyCompromise (RFC 5280
    /// 5.3.1, as Let's Encrypt allows); nothing ever lowers a reason. The
    /// decision is re-checked in the write transaction that stores it: when
    /// another registrar changed the record meanwhile, it is taken again from
    /// what is stored then, so concurrent revocations cannot overwrite each
    /// other, and the stored responses always say what the record says.
    pub async fn revoke(&self, iss: Arc<LoadedIssuer>, rev: Revocation) -> Result<CertStatus, IpcError> {
        if rev.reason == RevocationReason::RemoveFromCrl {
            return Err(IpcError::invalid(
                "removeFromCRL is not a revocation reason: it marks a release from hold in delta CRLs; \
                 to release a certificate from hold, call releaseHold (signetctl cert release-hold SERIAL)",
            ));
        }
        let now = self.now_secs();
        let time = if rev.revoked_unix_secs == 0 { now } else { rev.revoked_unix_secs };
        if time > now + 60 {
            return Err(IpcError::invalid("revocation time is in the future"));
        }
        let reason = rev.reason.code();
        // Each attempt that fails its commit saw another registrar's change;
        // a record can change only a few times (hold, revoked, keyCompromise)
        // unless releases interleave.
        const ATTEMPTS: usize = 8;
        for _ in 0..ATTEMPTS {
            let (db, id, serial) = (self.db.clone(), iss.id, rev.serial.clone());
            let existing = blocking(move || db.store.read(|t| db.cert(t, id, &serial))).await?;
            let Some(before) = existing else {
                return Err(never_recorded(&iss, &rev.serial));
            };
            let revoked = revocation_after(before.revoked, Revoked { time, reason, seq: 0 })
                .map_err(|r| already_revoked(&iss, &rev.serial, r))?;
            let rec = CertRecord { revoked: Some(revoked), ..before.clone() };
            let (db, serial) = (self.db.clone(), rev.serial.clone());
            let mut hashes = blocking(move || db.store.write(|t| db.cached_hashes(t, id, &serial))).await?;
            if !hashes.contains(&OcspHash::Sha1) {
                hashes.push(OcspHash::Sha1);
            }
            let signed = self.sign_all(&iss, &rev.serial, &rec, &hashes).await;
            let (db, serial) = (self.db.clone(), rev.serial.clone());
            let stored = commit(&self.db, move |t| {
                // The check-and-set: only over the record the decision was made on.
                if db.cert_w(t, id, &serial)?.as_ref() != Some(&before) {
                    return Ok(None);
                }
                let mut rec = rec;
                let mut state = db.state_w(t, id)?;
                state.revocation_seq += 1;
                if let Some(r) = rec.revoked.as_mut() {
                    r.seq = state.revocation_seq;
                }
                db.put_state(t, id, &state)?;
                db.put_cert(t, id, &serial, &rec)?;
                // Revoked (or on hold) again after a release: no longer released.
                db.delete_released(t, id, &serial)?;
                for (key, r) in &signed {
                    match r {
                        Some(r) => db.put_response(t, key, r)?,
                        // Never leave a "good" (or lesser) response behind a revocation.
                        None => {
                            db.delete_response(t, key)?;
                        }
                    }
                }
                Ok(Some(rec))
            })
            .await?;
            if let Some(stored) = stored {
                iss.crl_dirty.notify_one();
                tracing::info!(issuer = %iss.name, serial = %hex::encode(&rev.serial), reason = %rev.reason, "revoked");
                return Ok(stored.status(&rev.serial, None));
            }
        }
        Err(IpcError::new(
            ErrorKind::Unavailable,
            format!("serial {} changed {ATTEMPTS} times during the revocation; try again", hex::encode(&rev.serial)),
        ))
    }

    /// Releases a certificate from hold (revoked with reason certificateHold):
    /// it is good again. Returns once committed, with the responses re-signed
    /// as good in the same transaction (or dropped, if signd could not sign,
    /// so no stale `revoked` is served). The CRL publisher is woken: the full
    /// CRL and the shard drop the entry, delta CRLs whose base listed it say
    /// removeFromCRL (see `crl.rs`).
    pub async fn release_hold(&self, iss: Arc<LoadedIssuer>, serial: Vec<u8>) -> Result<CertStatus, IpcError> {
        // The commit checks that the record is still the one read here; if
        // another registrar changed it meanwhile (revoked it for good, say),
        // the release starts over from what is stored now.
        const ATTEMPTS: usize = 3;
        for _ in 0..ATTEMPTS {
            let (db, id, s) = (self.db.clone(), iss.id, serial.clone());
            let existing = blocking(move || db.store.read(|t| db.cert(t, id, &s))).await?;
            let Some(held) = existing else {
                return Err(never_recorded(&iss, &serial));
            };
            let hold = match held.revoked {
                Some(r) if r.reason == CERTIFICATE_HOLD => r,
                Some(r) => {
                    return Err(IpcError::new(ErrorKind::FailedPrecondition, format!(
                        "serial {} is not on hold: it is revoked ({}), and a revocation other than certificateHold is permanent",
                        hex::encode(&serial),
                        reason_name(r.reason)
                    )))
                }
                None => {
                    return Err(IpcError::new(ErrorKind::FailedPrecondition, format!(
                        "serial {} is not on hold: it is good (only a certificate revoked with reason certificate-hold can be released)",
                        hex::encode(&serial)
                    )))
                }
            };
            let rec = CertRecord { revoked: None, ..held.clone() };
            let (db, s) = (self.db.clone(), serial.clone());
            let mut hashes = blocking(move || db.store.write(|t| db.cached_hashes(t, id, &s))).await?;
            if !hashes.contains(&OcspHash::Sha1) {
                hashes.push(OcspHash::Sha1);
            }
            let signed = self.sign_all(&iss, &serial, &rec, &hashes).await;
            let (db, s, now) = (self.db.clone(), serial.clone(), self.now_secs());
            let committed = commit(&self.db, move |t| {
                if db.cert_w(t, id, &s)?.as_ref() != Some(&held) {
                    return Ok(None);
                }
                let mut state = db.state_w(t, id)?;
                state.revocation_seq += 1;
                db.put_state(t, id, &state)?;
                // Leaves the revoked index: the next full CRL and shard omit it.
                db.put_cert(t, id, &s, &rec)?;
                let released = Released { time: now, held_since: hold.time, seq: state.revocation_seq };
                db.put_released(t, id, &s, &released)?;
                for (key, r) in &signed {
                    match r {
                        Some(r) => db.put_response(t, key, r)?,
                        // Never leave a "revoked" response behind a release.
                        None => {
                            db.delete_response(t, key)?;
                        }
                    }
                }
                Ok(Some(rec.status(&s, Some(&released))))
            })
            .await?;
            if let Some(status) = committed {
                iss.crl_dirty.notify_one();
                tracing::info!(issuer = %iss.name, serial = %hex::encode(&serial), "released from hold");
                return Ok(status);
            }
        }
        Err(IpcError::new(
            ErrorKind::Unavailable,
            format!("serial {} changed {ATTEMPTS} times during the release; try again", hex::encode(&serial)),
        ))
    }

    /// The recorded status of `serial`.
    pub async fn status(&self, iss: &LoadedIssuer, serial: Vec<u8>) -> Result<CertStatus, IpcError> {
        let (db, id, s) = (self.db.clone(), iss.id, serial.clone());
        let rec = blocking(move || db.store.read(|t| db.cert_and_release(t, id, &s))).await?;
        Ok(rec.map_or_else(|| unknown_status(&serial), |(r, released)| r.status(&serial, released.as_ref())))
    }

    /// The newest CRL of a kind.
    pub async fn crl(&self, iss: &LoadedIssuer, which: CrlSelector) -> Result<Vec<u8>, IpcError> {
        let kind = match which {
            CrlSelector::Full => CrlKind::Full,
            CrlSelector::Delta => CrlKind::Delta,
            CrlSelector::Shard(n) if n < iss.profile.crl_shards => CrlKind::Shard(n),
            CrlSelector::Shard(n) => {
                return Err(IpcError::new(
                    ErrorKind::NotFound,
                    format!("issuer `{}` has {} CRL shards; there is no shard {n}", iss.name, iss.profile.crl_shards),
                ))
            }
        };
        let (db, id) = (self.db.clone(), iss.id);
        match blocking(move || db.crl(id, kind)).await? {
            Some(c) => Ok(c.der),
            None => Err(IpcError::new(ErrorKind::Unavailable, "no CRL has been signed yet (is signd reachable?)")),
        }
    }

    /// A stored CRL, for HTTP.
    pub fn stored_crl(&self, iss: &LoadedIssuer, kind: CrlKind) -> Result<Option<StoredCrl>, StoreError> {
        self.db.crl(iss.id, kind)
    }

    /// Answers an OCSP request (DER) from `client` (None: unknown, and not
    /// limited per client).
    pub async fn answer(&self, request: &[u8], client: Option<IpAddr>) -> OcspAnswer {
        use signet_ca::OcspErrorStatus as E;
        let req = match signet_ca::parse_ocsp_request(request) {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(error = %e, "malformed OCSP request");
                return OcspAnswer::Error(E::MalformedRequest);
            }
        };
        let [id] = req.cert_ids.as_slice() else { return self.answer_several(&req, client).await };
        let issuers = self.issuers();
        let Some(iss) = issuers.iter().find(|i| i.ocsp_issuer.matches(id)) else {
            return OcspAnswer::Error(E::Unauthorized);
        };
        let with_nonce = req.nonce.is_some() && iss.settings.nonce == crate::config::NoncePolicy::Echo;
        let key = response_key(iss.id, id.hash, &id.serial);
        let now = self.now_secs();
        let lookup = self.db.store.read(|t| {
            let cached = if with_nonce { None } else { self.db.response(t, &key)? };
            let rec = match &cached {
                Some(_) => None,
                None => self.db.cert(t, iss.id, &id.serial)?,
            };
            Ok((cached, rec))
        });
        let (cached, rec) = match lookup {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(error = %e, "OCSP lookup failed");
                return OcspAnswer::Error(E::InternalError);
            }
        };
        if let Some(r) = cached.filter(|r| r.next_update > now) {
            return OcspAnswer::Signed {
                cache: Some(Freshness {
                    this_update: r.this_update,
                    next_update: r.next_update,
                    max_age_cap: iss.settings.cache_max_age_seconds,
                }),
                der: r.der,
                etag: r.etag,
                // Reading the status back would mean decoding the response.
                status: "cached",
                presigned: true,
            };
        }
        let status = status_info(rec.as_ref());
        let nonce = if with_nonce { req.nonce.as_deref() } else { None };
        let _permit = match self.admit_fresh(client) {
            Ok(p) => p,
            Err(status) => return OcspAnswer::Error(status),
        };
        let signed = match self.sign(iss, id, status, nonce).await {
            Ok(s) => s,
            Err(e) => return OcspAnswer::Error(signing_failed(iss, &e)),
        };
        // Not for HTTP caches: a nonce's answer is single-use, and `unknown`
        // is signed afresh each time and may change any moment (the serial
        // recorded), so caches must not keep it.
        let cacheable = !with_nonce && rec.is_some();
        // Keep a fresh response for a known certificate, so the next request
        // is served from the store (not for nonces or unknown serials).
        if cacheable {
            let (db, r) = (self.db.clone(), signed.clone());
            let serial = id.serial.clone();
            let issuer_id = iss.id;
            let kept = blocking(move || {
                db.write(|t| {
                    // Only if the status did not change meanwhile.
                    if db.cert_w(t, issuer_id, &serial)?.as_ref() == rec.as_ref() {
                        db.put_response(t, &key, &r)?;
                    }
                    Ok(())
                })
            })
            .await;
            match kept {
                Ok(()) => {}
                // Logged once by the store's SpaceWatch, not per request.
                Err(_) if self.db.space.is_full() => {}
                Err(e) => tracing::warn!(error = %e, "cannot store a fresh OCSP response"),
            }
        }
        OcspAnswer::Signed {
            cache: cacheable.then_some(Freshness {
                this_update: signed.this_update,
                next_update: signed.next_update,
                max_age_cap: iss.settings.cache_max_age_seconds,
            }),
            der: signed.der,
            etag: signed.etag,
            status: status_name(&status),
            presigned: false,
        }
    }

    /// Answers a request about several certificates (2..=[`signet_ca::MAX_OCSP_REQUESTS`]):
    /// one response, one SingleResponse per certificate in request order,
    /// signed afresh (a pre-signed response covers one certificate and a
    /// signature covers the whole response, so they cannot be combined) and
    /// sent uncacheable. All must be of one CA: one response has one signer.
    async fn answer_several(&self, req: &OcspRequest, client: Option<IpAddr>) -> OcspAnswer {
        use signet_ca::OcspErrorStatus as E;
        let Some(first) = req.cert_ids.first() else { return OcspAnswer::Error(E::MalformedRequest) };
        let issuers = self.issuers();
        let Some(iss) = issuers.iter().find(|i| i.ocsp_issuer.matches(first)) else {
            return OcspAnswer::Error(E::Unauthorized);
        };
        if !req.cert_ids.iter().all(|id| iss.ocsp_issuer.matches(id)) {
            tracing::debug!(issuer = %iss.name, "OCSP request about certificates of several CAs (or of one not served): unauthorized");
            return OcspAnswer::Error(E::Unauthorized);
        }
        let with_nonce = req.nonce.is_some() && iss.settings.nonce == crate::config::NoncePolicy::Echo;
        let lookup = self
            .db
            .store
            .read(|t| req.cert_ids.iter().map(|id| self.db.cert(t, iss.id, &id.serial)).collect::<Result<Vec<_>, _>>());
        let recs = match lookup {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(error = %e, "OCSP lookup failed");
                return OcspAnswer::Error(E::InternalError);
            }
        };
        let _permit = match self.admit_fresh(client) {
            Ok(p) => p,
            Err(status) => return OcspAnswer::Error(status),
        };
        let statuses: Vec<_> = recs.iter().map(|r| status_info(r.as_ref())).collect();
        let nonce = if with_nonce { req.nonce.as_deref() } else { None };
        let signed = match self.sign_several(iss, &req.cert_ids, &statuses, nonce).await {
            Ok(s) => s,
            Err(e) => return OcspAnswer::Error(signing_failed(iss, &e)),
        };
        // Not for HTTP caches: signed afresh for every request and never
        // stored, so its ETag would change each time and a conditional
        // request could never match (as for `unknown`).
        OcspAnswer::Signed { cache: None, der: signed.der, etag: signed.etag, status: "several", presigned: false }
    }

    /// Admits a signature on the request path (nonces, unknown serials,
    /// expired responses, several certificates), bounded per client and in
    /// all: past either limit, clients hear tryLater at once instead of
    /// queueing on signd.
    fn admit_fresh(&self, client: Option<IpAddr>) -> Result<SemaphorePermit<'_>, signet_ca::OcspErrorStatus> {
        if let (Some(limit), Some(client)) = (&self.client_limit, client) {
            if !limit.admit(client) {
                tracing::debug!(%client, "client over its fresh-signature rate: tryLater");
                return Err(signet_ca::OcspErrorStatus::TryLater);
            }
        }
        self.fresh_signatures.try_acquire().map_err(|_| signet_ca::OcspErrorStatus::TryLater)
    }

    /// Re-signs `issuer`'s cached responses whose nextUpdate is within the
    /// refresh window. Returns how many were re-signed.
    pub async fn refresh(&self, iss: &LoadedIssuer) -> Result<usize, IpcError> {
        self.resign(iss, self.now_secs() + iss.settings.refresh_before() as i64).await
    }

    /// Fetches the issuer's responder certificate from signd again (after
    /// signd's `issueOcspResponder`): when it changed, every response is signed
    /// by the new responder from now on, and the stored ones are re-signed
    /// in the background. Answers what `info` answers then.
    pub async fn refresh_responder(self: Arc<Self>, iss: Arc<LoadedIssuer>) -> Result<IssuerInfo, IpcError> {
        let der = self.signd.ocsp_responder_certificate(&iss.name).await?;
        let fresh = ResponderCert::from_der(der)
            .map_err(|e| IpcError::internal(format!("the responder certificate signd gave: {e}")))?;
        let changed = {
            let mut current = iss.responder.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            let changed = current.der != fresh.der;
            if changed {
                *current = Arc::new(fresh);
            }
            changed
        };
        if changed {
            tracing::info!(issuer = %iss.name, "new OCSP responder certificate; re-signing the stored responses");
            let (core, iss) = (self.clone(), iss.clone());
            tokio::spawn(async move {
                match core.resign(&iss, i64::MAX).await {
                    Ok(n) => {
                        tracing::info!(issuer = %iss.name, responses = n, "stored OCSP responses re-signed by the new responder")
                    }
                    // The refresher re-signs the rest as they near nextUpdate.
                    Err(e) => {
                        tracing::warn!(issuer = %iss.name, error = %e, "cannot re-sign the stored OCSP responses")
                    }
                }
            });
        }
        Ok(iss.info())
    }

    /// Re-signs `issuer`'s cached responses whose nextUpdate is before
    /// `horizon`; how many.
    async fn resign(&self, iss: &LoadedIssuer, horizon: i64) -> Result<usize, IpcError> {
        const PAGE: usize = 1024;
        let mut after: Option<Vec<u8>> = None;
        let mut done = 0;
        loop {
            let (db, id, a) = (self.db.clone(), iss.id, after.clone());
            let page = blocking(move || db.responses_page(id, a.as_ref(), PAGE)).await?;
            let full = page.len() == PAGE;
            after = page.last().map(|e| e.key.clone());
            for crate::db::CachedEntry { key, hash, serial, next_update } in page {
                if next_update > horizon {
                    continue;
                }
                let (db, id, s) = (self.db.clone(), iss.id, serial.clone());
                let Some(rec) = blocking(move || db.store.read(|t| db.cert(t, id, &s))).await? else { continue };
                // Expired certificates are not kept fresh: a request for one
                // is signed on demand (RFC 6960 lets a responder answer for
                // them, RFC 5019 does not ask it to pre-sign them).
                if rec.not_after < self.now_secs() {
                    continue;
                }
                let cert_id = Self::cert_id(iss, hash, &serial)?;
                let signed = self.sign(iss, &cert_id, status_info(Some(&rec)), None).await?;
                let db = self.db.clone();
                blocking(move || {
                    db.write(|t| {
                        if db.cert_w(t, id, &serial)?.as_ref() == Some(&rec) {
                            db.put_response(t, &key, &signed)?;
                        }
                        Ok(())
                    })
                })
                .await?;
                done += 1;
            }
            if !full {
                return Ok(done);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_revocation_wins_and_only_key_compromise_raises_it() {
        let at = |reason: u8, time: i64| Revoked { time, reason, seq: 0 };
        let superseded = at(4, 100);
        assert_eq!(revocation_after(None, superseded), Ok(superseded));
        // A later revocation, whatever its reason but keyCompromise, is refused.
        for later in [0, 3, 4, 5, CERTIFICATE_HOLD] {
            assert_eq!(revocation_after(Some(superseded), at(later, 200)), Err(superseded), "{later}");
        }
        // keyCompromise raises the reason and keeps the first time; nothing lowers it again.
        let raised = revocation_after(Some(superseded), at(KEY_COMPROMISE, 200)).unwrap();
        assert_eq!(raised, at(KEY_COMPROMISE, 100));
        for later in [0, KEY_COMPROMISE, 4, CERTIFICATE_HOLD] {
            assert_eq!(revocation_after(Some(raised), at(later, 300)), Err(raised), "{later}");
        }
        // A hold becomes a revocation for good, at the hold's time; a hold again is refused.
        let hold = at(CERTIFICATE_HOLD, 50);
        assert_eq!(revocation_after(Some(hold), at(4, 60)), Ok(at(4, 50)));
        assert_eq!(revocation_after(Some(hold), at(CERTIFICATE_HOLD, 60)), Err(hold));
    }
}
