//! acme-bench: load generator for ACME (RFC 8555) servers such as acmed.
//!
//! Each of `--clients` tasks makes an account, then issues certificates back
//! to back over one HTTP/1.1 keep-alive connection: newOrder, authorization,
//! challenge (answered by a responder built in here), finalize, download.
//! `--warmup` issuances run first; the next `--requests` are measured.
//! Reports issuances/s, latency percentiles, per-phase means, errors by ACME
//! problem type and this process's heap allocation per issuance. Exits 1 if
//! any issuance (or account) failed, 2 if the run could not start.
//!
//! The library side is `signet_bench::acme_bench`; this file parses the
//! options and holds the counting allocator.

// The counting allocator below is the one place with unsafe code: a
// GlobalAlloc impl cannot be written without it.
#![deny(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};
use signet_bench::acme_bench::client::Polling;
use signet_bench::acme_bench::{self, ChallengeKind, Config, IdentifierKind, KeyType, ResponderConfig};

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting::new();

/// Load generator for ACME (RFC 8555) servers.
///
/// Latency is per issuance, from sending newOrder to the end of the
/// certificate download; account creation and --verify-cert checks are not
/// timed. Phases: new_order (the newOrder POST), authz (fetching the
/// authorization), challenge (publishing the answer, the challenge POST and
/// polling the authorization until valid), finalize (generating the
/// certificate key and CSR — seconds for RSA-4096 —, the finalize POST and
/// polling the order until valid), download (the certificate chain).
///
/// Heap allocation counts this whole process (clients and challenge
/// responders; the server runs elsewhere) over the measured window; a
/// reallocation counts as one allocation of its new size.
#[derive(Parser, Debug)]
#[command(version, about, long_about)]
struct Args {
    /// The ACME directory URL, e.g. https://127.0.0.1:14000/directory.
    #[arg(long)]
    directory: String,
    /// PEM file of CA certificates trusted for the server's TLS certificate
    /// (default: the system's roots); also roots for --verify-cert.
    #[arg(long, value_name = "PEM")]
    ca_bundle: Option<PathBuf>,
    /// Concurrent client tasks, each with its own account and connection.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    clients: u32,
    /// Issuances measured (the warmup not counted).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    requests: u64,
    /// Issuances run before measuring, not counted.
    #[arg(long, default_value_t = 10)]
    warmup: u64,
    /// Certificate key type, generated afresh for every CSR: ec:P-256,
    /// ec:P-384, ed25519, rsa:2048, rsa:3072, rsa:4096, ml-dsa-44,
    /// ml-dsa-65 or ml-dsa-87.
    #[arg(long, default_value = "ec:P-256", value_parser = parse_key_type)]
    key_type: KeyType,
    /// The CA's key type, as it was set up (acme-bench does not set the CA
    /// up): a label for the report, checked against the issuer of the first
    /// certificate issued (a mismatch fails the run).
    #[arg(long, default_value = "ec:P-256", value_parser = parse_key_type)]
    ca_key_type: KeyType,
    /// The challenge answered.
    #[arg(long, value_enum, default_value_t = Challenge::Http01)]
    challenge: Challenge,
    /// Order DNS names (c<client>-<n>.<domain-suffix>, new for every
    /// issuance) or an IP address (--ip-address).
    #[arg(long, value_enum, default_value_t = Ident::Dns)]
    identifier: Ident,
    /// The DNS zone the names are made in; the server must resolve them
    /// (e.g. a wildcard A record to the responders' address).
    #[arg(long, default_value = "bench.test")]
    domain_suffix: String,
    /// The address ordered with --identifier ip.
    #[arg(long, default_value = "127.0.0.1")]
    ip_address: IpAddr,
    /// Where the built-in http-01 server listens.
    #[arg(long, default_value = "127.0.0.1:5002")]
    http01_listen: SocketAddr,
    /// Where the built-in tls-alpn-01 server listens.
    #[arg(long, default_value = "127.0.0.1:5001")]
    tlsalpn01_listen: SocketAddr,
    /// The zone file dns-01 TXT records are written to (lines "NAME TYPE
    /// VALUE"; its other lines are kept, and it is restored at the end).
    #[arg(long, value_name = "FILE")]
    dns_zone: Option<PathBuf>,
    /// Milliseconds between polls of an authorization or order; a
    /// Retry-After from the server is honoured up to this.
    #[arg(long, default_value_t = 50)]
    poll_ms: u64,
    /// Seconds an authorization or order may stay pending or processing.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    poll_timeout: u64,
    /// Seconds one HTTP request (connecting included) may take.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// Verify every certificate chain with OpenSSL (trusting --ca-bundle and
    /// a self-signed root at the end of the chain) and that it names the
    /// identifier. Not timed.
    #[arg(long)]
    verify_cert: bool,
    /// Report as text or as one JSON object.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// A label carried into the report.
    #[arg(long)]
    label: Option<String>,
    /// Tokio worker threads. 1 (the default) runs the clients and responders
    /// on this thread, leaving the other cores to the server; key generation
    /// runs on blocking threads either way.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: u32,
}

/// The challenge types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Challenge {
    /// http-01 (RFC 8555 §8.3), served on --http01-listen.
    #[value(name = "http-01")]
    Http01,
    /// tls-alpn-01 (RFC 8737), served on --tlsalpn01-listen.
    #[value(name = "tls-alpn-01")]
    TlsAlpn01,
    /// dns-01 (RFC 8555 §8.4), written to --dns-zone.
    #[value(name = "dns-01")]
    Dns01,
    /// dns-persist-01 (draft-ietf-acme-dns-persist), written to --dns-zone.
    #[value(name = "dns-persist-01")]
    DnsPersist01,
}

