//! A run: the responder, one task per client, the setup, warmup and
//! measured stages, and the report.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use openssl::ssl::SslConnector;
use openssl::x509::X509;
use signet_acme::types::Identifier;
use tokio::time::Instant;

use super::challenge::Responder;
use super::client::Client;
use super::error::Error;
use super::http::{self, Connection, Origin};
use super::issue::{self, Issued, Plan};
use super::keys::{self, KeyType};
use super::stats::{AllocProbe, Memory, Summary, Tally};
use super::{CaCheck, ClientStats, Config, ConfigEcho, IdentifierKind, Report, Stage};
use crate::self_cpu_time;

/// What every task shares.
struct Shared {
    config: Config,
    responder: Responder,
    /// Roots for `--verify-cert` (the CA bundle's certificates).
    roots: Vec<X509>,
    /// The issuer key type of the first certificate issued (`None` inside:
    /// not one of ours).
    ca_observed: OnceLock<Option<KeyType>>,
}

/// One client task's state between stages.
struct Worker {
    id: usize,
    client: Client,
    /// The number of this task's next issuance (names `c{id}-{n}`).
    next: u64,
}

/// Runs the benchmark: starts the challenge responder, makes the accounts,
/// runs the warmup, then measures. An error here is one that stops the run
/// before it starts (a responder that cannot listen, unreadable TLS trust).
pub async fn run(config: &Config, probe: &dyn AllocProbe) -> Result<Report, Error> {
    let responder = Responder::start(config.challenge, &config.responders).await?;
    let origin = Origin::of(&config.directory)?;
    let tls = http::tls_connector(config.ca_bundle.as_deref())
        .map_err(|e| Error::Crypto(format!("TLS client setup (--ca-bundle): {e}")))?;
    let roots = match &config.ca_bundle {
        Some(path) if config.verify_cert => {
            let pem = std::fs::read(path).map_err(|e| Error::Verify(format!("{}: {e}", path.display())))?;
            X509::stack_from_pem(&pem).map_err(|e| Error::Verify(format!("{}: {e}", path.display())))?
        }
        _ => Vec::new(),
    };
    let shared = Arc::new(Shared { config: config.clone(), responder, roots, ca_observed: OnceLock::new() });

    // Accounts: untimed.
    let mut setup_errors = Tally::default();
    let mut workers = Vec::with_capacity(config.clients);
    let tasks: Vec<_> = (0..config.clients)
        .map(|id| tokio::spawn(setup(id, Arc::clone(&shared), origin.clone(), Arc::clone(&tls))))
        .collect();
    for task in tasks {
        match task.await {
            Ok(Ok(worker)) => workers.push(worker),
            Ok(Err(e)) => setup_errors.error(&e),
            Err(e) => setup_errors.error(&Error::Protocol(format!("a client task failed: {e}"))),
        }
    }

    let (workers, warmup) = stage(workers, &shared, config.warmup).await;

    probe.reset_peak();
    let alloc_start = probe.snapshot();
    let cpu_start = self_cpu_time();
    let window_start = Instant::now();
    let (workers, measured) = stage(workers, &shared, config.requests).await;
    let window = window_start.elapsed();
    let cpu = self_cpu_time().saturating_sub(cpu_start);
    let alloc_end = probe.snapshot();

    let stop = shared.responder.stop();
    let summary = Summary::of(&measured, window);
    let client = ClientStats {
        connections_opened: workers.iter().map(|w| w.client.connections_opened()).sum(),
        bad_nonce_retries: workers.iter().map(|w| w.client.bad_nonce_retries).sum(),
        // /proc counts CPU time in 10 ms ticks: meaningless over a short window.
        cpu_percent: (window >= Duration::from_millis(200))
            .then(|| (cpu.as_secs_f64() / window.as_secs_f64() * 1000.0).round() / 10.0),
    };
    let observed = shared.ca_observed.get().copied().flatten();
    let ca = CaCheck {
        expected: config.ca_key_type.to_string(),
        observed: observed.map(|k| k.to_string()),
        matches: observed.map(|k| k == config.ca_key_type),
    };
    if let Err(e) = stop {
        setup_errors.error(&e);
    }
    let setup_errors = setup_errors.errors;
    let passed = setup_errors.is_empty()
        && warmup.error_count() == 0
        && measured.error_count() == 0
        && summary.issuances == config.requests
        && ca.matches != Some(false);
    Ok(Report {
        label: config.label.clone(),
        config: echo(config),
        memory: Memory::between(alloc_start, alloc_end, summary.issuances),
        summary,
        errors: measured.errors,
        warmup: Stage { issuances: warmup.samples.len() as u64, failed: warmup.error_count(), errors: warmup.errors },
        setup_errors,
        client,
        ca,
        passed,
    })
}

