//! signd's interface (`signd.capnp`): the traits signd implements with plain
//! types, and the capnp servers that answer for them.

use std::rc::Rc;

use capnp::capability::Rc as CapRc;
use capnp_rpc::{rpc_twoparty_capnp::Side, RpcSystem};
use futures::future::LocalBoxFuture;
use futures::FutureExt;
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;

use super::accept::{handle, rpc_system, serve_bootstrap, IdleWork, InFlight, ServeOptions};
use super::LocalResult;
use crate::convert::signd as conv;
use crate::signd_capnp as wire;
use crate::types::*;

/// signd's entry point: called once per accepted connection.
pub trait SigndService: 'static {
    /// Creates the session for a new connection from `peer`.
    fn session(&self, peer: PeerCredentials) -> Rc<dyn Session>;
    /// Called on the serving thread while it polls for the next call (see
    /// [`ServeOptions::busy_poll`]): does one short piece of work ahead
    /// (tens of microseconds at most), if any is due, and returns whether it
    /// did. A call arriving meanwhile waits for it to finish.
    fn idle_work(&self) -> bool {
        false
    }
}

/// One connection's view of signd, bound to the caller's peer credentials.
pub trait Session: 'static {
    /// Who the caller is and what policy grants it.
    fn whoami(&self) -> Result<CallerInfo, IpcError>;
    /// A signer limited to `role` (empty: the caller's first role), or a refusal.
    /// Refusals are recorded before the future resolves.
    fn signer(&self, role: String) -> LocalResult<Rc<dyn SignerService>>;
    /// The admin capability, or a refusal (recorded before the future resolves).
    fn admin(&self) -> LocalResult<Rc<dyn AdminService>>;
    /// signd's health (anyone may ask).
    fn health(&self) -> Health;
    /// The certificate issuer of CA `name` (empty: the first the caller may
    /// use), or a refusal (recorded before the future resolves).
    fn issuer(&self, name: String) -> LocalResult<Rc<dyn IssuerService>>;
    /// The CRL signer of CA `name`, or a refusal.
    fn crl_signer(&self, name: String) -> LocalResult<Rc<dyn CrlSignerService>>;
    /// The OCSP signer of CA `name`, or a refusal.
    fn ocsp_signer(&self, name: String) -> LocalResult<Rc<dyn OcspSignerService>>;
    /// The signer of CT log `name` (empty: the first the caller may use), or
    /// a refusal (recorded before the future resolves).
    fn log_signer(&self, name: String) -> LocalResult<Rc<dyn LogSignerService>>;
}

/// Certificate issuance for one CA.
pub trait IssuerService: 'static {
    /// Validates `tbs` (DER TBSCertificate) against the CA's profile, signs it
    /// and returns the Certificate (DER).
    fn sign_tbs_certificate(&self, tbs: Vec<u8>) -> LocalResult<Vec<u8>>;
    /// The CA's own certificate (DER).
    fn ca_certificate(&self) -> LocalResult<Vec<u8>>;
    /// The end-entity profile, TOML.
    fn profile(&self) -> LocalResult<String>;
}

/// CRL signing for one CA.
pub trait CrlSignerService: 'static {
    /// Validates `tbs` (DER TBSCertList), signs it and returns the CRL (DER).
    fn sign_tbs_cert_list(&self, tbs: Vec<u8>) -> LocalResult<Vec<u8>>;
    /// The CA's own certificate (DER).
    fn ca_certificate(&self) -> LocalResult<Vec<u8>>;
    /// The end-entity profile, TOML.
    fn profile(&self) -> LocalResult<String>;
}

/// OCSP response signing for one CA's responder.
pub trait OcspSignerService: 'static {
    /// Validates `response_data` (DER ResponseData), signs it and returns the
    /// OCSPResponse (DER) carrying the responder certificate.
    fn sign_response_data(&self, response_data: Vec<u8>) -> LocalResult<Vec<u8>>;
    /// The responder's certificate (DER).
    fn responder_certificate(&self) -> LocalResult<Vec<u8>>;
    /// The CA's own certificate (DER).
    fn ca_certificate(&self) -> LocalResult<Vec<u8>>;
    /// Several separate `signResponseData` calls, arrived together; an
    /// outcome for each, in order. Each must be treated exactly as its own
    /// [`OcspSignerService::sign_response_data`] (checks, audit). The default
    /// makes those calls, all started before any is awaited.
    fn sign_each(&self, response_data: Vec<Vec<u8>>) -> LocalBoxFuture<'static, Vec<Result<Vec<u8>, IpcError>>> {
        let calls: Vec<_> = response_data.into_iter().map(|d| self.sign_response_data(d)).collect();
        Box::pin(futures::future::join_all(calls))
    }
}

