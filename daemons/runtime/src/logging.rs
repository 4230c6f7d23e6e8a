//! Logging setup: `tracing` to stderr, in journald's format when run by systemd.
//!
//! The filter comes from `SIGNET_LOG`, else `RUST_LOG`, else the daemon's default (all in
//! `EnvFilter` syntax, e.g. `info,signet_store=debug`). When `JOURNAL_STREAM` says stderr is
//! connected to journald, lines carry no timestamp and no colours, and start with the
//! sd-daemon priority prefix (`<3>` error, `<4>` warn, `<6>` info, `<7>` debug and trace) so
//! journald records the right priority.

use std::fmt;
use std::io::IsTerminal;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// The environment variable that holds Signet's log filter; it wins over `RUST_LOG`.
pub const FILTER_ENV: &str = "SIGNET_LOG";

/// Installs the global logger for `daemon`, with `default_level` (an `EnvFilter` directive such
/// as `"info"`) when neither `SIGNET_LOG` nor `RUST_LOG` is set.
///
/// Calling it again, or after another global subscriber was installed, does nothing.
pub fn init(daemon: &str, default_level: &str) {
    let (filter, bad_directive) =
        filter_from(std::env::var(FILTER_ENV).ok(), std::env::var("RUST_LOG").ok(), default_level);
    let journal = stderr_is_journal();
    let installed = subscriber(journal, filter, std::io::stderr).try_init().is_ok();
    if installed {
        if let Some(bad) = bad_directive {
            tracing::warn!(filter = %bad, "ignoring invalid log filter, using {default_level:?}");
        }
        tracing::debug!(daemon, journal, "logging initialised");
    }
}

/// The syslog priority journald should record for `level`.
pub fn syslog_priority(level: Level) -> u8 {
    match level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// Picks the filter; returns the rejected directive if the chosen variable did not parse.
fn filter_from(signet: Option<String>, rust: Option<String>, default_level: &str) -> (EnvFilter, Option<String>) {
    let fallback = || EnvFilter::try_new(default_level).unwrap_or_else(|_| EnvFilter::new("info"));
    match signet.or(rust).filter(|s| !s.trim().is_empty()) {
        Some(s) => match EnvFilter::try_new(&s) {
            Ok(f) => (f, None),
            Err(_) => (fallback(), Some(s)),
        },
        None => (fallback(), None),
    }
}

/// True when `JOURNAL_STREAM` is set and (if it can be checked) names our stderr.
fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = value.to_str().and_then(parse_journal_stream) else {
        return true;
    };
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata("/proc/self/fd/2") {
        Ok(m) => m.dev() == dev && m.ino() == ino,
        // Cannot check (no /proc): trust the variable.
        Err(_) => true,
    }
}

/// Parses `JOURNAL_STREAM`'s `DEVICE:INODE`.
fn parse_journal_stream(value: &str) -> Option<(u64, u64)> {
    let (dev, ino) = value.split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

type BoxedSubscriber = Box<dyn Subscriber + Send + Sync + 'static>;

fn subscriber<W>(journal: bool, filter: EnvFilter, writer: W) -> BoxedSubscriber
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    // A log line that cannot be written is dropped. tracing-subscriber would
    // otherwise report it with eprintln!, which panics when stderr itself is
    // the broken pipe (e.g. the `tee` of scripts/run died with the same Ctrl-C):
    // a panic in the signal-handling task would then leave the daemon running.
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).log_internal_errors(false);
    if journal {
        Box::new(builder.with_ansi(false).event_format(JournalFormat).finish())
    } else {
        Box::new(builder.with_ansi(std::io::stderr().is_terminal()).finish())
    }
}

/// `<prio>span{fields}: target: message key=value` — journald adds time, host and unit.
struct JournalFormat;

impl<S, N> FormatEvent<S, N> for JournalFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let meta = event.metadata();
        write!(writer, "<{}>", syslog_priority(*meta.level()))?;
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                write!(writer, "{}", span.name())?;
                let ext = span.extensions();
                if let Some(fields) = ext.get::<FormattedFields<N>>() {
                    if !fields.is_empty() {
                        write!(writer, "{{{fields}}}")?;
                    }
                }
                write!(writer, ": ")?;
            }
        }
        write!(writer, "{}: ", meta.target())?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    impl Buf {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn capture(journal: bool, filter: &str) -> String {
        let buf = Buf::default();
        let sub = subscriber(journal, EnvFilter::new(filter), buf.clone());
        tracing::subscriber::with_default(sub, || {
            let span = tracing::info_span!("conn", peer = 7);
            let _g = span.enter();
            tracing::error!(code = 5, "boom");
            tracing::warn!("careful");
            tracing::info!("hello");
            tracing::debug!("details");
            tracing::trace!("noise");
        });
        buf.text()
    }

    #[test]
    fn journal_format_has_priority_prefix_and_no_timestamp() {
        let out = capture(true, "trace");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 5, "{out}");
        let target = module_path!();
        assert_eq!(lines[0], format!("<3>conn{{peer=7}}: {target}: boom code=5"));
        assert_eq!(lines[1], format!("<4>conn{{peer=7}}: {target}: careful"));
        assert!(lines[2].starts_with("<6>") && lines[2].ends_with("hello"));
        assert!(lines[3].starts_with("<7>") && lines[3].ends_with("details"));
        assert!(lines[4].starts_with("<7>") && lines[4].ends_with("noise"));
        assert!(!out.contains('\x1b'), "no ANSI escapes: {out:?}");
    }

    #[test]
    fn human_format_has_levels_and_filter_applies() {
        let out = capture(false, "info");
        assert!(out.contains("ERROR") && out.contains("boom"), "{out}");
        assert!(out.contains("WARN") && out.contains("INFO"), "{out}");
        assert!(!out.contains("details") && !out.contains("noise"), "{out}");
        assert!(!out.starts_with('<'), "{out}");
    }

    #[test]
    fn priorities() {
        assert_eq!(syslog_priority(Level::ERROR), 3);
        assert_eq!(syslog_priority(Level::WARN), 4);
        assert_eq!(syslog_priority(Level::INFO), 6);
        assert_eq!(syslog_priority(Level::DEBUG), 7);
        assert_eq!(syslog_priority(Level::TRACE), 7);
    }

    #[test]
    fn filter_precedence() {
        let s = |v: &str| Some(v.to_owned());
        let (f, bad) = filter_from(s("debug"), s("error"), "info");
        assert_eq!(f.to_string(), "debug");
        assert!(bad.is_none());
        let (f, _) = filter_from(None, s("error"), "info");
        assert_eq!(f.to_string(), "error");
        let (f, _) = filter_from(None, None, "warn");
        assert_eq!(f.to_string(), "warn");
        let (f, bad) = filter_from(s("=[bad"), None, "warn");
        assert_eq!(f.to_string(), "warn");
        assert_eq!(bad.as_deref(), Some("=[bad"));
    }

    #[test]
    fn journal_stream_parsing() {
        assert_eq!(parse_journal_stream("8:12345"), Some((8, 12345)));
        assert_eq!(parse_journal_stream("x:1"), None);
        assert_eq!(parse_journal_stream("81"), None);
    }

    #[test]
    fn init_twice_is_a_no_op() {
        init("test", "info");
        init("test", "debug");
        tracing::info!("still works");
    }
}
