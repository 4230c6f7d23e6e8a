//! Strict TOML configuration loading and the `--config` / `--check-config` arguments.
//!
//! Config structs use `#[serde(deny_unknown_fields)]`; errors name the file, line, column and,
//! for an unknown key, the key:
//!
//! ```text
//! /etc/signet/signd.toml:7:1: unknown key `sokcet`, expected one of `socket`, `state_dir`
//! ```

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::DaemonError;

/// Exit code for `--check-config` success.
pub const EXIT_OK: u8 = 0;
/// Exit code when the configuration cannot be loaded (also used outside `--check-config`).
pub const EXIT_CONFIG: u8 = 2;

/// Why a configuration file could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("{}: cannot read config file: {source}", path.display())]
    Read {
        /// The file that was asked for.
        path: PathBuf,
        /// The underlying I/O error.
        source: io::Error,
    },
    /// A key that the config struct does not know.
    #[error("{}:{line}:{column}: {message}", path.display())]
    UnknownKey {
        /// The config file.
        path: PathBuf,
        /// 1-based line of the key.
        line: usize,
        /// 1-based column (in characters) of the key.
        column: usize,
        /// The unknown key as written.
        key: String,
        /// Full message, e.g. ``unknown key `sokcet`, expected one of `socket` ``.
        message: String,
    },
    /// Any other syntax or type error at a known position.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// An error that toml could not attach to a position (e.g. a missing top-level key).
    #[error("{}: {message}", path.display())]
    Unpositioned {
        /// The config file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Reads and strictly decodes the TOML file at `path`.
pub fn load<T: DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
    parse(&text, path)
}

/// Strictly decodes TOML `text`; `origin` is the file name used in errors.
pub fn parse<T: DeserializeOwned>(text: &str, origin: &Path) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| convert_error(&e, text, origin))
}

fn convert_error(e: &toml::de::Error, text: &str, origin: &Path) -> ConfigError {
    let path = origin.to_owned();
    let raw = e.message().trim_end();
    let key = unknown_field_name(raw);
    // serde says "field"; in a TOML file the user writes a key.
    let message = if let Some(rest) = raw.strip_prefix("unknown field") {
        format!("unknown key{rest}")
    } else if let Some(rest) = raw.strip_prefix("missing field") {
        format!("missing key{rest}")
    } else {
        raw.to_owned()
    };
    let Some(span) = e.span() else {
        return ConfigError::Unpositioned { path, message };
    };
    let (line, column) = line_column(text, span.start);
    match key {
        Some(key) => ConfigError::UnknownKey { path, line, column, key, message },
        None => {
            // A bad value: say whose (toml keeps the key to itself).
            let message = match key_before(text, span.start) {
                Some(key) => format!("key `{key}`: {message}"),
                None => message,
            };
            ConfigError::Invalid { path, line, column, message }
        }
    }
}

/// The key of `key = value` when byte `offset` is where the value starts on its line.
fn key_before(text: &str, offset: usize) -> Option<&str> {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
    let lhs = line.trim_end().strip_suffix('=')?.trim_end();
    let is_key_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let start = lhs.char_indices().rev().take_while(|&(_, c)| is_key_char(c)).last()?.0;
    Some(&lhs[start..])
}

/// Extracts `name` from serde's "unknown field `name`, expected ..." message.
fn unknown_field_name(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let end = rest.find('`')?;
    Some(rest[..end].to_owned())
}

/// 1-based (line, column) of byte `offset` in `text`; the column counts characters.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Command-line arguments every daemon shares; `#[command(flatten)]` them into the daemon's args.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DaemonArgs {
    /// Path of the TOML configuration file (the daemon's default path if omitted).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Load and validate the configuration, print the result, and exit (0 if valid, 2 if not).
    #[arg(long)]
    pub check_config: bool,
}

impl DaemonArgs {
    /// The config path given with `--config`, or `default` if none was given.
    pub fn config_path<'a>(&'a self, default: &'a Path) -> &'a Path {
        self.config.as_deref().unwrap_or(default)
    }
}