/// Signing for one Certificate Transparency log with its log key.
pub trait LogSignerService: 'static {
    /// Checks that every input is an RFC 6962 SCT or tree head signature
    /// input (else refuses them all), and returns one DER ECDSA signature per
    /// input, in order.
    fn sign_many(&self, inputs: Vec<Vec<u8>>) -> LocalResult<Vec<Vec<u8>>>;
    /// The log key's SubjectPublicKeyInfo (DER).
    fn public_key(&self) -> LocalResult<Vec<u8>>;
}

/// Signing within one role.
pub trait SignerService: 'static {
    /// Keys this role may use.
    fn list_keys(&self) -> LocalResult<Vec<KeyInfo>>;
    /// One key's public information.
    fn public_key(&self, key_id: String) -> LocalResult<KeyInfo>;
    /// Signs `message` (signd hashes it as `scheme` requires).
    fn sign(&self, key_id: String, scheme: SignatureScheme, message: Vec<u8>) -> LocalResult<Vec<u8>>;
    /// Signs every message with one key; signatures in order.
    fn sign_batch(&self, key_id: String, scheme: SignatureScheme, messages: Vec<Vec<u8>>) -> LocalResult<Vec<Vec<u8>>>;
    /// Several separate `sign` calls with one key and scheme, arrived
    /// together; an outcome for each, in order. Each must be treated exactly
    /// as its own [`SignerService::sign`] (checks, audit). The default makes
    /// those calls, all started before any is awaited.
    fn sign_each(
        &self,
        key_id: String,
        scheme: SignatureScheme,
        messages: Vec<Vec<u8>>,
    ) -> LocalBoxFuture<'static, Vec<Result<Vec<u8>, IpcError>>> {
        let calls: Vec<_> = messages.into_iter().map(|m| self.sign(key_id.clone(), scheme, m)).collect();
        Box::pin(futures::future::join_all(calls))
    }
}

/// Key management and audit for admin roles.
pub trait AdminService: 'static {
    /// Every key.
    fn list_keys(&self) -> LocalResult<Vec<KeyInfo>>;
    /// One key.
    fn key(&self, key_id: String) -> LocalResult<KeyInfo>;
    /// Generates a key.
    fn generate_key(&self, spec: KeySpec) -> LocalResult<KeyInfo>;
    /// Imports a PKCS#8 private key (PEM or DER).
    fn import_key(&self, spec: KeySpec, pkcs8: Vec<u8>) -> LocalResult<KeyInfo>;
    /// Reads the audit log.
    fn audit(&self, query: AuditQuery) -> LocalResult<Vec<AuditRecord>>;
    /// Issues a new delegated OCSP responder certificate for an issuer with
    /// the key `key_id`, valid `validity_days` (0: the default), and makes it
    /// the issuer's responder; the certificate, DER.
    fn issue_ocsp_responder(&self, issuer: String, key_id: String, validity_days: u32) -> LocalResult<Vec<u8>>;
    /// Issues a new issuing CA beside an issuer (signed by the root key),
    /// with its OCSP responder, and serves it under a new name from then on;
    /// the CA certificate, DER.
    fn issue_issuing_ca(&self, spec: IssuingCaSpec) -> LocalResult<Vec<u8>>;
    /// Adds CT log `name` with log key `key_id`, its LogSigner for holders of
    /// `roles` (empty: the configured logs' roles), kept in signd's store; the
    /// log key's SubjectPublicKeyInfo, DER.
    fn add_ct_log(&self, name: String, key_id: String, roles: Vec<String>) -> LocalResult<Vec<u8>>;
}

/// Serves `service` on `listener` until `shutdown` is cancelled, then stops
/// accepting and waits (up to [`DRAIN_TIMEOUT`]) for calls in progress to be
/// answered. Must be called inside a `LocalSet`. A broken or hostile
/// connection only ever ends itself.
pub async fn serve(
    listener: UnixListener,
    service: Rc<dyn SigndService>,
    opts: ServeOptions,
    shutdown: CancellationToken,
) {
    let idle = service.clone();
    let idle_work: IdleWork = Rc::new(move || idle.idle_work());
    serve_bootstrap(listener, opts, shutdown, Some(idle_work), move |peer, in_flight| {
        let session = service.session(peer);
        let bootstrap: wire::signd::Client =
            capnp_rpc::new_client(SigndServer { session, opts, in_flight: in_flight.clone() });
        bootstrap.client
    })
    .await
}

