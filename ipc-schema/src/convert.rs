//! Conversions between the plain types in [`crate::types`] and capnp readers and
//! builders. Every field crosses the wire through this module and nowhere else.

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

fn text_list(r: capnp::Result<capnp::text_list::Reader<'_>>, what: &str) -> Result<Vec<String>, IpcError> {
    let list = r.map_err(|e| malformed(what, e))?;
    list.iter().map(|t| text(t, what)).collect()
}

fn set_text_list(mut b: capnp::text_list::Builder<'_>, items: &[String]) {
    for (i, s) in items.iter().enumerate() {
        // Indexes come from `items`, which sized the list.
        b.set(i as u32, s.as_str());
    }
}

// --- enums ------------------------------------------------------------------

pub(crate) fn algorithm_to_wire(a: KeyAlgorithm) -> wire::KeyAlgorithm {
    use wire::KeyAlgorithm as W;
    match a {
        KeyAlgorithm::EcP256 => W::EcP256,
        KeyAlgorithm::EcP384 => W::EcP384,
        KeyAlgorithm::EcP521 => W::EcP521,
        KeyAlgorithm::Ed25519 => W::Ed25519,
        KeyAlgorithm::Rsa2048 => W::Rsa2048,
        KeyAlgorithm::Rsa3072 => W::Rsa3072,
        KeyAlgorithm::Rsa4096 => W::Rsa4096,
        KeyAlgorithm::MlDsa44 => W::MlDsa44,
        KeyAlgorithm::MlDsa65 => W::MlDsa65,
        KeyAlgorithm::MlDsa87 => W::MlDsa87,
    }
}

pub(crate) fn algorithm_from_wire(a: Result<wire::KeyAlgorithm, capnp::NotInSchema>) -> Result<KeyAlgorithm, IpcError> {
    use wire::KeyAlgorithm as W;
    Ok(match a.map_err(|e| malformed("key algorithm", e))? {
        W::EcP256 => KeyAlgorithm::EcP256,
        W::EcP384 => KeyAlgorithm::EcP384,
        W::EcP521 => KeyAlgorithm::EcP521,
        W::Ed25519 => KeyAlgorithm::Ed25519,
        W::Rsa2048 => KeyAlgorithm::Rsa2048,
        W::Rsa3072 => KeyAlgorithm::Rsa3072,
        W::Rsa4096 => KeyAlgorithm::Rsa4096,
        W::MlDsa44 => KeyAlgorithm::MlDsa44,
        W::MlDsa65 => KeyAlgorithm::MlDsa65,
        W::MlDsa87 => KeyAlgorithm::MlDsa87,
    })
}

pub(crate) fn scheme_to_wire(s: SignatureScheme) -> wire::SignatureScheme {
    use wire::SignatureScheme as W;
    match s {
        SignatureScheme::Default => W::Default,
        SignatureScheme::EcdsaSha256 => W::EcdsaSha256,
        SignatureScheme::EcdsaSha384 => W::EcdsaSha384,
        SignatureScheme::EcdsaSha512 => W::EcdsaSha512,
        SignatureScheme::Ed25519 => W::Ed25519,
        SignatureScheme::RsaPkcs1Sha256 => W::RsaPkcs1Sha256,
        SignatureScheme::RsaPkcs1Sha384 => W::RsaPkcs1Sha384,
        SignatureScheme::RsaPkcs1Sha512 => W::RsaPkcs1Sha512,
        SignatureScheme::RsaPssSha256 => W::RsaPssSha256,
        SignatureScheme::RsaPssSha384 => W::RsaPssSha384,
        SignatureScheme::RsaPssSha512 => W::RsaPssSha512,
        SignatureScheme::MlDsa44 => W::MlDsa44,
        SignatureScheme::MlDsa65 => W::MlDsa65,
        SignatureScheme::MlDsa87 => W::MlDsa87,
    }
}