/// A daemon's configuration file: decoded strictly, then checked for what serde cannot see.
pub trait DaemonConfig: DeserializeOwned {
    /// Every check the daemon makes on its configuration before it serves: values that parse
    /// but make no sense, names that must resolve (users, groups, roles), files that must be
    /// there and readable (certificates, keys, profiles).
    ///
    /// It runs for `--check-config`, at start and before a reload is applied, always through
    /// [`check`], so a config `--check-config` accepts is not refused at start for anything the
    /// file says, and one it refuses is refused at start with the same message. What only the
    /// running system can tell (the store, keys in signd, a peer daemon) is left to start.
    ///
    /// The error is one line without the file name, which [`check`] adds.
    fn check_config(&self) -> Result<(), String>;
}

/// A configuration that passed [`DaemonConfig::check_config`]; only [`check`] makes one, so a
/// daemon's `run` taking a `Checked` config cannot skip the checks.
#[derive(Debug)]
pub struct Checked<T> {
    config: T,
}

impl<T> Checked<T> {
    /// The configuration itself.
    pub fn into_inner(self) -> T {
        self.config
    }
}

impl<T> std::ops::Deref for Checked<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.config
    }
}

/// Runs `config`'s [`DaemonConfig::check_config`]; the error names the file (`PATH: what`).
pub fn check<T: DaemonConfig>(path: &Path, config: T) -> Result<Checked<T>, DaemonError> {
    config.check_config().map_err(|e| DaemonError::Config(format!("{}: {e}", path.display())))?;
    Ok(Checked { config })
}

/// Loads the file at `path` strictly and [`check`]s it: what start, `--check-config` and a
/// reload each do with a config file.
pub fn load_checked<T: DaemonConfig>(path: &Path) -> Result<Checked<T>, DaemonError> {
    let config = load::<T>(path).map_err(|e| DaemonError::Config(e.to_string()))?;
    check(path, config)
}

/// What `main` does after [`startup`]: run with the loaded config, or exit with a code.
#[derive(Debug)]
#[must_use]
pub enum Startup<T> {
    /// The config loaded and passed its checks, and `--check-config` was not given: run the
    /// daemon.
    Run(Checked<T>),
    /// Exit the process with this code (`--check-config` done, or the config is invalid).
    Exit(u8),
}

/// Loads and checks the config for a daemon and implements `--check-config`, writing to
/// stdout/stderr.
///
/// With `--check-config`: prints `config OK: PATH` and returns `Exit(0)`, or prints the error and
/// returns `Exit(2)`. Without it: returns `Run(config)`, or prints the same error and returns
/// `Exit(2)`. Typical use in `main`:
///
/// ```no_run
/// # #[derive(serde::Deserialize)] struct Config {}
/// # impl signet_runtime::config::DaemonConfig for Config {
/// #     fn check_config(&self) -> Result<(), String> { Ok(()) }
/// # }
/// # let args = signet_runtime::config::DaemonArgs::default();
/// use signet_runtime::config::{startup, Startup};
/// let config = match startup::<Config>(&args, "/etc/signet/signd.toml".as_ref()) {
///     Startup::Run(c) => c,
///     Startup::Exit(code) => std::process::exit(code.into()),
/// };
/// ```
pub fn startup<T: DaemonConfig>(args: &DaemonArgs, default_path: &Path) -> Startup<T> {
    startup_to(args, default_path, &mut io::stdout().lock(), &mut io::stderr().lock())
}