/// Serves one connection from `peer` over the two halves of any byte stream;
/// resolves when the connection ends. Must run inside a `LocalSet`.
pub fn serve_connection<R, W>(
    read: R,
    write: W,
    peer: PeerCredentials,
    service: &dyn SigndService,
    opts: ServeOptions,
    in_flight: &InFlight,
) -> RpcSystem<Side>
where
    R: tokio::io::AsyncRead + Unpin + 'static,
    W: tokio::io::AsyncWrite + Unpin + 'static,
{
    let session = service.session(peer);
    let bootstrap: wire::signd::Client =
        capnp_rpc::new_client(SigndServer { session, opts, in_flight: in_flight.clone() });
    rpc_system(read, write, opts, bootstrap.client)
}

struct SigndServer {
    session: Rc<dyn Session>,
    opts: ServeOptions,
    in_flight: InFlight,
}

impl SigndServer {
    /// What the capabilities handed out on this connection share.
    fn child<T>(&self, inner: T) -> Child<T> {
        Child { inner, opts: self.opts, in_flight: self.in_flight.clone() }
    }
}

/// A capability handed out by [`SigndServer`]: the service behind it, the
/// connection's limits and its thread's calls in flight.
struct Child<T> {
    inner: T,
    opts: ServeOptions,
    in_flight: InFlight,
}

type SignerServer = Child<Rc<dyn SignerService>>;
type AdminServer = Child<Rc<dyn AdminService>>;
type IssuerServer = Child<Rc<dyn IssuerService>>;
type CrlSignerServer = Child<Rc<dyn CrlSignerService>>;
type OcspSignerServer = Child<Rc<dyn OcspSignerService>>;
type LogSignerServer = Child<Rc<dyn LogSignerService>>;

/// `call` for a method answered without waiting.
fn now<T: 'static>(outcome: Result<T, IpcError>) -> std::future::Ready<Result<T, IpcError>> {
    std::future::ready(outcome)
}

impl wire::signd::Server for SigndServer {
    async fn whoami(
        self: CapRc<Self>,
        params: wire::signd::WhoamiParams,
        results: wire::signd::WhoamiResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| now(self.session.whoami())).await
    }

    async fn signer(
        self: CapRc<Self>,
        params: wire::signd::SignerParams,
        results: wire::signd::SignerResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_signer, |role| {
            self.session.signer(role).map(|r| r.map(|inner| capnp_rpc::new_client(self.child(inner))))
        })
        .await
    }

    async fn admin(
        self: CapRc<Self>,
        params: wire::signd::AdminParams,
        results: wire::signd::AdminResults,
    ) -> capnp::Result<()> {
        handle(
            &self.in_flight,
            params,
            results,
            |_| Ok(()),
            |()| self.session.admin().map(|r| r.map(|inner| capnp_rpc::new_client(self.child(inner)))),
        )
        .await
    }

    async fn health(
        self: CapRc<Self>,
        _: wire::signd::HealthParams,
        mut results: wire::signd::HealthResults,
    ) -> capnp::Result<()> {
        let _call = self.in_flight.enter();
        conv::write_health_results(results.get(), &self.session.health());
        Ok(())
    }

    async fn issuer(
        self: CapRc<Self>,
        params: wire::signd::IssuerParams,
        results: wire::signd::IssuerResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_issuer, |name| {
            self.session.issuer(name).map(|r| r.map(|inner| capnp_rpc::new_client(self.child(inner))))
        })
        .await
    }

    async fn crl_signer(
        self: CapRc<Self>,
        params: wire::signd::CrlSignerParams,
        results: wire::signd::CrlSignerResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_crl_signer, |name| {
            self.session.crl_signer(name).map(|r| r.map(|inner| capnp_rpc::new_client(self.child(inner))))
        })
        .await
    }

    async fn ocsp_signer(
        self: CapRc<Self>,
        params: wire::signd::OcspSignerParams,
        results: wire::signd::OcspSignerResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_ocsp_signer, |name| {
            self.session.ocsp_signer(name).map(|r| r.map(|inner| capnp_rpc::new_client(self.child(inner))))
        })
        .await
    }

    async fn log_signer(
        self: CapRc<Self>,
        params: wire::signd::LogSignerParams,
        results: wire::signd::LogSignerResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_log_signer, |name| {
            self.session.log_signer(name).map(|r| r.map(|inner| capnp_rpc::new_client(self.child(inner))))
        })
        .await
    }
}