/// A client task's setup: the directory, the account.
async fn setup(id: usize, shared: Arc<Shared>, origin: Origin, tls: Arc<SslConnector>) -> Result<Worker, Error> {
    let config = &shared.config;
    let conn = Connection::new(origin, Some(tls), config.timeout);
    let mut client = Client::new(conn, &config.directory, config.polling).await?;
    client.create_account().await?;
    Ok(Worker { id, client, next: 1 })
}

/// Runs `total` issuances over the workers (each takes the next ticket
/// until none is left) and gives the workers back with what they measured.
async fn stage(workers: Vec<Worker>, shared: &Arc<Shared>, total: u64) -> (Vec<Worker>, Tally) {
    let tickets = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = workers
        .into_iter()
        .map(|worker| tokio::spawn(issue_until_done(worker, Arc::clone(shared), Arc::clone(&tickets), total)))
        .collect();
    let mut workers = Vec::with_capacity(tasks.len());
    let mut tally = Tally::default();
    for task in tasks {
        match task.await {
            Ok((worker, t)) => {
                workers.push(worker);
                tally.merge(t);
            }
            // A panicking task loses its worker; the run goes on with the others.
            Err(e) => tally.error(&Error::Protocol(format!("a client task failed: {e}"))),
        }
    }
    (workers, tally)
}

async fn issue_until_done(
    mut worker: Worker,
    shared: Arc<Shared>,
    tickets: Arc<AtomicU64>,
    total: u64,
) -> (Worker, Tally) {
    let config = &shared.config;
    let plan = Plan { challenge: config.challenge, responder: &shared.responder, key_type: config.key_type };
    let mut tally = Tally::default();
    while tickets.fetch_add(1, Ordering::Relaxed) < total {
        let identifier = match config.identifier {
            IdentifierKind::Dns => Identifier::dns(format!("c{}-{}.{}", worker.id, worker.next, config.domain_suffix)),
            IdentifierKind::Ip => Identifier::ip(config.ip_address.to_string()),
        };
        worker.next += 1;
        let outcome = match issue::issue(&mut worker.client, &plan, identifier.clone()).await {
            Ok(issued) => check(&shared, &issued, &identifier).map(|()| issued.sample),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(sample) => tally.samples.push(sample),
            Err(e) => tally.error(&e),
        }
    }
    (worker, tally)
}

/// The untimed checks of an issued chain: the CA's key type (once), and
/// with `--verify-cert` the chain and its name.
fn check(shared: &Shared, issued: &Issued, identifier: &Identifier) -> Result<(), Error> {
    let observe = shared.ca_observed.get().is_none();
    if !observe && !shared.config.verify_cert {
        return Ok(());
    }
    let chain = issue::parse_chain(&issued.chain_pem)?;
    if let (true, Some(leaf)) = (observe, chain.first()) {
        let _ = shared.ca_observed.set(keys::issuer_key_type(leaf, chain.get(1).map(|c| c.as_ref())));
    }
    if shared.config.verify_cert {
        issue::verify_chain(&chain, &shared.roots, identifier)?;
    }
    Ok(())
}

fn echo(config: &Config) -> ConfigEcho {
    ConfigEcho {
        directory: config.directory.clone(),
        clients: config.clients,
        requests: config.requests,
        warmup: config.warmup,
        key_type: config.key_type.to_string(),
        ca_key_type: config.ca_key_type.to_string(),
        challenge: config.challenge.name(),
        identifier: config.identifier.name(),
        poll_ms: config.polling.interval.as_millis() as u64,
        verify_cert: config.verify_cert,
        threads: config.threads,
    }
}
