//! acmed: Signet's ACME CA (RFC 8555).
//!
//! acmed speaks ACME over HTTPS, keeps accounts, orders, authorizations and
//! certificates in its own LMDB, validates challenges against the network
//! (http-01, dns-01, tls-alpn-01, dns-persist-01, CAA), and issues through
//! signd's Issuer role. Every certificate is recorded in ocspd before a client
//! sees it, and revocations go to ocspd at once. The protocol's pure parts
//! (JWS, problem documents, resource types, CAA) live in `signet-acme`. With
//! `[ct]`, certificates carry SCTs from Certificate Transparency logs: a
//! precertificate is signed and logged first ([`ct`]).
//!
//! An admin interface (Cap'n Proto, `acmed.capnp`) on a Unix socket manages
//! external account binding keys (`signetctl acme eab ...`).
//!
//! Threads: one multi-threaded tokio runtime serves HTTPS and runs validations;
//! one more thread serves the admin socket on a `LocalSet`
//! (`signet_runtime::service_thread`).
#![forbid(unsafe_code)]
// Handlers return `Result<_, Problem>`: the refusal is the answer (a problem
// document), built once per refused request; boxing it buys nothing.
#![allow(clippy::result_large_err)]

pub mod admin;
pub mod cas;
pub mod challenge;
pub mod config;
pub mod ct;
pub mod db;
pub mod issue;
pub mod limits;
pub mod nonce;
pub mod resources;
pub mod server;
pub mod window;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use rand_core::{OsRng, RngCore};
use signet_acme::types::{Directory, DirectoryMeta};
use signet_ca::{Issuer, Profile};
use signet_ipc::{OcspdClient, SigndClient};
use signet_runtime::config::{Checked, DaemonConfig};
use signet_runtime::health::{self, Health};
use signet_runtime::lifecycle::Lifecycle;
use signet_runtime::metrics::Metrics;
use signet_runtime::service_thread::ServiceThread;
use signet_runtime::{activation, notify};
use signet_types::Clock;
use x509_cert::Certificate;

use crate::challenge::Validator;
use crate::config::Config;
use crate::db::Db;
use crate::limits::Limiter;
use crate::nonce::Nonces;
use crate::server::{AcmeHttp, JwkCache};

/// Why acmed could not start or stopped abnormally (the shared daemon error).
pub use signet_runtime::DaemonError as AcmedError;

/// What acmed knows of a CA it issues (or issued) under, fetched from signd.
pub struct CaContext {
    /// The issuer's name in signd (Issuer role) and ocspd (registry).
    pub name: String,
    /// The issuing CA, for building TBSCertificates.
    pub issuer: Issuer,
    /// The issuer's certificate profile (signd enforces it too).
    pub profile: Profile,
    /// The issuing CA certificate, DER.
    pub ca_der: Vec<u8>,
    /// Its subject key identifier (the AKI of what it issues; ARI ids start with it).
    pub ski: Vec<u8>,
    /// The chains served after the leaf, PEM: `[0]` up to (not including) the
    /// root, `[1]` (when the chain file has one) including it.
    pub chains: Vec<String>,
    /// The issuing CA certificate and the rest of the chain file after it
    /// (DER): what follows a precertificate submitted to CT logs.
    pub issuers: Vec<Vec<u8>>,
}