impl wire::signer::Server for SignerServer {
    async fn list_keys(
        self: CapRc<Self>,
        params: wire::signer::ListKeysParams,
        results: wire::signer::ListKeysResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.list_keys()).await
    }

    async fn public_key(
        self: CapRc<Self>,
        params: wire::signer::PublicKeyParams,
        results: wire::signer::PublicKeyResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_public_key, |id| self.inner.public_key(id)).await
    }

    async fn sign(
        self: CapRc<Self>,
        params: wire::signer::SignParams,
        results: wire::signer::SignResults,
    ) -> capnp::Result<()> {
        handle(
            &self.in_flight,
            params,
            results,
            |p| conv::read_sign(p, &self.opts),
            |(id, scheme, message)| self.inner.sign(id, scheme, message),
        )
        .await
    }

    async fn sign_batch(
        self: CapRc<Self>,
        params: wire::signer::SignBatchParams,
        results: wire::signer::SignBatchResults,
    ) -> capnp::Result<()> {
        handle(
            &self.in_flight,
            params,
            results,
            |p| conv::read_sign_batch(p, &self.opts),
            |(id, scheme, messages)| self.inner.sign_batch(id, scheme, messages),
        )
        .await
    }

    async fn sign_each(
        self: CapRc<Self>,
        params: wire::signer::SignEachParams,
        results: wire::signer::SignEachResults,
    ) -> capnp::Result<()> {
        handle(
            &self.in_flight,
            params,
            results,
            |p| conv::read_sign_each(p, &self.opts),
            |(id, scheme, messages)| {
                let inner = &self.inner;
                each_within_limit(&self.opts, messages, move |fit| inner.sign_each(id, scheme, fit))
            },
        )
        .await
    }
}

/// A `signEach` (Signer's or OcspSigner's): an oversized input fails alone,
/// as its own call would; the others go to `sign_each` together.
async fn each_within_limit(
    opts: &ServeOptions,
    inputs: Vec<Vec<u8>>,
    sign_each: impl FnOnce(Vec<Vec<u8>>) -> LocalBoxFuture<'static, Vec<Result<Vec<u8>, IpcError>>>,
) -> Result<Vec<Result<Vec<u8>, IpcError>>, IpcError> {
    let sizes: Vec<Result<(), IpcError>> = inputs.iter().map(|m| conv::check_size(opts, m.len())).collect();
    let fit: Vec<Vec<u8>> = inputs.into_iter().zip(&sizes).filter(|(_, size)| size.is_ok()).map(|(m, _)| m).collect();
    let signed = if fit.is_empty() { Vec::new() } else { sign_each(fit).await };
    let mut signed = signed.into_iter();
    Ok(sizes
        .into_iter()
        .map(|size| match size {
            Ok(()) => signed.next().unwrap_or_else(|| Err(IpcError::internal("no outcome for this call"))),
            Err(e) => Err(e),
        })
        .collect())
}

impl wire::admin::Server for AdminServer {
    async fn list_keys(
        self: CapRc<Self>,
        params: wire::admin::ListKeysParams,
        results: wire::admin::ListKeysResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.list_keys()).await
    }

    async fn key(
        self: CapRc<Self>,
        params: wire::admin::KeyParams,
        results: wire::admin::KeyResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_admin_key, |id| self.inner.key(id)).await
    }

    async fn generate_key(
        self: CapRc<Self>,
        params: wire::admin::GenerateKeyParams,
        results: wire::admin::GenerateKeyResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_generate_key, |spec| self.inner.generate_key(spec)).await
    }

    async fn import_key(
        self: CapRc<Self>,
        params: wire::admin::ImportKeyParams,
        results: wire::admin::ImportKeyResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_import_key, |(spec, pkcs8)| {
            self.inner.import_key(spec, pkcs8)
        })
        .await
    }

    async fn audit(
        self: CapRc<Self>,
        params: wire::admin::AuditParams,
        results: wire::admin::AuditResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_audit, |query| self.inner.audit(query)).await
    }

    async fn issue_ocsp_responder(
        self: CapRc<Self>,
        params: wire::admin::IssueOcspResponderParams,
        results: wire::admin::IssueOcspResponderResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_issue_ocsp_responder, |(issuer, key_id, days)| {
            self.inner.issue_ocsp_responder(issuer, key_id, days)
        })
        .await
    }

    async fn issue_issuing_ca(
        self: CapRc<Self>,
        params: wire::admin::IssueIssuingCaParams,
        results: wire::admin::IssueIssuingCaResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_issue_issuing_ca, |spec| self.inner.issue_issuing_ca(spec))
            .await
    }

    async fn add_ct_log(
        self: CapRc<Self>,
        params: wire::admin::AddCtLogParams,
        results: wire::admin::AddCtLogResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, conv::read_add_ct_log, |(name, key_id, roles)| {
            self.inner.add_ct_log(name, key_id, roles)
        })
        .await
    }
}

