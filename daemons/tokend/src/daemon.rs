//! The daemon: the store opened, the keys read from signd, the HTTP side and
//! the admin interface served until stopped; SIGHUP re-reads `[admin]`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use signet_ipc::SigndClient;
use signet_runtime::activation;
use signet_runtime::config::Checked;
use signet_runtime::health::{self, Health};
use signet_runtime::lifecycle::Lifecycle;
use signet_runtime::metrics::Metrics;
use signet_runtime::service_thread::ServiceThread;

use crate::admin::Admins;
use crate::config::Config;
use crate::db::Db;
use crate::http::{unix_now, FlowSettings, TokenMetrics, TokenService, TokendHttp};
use crate::keys::Keys;

pub use signet_runtime::DaemonError as TokendError;

/// How many verified tokens introspection remembers (a few hundred bytes each).
const VERIFIED_TOKENS: usize = 100_000;

/// How often expired replay and revocation records are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// Who may use the admin interface, resolved (`[admin]`, or tokend's own uid and root).
fn resolve_admins(config: &Config) -> Result<signet_runtime::principals::ResolvedPrincipals, String> {
    let own_uid = nix::unistd::getuid().as_raw();
    config.admins(own_uid).resolve().map_err(|e| format!("[admin]: {e}"))
}

/// Runs tokend with a checked configuration until SIGTERM/SIGINT.
pub fn run(config_path: &Path, config: Checked<Config>) -> Result<(), TokendError> {
    let config = config.into_inner();
    let cfg_err = |e: String| TokendError::Config(format!("{}: {e}", config_path.display()));
    // SIGHUP re-reads who may use the admin interface; everything else in the config takes a restart.
    let admins = Arc::new(Admins::new(&config, resolve_admins).map_err(cfg_err)?);
    let db =
        Db::open(&config.state_dir).map_err(|source| TokendError::Store { path: config.state_dir.clone(), source })?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| TokendError::Startup(format!("tokio runtime: {e}")))?;
    rt.block_on(serve(config_path, config, db, admins))
}