pub(crate) fn scheme_from_wire(
    s: Result<wire::SignatureScheme, capnp::NotInSchema>,
) -> Result<SignatureScheme, IpcError> {
    use wire::SignatureScheme as W;
    Ok(match s.map_err(|e| malformed("signature scheme", e))? {
        W::Default => SignatureScheme::Default,
        W::EcdsaSha256 => SignatureScheme::EcdsaSha256,
        W::EcdsaSha384 => SignatureScheme::EcdsaSha384,
        W::EcdsaSha512 => SignatureScheme::EcdsaSha512,
        W::Ed25519 => SignatureScheme::Ed25519,
        W::RsaPkcs1Sha256 => SignatureScheme::RsaPkcs1Sha256,
        W::RsaPkcs1Sha384 => SignatureScheme::RsaPkcs1Sha384,
        W::RsaPkcs1Sha512 => SignatureScheme::RsaPkcs1Sha512,
        W::RsaPssSha256 => SignatureScheme::RsaPssSha256,
        W::RsaPssSha384 => SignatureScheme::RsaPssSha384,
        W::RsaPssSha512 => SignatureScheme::RsaPssSha512,
        W::MlDsa44 => SignatureScheme::MlDsa44,
        W::MlDsa65 => SignatureScheme::MlDsa65,
        W::MlDsa87 => SignatureScheme::MlDsa87,
    })
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
        // A kind signet-types gained before the schema did: still an error,
        // just not a precise one.
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
        // A kind added by a newer signd: still an error, just not one we know.
        Err(_) => ErrorKind::Internal,
    }
}

// --- structs ----------------------------------------------------------------

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

pub(crate) fn write_key_info(mut b: wire::key_info::Builder<'_>, k: &KeyInfo) {
    b.set_id(k.id.as_str());
    b.set_algorithm(algorithm_to_wire(k.algorithm));
    b.set_spki(&k.spki[..]);
    b.set_created_unix_secs(k.created_unix_secs);
    set_text_list(b.reborrow().init_roles(k.roles.len() as u32), &k.roles);
    b.set_backend(k.backend.as_str());
    b.set_location(k.location.as_str());
    b.set_available(k.available);
    b.set_problem(k.problem.as_str());
}

pub(crate) fn read_key_info(r: wire::key_info::Reader<'_>) -> Result<KeyInfo, IpcError> {
    Ok(KeyInfo {
        id: text(r.get_id(), "key id")?,
        algorithm: algorithm_from_wire(r.get_algorithm())?,
        spki: data(r.get_spki(), "spki")?,
        created_unix_secs: r.get_created_unix_secs(),
        roles: text_list(r.get_roles(), "roles")?,
        backend: text(r.get_backend(), "backend")?,
        location: text(r.get_location(), "location")?,
        available: r.get_available(),
        problem: text(r.get_problem(), "problem")?,
    })
}

pub(crate) fn write_key_list(mut b: capnp::struct_list::Builder<'_, wire::key_info::Owned>, keys: &[KeyInfo]) {
    for (i, k) in keys.iter().enumerate() {
        write_key_info(b.reborrow().get(i as u32), k);
    }
}

pub(crate) fn read_key_list(
    r: capnp::Result<capnp::struct_list::Reader<'_, wire::key_info::Owned>>,
) -> Result<Vec<KeyInfo>, IpcError> {
    r.map_err(|e| malformed("key list", e))?.iter().map(read_key_info).collect()
}

pub(crate) fn write_caller(mut b: wire::caller::Builder<'_>, c: &CallerInfo) {
    b.set_uid(c.uid);
    b.set_gid(c.gid);
    b.set_pid(c.pid);
    set_text_list(b.reborrow().init_roles(c.roles.len() as u32), &c.roles);
    b.set_admin(c.admin);
}

pub(crate) fn read_caller(r: wire::caller::Reader<'_>) -> Result<CallerInfo, IpcError> {
    Ok(CallerInfo {
        uid: r.get_uid(),
        gid: r.get_gid(),
        pid: r.get_pid(),
        roles: text_list(r.get_roles(), "roles")?,
        admin: r.get_admin(),
    })
}

pub(crate) fn write_health(mut b: wire::health::Builder<'_>, h: &Health) {
    b.set_ok(h.ok);
    b.set_version(h.version.as_str());
    b.set_keys_loaded(h.keys_loaded);
    b.set_keys_unavailable(h.keys_unavailable);
    b.set_uptime_secs(h.uptime_secs);
    b.set_audit_records(h.audit_records);
}

