//! systemd socket activation with named file descriptors, and listeners that fall back to
//! binding themselves when the daemon is started without activation.
//!
//! A unit's `.socket` names each socket with `FileDescriptorName=`; the daemon asks for it by
//! that name:
//!
//! ```no_run
//! # async fn f() -> Result<(), signet_runtime::activation::ActivationError> {
//! use signet_runtime::activation::{unix_listener, Activation};
//! let mut act = Activation::from_env();
//! let ctl = unix_listener(&mut act, "control", "/run/signet/signd.sock".as_ref(), 0o660)?;
//! # Ok(()) }
//! ```

use std::fs::{DirBuilder, Permissions};
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use listenfd::ListenFd;

/// The name systemd gives a socket without `FileDescriptorName=`.
pub const DEFAULT_NAME: &str = "unknown";

const ENV_VARS: [&str; 4] = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "LISTEN_FDS_FIRST_FD"];

/// Why a listener could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ActivationError {
    /// `LISTEN_FDS` / `LISTEN_FDNAMES` are malformed or disagree.
    #[error("invalid socket activation environment: {0}")]
    Environment(String),
    /// The activated socket with this name is not the kind asked for.
    #[error("activated socket `{name}` is not a {expected}: {source}")]
    WrongType {
        /// The `FileDescriptorName=`.
        name: String,
        /// What the daemon asked for, e.g. "unix stream socket".
        expected: &'static str,
        /// The check that failed.
        source: io::Error,
    },
    /// The directory for a fallback socket could not be created.
    #[error("{}: cannot create socket directory: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// Something other than a socket is in the way of the fallback socket.
    #[error("{}: exists and is not a socket; refusing to remove it", path.display())]
    NotASocket {
        /// The fallback socket path.
        path: PathBuf,
    },
    /// A live process is listening on the fallback socket.
    #[error("{}: another process is already listening on this socket", path.display())]
    InUse {
        /// The fallback socket path.
        path: PathBuf,
    },
    /// A stale socket file could not be inspected or removed.
    #[error("{}: cannot remove stale socket: {source}", path.display())]
    RemoveStale {
        /// The fallback socket path.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// Binding the fallback address failed.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The path or `ip:port`.
        addr: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The fallback socket's mode could not be set.
    #[error("{}: cannot set mode {mode:o}: {source}", path.display())]
    Chmod {
        /// The fallback socket path.
        path: PathBuf,
        /// The requested mode.
        mode: u32,
        /// The underlying error.
        source: io::Error,
    },
    /// The listener could not be made non-blocking or registered with tokio.
    #[error("cannot hand listener `{name}` to tokio: {source}")]
    Register {
        /// The socket's name.
        name: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The async helpers were called outside a tokio runtime.
    #[error("listener `{0}` must be set up inside a tokio runtime")]
    NoRuntime(String),
}

impl ActivationError {
    /// The kind of the underlying I/O error, for the errors that have one: lets a
    /// daemon tell, say, a read-only directory from the rest.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            Self::WrongType { source, .. }
            | Self::CreateDir { source, .. }
            | Self::RemoveStale { source, .. }
            | Self::Bind { source, .. }
            | Self::Chmod { source, .. }
            | Self::Register { source, .. } => Some(source.kind()),
            Self::Environment(_) | Self::NotASocket { .. } | Self::InUse { .. } | Self::NoRuntime(_) => None,
        }
    }
}

/// The sockets systemd passed to this process, by name.
pub struct Activation {
    fds: ListenFd,
    names: Vec<String>,
}

impl std::fmt::Debug for Activation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Activation").field("names", &self.names).finish_non_exhaustive()
    }
}