/// The identifier types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Ident {
    /// DNS names.
    Dns,
    /// An IP address (RFC 8738).
    Ip,
}

/// The report's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    /// Lines for people.
    Text,
    /// One JSON object.
    Json,
}

fn parse_key_type(s: &str) -> Result<KeyType, String> {
    s.parse()
}

fn main() -> ExitCode {
    let args = Args::parse();
    let report = match run(&args) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("acme-bench: {e:#}");
            return ExitCode::from(2);
        }
    };
    match args.output {
        Output::Text => print!("{}", report.text()),
        Output::Json => println!("{}", report.json()),
    }
    if report.passed {
        ExitCode::SUCCESS
    } else {
        eprintln!("acme-bench: FAILED (see the errors above)");
        ExitCode::FAILURE
    }
}

fn run(args: &Args) -> anyhow::Result<acme_bench::Report> {
    let config = config(args)?;
    let runtime = if args.threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads as usize).enable_all().build()?
    };
    Ok(runtime.block_on(acme_bench::run(&config, &ALLOC))?)
}

fn config(args: &Args) -> anyhow::Result<Config> {
    let challenge = match args.challenge {
        Challenge::Http01 => ChallengeKind::Http01,
        Challenge::TlsAlpn01 => ChallengeKind::TlsAlpn01,
        Challenge::Dns01 => ChallengeKind::Dns01,
        Challenge::DnsPersist01 => ChallengeKind::DnsPersist01,
    };
    let identifier = match args.identifier {
        Ident::Dns => IdentifierKind::Dns,
        Ident::Ip => IdentifierKind::Ip,
    };
    if matches!(challenge, ChallengeKind::Dns01 | ChallengeKind::DnsPersist01) {
        let name = challenge.name();
        if identifier == IdentifierKind::Ip {
            bail!("{name} cannot validate IP addresses (RFC 8738 §7): use http-01 or tls-alpn-01");
        }
        if args.dns_zone.is_none() {
            bail!("--challenge {name} needs --dns-zone FILE");
        }
    }
    if let Some(bundle) = &args.ca_bundle {
        std::fs::metadata(bundle).with_context(|| format!("--ca-bundle {}", bundle.display()))?;
    }
    Ok(Config {
        directory: args.directory.clone(),
        ca_bundle: args.ca_bundle.clone(),
        clients: args.clients as usize,
        requests: args.requests,
        warmup: args.warmup,
        key_type: args.key_type,
        ca_key_type: args.ca_key_type,
        challenge,
        identifier,
        domain_suffix: args.domain_suffix.trim_matches('.').to_owned(),
        ip_address: args.ip_address,
        responders: ResponderConfig {
            http01_listen: args.http01_listen,
            tlsalpn01_listen: args.tlsalpn01_listen,
            dns_zone: args.dns_zone.clone(),
        },
        polling: Polling {
            interval: Duration::from_millis(args.poll_ms),
            timeout: Duration::from_secs(args.poll_timeout),
        },
        timeout: Duration::from_secs(args.timeout),
        verify_cert: args.verify_cert,
        label: args.label.clone(),
        threads: args.threads as usize,
    })
}

/// A global allocator that counts what passes through it to mimalloc.
#[allow(unsafe_code)]
mod counting {
    use std::alloc::{GlobalAlloc, Layout};
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    use mimalloc::MiMalloc;
    use signet_bench::acme_bench::{AllocProbe, AllocSnapshot};

    /// mimalloc, counting bytes and calls. Relaxed atomics: the counters are
    /// read between stages, after the tasks that moved them were joined.
    pub struct Counting {
        allocated: AtomicU64,
        allocations: AtomicU64,
        live: AtomicU64,
        peak: AtomicU64,
    }

    impl Counting {
        pub const fn new() -> Counting {
            Counting {
                allocated: AtomicU64::new(0),
                allocations: AtomicU64::new(0),
                live: AtomicU64::new(0),
                peak: AtomicU64::new(0),
            }
        }

        fn allocated(&self, size: usize) {
            let size = size as u64;
            self.allocated.fetch_add(size, Relaxed);
            self.allocations.fetch_add(1, Relaxed);
            let live = self.live.fetch_add(size, Relaxed) + size;
            self.peak.fetch_max(live, Relaxed);
        }

        fn freed(&self, size: usize) {
            self.live.fetch_sub(size as u64, Relaxed);
        }
    }

    // SAFETY: every method passes its arguments, with the caller's guarantees
    // about them, unchanged to MiMalloc (a correct GlobalAlloc) and returns its
    // result unchanged; the counting touches only atomics and never allocates.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: forwarded as is (see above).
            let p = unsafe { MiMalloc.alloc(layout) };
            if !p.is_null() {
                self.allocated(layout.size());
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: forwarded as is (see above).
            let p = unsafe { MiMalloc.alloc_zeroed(layout) };
            if !p.is_null() {
                self.allocated(layout.size());
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: forwarded as is: `ptr` came from this allocator, that
            // is from MiMalloc, with `layout`.
            unsafe { MiMalloc.dealloc(ptr, layout) };
            self.freed(layout.size());
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: forwarded as is (see above).
            let p = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                self.freed(layout.size());
                self.allocated(new_size);
            }
            p
        }
    }

    impl AllocProbe for Counting {
        fn snapshot(&self) -> AllocSnapshot {
            AllocSnapshot {
                allocated_bytes: self.allocated.load(Relaxed),
                allocations: self.allocations.load(Relaxed),
                live_bytes: self.live.load(Relaxed),
                peak_live_bytes: self.peak.load(Relaxed),
            }
        }

        fn reset_peak(&self) {
            self.peak.store(self.live.load(Relaxed), Relaxed);
        }
    }
}