pub(crate) fn read_health(r: wire::health::Reader<'_>) -> Result<Health, IpcError> {
    Ok(Health {
        ok: r.get_ok(),
        version: text(r.get_version(), "version")?,
        keys_loaded: r.get_keys_loaded(),
        keys_unavailable: r.get_keys_unavailable(),
        uptime_secs: r.get_uptime_secs(),
        audit_records: r.get_audit_records(),
    })
}

pub(crate) fn write_key_spec(mut b: wire::key_spec::Builder<'_>, s: &KeySpec) {
    b.set_id(s.id.as_str());
    b.set_algorithm(algorithm_to_wire(s.algorithm));
    set_text_list(b.reborrow().init_roles(s.roles.len() as u32), &s.roles);
    b.set_backend(s.backend.as_str());
}

pub(crate) fn read_key_spec(r: capnp::Result<wire::key_spec::Reader<'_>>) -> Result<KeySpec, IpcError> {
    let r = r.map_err(|e| malformed("key spec", e))?;
    Ok(KeySpec {
        id: text(r.get_id(), "key id")?,
        algorithm: algorithm_from_wire(r.get_algorithm())?,
        roles: text_list(r.get_roles(), "roles")?,
        backend: text(r.get_backend(), "backend")?,
    })
}

pub(crate) fn write_audit_query(mut b: wire::audit_query::Builder<'_>, q: &AuditQuery) {
    b.set_after_seq(q.after_seq);
    b.set_limit(q.limit);
    b.set_newest_first(q.newest_first);
}

pub(crate) fn read_audit_query(r: capnp::Result<wire::audit_query::Reader<'_>>) -> Result<AuditQuery, IpcError> {
    let r = r.map_err(|e| malformed("audit query", e))?;
    Ok(AuditQuery { after_seq: r.get_after_seq(), limit: r.get_limit(), newest_first: r.get_newest_first() })
}

pub(crate) fn write_audit_list(
    mut b: capnp::struct_list::Builder<'_, wire::audit_record::Owned>,
    records: &[AuditRecord],
) {
    for (i, a) in records.iter().enumerate() {
        let mut r = b.reborrow().get(i as u32);
        r.set_seq(a.seq);
        r.set_time_unix_nanos(a.time_unix_nanos);
        r.set_operation(a.operation.as_str());
        r.set_key_id(a.key_id.as_str());
        r.set_uid(a.uid);
        r.set_pid(a.pid);
        r.set_role(a.role.as_str());
        r.set_message_sha256(&a.message_sha256[..]);
        r.set_ok(a.ok);
        r.set_outcome(a.outcome.as_str());
    }
}

pub(crate) fn read_audit_list(
    r: capnp::Result<capnp::struct_list::Reader<'_, wire::audit_record::Owned>>,
) -> Result<Vec<AuditRecord>, IpcError> {
    r.map_err(|e| malformed("audit list", e))?
        .iter()
        .map(|r| {
            Ok(AuditRecord {
                seq: r.get_seq(),
                time_unix_nanos: r.get_time_unix_nanos(),
                operation: text(r.get_operation(), "operation")?,
                key_id: text(r.get_key_id(), "key id")?,
                uid: r.get_uid(),
                pid: r.get_pid(),
                role: text(r.get_role(), "role")?,
                message_sha256: data(r.get_message_sha256(), "message hash")?,
                ok: r.get_ok(),
                outcome: text(r.get_outcome(), "outcome")?,
            })
        })
        .collect()
}

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

// --- ocspd ------------------------------------------------------------------

pub(crate) mod ocspd {
    use super::{data, malformed, read_error, text, write_error};
    use crate::ocspd_capnp as wire;
    use crate::types::*;

