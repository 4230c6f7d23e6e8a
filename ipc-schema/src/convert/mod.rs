//! Conversions between the plain types in [`crate::types`] and capnp readers and
//! builders: the shared pieces here, one module per service beside them. Every
//! field crosses the wire through these modules and nowhere else. Clients hand
//! them a method's Params to fill and its Results to read ([`ReadOutcome`]);
//! servers hand them a method's Params to read and its Results to fill
//! ([`WriteOutcome`]).

pub(crate) mod acmed;
pub(crate) mod ctlogd;
pub(crate) mod ocspd;
pub(crate) mod signd;
pub(crate) mod tokend;

// `Error`, `DerResult` and `TextResult` are in signd.capnp; the other schemas import them.
use crate::signd_capnp as wire;
use crate::types::*;

/// A malformed message from the peer becomes a typed error, never a panic.
pub(crate) fn malformed(what: &str, e: impl std::fmt::Display) -> IpcError {
    IpcError::invalid(format!("malformed {what}: {e}"))
}

pub(crate) fn text(r: capnp::Result<capnp::text::Reader<'_>>, what: &str) -> Result<String, IpcError> {
    let t = r.map_err(|e| malformed(what, e))?;
    t.to_str().map(str::to_owned).map_err(|e| malformed(what, e))
}

pub(crate) fn data(r: capnp::Result<capnp::data::Reader<'_>>, what: &str) -> Result<Vec<u8>, IpcError> {
    r.map(<[u8]>::to_vec).map_err(|e| malformed(what, e))
}

pub(crate) fn text_list(r: capnp::Result<capnp::text_list::Reader<'_>>, what: &str) -> Result<Vec<String>, IpcError> {
    let list = r.map_err(|e| malformed(what, e))?;
    list.iter().map(|t| text(t, what)).collect()
}

pub(crate) fn set_text_list(mut b: capnp::text_list::Builder<'_>, items: &[String]) {
    for (i, s) in items.iter().enumerate() {
        // Indexes come from `items`, which sized the list.
        b.set(i as u32, s.as_str());
    }
}

fn kind_to_wire(k: ErrorKind) -> wire::ErrorKind {
    use wire::ErrorKind as W;
    match k {
        ErrorKind::Internal => W::Internal,
        ErrorKind::PermissionDenied => W::PermissionDenied,
        ErrorKind::UnknownKey => W::UnknownKey,
        ErrorKind::WrongAlgorithm => W::WrongAlgorithm,
        ErrorKind::InvalidArgument => W::InvalidArgument,
        ErrorKind::KeyUnavailable => W::KeyUnavailable,
        ErrorKind::Backend => W::Backend,
        ErrorKind::AlreadyExists => W::AlreadyExists,
        ErrorKind::Unavailable => W::Unavailable,
        ErrorKind::TooLarge => W::TooLarge,
        ErrorKind::Unsupported => W::Unsupported,
        ErrorKind::NotFound => W::NotFound,
        ErrorKind::FailedPrecondition => W::FailedPrecondition,
        ErrorKind::AlreadyRevoked => W::AlreadyRevoked,
        ErrorKind::ShuttingDown => W::ShuttingDown,
        // A kind signet-types gained before the schema did (the test below
        // catches it): still an error, just not a precise one.
        _ => W::Internal,
    }
}

fn kind_from_wire(k: Result<wire::ErrorKind, capnp::NotInSchema>) -> ErrorKind {
    use wire::ErrorKind as W;
    match k {
        Ok(W::Internal) => ErrorKind::Internal,
        Ok(W::PermissionDenied) => ErrorKind::PermissionDenied,
        Ok(W::UnknownKey) => ErrorKind::UnknownKey,
        Ok(W::WrongAlgorithm) => ErrorKind::WrongAlgorithm,
        Ok(W::InvalidArgument) => ErrorKind::InvalidArgument,
        Ok(W::KeyUnavailable) => ErrorKind::KeyUnavailable,
        Ok(W::Backend) => ErrorKind::Backend,
        Ok(W::AlreadyExists) => ErrorKind::AlreadyExists,
        Ok(W::Unavailable) => ErrorKind::Unavailable,
        Ok(W::TooLarge) => ErrorKind::TooLarge,
        Ok(W::Unsupported) => ErrorKind::Unsupported,
        Ok(W::NotFound) => ErrorKind::NotFound,
        Ok(W::FailedPrecondition) => ErrorKind::FailedPrecondition,
        Ok(W::AlreadyRevoked) => ErrorKind::AlreadyRevoked,
        Ok(W::ShuttingDown) => ErrorKind::ShuttingDown,
        // A kind added by a newer signd: still an error, just not one we know.
        Err(_) => ErrorKind::Internal,
    }
}

// --- errors -----------------------------------------------------------------

pub(crate) fn write_error(mut b: wire::error::Builder<'_>, e: &IpcError) {
    b.set_kind(kind_to_wire(e.kind));
    b.set_detail(e.detail.as_str());
}

pub(crate) fn read_error(r: capnp::Result<wire::error::Reader<'_>>) -> IpcError {
    match r {
        Ok(r) => IpcError {
            kind: kind_from_wire(r.get_kind()),
            detail: r.get_detail().ok().and_then(|t| t.to_str().ok()).unwrap_or("").to_owned(),
        },
        Err(e) => malformed("error", e),
    }
}

// --- shared lists and result unions -----------------------------------------