/// [`startup`] writing its messages to the given writers instead of stdout/stderr.
pub fn startup_to<T: DaemonConfig>(
    args: &DaemonArgs,
    default_path: &Path,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Startup<T> {
    let path = args.config_path(default_path);
    match load_checked::<T>(path) {
        Ok(config) if args.check_config => {
            // Nothing useful to do if stdout is closed; the exit code still says OK.
            let _ = writeln!(out, "config OK: {}", path.display());
            drop(config);
            Startup::Exit(EXIT_OK)
        }
        Ok(config) => Startup::Run(config),
        Err(e) => {
            let _ = writeln!(err, "{e}");
            Startup::Exit(EXIT_CONFIG)
        }
    }
}

/// The whole `main` of a daemon: logging for `daemon`, the config from `--config` (or
/// `default_path`) loaded and checked, with `--check-config`, then `run`. A failure is logged
/// and printed, and the process exits non-zero (2 for a config refused by [`startup`]).
pub fn daemon_main<C, E>(
    daemon: &str,
    default_path: &Path,
    args: &DaemonArgs,
    run: impl FnOnce(&Path, Checked<C>) -> Result<(), E>,
) -> std::process::ExitCode
where
    C: DaemonConfig,
    E: std::fmt::Display,
{
    crate::logging::init(daemon, "info");
    let config = match startup::<C>(args, default_path) {
        Startup::Run(c) => c,
        Startup::Exit(code) => return std::process::ExitCode::from(code),
    };
    // Connections are bounded by each listener's [http] max_connections, not by the
    // default soft limit of 1,024 files.
    match crate::http::raise_open_file_limit() {
        Ok(files) => tracing::debug!(files, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
    }
    match run(args.config_path(default_path), config) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            // Nothing more to do if stderr is gone too.
            let _ = writeln!(io::stderr(), "{daemon}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A Unix socket's permission bits, written in config as an octal string (`socket_mode =
/// "0660"`; `"660"` and `"0o660"` too) and checked when the file is read: anything else is a
/// config error naming the file, line and key. The default is `0660`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SocketMode(u32);

impl SocketMode {
    /// `rw-rw----`: the owner and the socket's group may connect.
    pub const DEFAULT: SocketMode = SocketMode(0o660);

    /// The mode `bits`, if they are permission bits only (at most `0o777`).
    pub const fn new(bits: u32) -> Option<SocketMode> {
        if bits <= 0o777 {
            Some(SocketMode(bits))
        } else {
            None
        }
    }

    /// The permission bits, for `chmod`.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

impl Default for SocketMode {
    fn default() -> Self {
        SocketMode::DEFAULT
    }
}

impl std::fmt::Display for SocketMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04o}", self.0)
    }
}

impl std::str::FromStr for SocketMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        parse_mode(s).map(SocketMode).ok_or_else(|| format!("{s:?} is not an octal file mode such as \"0660\""))
    }
}