    fn reason_to_wire(r: Option<RevocationReason>) -> wire::RevocationReason {
        use wire::RevocationReason as W;
        match r {
            None | Some(RevocationReason::Unspecified) => W::Unspecified,
            Some(RevocationReason::KeyCompromise) => W::KeyCompromise,
            Some(RevocationReason::CaCompromise) => W::CaCompromise,
            Some(RevocationReason::AffiliationChanged) => W::AffiliationChanged,
            Some(RevocationReason::Superseded) => W::Superseded,
            Some(RevocationReason::CessationOfOperation) => W::CessationOfOperation,
            Some(RevocationReason::CertificateHold) => W::CertificateHold,
            Some(RevocationReason::RemoveFromCrl) => W::RemoveFromCrl,
            Some(RevocationReason::PrivilegeWithdrawn) => W::PrivilegeWithdrawn,
            Some(RevocationReason::AaCompromise) => W::AaCompromise,
        }
    }

    fn reason_from_wire(r: Result<wire::RevocationReason, capnp::NotInSchema>) -> Result<RevocationReason, IpcError> {
        use wire::RevocationReason as W;
        Ok(match r {
            Ok(W::Unspecified) => RevocationReason::Unspecified,
            Ok(W::KeyCompromise) => RevocationReason::KeyCompromise,
            Ok(W::CaCompromise) => RevocationReason::CaCompromise,
            Ok(W::AffiliationChanged) => RevocationReason::AffiliationChanged,
            Ok(W::Superseded) => RevocationReason::Superseded,
            Ok(W::CessationOfOperation) => RevocationReason::CessationOfOperation,
            Ok(W::CertificateHold) => RevocationReason::CertificateHold,
            Ok(W::RemoveFromCrl) => RevocationReason::RemoveFromCrl,
            Ok(W::PrivilegeWithdrawn) => RevocationReason::PrivilegeWithdrawn,
            Ok(W::AaCompromise) => RevocationReason::AaCompromise,
            Ok(W::Unused7) => return Err(IpcError::invalid("revocation reason 7 is not used (RFC 5280)")),
            Err(e) => return Err(malformed("revocation reason", e)),
        })
    }

    pub(crate) fn write_issued(mut b: wire::issued_cert::Builder<'_>, c: &IssuedCert) {
        b.set_serial(&c.serial[..]);
        b.set_not_after_unix_secs(c.not_after_unix_secs);
        b.set_crl_shard(c.crl_shard);
    }

    pub(crate) fn read_issued(r: capnp::Result<wire::issued_cert::Reader<'_>>) -> Result<IssuedCert, IpcError> {
        let r = r.map_err(|e| malformed("issued certificate", e))?;
        Ok(IssuedCert {
            serial: data(r.get_serial(), "serial")?,
            not_after_unix_secs: r.get_not_after_unix_secs(),
            crl_shard: r.get_crl_shard(),
        })
    }

    pub(crate) fn write_revocation(mut b: wire::revocation::Builder<'_>, v: &Revocation) {
        b.set_serial(&v.serial[..]);
        b.set_reason(reason_to_wire(Some(v.reason)));
        b.set_revoked_unix_secs(v.revoked_unix_secs);
    }

    pub(crate) fn read_revocation(r: capnp::Result<wire::revocation::Reader<'_>>) -> Result<Revocation, IpcError> {
        let r = r.map_err(|e| malformed("revocation", e))?;
        Ok(Revocation {
            serial: data(r.get_serial(), "serial")?,
            reason: reason_from_wire(r.get_reason())?,
            revoked_unix_secs: r.get_revoked_unix_secs(),
        })
    }

    pub(crate) fn write_status_result(b: wire::cert_status_result::Builder<'_>, outcome: Result<CertStatus, IpcError>) {
        let s = match outcome {
            Ok(s) => s,
            Err(e) => return write_error(b.init_err(), &e),
        };
        let mut o = b.init_ok();
        o.set_serial(&s.serial[..]);
        o.set_state(match s.state {
            CertState::Good => wire::CertState::Good,
            CertState::Revoked => wire::CertState::Revoked,
            CertState::Unknown => wire::CertState::Unknown,
        });
        o.set_not_after_unix_secs(s.not_after_unix_secs);
        o.set_crl_shard(s.crl_shard);
        o.set_recorded_unix_secs(s.recorded_unix_secs);
        o.set_revoked_unix_secs(s.revoked_unix_secs);
        o.set_reason(reason_to_wire(s.reason));
        o.set_released_unix_secs(s.released_unix_secs);
    }