/// Reads a `List(Data)` into owned messages, enforcing a count limit.
pub(crate) fn read_data_list(
    r: capnp::Result<capnp::data_list::Reader<'_>>,
    max: usize,
) -> Result<Vec<Vec<u8>>, IpcError> {
    let list = r.map_err(|e| malformed("message list", e))?;
    if list.len() as usize > max {
        return Err(IpcError::new(
            ErrorKind::TooLarge,
            format!("batch of {} messages is over the limit of {max}", list.len()),
        ));
    }
    list.iter().map(|d| data(d, "message")).collect()
}

pub(crate) fn write_data_list(mut b: capnp::data_list::Builder<'_>, items: &[Vec<u8>]) {
    for (i, d) in items.iter().enumerate() {
        b.set(i as u32, &d[..]);
    }
}

/// Writes a `DerResult` union.
pub(crate) fn write_der_result(mut b: wire::der_result::Builder<'_>, outcome: Result<Vec<u8>, IpcError>) {
    match outcome {
        Ok(der) => b.set_ok(&der[..]),
        Err(e) => write_error(b.init_err(), &e),
    }
}

/// Reads a `DerResult` union.
pub(crate) fn read_der_result(r: wire::der_result::Reader<'_>, what: &str) -> Result<Vec<u8>, IpcError> {
    match r.which().map_err(|e| malformed(what, e))? {
        wire::der_result::Ok(d) => data(d, what),
        wire::der_result::Err(e) => Err(read_error(e)),
    }
}

/// Writes a `TextResult` union.
pub(crate) fn write_text_result(mut b: wire::text_result::Builder<'_>, outcome: Result<String, IpcError>) {
    match outcome {
        Ok(t) => b.set_ok(t.as_str()),
        Err(e) => write_error(b.init_err(), &e),
    }
}

/// Reads a `TextResult` union.
pub(crate) fn read_text_result(r: wire::text_result::Reader<'_>, what: &str) -> Result<String, IpcError> {
    match r.which().map_err(|e| malformed(what, e))? {
        wire::text_result::Ok(t) => text(t, what),
        wire::text_result::Err(e) => Err(read_error(e)),
    }
}

// --- a call's outcome ---------------------------------------------------------

/// Why a call's answer could not be had: a typed error from the peer or from
/// reading its answer, or the transport failing (`disconnected`: the
/// connection is gone, and a retry on a new one may succeed).
pub(crate) struct CallError {
    /// The error the caller sees.
    pub(crate) error: IpcError,
    /// Whether the connection broke under the call.
    pub(crate) disconnected: bool,
}

impl From<IpcError> for CallError {
    fn from(error: IpcError) -> Self {
        Self { error, disconnected: false }
    }
}

impl From<capnp::Error> for CallError {
    fn from(e: capnp::Error) -> Self {
        // A peer killed mid-message surfaces as a failed read ("Premature end
        // of file") rather than as Disconnected; either way the connection is gone.
        let disconnected = matches!(e.kind, capnp::ErrorKind::Disconnected | capnp::ErrorKind::PrematureEndOfFile);
        let kind = if disconnected {
            ErrorKind::Unavailable
        } else if e.kind == capnp::ErrorKind::Unimplemented {
            // A method this signd does not have (an older one).
            ErrorKind::Unsupported
        } else if e.extra.contains("which is too large") {
            // signd refused the frame (ServeOptions::max_frame_bytes) and closed
            // the connection; the next call reconnects.
            ErrorKind::TooLarge
        } else {
            ErrorKind::Internal
        };
        Self { error: IpcError::new(kind, format!("IPC connection: {e}")), disconnected }
    }
}

/// A method's Results as the client reads them: the value or the error in
/// its `result` union.
pub(crate) trait ReadOutcome {
    /// What the method returns.
    type Value;
    /// Reads the answer.
    fn read_outcome(self) -> Result<Self::Value, CallError>;
}

/// A method's Results as the server fills them: the value or the error in
/// its `result` union.
pub(crate) trait WriteOutcome {
    /// What the method returns.
    type Value;
    /// Writes the answer.
    fn write_outcome(self, outcome: Result<Self::Value, IpcError>);
}

/// Implements [`ReadOutcome`] and [`WriteOutcome`] for the Results of
/// `interface::method_results` (a `wire` module in scope where it is used),
/// whose `result` union is read by `read` and written by `write`.
macro_rules! outcome {
    ($iface:ident::$results:ident: $value:ty, $write:expr, $read:expr) => {
        impl $crate::convert::ReadOutcome for wire::$iface::$results::Reader<'_> {
            type Value = $value;
            // `read` returns an IpcError or a CallError; `?` makes either a CallError.
            #[allow(clippy::needless_question_mark)]
            fn read_outcome(self) -> Result<$value, $crate::convert::CallError> {
                Ok(($read)(self.get_result()?)?)
            }
        }

        impl $crate::convert::WriteOutcome for wire::$iface::$results::Builder<'_> {
            type Value = $value;
            fn write_outcome(self, outcome: Result<$value, IpcError>) {
                ($write)(self.init_result(), outcome)
            }
        }
    };
}
pub(crate) use outcome;

/// Reads a `union { ok; err }` result of module `$union`: `ok` by `read_ok`,
/// `err` as the typed error it carries.
macro_rules! read_union {
    ($r:expr, $union:ident, $what:expr, |$v:ident| $read_ok:expr) => {{
        match $r.which().map_err(|e| $crate::convert::malformed($what, e))? {
            wire::$union::Ok($v) => Ok($read_ok),
            wire::$union::Err(e) => Err($crate::convert::read_error(e).into()),
        }
    }};
}
pub(crate) use read_union;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_kind_crosses_the_wire() {
        for kind in ErrorKind::ALL {
            assert_eq!(kind_from_wire(Ok(kind_to_wire(kind))), kind, "{kind}");
        }
    }
}