/// acmed's shared state.
pub struct Acme {
    /// The configuration.
    pub cfg: Config,
    /// The public base URL (no trailing slash).
    pub base: String,
    /// The store.
    pub db: Db,
    /// signd (Issuer role).
    pub signd: SigndClient,
    /// ocspd (registry).
    pub ocspd: OcspdClient,
    /// The CAs: the one it issues from, and those it issued from before
    /// (`AcmeAdmin.useIssuer`; see [`cas`]).
    pub cas: cas::Cas,
    /// Anti-replay nonces.
    pub nonces: Nonces,
    /// Challenge validation.
    pub validator: Validator,
    /// Rate limits.
    pub limits: Limiter,
    /// The directory document, serialised once.
    pub directory: Bytes,
    /// Parsed account keys.
    pub jwk_cache: JwkCache,
    /// Validations and finalizations in progress.
    pub inflight: Arc<resources::InFlight>,
    /// Counters.
    pub metrics: AcmeMetrics,
    /// The CT logs (`[ct]`), when configured.
    pub ct: Option<ct::CtLogs>,
    /// Where "now" comes from.
    pub clock: Clock,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ValidationLabels {
    challenge: String,
    outcome: String,
}

/// acmed's Prometheus metrics.
pub struct AcmeMetrics {
    /// Accounts created.
    pub accounts: Counter,
    /// Orders created.
    pub orders: Counter,
    /// Orders created with ARI `replaces`.
    pub replacing: Counter,
    /// renewalInfo requests answered.
    pub renewal_info: Counter,
    /// Certificates issued.
    pub certificates: Counter,
    /// Certificates revoked.
    pub revocations: Counter,
    /// Answers with a 5xx status.
    pub server_errors: Counter,
    validations: Family<ValidationLabels, Histogram>,
}

impl AcmeMetrics {
    fn new(m: &Metrics) -> AcmeMetrics {
        let me = AcmeMetrics {
            accounts: Counter::default(),
            orders: Counter::default(),
            replacing: Counter::default(),
            renewal_info: Counter::default(),
            certificates: Counter::default(),
            revocations: Counter::default(),
            server_errors: Counter::default(),
            validations: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.0005, 2.0, 16))),
        };
        m.register("acme_accounts_created", "Accounts created", me.accounts.clone());
        m.register("acme_orders_created", "Orders created", me.orders.clone());
        m.register(
            "acme_renewal_info_answered",
            "ARI renewalInfo requests answered for a known certificate",
            me.renewal_info.clone(),
        );
        m.register(
            "acme_orders_replacing",
            "Orders created to replace a certificate (ARI replaces)",
            me.replacing.clone(),
        );
        m.register("acme_certificates_issued", "Certificates issued", me.certificates.clone());
        m.register("acme_certificates_revoked", "Certificates revoked", me.revocations.clone());
        m.register("acme_server_errors", "Answers with a 5xx status", me.server_errors.clone());
        m.register("acme_validation_seconds", "Challenge validations by type and outcome", me.validations.clone());
        me
    }

    /// Records one validation.
    pub fn validation(&self, challenge: &str, ok: bool, took: Duration) {
        let labels = ValidationLabels {
            challenge: challenge.to_owned(),
            outcome: if ok { "valid" } else { "invalid" }.to_owned(),
        };
        self.validations.get_or_create(&labels).observe(took.as_secs_f64());
    }
}

/// What `--check-config` and start check beyond the file's syntax: the values serde cannot
/// judge ([`Config::check`]), the TLS certificate and key (readable, matching), the chain file,
/// `[admin]`'s users and groups, the DNS resolver settings validation uses, and `[ct]`'s log
/// keys and TLS roots. Whether signd
/// knows the issuer is learnt at start.
impl DaemonConfig for Config {
    fn check_config(&self) -> Result<(), String> {
        self.check()?;
        self.http.check()?;
        signet_runtime::tls::acceptor_from_files(&self.tls_certificate, &self.tls_key)?;
        if let Some(path) = &self.chain {
            read_chain(path)?;
        }
        resolve_admins(self)?;
        validator(self)?;
        if let Some(ct) = &self.ct {
            ct::CtLogs::new(ct)?;
        }
        Ok(())
    }
}

/// Runs acmed until SIGTERM or SIGINT.
pub fn run(config_path: &Path, config: Checked<Config>) -> Result<(), AcmedError> {
    let config = config.into_inner();
    let cfg_err = |e: String| AcmedError::Config(format!("{}: {e}", config_path.display()));
    let tls = signet_runtime::tls::acceptor_from_files(&config.tls_certificate, &config.tls_key).map_err(cfg_err)?;
    let chain_pem = config.chain.as_deref().map(read_chain).transpose().map_err(cfg_err)?;
    // SIGHUP re-reads who may use the admin interface; everything else in the config takes a restart.
    let admins = Arc::new(admin::Admins::new(&config, resolve_admins).map_err(cfg_err)?);
    let db =
        Db::open(&config.state_dir).map_err(|source| AcmedError::Store { path: config.state_dir.clone(), source })?;
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = config.http_threads {
        builder.worker_threads(n.max(1));
    }
    let rt = builder.enable_all().build().map_err(|e| AcmedError::Startup(format!("tokio runtime: {e}")))?;
    rt.block_on(serve(config_path, config, db, Arc::new(tls), chain_pem, admins))
}

/// Who may use the admin interface, resolved (`[admin]`, or acmed's own uid and root).
fn resolve_admins(config: &Config) -> Result<signet_runtime::principals::ResolvedPrincipals, String> {
    let own_uid = nix::unistd::getuid().as_raw();
    config.admins(own_uid).resolve().map_err(|e| format!("[admin]: {e}"))
}

/// The chain file's bytes, once they parse as PEM certificates.
fn read_chain(path: &Path) -> Result<Vec<u8>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("chain {}: {e}", path.display()))?;
    Certificate::load_pem_chain(&pem).map_err(|e| format!("chain: {e}"))?;
    Ok(pem)
}

/// Challenge validation as configured.
fn validator(config: &Config) -> Result<Validator, String> {
    Validator::new(
        config.dns_resolver,
        config.http01_port,
        config.http01_https_port,
        config.tlsalpn01_port,
        Duration::from_secs(config.validation_timeout_seconds),
        config.caa_identities.clone(),
        Duration::from_secs(config.caa_cache_max_seconds),
    )
}