impl<'de> serde::Deserialize<'de> for SocketMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Parses a file mode written as octal (`"0660"`, `"660"` or `"0o660"`), at most `0o777`.
pub fn parse_mode(s: &str) -> Option<u32> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    u32::from_str_radix(digits, 8).ok().filter(|m| *m <= 0o777)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use clap::Parser;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Conf {
        socket: String,
        #[serde(default)]
        workers: u32,
        #[serde(default)]
        http: Option<Http>,
        #[serde(default)]
        socket_mode: SocketMode,
    }

    impl DaemonConfig for Conf {
        fn check_config(&self) -> Result<(), String> {
            if self.workers > 64 {
                return Err(format!("workers = {} is more than 64", self.workers));
            }
            Ok(())
        }
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Http {
        listen: String,
    }

    fn origin() -> &'static Path {
        Path::new("/etc/signet/signd.toml")
    }

    #[test]
    fn parses_valid_config() {
        let c: Conf = parse("socket = \"/run/s\"\nworkers = 4\n", origin()).unwrap();
        assert_eq!(c.socket, "/run/s");
        assert_eq!(c.workers, 4);
    }

    #[test]
    fn unknown_top_level_key_names_file_line_column_and_key() {
        let text = "# comment\nsocket = \"/run/s\"\n\n\n\n\nsokcet = 1\n";
        let err = parse::<Conf>(text, origin()).unwrap_err();
        let shown = err.to_string();
        assert!(shown.starts_with("/etc/signet/signd.toml:7:1: unknown key `sokcet`, expected one of"), "{shown}");
        assert!(shown.contains("`socket`"), "{shown}");
        match err {
            ConfigError::UnknownKey { line, column, key, .. } => {
                assert_eq!((line, column, key.as_str()), (7, 1, "sokcet"))
            }
            other => panic!("wrong variant: {other:?}"),
        }
    }

    #[test]
    fn unknown_key_in_nested_table() {
        let text = "socket = \"x\"\n[http]\nlisten = \"a\"\n  lisen = \"b\"\n";
        let err = parse::<Conf>(text, origin()).unwrap_err();
        match &err {
            ConfigError::UnknownKey { line, column, key, .. } => {
                assert_eq!((*line, *column, key.as_str()), (4, 3, "lisen"))
            }
            other => panic!("wrong variant: {other:?}"),
        }
        assert!(err.to_string().contains("expected `listen`"), "{err}");
    }

    #[test]
    fn type_error_has_position() {
        let err = parse::<Conf>("socket = \"x\"\nworkers = \"many\"\n", origin()).unwrap_err();
        let shown = err.to_string();
        assert!(shown.starts_with("/etc/signet/signd.toml:2:11: "), "{shown}");
        assert!(matches!(err, ConfigError::Invalid { line: 2, .. }));
        assert!(shown.contains("key `workers`: "), "{shown}");
    }

    #[test]
    fn socket_mode_is_checked_when_read() {
        let c: Conf = parse("socket = \"x\"\n", origin()).unwrap();
        assert_eq!(c.socket_mode, SocketMode::DEFAULT);
        assert_eq!(c.socket_mode.to_string(), "0660");
        let c: Conf = parse("socket = \"x\"\nsocket_mode = \"0o600\"\n", origin()).unwrap();
        assert_eq!(c.socket_mode.bits(), 0o600);
        for bad in ["\"0999\"", "\"rw\"", "\"1777\"", "660"] {
            let err = parse::<Conf>(&format!("socket = \"x\"\n\nsocket_mode = {bad}\n"), origin()).unwrap_err();
            let shown = err.to_string();
            assert!(shown.starts_with("/etc/signet/signd.toml:3:15: key `socket_mode`: "), "{shown}");
        }
        assert_eq!(SocketMode::new(0o1777), None);
        assert_eq!(SocketMode::new(0o640).map(SocketMode::bits), Some(0o640));
    }

    #[test]
    fn key_before_a_value() {
        assert_eq!(key_before("a = 1", 4), Some("a"));
        assert_eq!(key_before("x\n  sub.key_1 =  2", 17), Some("sub.key_1"));
        assert_eq!(key_before("é = 1", 5), None);
        assert_eq!(key_before("[t]\n", 1), None);
        assert_eq!(key_before("k = [1, 2]", 8), None);
    }

    #[test]
    fn syntax_error_has_position() {
        let err = parse::<Conf>("socket = \"x\"\nworkers = = 3\n", origin()).unwrap_err();
        assert!(matches!(err, ConfigError::Invalid { line: 2, .. }), "{err:?}");
    }

    #[test]
    fn missing_required_key_names_key_and_file() {
        let err = parse::<Conf>("workers = 1\n", origin()).unwrap_err();
        let shown = err.to_string();
        assert!(shown.starts_with("/etc/signet/signd.toml"), "{shown}");
        assert!(shown.contains("missing key `socket`"), "{shown}");
    }

    #[test]
    fn missing_file_names_path() {
        let err = load::<Conf>(Path::new("/nonexistent/signet/x.toml")).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }));
        assert!(err.to_string().starts_with("/nonexistent/signet/x.toml: cannot read config file"), "{err}");
    }

    #[test]
    fn line_column_counts_characters() {
        assert_eq!(line_column("abc", 0), (1, 1));
        assert_eq!(line_column("a\nbc", 3), (2, 2));
        assert_eq!(line_column("é = 1\nx", 3), (1, 3));
        assert_eq!(line_column("ab", 99), (1, 3));
    }

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        daemon: DaemonArgs,
    }

    #[test]
    fn daemon_args_flatten_and_default_path() {
        let cli = Cli::try_parse_from(["signd", "--config", "/tmp/a.toml", "--check-config"]).unwrap();
        assert!(cli.daemon.check_config);
        assert_eq!(cli.daemon.config_path(Path::new("/etc/d.toml")), Path::new("/tmp/a.toml"));
        let cli = Cli::try_parse_from(["signd"]).unwrap();
        assert!(!cli.daemon.check_config);
        assert_eq!(cli.daemon.config_path(Path::new("/etc/d.toml")), Path::new("/etc/d.toml"));
    }

    fn run_startup(args: &DaemonArgs, default: &Path) -> (Startup<Conf>, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let s = startup_to::<Conf>(args, default, &mut out, &mut err);
        (s, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    }

    #[test]
    fn check_config_ok_and_failure() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.toml");
        std::fs::write(&good, "socket = \"/run/s\"\n").unwrap();
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "socket = \"/run/s\"\nsokcet = 1\n").unwrap();

        let args = DaemonArgs { config: Some(good.clone()), check_config: true };
        let (s, out, err) = run_startup(&args, Path::new("/unused"));
        assert!(matches!(s, Startup::Exit(0)));
        assert_eq!(out, format!("config OK: {}\n", good.display()));
        assert!(err.is_empty());

        let args = DaemonArgs { config: Some(bad.clone()), check_config: true };
        let (s, out, err) = run_startup(&args, Path::new("/unused"));
        assert!(matches!(s, Startup::Exit(2)));
        assert!(out.is_empty());
        assert!(err.starts_with(&format!("{}:2:1: unknown key `sokcet`", bad.display())), "{err}");

        // Without --check-config: run with the default path, or exit 2 on error.
        let args = DaemonArgs::default();
        match run_startup(&args, &good) {
            (Startup::Run(c), out, _) => {
                assert_eq!(c.socket, "/run/s");
                assert!(out.is_empty());
            }
            other => panic!("expected Run, got {other:?}"),
        }
        let (s, _, err) = run_startup(&args, &dir.path().join("missing.toml"));
        assert!(matches!(s, Startup::Exit(2)));
        assert!(err.contains("missing.toml: cannot read config file"), "{err}");
    }

    #[test]
    fn checks_refuse_alike_with_and_without_check_config() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("many.toml");
        std::fs::write(&path, "socket = \"/run/s\"\nworkers = 65\n").unwrap();
        let expected = format!("{}: workers = 65 is more than 64\n", path.display());
        for check_config in [true, false] {
            let args = DaemonArgs { config: Some(path.clone()), check_config };
            let (s, out, err) = run_startup(&args, Path::new("/unused"));
            assert!(matches!(s, Startup::Exit(2)), "{s:?}");
            assert!(out.is_empty());
            assert_eq!(err, expected);
        }
        let e = load_checked::<Conf>(&path).unwrap_err();
        assert!(matches!(&e, DaemonError::Config(m) if format!("{m}\n") == expected), "{e:?}");
        std::fs::write(&path, "socket = \"/run/s\"\nworkers = 64\n").unwrap();
        assert_eq!(load_checked::<Conf>(&path).unwrap().into_inner().workers, 64);
    }
}

#[cfg(test)]
mod mode_tests {
    use super::parse_mode;

    #[test]
    fn modes_are_octal() {
        assert_eq!(parse_mode("0660"), Some(0o660));
        assert_eq!(parse_mode("0o600"), Some(0o600));
        assert_eq!(parse_mode("777"), Some(0o777));
        assert_eq!(parse_mode("0888"), None);
        assert_eq!(parse_mode("1777"), None);
        assert_eq!(parse_mode(""), None);
    }
}