impl Activation {
    /// Reads `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES` (fds start at 3), then unsets them
    /// so child processes do not inherit them. Call it once, early, before spawning threads.
    ///
    /// Sockets meant for another process (`LISTEN_PID` differs or is unset) are ignored. A
    /// malformed environment is logged and treated as no activation.
    pub fn from_env() -> Activation {
        let vars: Vec<Option<String>> = ENV_VARS[..3].iter().map(|v| std::env::var(v).ok()).collect();
        let parsed = parse_env(vars[0].as_deref(), vars[1].as_deref(), vars[2].as_deref(), std::process::id());
        // listenfd honours LISTEN_FDS_FIRST_FD; systemd always starts at 3.
        std::env::remove_var("LISTEN_FDS_FIRST_FD");
        let act = match parsed {
            Ok(names) if !names.is_empty() => {
                // Reads LISTEN_PID/LISTEN_FDS again (same verdict: the PID matched) and unsets them.
                let fds = ListenFd::from_env();
                if fds.len() == names.len() {
                    Activation { fds, names }
                } else {
                    tracing::error!("socket activation environment changed while reading it");
                    Activation::none()
                }
            }
            Ok(_) => Activation::none(),
            Err(e) => {
                tracing::error!(error = %e, "ignoring socket activation");
                Activation::none()
            }
        };
        for var in ENV_VARS {
            std::env::remove_var(var);
        }
        if !act.names.is_empty() {
            tracing::debug!(names = ?act.names, "socket-activated");
        }
        act
    }

    /// No activated sockets: every `take_*` returns `None`, and the helpers bind themselves.
    pub fn none() -> Activation {
        Activation { fds: ListenFd::empty(), names: Vec::new() }
    }

    /// The names of all passed sockets, in fd order (taken ones included).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Takes the first not-yet-taken Unix stream listener called `name`.
    ///
    /// `Ok(None)` if there is none; an error if the fd by that name is another kind of socket.
    pub fn take_unix(&mut self, name: &str) -> Result<Option<std::os::unix::net::UnixListener>, ActivationError> {
        self.take(name, "unix stream socket", ListenFd::take_unix_listener)
    }

    /// Takes the first not-yet-taken TCP listener (IPv4 or IPv6) called `name`.
    ///
    /// `Ok(None)` if there is none; an error if the fd by that name is another kind of socket.
    pub fn take_tcp(&mut self, name: &str) -> Result<Option<std::net::TcpListener>, ActivationError> {
        // listenfd accepts IPv6 TCP sockets here too.
        self.take(name, "TCP socket", ListenFd::take_tcp_listener)
    }

    fn take<T>(
        &mut self,
        name: &str,
        expected: &'static str,
        take: impl Fn(&mut ListenFd, usize) -> io::Result<Option<T>>,
    ) -> Result<Option<T>, ActivationError> {
        for idx in (0..self.names.len()).filter(|&i| self.names[i] == name) {
            match take(&mut self.fds, idx) {
                Ok(Some(listener)) => return Ok(Some(listener)),
                Ok(None) => continue, // already taken
                Err(source) => return Err(ActivationError::WrongType { name: name.to_owned(), expected, source }),
            }
        }
        Ok(None)
    }
}

/// Parses the activation variables; returns one name per fd (empty if none are ours).
fn parse_env(
    listen_pid: Option<&str>,
    listen_fds: Option<&str>,
    listen_fdnames: Option<&str>,
    own_pid: u32,
) -> Result<Vec<String>, ActivationError> {
    let (Some(pid), Some(fds)) = (listen_pid, listen_fds) else {
        return Ok(Vec::new());
    };
    let pid: u32 =
        pid.trim().parse().map_err(|_| ActivationError::Environment(format!("LISTEN_PID={pid:?} is not a PID")))?;
    if pid != own_pid {
        return Ok(Vec::new());
    }
    let count: usize =
        fds.trim().parse().map_err(|_| ActivationError::Environment(format!("LISTEN_FDS={fds:?} is not a count")))?;
    let names: Vec<String> = match listen_fdnames {
        None => vec![DEFAULT_NAME.to_owned(); count],
        Some(names) => names.split(':').map(str::to_owned).collect(),
    };
    if count == 0 {
        return Ok(Vec::new());
    }
    if names.len() != count {
        return Err(ActivationError::Environment(format!(
            "LISTEN_FDS={count} but LISTEN_FDNAMES has {} names",
            names.len()
        )));
    }
    Ok(names)
}