async fn serve(
    config_path: &Path,
    config: Config,
    db: Db,
    tls: Arc<openssl::ssl::SslAcceptor>,
    chain_pem: Option<Vec<u8>>,
    admins: Arc<admin::Admins>,
) -> Result<(), AcmedError> {
    let mut life = Lifecycle::install("acmed", config_path)?;
    let shutdown = life.shutdown_token();
    let mut act = activation::Activation::from_env();
    let listener = activation::tcp_listener(&mut act, "acmed-https", config.listen)?;
    // Bound now, so admin clients queue while acmed loads the issuer from signd.
    let admin_listener = activation::unix_listener_std(
        &mut act,
        "acmed-admin",
        &config.admin_socket_path(),
        config.admin_socket_mode.bits(),
    )?;

    let signd = SigndClient::new(&config.signd_socket).map_err(|e| AcmedError::Startup(e.to_string()))?;
    let ocspd = OcspdClient::new(&config.ocspd_socket);
    let _ = notify::status("loading the issuer from signd");
    let cfg_err = |e: String| AcmedError::Config(format!("{}: {e}", config_path.display()));
    let cas = tokio::select! {
        loaded = cas::load(&config, &db, &signd, chain_pem.as_deref()) => loaded.map_err(cfg_err)?,
        () = shutdown.cancelled() => return Ok(()),
    };
    let validator = validator(&config).map_err(cfg_err)?;
    let base = config.public_url();
    let directory = directory_json(&config, &base);
    let metrics = Metrics::new("acmed");
    let ct = config.ct.as_ref().map(ct::CtLogs::new).transpose().map_err(cfg_err)?;
    if let Some(ct) = &ct {
        ct.register(&metrics);
    }
    let health = Health::new();
    health::watch(&health, &metrics, "signd", health::WATCH_EVERY, shutdown.clone(), {
        let signd = signd.clone();
        move || signd.reachable()
    });
    health::watch(&health, &metrics, "ocspd", health::WATCH_EVERY, shutdown.clone(), {
        let ocspd = ocspd.clone();
        move || ocspd.reachable()
    });
    let mut key = [0u8; 32];
    OsRng.fill_bytes(&mut key);
    let acme = Arc::new(Acme {
        limits: Limiter::new(config.rate_limits.clone()),
        cfg: config,
        base,
        db,
        signd,
        ocspd,
        cas,
        nonces: Nonces::new(key),
        validator,
        directory,
        jwk_cache: JwkCache::new(100_000),
        inflight: Arc::default(),
        metrics: AcmeMetrics::new(&metrics),
        ct,
        clock: Clock::system(),
    });
    let handler = Arc::new(AcmeHttp(acme.clone()));
    let http = tokio::spawn(signet_runtime::http::serve_tls(
        listener,
        tls,
        acme.cfg.http,
        handler,
        metrics,
        health,
        shutdown.clone(),
    ));

    // The admin interface: its own thread and LocalSet.
    let admin_thread = {
        let (acme, admins, stop) = (acme.clone(), admins.clone(), shutdown.clone());
        ServiceThread::spawn("acmed-admin", "admin", admin_listener, shutdown.clone(), move |listener| {
            admin::serve(listener, acme, admins, stop)
        })?
    };
    life.on_stop(async move {
        if let Ok(Err(e)) = http.await {
            tracing::warn!(error = %e, "HTTPS server ended with an error");
        }
    });
    life.on_stop(admin_thread.join());

    tracing::info!(
        listen = %acme.cfg.listen,
        directory = %acme.url("/directory"),
        issuer = %acme.ca().name,
        admin_socket = %acme.cfg.admin_socket_path().display(),
        "acmed ready"
    );
    life.serve(&format!("serving {}", acme.url("/directory")), admins.as_ref()).await;
    Ok(())
}

fn directory_json(cfg: &Config, base: &str) -> Bytes {
    let profiles: BTreeMap<String, String> =
        cfg.profiles.iter().map(|(k, v)| (k.clone(), v.description.clone())).collect();
    let d = Directory {
        new_nonce: format!("{base}/acme/new-nonce"),
        new_account: format!("{base}/acme/new-account"),
        new_order: format!("{base}/acme/new-order"),
        new_authz: None,
        revoke_cert: format!("{base}/acme/revoke-cert"),
        key_change: format!("{base}/acme/key-change"),
        renewal_info: Some(format!("{base}/acme/renewal-info")),
        meta: Some(DirectoryMeta {
            terms_of_service: cfg.terms_of_service.clone(),
            website: cfg.website.clone(),
            caa_identities: cfg.caa_identities.clone(),
            external_account_required: cfg.external_account_required,
            profiles,
        }),
    };
    Bytes::from(serde_json::to_vec_pretty(&d).unwrap_or_default())
}