async fn serve(config_path: &Path, config: Config, db: Db, admins: Arc<Admins>) -> Result<(), TokendError> {
    let mut life = Lifecycle::install("tokend", config_path)?;
    let shutdown = life.shutdown_token();
    let mut act = activation::Activation::from_env();
    let listener = activation::tcp_listener(&mut act, "tokend-http", config.listen)?;
    let admin_listener = activation::unix_listener_std(
        &mut act,
        "tokend-admin",
        &config.admin_socket_path(),
        config.admin_socket_mode.bits(),
    )?;
    let cfg_err = |e: String| TokendError::Config(format!("{}: {e}", config_path.display()));
    let alg = config.algorithm().map_err(cfg_err)?;
    let signd = SigndClient::new(&config.signd_socket).map_err(|e| TokendError::Startup(e.to_string()))?;
    let signd_watch = signd.clone();
    let keys = Arc::new(Keys::new(
        signd,
        config.signd_role.clone(),
        db.clone(),
        alg,
        config.tokens.key_publish_seconds,
        config.tokens.access_token_seconds,
    ));
    match keys.refresh(unix_now()).await {
        Ok(view) if view.signer.is_none() => {
            tracing::warn!(role = %config.signd_role, alg = alg.name(), "no signd key of this alg yet: tokens are refused")
        }
        Ok(view) => tracing::info!(keys = view.published.len(), "signing keys read from signd"),
        Err(e) => tracing::warn!(error = %e, "signing keys not read yet; retrying"),
    }

    let trusted_issuers = config.trusted_issuers().map_err(cfg_err)?;
    // [tls]: the mTLS listener, its acceptor (asking for client certificates) and client CAs.
    let mtls = match &config.tls {
        None => {
            if act.names().iter().any(|n| n == "tokend-https") {
                tracing::warn!("socket tokend-https was passed, but tokend.toml has no [tls]: it is not served");
            }
            None
        }
        Some(tls) => {
            let listener = activation::tcp_listener(&mut act, "tokend-https", tls.listen)?;
            let acceptor = signet_runtime::tls::acceptor_requesting_client_certs(&tls.certificate, &tls.key)
                .map_err(|e| cfg_err(format!("[tls]: {e}")))?;
            let client_ca = match &tls.client_ca_file {
                Some(path) => {
                    Some(crate::mtls::ca_store(path).map_err(|e| cfg_err(format!("tls.client_ca_file: {e}")))?)
                }
                None => None,
            };
            let base_url = config.mtls_base_url().unwrap_or_default();
            let revocation = crate::ocsp::Revocation::new(tls).map_err(cfg_err)?;
            Some((listener, Arc::new(acceptor), crate::mtls::Mtls { base_url, client_ca, revocation }))
        }
    };
    let (mtls_listener, mtls) = match mtls {
        Some((l, a, m)) => (Some((l, a)), Some(m)),
        None => (None, None),
    };
    let directory = crate::users::Directory::new(config.ldap.as_ref()).map_err(cfg_err)?;
    let metrics = Metrics::new("tokend");
    let service = Arc::new(TokenService {
        issuer: config.base_url().to_owned(),
        db: db.clone(),
        keys: keys.clone(),
        token_seconds: config.tokens.access_token_seconds,
        max_assertion_seconds: config.tokens.max_assertion_seconds,
        jwks_max_age: (config.tokens.key_publish_seconds / 2).clamp(1, 300),
        metrics: TokenMetrics::register(&metrics),
        verified: crate::token::Verified::new(VERIFIED_TOKENS),
        flows: FlowSettings {
            code_seconds: config.tokens.code_seconds,
            id_token_seconds: config.tokens.id_token_seconds,
            refresh_token_seconds: config.tokens.refresh_token_seconds,
            refresh_family_seconds: config.tokens.refresh_family_seconds,
            refresh_grace_seconds: config.tokens.refresh_grace_seconds,
            session_seconds: config.login.session_seconds,
            csrf_key: db
                .secret("csrf")
                .map_err(|source| TokendError::Store { path: config.state_dir.clone(), source })?,
            dpop_key: db
                .secret("dpop-nonce")
                .map_err(|source| TokendError::Store { path: config.state_dir.clone(), source })?,
            dpop_require_nonce: config.tokens.dpop_nonce,
        },
        trusted_issuers,
        remote: crate::remote::RemoteJwks::new().map_err(TokendError::Startup)?,
        directory,
        mtls,
    });
    let (keys_ready, role) = (keys.clone(), config.signd_role.clone());
    let health = Health::new().with_check("token key", move || match keys_ready.view().signer {
        Some(_) => Ok(()),
        None => Err(format!("no key of role {role} for {} read from signd yet", alg.name())),
    });
    health::watch(&health, &metrics, "signd", health::WATCH_EVERY, shutdown.clone(), {
        let signd = signd_watch;
        move || signd.reachable()
    });
    let https = mtls_listener.map(|(listener, acceptor)| {
        tokio::spawn(signet_runtime::http::serve_tls(
            listener,
            acceptor,
            config.http,
            Arc::new(TokendHttp(service.clone())),
            metrics.clone(),
            health.clone(),
            shutdown.clone(),
        ))
    });
    let http = tokio::spawn(signet_runtime::http::serve(
        listener,
        config.http,
        Arc::new(TokendHttp(service)),
        metrics,
        health,
        shutdown.clone(),
    ));
    let refresher =
        tokio::spawn(refresh(keys.clone(), db.clone(), config.tokens.key_refresh_seconds, shutdown.clone()));
    let admin_thread = {
        let (db, keys, admins, stop) = (db.clone(), keys.clone(), admins.clone(), shutdown.clone());
        ServiceThread::spawn("tokend-admin", "admin", admin_listener, shutdown.clone(), move |listener| {
            crate::admin::serve(listener, db, keys, admins, stop)
        })?
    };
    life.on_stop(async move {
        if let Ok(Err(e)) = http.await {
            tracing::warn!(error = %e, "HTTP server ended with an error");
        }
        if let Some(Ok(Err(e))) = match https {
            Some(h) => Some(h.await),
            None => None,
        } {
            tracing::warn!(error = %e, "HTTPS (mTLS) server ended with an error");
        }
        let _ = refresher.await;
    });
    life.on_stop(admin_thread.join());
    tracing::info!(listen = %config.listen, issuer = %config.issuer, admin_socket = %config.admin_socket_path().display(), "tokend ready");
    life.serve(&format!("issuing tokens as {}", config.issuer), admins.as_ref()).await;
    Ok(())
}

/// Reads signd's key list every `every_seconds`; prunes expired records every [`PRUNE_EVERY`].
async fn refresh(keys: Arc<Keys>, db: Db, every_seconds: u64, stop: tokio_util::sync::CancellationToken) {
    let mut last_prune = std::time::Instant::now();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(every_seconds)) => {}
        }
        if let Err(e) = keys.refresh(unix_now()).await {
            tracing::warn!(error = %e, "reading the signing keys from signd failed");
        }
        if last_prune.elapsed() >= PRUNE_EVERY {
            last_prune = std::time::Instant::now();
            let db = db.clone();
            match tokio::task::spawn_blocking(move || db.prune(unix_now())).await {
                Ok(Ok(n)) if n > 0 => tracing::info!(records = n, "expired replay and revocation records pruned"),
                Ok(Err(e)) => tracing::warn!(error = %e, "pruning failed"),
                _ => {}
            }
        }
    }
}
