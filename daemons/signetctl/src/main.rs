//! signetctl: the Signet admin CLI.
//!
//! Exit codes (stable, for scripts): 0 success; 1 any other failure (for
//! `ct`: a check failed; for `restore`: the backup does not verify); 2 bad
//! arguments or request (including a wrong algorithm, a backup or restore
//! target that is not empty); 3 permission denied; 4 unknown key, serial, EAB
//! key id or OAuth client; 5 signd, ocspd, acmed, tokend or the CT log unavailable.
#![forbid(unsafe_code)]

/// Writes to standard output; see [`write_stdout`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::write_stdout(format_args!($($arg)*), false) };
}

/// Writes a line to standard output; see [`write_stdout`].
macro_rules! outln {
    () => { $crate::write_stdout(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::write_stdout(format_args!($($arg)*), true) };
}

mod acme;
mod backup;
mod ca;
mod ct;
mod oauth;
mod output;
mod probe;
mod setup;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use base64::Engine;
use clap::{Args, Parser, Subcommand};
use signet_ipc::{block_on, AuditQuery, ErrorKind, IpcError, KeyAlgorithm, KeySpec, SignatureScheme, SigndClient};

pub(crate) const EXIT_CODES: &str = "Exit codes: 0 ok; 1 failure (ct: a check failed; restore: the backup does not \
verify); 2 bad arguments or request (backup, restore: a target that is not empty); 3 permission denied; 4 unknown key, serial, EAB key id, OAuth client or user; 5 signd, ocspd, acmed, tokend or the CT log \
unavailable; 7 ct shard add: ctlogd refuses the shard (a name served already, an overlapping window).";

/// Administer Signet: setup, keys, signing, the audit log, certificates, acmed, tokend, CT logs, probes, backups.
#[derive(Parser)]
#[command(version, about, after_help = EXIT_CODES)]
struct Cli {
    /// signd's socket.
    #[arg(long, global = true, env = "SIGNET_SIGND_SOCKET", default_value = signet_ipc::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// ocspd's registry socket (for cert and crl).
    #[arg(long, global = true, env = "SIGNET_OCSPD_SOCKET", default_value = signet_ipc::DEFAULT_OCSPD_SOCKET)]
    ocspd_socket: PathBuf,
    /// acmed's admin socket (for acme).
    #[arg(long, global = true, env = "SIGNET_ACMED_SOCKET", default_value = signet_ipc::DEFAULT_ACMED_SOCKET)]
    acmed_socket: PathBuf,
    /// ctlogd's admin socket (for ct shard).
    #[arg(long, global = true, env = "SIGNET_CTLOGD_SOCKET", default_value = signet_ipc::DEFAULT_CTLOGD_SOCKET)]
    ctlogd_socket: PathBuf,
    /// tokend's admin socket (for oauth).
    #[arg(long, global = true, env = "SIGNET_TOKEND_SOCKET", default_value = signet_ipc::DEFAULT_TOKEND_SOCKET)]
    tokend_socket: PathBuf,
    /// The CA (issuer name in signd's and ocspd's config) for cert and crl.
    #[arg(long, global = true, env = "SIGNET_ISSUER", default_value = "demo")]
    issuer: String,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Manage keys.
    #[command(subcommand, after_help = EXIT_CODES)]
    Key(KeyCommand),
    /// Sign a message (for scripts): prints the signature in base64, or writes raw bytes with --out.
    #[command(after_help = EXIT_CODES)]
    Sign(SignArgs),
    /// Read the audit log.
    #[command(after_help = EXIT_CODES)]
    Audit(AuditArgs),
    /// Show signd's health.
    #[command(after_help = EXIT_CODES)]
    Health,
    /// Show who signd thinks you are and the roles you hold.
    #[command(after_help = EXIT_CODES)]
    Whoami,
    /// Create a CA whose keys live in signd.
    #[command(subcommand, after_help = EXIT_CODES)]
    Ca(ca::CaCommand),
    /// Issue, revoke and look up certificates.
    #[command(subcommand, after_help = EXIT_CODES)]
    Cert(ca::CertCommand),
    /// Read the CRLs ocspd publishes.
    #[command(subcommand, after_help = EXIT_CODES)]
    Crl(ca::CrlCommand),
    /// Administer acmed: external account binding keys.
    #[command(subcommand, after_help = EXIT_CODES)]
    Acme(acme::AcmeCommand),
    /// Administer tokend: OAuth clients, local users and token signing keys.
    #[command(subcommand, after_help = EXIT_CODES)]
    Oauth(oauth::OauthCommand),
    /// Check a CT log over its public HTTP APIs: checkpoint, tiles, proofs.
    #[command(subcommand, after_help = EXIT_CODES)]
    Ct(ct::CtCommand),
    /// probed's checks: list them, or run one once and print the result.
    #[command(subcommand, after_help = EXIT_CODES)]
    Probe(probe::ProbeCommand),
    /// Back up the appliance while it runs: every daemon's LMDB store (LMDB's
    /// own consistent copy), configs and public files; private keys only with
    /// --include-private-keys. Each daemon is found through its config file.
    #[command(after_help = EXIT_CODES)]
    Backup(backup::BackupArgs),
    /// Restore a backup into a fresh state directory, after checking every
    /// file against its manifest; --map OLD=NEW moves it (configs rewritten).
    #[command(after_help = EXIT_CODES)]
    Restore(backup::RestoreArgs),
    /// Make a fresh install (scripts/install's configs, signd running on its
    /// signd.toml) a working appliance: the CA, the CT log's key, tokend's
    /// token key (all in signd: OpenSSL, or --backend nss), signd's roles,
    /// [issuers.NAME] and [logs.NAME], and each daemon's config pointing at the
    /// others. signd loads issuers and logs at start, so the first run ends by
    /// asking to restart signd and start ocspd; the second issues acmed's TLS
    /// certificate and writes acmed's and probed's configs. Rerunnable at any point.
    #[command(after_help = EXIT_CODES)]
    Setup(setup::SetupArgs),
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Generate a key in signd.
    Generate {
        /// The new key's id ([A-Za-z0-9._-], up to 64).
        id: String,
        /// ecdsa-p256, ecdsa-p384, ecdsa-p521, ed25519, rsa-2048, rsa-3072, rsa-4096, ml-dsa-44, ml-dsa-65, ml-dsa-87.
        #[arg(long, short)]
        algorithm: KeyAlgorithm,
        /// A role that may use the key (repeatable).
        #[arg(long = "role")]
        roles: Vec<String>,
        /// Backend (default: signd's first backend).
        #[arg(long, default_value = "")]
        backend: String,
    },
    /// Import a PKCS#8 private key (PEM or DER) into signd.
    Import {
        /// The new key's id.
        id: String,
        /// The key's algorithm (checked against the file).
        #[arg(long, short)]
        algorithm: KeyAlgorithm,
        /// The PKCS#8 file; `-` for standard input.
        #[arg(long)]
        file: PathBuf,
        /// A role that may use the key (repeatable).
        #[arg(long = "role")]
        roles: Vec<String>,
        /// Backend (default: signd's first backend).
        #[arg(long, default_value = "")]
        backend: String,
    },
    /// List the keys: every key for an admin; otherwise those a role of yours
    /// may list (its `list` permission, as libpki's pki_list_keys sees them).
    List {
        /// The role to list through, when you are not an admin (default: your first role).
        #[arg(long, default_value = "")]
        role: String,
    },
    /// Show one key: algorithm, where it lives, roles, availability (an admin,
    /// or a role with the `public-key` permission on it).
    Show {
        /// The key's id.
        id: String,
        /// The role to read it through, when you are not an admin (default: your first role).
        #[arg(long, default_value = "")]
        role: String,
    },
    /// Print a key's public key (SubjectPublicKeyInfo) as PEM, or DER with --der
    /// (an admin, or a role with the `public-key` permission on it).
    ExportPublic {
        /// The key's id.
        id: String,
        /// The role to read it through, when you are not an admin (default: your first role).
        #[arg(long, default_value = "")]
        role: String,
        /// Write DER instead of PEM.
        #[arg(long)]
        der: bool,
        /// Write to this file instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Args)]
struct SignArgs {
    /// The key to sign with.
    #[arg(long)]
    key: String,
    /// The role to act in (default: your first role).
    #[arg(long, default_value = "")]
    role: String,
    /// The signature scheme (default: the key's own).
    #[arg(long, default_value = "default")]
    scheme: SignatureScheme,
    /// The message file; `-` (default) for standard input.
    #[arg(long = "in", default_value = "-")]
    input: PathBuf,
    /// Write the raw signature here instead of printing base64.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct AuditArgs {
    /// At most this many records.
    #[arg(long, default_value_t = 50)]
    limit: u32,
    /// Records after this sequence number (before it, with --newest).
    #[arg(long, default_value_t = 0)]
    after: u64,
    /// Newest first.
    #[arg(long)]
    newest: bool,
}

/// A failure and the exit code it maps to.
struct Failure {
    code: u8,
    message: String,
}

impl From<IpcError> for Failure {
    fn from(e: IpcError) -> Self {
        let code = match e.kind {
            ErrorKind::InvalidArgument | ErrorKind::WrongAlgorithm | ErrorKind::TooLarge => 2,
            ErrorKind::PermissionDenied => 3,
            ErrorKind::UnknownKey | ErrorKind::NotFound => 4,
            ErrorKind::Unavailable | ErrorKind::ShuttingDown => 5,
            ErrorKind::AlreadyRevoked => 6,
            _ => 1,
        };
        Self { code, message: e.to_string() }
    }
}

fn io_failure(what: &std::path::Path, e: std::io::Error) -> Failure {
    Failure { code: 2, message: format!("{}: {e}", what.display()) }
}

/// Standard output for everything signetctl prints. When the reader has gone
/// (`signetctl crl show | head`), signetctl stops quietly with status 0, as
/// tools that print for pipes do, instead of panicking as println! would.
pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>, newline: bool) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout.write_fmt(args).and_then(|()| if newline { stdout.write_all(b"\n") } else { Ok(()) });
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "signetctl: stdout: {e}");
            std::process::exit(1);
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            let _ = writeln!(std::io::stderr(), "signetctl: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn run(cli: &Cli) -> Result<(), Failure> {
    let out = output::Printer { json: cli.json };
    // One call at a time from this thread: run it here, no client thread.
    let client = SigndClient::new(&cli.socket)?.per_thread();
    match &cli.command {
        Command::Key(KeyCommand::Generate { id, algorithm, roles, backend }) => {
            let spec =
                KeySpec { id: id.clone(), algorithm: *algorithm, roles: roles.clone(), backend: backend.clone() };
            out.key(&block_on(client.generate_key(spec))?);
        }
        Command::Key(KeyCommand::Import { id, algorithm, file, roles, backend }) => {
            let pkcs8 = read_input(file)?;
            let spec =
                KeySpec { id: id.clone(), algorithm: *algorithm, roles: roles.clone(), backend: backend.clone() };
            out.key(&block_on(client.import_key(spec, pkcs8))?);
        }
        // One rule with libpki: an admin sees every key; anyone else what
        // their role's `list` / `public-key` permissions show.
        Command::Key(KeyCommand::List { role }) => {
            out.keys(&as_admin_or_role(block_on(client.admin_list_keys()), || block_on(client.list_keys(role)))?)
        }
        Command::Key(KeyCommand::Show { id, role }) => {
            out.key(&as_admin_or_role(block_on(client.admin_key(id)), || block_on(client.public_key(role, id)))?)
        }
        Command::Key(KeyCommand::ExportPublic { id, role, der, out: path }) => {
            let key = as_admin_or_role(block_on(client.admin_key(id)), || block_on(client.public_key(role, id)))?;
            let bytes = if *der { key.spki } else { output::pem("PUBLIC KEY", &key.spki).into_bytes() };
            write_output(path.as_ref(), &bytes)?;
        }
        Command::Sign(args) => {
            let message = read_input(&args.input)?;
            let sig = block_on(client.sign(&args.role, &args.key, args.scheme, message))?;
            match &args.out {
                Some(path) => write_output(Some(path), &sig)?,
                None if cli.json => out.json(&serde_json::json!({
                    "key": args.key,
                    "signature": base64::engine::general_purpose::STANDARD.encode(&sig),
                })),
                None => outln!("{}", base64::engine::general_purpose::STANDARD.encode(&sig)),
            }
        }
        Command::Audit(a) => {
            let query = AuditQuery { after_seq: a.after, limit: a.limit, newest_first: a.newest };
            out.audit(&block_on(client.audit(query))?);
        }
        Command::Health => out.health(&block_on(client.health())?),
        Command::Whoami => out.whoami(&block_on(client.whoami())?),
        Command::Ca(ca::CaCommand::Init(args)) => ca::init(&client, args, &out)?,
        Command::Ca(ca::CaCommand::RotateResponder(args)) => {
            let ocspd = signet_ipc::OcspdClient::new(&cli.ocspd_socket).per_thread();
            ca::rotate_responder(&client, &ocspd, &cli.issuer, args, &out)?;
        }
        Command::Ca(ca::CaCommand::RotateIssuer(args)) => {
            let ocspd = signet_ipc::OcspdClient::new(&cli.ocspd_socket).per_thread();
            let acmed = signet_ipc::AcmedClient::new(&cli.acmed_socket).per_thread();
            ca::rotate_issuer(&client, &ocspd, &acmed, &cli.issuer, args, &out)?;
        }
        Command::Cert(cmd) => {
            let ocspd = signet_ipc::OcspdClient::new(&cli.ocspd_socket).per_thread();
            ca::cert(&client, &ocspd, &cli.issuer, cmd, &out)?;
        }
        Command::Crl(cmd) => {
            let ocspd = signet_ipc::OcspdClient::new(&cli.ocspd_socket).per_thread();
            ca::crl(&ocspd, &cli.issuer, cmd, &out)?;
        }
        Command::Acme(cmd) => {
            let acmed = signet_ipc::AcmedClient::new(&cli.acmed_socket).per_thread();
            acme::run(&acmed, cmd, &out)?;
        }
        Command::Oauth(cmd) => {
            let tokend = signet_ipc::TokendClient::new(&cli.tokend_socket).per_thread();
            oauth::run(&tokend, &client, cmd, &out)?;
        }
        Command::Ct(ct::CtCommand::Shard(cmd)) => {
            let ctlogd = signet_ipc::CtlogdClient::new(&cli.ctlogd_socket).per_thread();
            ct::shard::run(&client, &ctlogd, cmd, &out)?;
        }
        // HTTP only: the signd client above is never connected.
        Command::Ct(cmd) => ct::run(cmd, &out)?,
        // No socket either: the checks run here, from probed's config.
        Command::Probe(cmd) => probe::run(cmd, &out)?,
        // Files and stores only: the daemons are found through their configs.
        Command::Backup(args) => backup::backup(args, &out)?,
        Command::Restore(args) => backup::restore(args, &out)?,
        Command::Setup(args) => setup::setup(&client, args, &out)?,
    }
    Ok(())
}

/// The admin answer, or, when the caller is no admin, the answer through a
/// role (whose refusal is then the one reported).
fn as_admin_or_role<T>(admin: Result<T, IpcError>, role: impl FnOnce() -> Result<T, IpcError>) -> Result<T, IpcError> {
    match admin {
        Err(e) if e.kind == ErrorKind::PermissionDenied => role(),
        other => other,
    }
}

pub(crate) fn read_input(path: &PathBuf) -> Result<Vec<u8>, Failure> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map_err(|e| io_failure(path, e))?;
        Ok(buf)
    } else {
        std::fs::read(path).map_err(|e| io_failure(path, e))
    }
}

fn write_output(path: Option<&PathBuf>, bytes: &[u8]) -> Result<(), Failure> {
    match path {
        Some(p) => std::fs::write(p, bytes).map_err(|e| io_failure(p, e)),
        None => std::io::stdout().write_all(bytes).map_err(|e| Failure { code: 1, message: format!("stdout: {e}") }),
    }
}