/// The activated Unix listener `name`, or else a socket bound at `fallback_path` with `mode`.
///
/// For the fallback, the parent directory is created (mode 0755) if missing, and an existing
/// file at the path is removed only if it is a socket nobody listens on. Must be called inside a
/// tokio runtime.
pub fn unix_listener(
    act: &mut Activation,
    name: &str,
    fallback_path: &Path,
    mode: u32,
) -> Result<tokio::net::UnixListener, ActivationError> {
    ensure_runtime(name)?;
    let std_listener = unix_listener_std(act, name, fallback_path, mode)?;
    let register = |source| ActivationError::Register { name: name.to_owned(), source };
    tokio::net::UnixListener::from_std(std_listener).map_err(register)
}

/// [`unix_listener`] for a service on another thread (and runtime): the listener is
/// non-blocking but not yet registered with tokio, so it can be called outside a runtime.
pub fn unix_listener_std(
    act: &mut Activation,
    name: &str,
    fallback_path: &Path,
    mode: u32,
) -> Result<std::os::unix::net::UnixListener, ActivationError> {
    let std_listener = match act.take_unix(name)? {
        Some(l) => l,
        None => bind_unix(fallback_path, mode)?,
    };
    std_listener.set_nonblocking(true).map_err(|source| ActivationError::Register { name: name.to_owned(), source })?;
    Ok(std_listener)
}

/// The activated TCP listener `name`, or else one bound at `fallback_addr`. Must be called
/// inside a tokio runtime.
pub fn tcp_listener(
    act: &mut Activation,
    name: &str,
    fallback_addr: SocketAddr,
) -> Result<tokio::net::TcpListener, ActivationError> {
    ensure_runtime(name)?;
    let std_listener = match act.take_tcp(name)? {
        Some(l) => l,
        None => std::net::TcpListener::bind(fallback_addr)
            .map_err(|source| ActivationError::Bind { addr: fallback_addr.to_string(), source })?,
    };
    let register = |source| ActivationError::Register { name: name.to_owned(), source };
    std_listener.set_nonblocking(true).map_err(register)?;
    tokio::net::TcpListener::from_std(std_listener).map_err(register)
}

fn ensure_runtime(name: &str) -> Result<(), ActivationError> {
    tokio::runtime::Handle::try_current().map(drop).map_err(|_| ActivationError::NoRuntime(name.to_owned()))
}

fn bind_unix(path: &Path, mode: u32) -> Result<std::os::unix::net::UnixListener, ActivationError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|source| ActivationError::CreateDir { path: dir.to_owned(), source })?;
    }
    remove_stale_socket(path)?;
    let listener = std::os::unix::net::UnixListener::bind(path)
        .map_err(|source| ActivationError::Bind { addr: path.display().to_string(), source })?;
    std::fs::set_permissions(path, Permissions::from_mode(mode)).map_err(|source| ActivationError::Chmod {
        path: path.to_owned(),
        mode,
        source,
    })?;
    Ok(listener)
}

fn remove_stale_socket(path: &Path) -> Result<(), ActivationError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(ActivationError::RemoveStale { path: path.to_owned(), source }),
    };
    if !meta.file_type().is_socket() {
        return Err(ActivationError::NotASocket { path: path.to_owned() });
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(ActivationError::InUse { path: path.to_owned() });
    }
    std::fs::remove_file(path).map_err(|source| ActivationError::RemoveStale { path: path.to_owned(), source })
}

#[cfg(test)]
#[path = "activation_tests.rs"]
mod tests;