    pub(crate) fn read_status_result(r: wire::cert_status_result::Reader<'_>) -> Result<CertStatus, IpcError> {
        let o = match r.which().map_err(|e| malformed("status result", e))? {
            wire::cert_status_result::Ok(o) => o.map_err(|e| malformed("status", e))?,
            wire::cert_status_result::Err(e) => return Err(read_error(e)),
        };
        let state = match o.get_state().map_err(|e| malformed("certificate state", e))? {
            wire::CertState::Good => CertState::Good,
            wire::CertState::Revoked => CertState::Revoked,
            wire::CertState::Unknown => CertState::Unknown,
        };
        Ok(CertStatus {
            serial: data(o.get_serial(), "serial")?,
            state,
            not_after_unix_secs: o.get_not_after_unix_secs(),
            crl_shard: o.get_crl_shard(),
            recorded_unix_secs: o.get_recorded_unix_secs(),
            revoked_unix_secs: o.get_revoked_unix_secs(),
            reason: if state == CertState::Revoked { Some(reason_from_wire(o.get_reason())?) } else { None },
            released_unix_secs: o.get_released_unix_secs(),
        })
    }

    pub(crate) fn write_selector(mut b: wire::crl_selector::Builder<'_>, s: CrlSelector) {
        match s {
            CrlSelector::Full => b.set_full(()),
            CrlSelector::Shard(n) => b.set_shard(n),
            CrlSelector::Delta => b.set_delta(()),
        }
    }

    pub(crate) fn read_selector(r: capnp::Result<wire::crl_selector::Reader<'_>>) -> Result<CrlSelector, IpcError> {
        let r = r.map_err(|e| malformed("CRL selector", e))?;
        Ok(match r.which().map_err(|e| malformed("CRL selector", e))? {
            wire::crl_selector::Full(()) => CrlSelector::Full,
            wire::crl_selector::Shard(n) => CrlSelector::Shard(n),
            wire::crl_selector::Delta(()) => CrlSelector::Delta,
        })
    }

    pub(crate) fn write_info_result(b: wire::issuer_info_result::Builder<'_>, outcome: Result<IssuerInfo, IpcError>) {
        let i = match outcome {
            Ok(i) => i,
            Err(e) => return write_error(b.init_err(), &e),
        };
        let mut o = b.init_ok();
        o.set_name(i.name.as_str());
        o.set_ca_certificate(&i.ca_certificate[..]);
        o.set_responder_certificate(&i.responder_certificate[..]);
        o.set_crl_shards(i.crl_shards);
        o.set_ocsp_url(i.ocsp_url.as_str());
        o.set_crl_url(i.crl_url.as_str());
    }

    pub(crate) fn read_info_result(r: wire::issuer_info_result::Reader<'_>) -> Result<IssuerInfo, IpcError> {
        let o = match r.which().map_err(|e| malformed("issuer info result", e))? {
            wire::issuer_info_result::Ok(o) => o.map_err(|e| malformed("issuer info", e))?,
            wire::issuer_info_result::Err(e) => return Err(read_error(e)),
        };
        Ok(IssuerInfo {
            name: text(o.get_name(), "name")?,
            ca_certificate: data(o.get_ca_certificate(), "CA certificate")?,
            responder_certificate: data(o.get_responder_certificate(), "responder certificate")?,
            crl_shards: o.get_crl_shards(),
            ocsp_url: text(o.get_ocsp_url(), "OCSP URL")?,
            crl_url: text(o.get_crl_url(), "CRL URL")?,
        })
    }

    pub(crate) fn write_health(mut b: wire::ocspd_health::Builder<'_>, h: &OcspdHealth) {
        b.set_ok(h.ok);
        b.set_version(h.version.as_str());
        super::set_text_list(b.reborrow().init_issuers(h.issuers.len() as u32), &h.issuers);
        b.set_certificates(h.certificates);
        b.set_revoked(h.revoked);
        b.set_uptime_secs(h.uptime_secs);
    }