impl wire::issuer::Server for IssuerServer {
    async fn sign_tbs_certificate(
        self: CapRc<Self>,
        params: wire::issuer::SignTbsCertificateParams,
        results: wire::issuer::SignTbsCertificateResults,
    ) -> capnp::Result<()> {
        handle(
            &self.in_flight,
            params,
            results,
            |p| conv::read_sign_tbs_certificate(p, &self.opts),
            |tbs| self.inner.sign_tbs_certificate(tbs),
        )
        .await
    }

    async fn ca_certificate(
        self: CapRc<Self>,
        params: wire::issuer::CaCertificateParams,
        results: wire::issuer::CaCertificateResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.ca_certificate()).await
    }

    async fn profile(
        self: CapRc<Self>,
        params: wire::issuer::ProfileParams,
        results: wire::issuer::ProfileResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.profile()).await
    }
}

impl wire::crl_signer::Server for CrlSignerServer {
    async fn sign_tbs_cert_list(
        self: CapRc<Self>,
        params: wire::crl_signer::SignTbsCertListParams,
        results: wire::crl_signer::SignTbsCertListResults,
    ) -> capnp::Result<()> {
        handle(
            &self.in_flight,
            params,
            results,
            |p| conv::read_sign_tbs_cert_list(p, &self.opts),
            |tbs| self.inner.sign_tbs_cert_list(tbs),
        )
        .await
    }

    async fn ca_certificate(
        self: CapRc<Self>,
        params: wire::crl_signer::CaCertificateParams,
        results: wire::crl_signer::CaCertificateResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.ca_certificate()).await
    }

    async fn profile(
        self: CapRc<Self>,
        params: wire::crl_signer::ProfileParams,
        results: wire::crl_signer::ProfileResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.profile()).await
    }
}

impl wire::ocsp_signer::Server for OcspSignerServer {
    async fn sign_response_data(
        self: CapRc<Self>,
        params: wire::ocsp_signer::SignResponseDataParams,
        results: wire::ocsp_signer::SignResponseDataResults,
    ) -> capnp::Result<()> {
        handle(
            &self.in_flight,
            params,
            results,
            |p| conv::read_sign_response_data(p, &self.opts),
            |data| self.inner.sign_response_data(data),
        )
        .await
    }

    async fn responder_certificate(
        self: CapRc<Self>,
        params: wire::ocsp_signer::ResponderCertificateParams,
        results: wire::ocsp_signer::ResponderCertificateResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.responder_certificate()).await
    }

    async fn ca_certificate(
        self: CapRc<Self>,
        params: wire::ocsp_signer::CaCertificateParams,
        results: wire::ocsp_signer::CaCertificateResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.ca_certificate()).await
    }

    async fn sign_each(
        self: CapRc<Self>,
        params: wire::ocsp_signer::SignEachParams,
        results: wire::ocsp_signer::SignEachResults,
    ) -> capnp::Result<()> {
        handle(
            &self.in_flight,
            params,
            results,
            |p| conv::read_sign_response_data_each(p, &self.opts),
            |response_data| each_within_limit(&self.opts, response_data, |fit| self.inner.sign_each(fit)),
        )
        .await
    }
}

impl wire::log_signer::Server for LogSignerServer {
    async fn sign_many(
        self: CapRc<Self>,
        params: wire::log_signer::SignManyParams,
        results: wire::log_signer::SignManyResults,
    ) -> capnp::Result<()> {
        handle(
            &self.in_flight,
            params,
            results,
            |p| conv::read_sign_many(p, &self.opts),
            |inputs| self.inner.sign_many(inputs),
        )
        .await
    }

    async fn public_key(
        self: CapRc<Self>,
        params: wire::log_signer::PublicKeyParams,
        results: wire::log_signer::PublicKeyResults,
    ) -> capnp::Result<()> {
        handle(&self.in_flight, params, results, |_| Ok(()), |()| self.inner.public_key()).await
    }
}