    pub(crate) fn read_health(r: wire::ocspd_health::Reader<'_>) -> Result<OcspdHealth, IpcError> {
        Ok(OcspdHealth {
            ok: r.get_ok(),
            version: text(r.get_version(), "version")?,
            issuers: super::text_list(r.get_issuers(), "issuers")?,
            certificates: r.get_certificates(),
            revoked: r.get_revoked(),
            uptime_secs: r.get_uptime_secs(),
        })
    }
}

// --- acmed ------------------------------------------------------------------

pub(crate) mod acmed {
    use super::{data, malformed, read_error, text, write_error};
    use crate::acmed_capnp as wire;
    use crate::types::*;

    fn write_eab_key(mut b: wire::eab_key::Builder<'_>, k: &EabKey) {
        b.set_key_id(k.key_id.as_str());
        b.set_hmac_key(&k.hmac_key[..]);
        b.set_created_unix_secs(k.created_unix_secs);
        b.set_bound_account(k.bound_account.as_str());
        b.set_note(k.note.as_str());
    }

    fn read_eab_key(r: wire::eab_key::Reader<'_>) -> Result<EabKey, IpcError> {
        Ok(EabKey {
            key_id: text(r.get_key_id(), "key id")?,
            hmac_key: data(r.get_hmac_key(), "HMAC key")?,
            created_unix_secs: r.get_created_unix_secs(),
            bound_account: text(r.get_bound_account(), "bound account")?,
            note: text(r.get_note(), "note")?,
        })
    }

    pub(crate) fn write_key_result(b: wire::eab_key_result::Builder<'_>, outcome: Result<EabKey, IpcError>) {
        match outcome {
            Ok(k) => write_eab_key(b.init_ok(), &k),
            Err(e) => write_error(b.init_err(), &e),
        }
    }

    pub(crate) fn read_key_result(r: wire::eab_key_result::Reader<'_>) -> Result<EabKey, IpcError> {
        match r.which().map_err(|e| malformed("EAB key result", e))? {
            wire::eab_key_result::Ok(k) => read_eab_key(k.map_err(|e| malformed("EAB key", e))?),
            wire::eab_key_result::Err(e) => Err(read_error(e)),
        }
    }

    pub(crate) fn write_key_list_result(
        b: wire::eab_key_list_result::Builder<'_>,
        outcome: Result<Vec<EabKey>, IpcError>,
    ) {
        let keys = match outcome {
            Ok(k) => k,
            Err(e) => return write_error(b.init_err(), &e),
        };
        let mut list = b.init_ok(keys.len() as u32);
        for (i, k) in keys.iter().enumerate() {
            // Indexes come from `keys`, which sized the list.
            write_eab_key(list.reborrow().get(i as u32), k);
        }
    }

    pub(crate) fn read_key_list_result(r: wire::eab_key_list_result::Reader<'_>) -> Result<Vec<EabKey>, IpcError> {
        match r.which().map_err(|e| malformed("EAB key list result", e))? {
            wire::eab_key_list_result::Ok(list) => {
                list.map_err(|e| malformed("EAB key list", e))?.iter().map(read_eab_key).collect()
            }
            wire::eab_key_list_result::Err(e) => Err(read_error(e)),
        }
    }

    pub(crate) fn write_health(mut b: wire::acmed_health::Builder<'_>, h: &AcmedHealth) {
        b.set_ok(h.ok);
        b.set_version(h.version.as_str());
        b.set_uptime_secs(h.uptime_secs);
        b.set_accounts(h.accounts);
        b.set_eab_keys(h.eab_keys);
        b.set_external_account_required(h.external_account_required);
    }

    pub(crate) fn read_health(r: wire::acmed_health::Reader<'_>) -> Result<AcmedHealth, IpcError> {
        Ok(AcmedHealth {
            ok: r.get_ok(),
            version: text(r.get_version(), "version")?,
            uptime_secs: r.get_uptime_secs(),
            accounts: r.get_accounts(),
            eab_keys: r.get_eab_keys(),
            external_account_required: r.get_external_account_required(),
        })
    }
}
