//! ocspd's interface (`ocspd.capnp`): its structs, each method's Params and Results.

use super::{
    data, malformed, outcome, read_der_result, read_error, read_union, set_text_list, text, text_list,
    write_der_result, write_error, CallError,
};
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

fn write_issued(mut b: wire::issued_cert::Builder<'_>, c: &IssuedCert) {
    b.set_serial(&c.serial[..]);
    b.set_not_after_unix_secs(c.not_after_unix_secs);
    b.set_crl_shard(c.crl_shard);
}

fn read_issued(r: capnp::Result<wire::issued_cert::Reader<'_>>) -> Result<IssuedCert, IpcError> {
    let r = r.map_err(|e| malformed("issued certificate", e))?;
    Ok(IssuedCert {
        serial: data(r.get_serial(), "serial")?,
        not_after_unix_secs: r.get_not_after_unix_secs(),
        crl_shard: r.get_crl_shard(),
    })
}

fn write_revocation(mut b: wire::revocation::Builder<'_>, v: &Revocation) {
    b.set_serial(&v.serial[..]);
    b.set_reason(reason_to_wire(Some(v.reason)));
    b.set_revoked_unix_secs(v.revoked_unix_secs);
}

fn read_revocation(r: capnp::Result<wire::revocation::Reader<'_>>) -> Result<Revocation, IpcError> {
    let r = r.map_err(|e| malformed("revocation", e))?;
    Ok(Revocation {
        serial: data(r.get_serial(), "serial")?,
        reason: reason_from_wire(r.get_reason())?,
        revoked_unix_secs: r.get_revoked_unix_secs(),
    })
}

fn write_status_result(b: wire::cert_status_result::Builder<'_>, outcome: Result<CertStatus, IpcError>) {
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

fn read_status_result(r: wire::cert_status_result::Reader<'_>) -> Result<CertStatus, IpcError> {
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

fn write_selector(mut b: wire::crl_selector::Builder<'_>, s: CrlSelector) {
    match s {
        CrlSelector::Full => b.set_full(()),
        CrlSelector::Shard(n) => b.set_shard(n),
        CrlSelector::Delta => b.set_delta(()),
    }
}

fn read_selector(r: capnp::Result<wire::crl_selector::Reader<'_>>) -> Result<CrlSelector, IpcError> {
    let r = r.map_err(|e| malformed("CRL selector", e))?;
    Ok(match r.which().map_err(|e| malformed("CRL selector", e))? {
        wire::crl_selector::Full(()) => CrlSelector::Full,
        wire::crl_selector::Shard(n) => CrlSelector::Shard(n),
        wire::crl_selector::Delta(()) => CrlSelector::Delta,
    })
}

fn write_info_result(b: wire::issuer_info_result::Builder<'_>, outcome: Result<IssuerInfo, IpcError>) {
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

fn read_info_result(r: wire::issuer_info_result::Reader<'_>) -> Result<IssuerInfo, IpcError> {
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

fn write_health(mut b: wire::ocspd_health::Builder<'_>, h: &OcspdHealth) {
    b.set_ok(h.ok);
    b.set_version(h.version.as_str());
    set_text_list(b.reborrow().init_issuers(h.issuers.len() as u32), &h.issuers);
    b.set_certificates(h.certificates);
    b.set_revoked(h.revoked);
    b.set_uptime_secs(h.uptime_secs);
}

fn read_health(r: wire::ocspd_health::Reader<'_>) -> Result<OcspdHealth, IpcError> {
    Ok(OcspdHealth {
        ok: r.get_ok(),
        version: text(r.get_version(), "version")?,
        issuers: text_list(r.get_issuers(), "issuers")?,
        certificates: r.get_certificates(),
        revoked: r.get_revoked(),
        uptime_secs: r.get_uptime_secs(),
    })
}

// --- each method's Results ----------------------------------------------------

fn write_registry_result(mut b: wire::registry_result::Builder<'_>, outcome: Result<wire::registry::Client, IpcError>) {
    match outcome {
        Ok(c) => b.set_ok(c),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_registry_result(r: wire::registry_result::Reader<'_>) -> Result<wire::registry::Client, CallError> {
    read_union!(r, registry_result, "registry result", |c| c?)
}

outcome!(ocspd::registry_results: wire::registry::Client, write_registry_result, read_registry_result);
outcome!(registry::record_issued_results: CertStatus, write_status_result, read_status_result);
outcome!(registry::revoke_results: CertStatus, write_status_result, read_status_result);
outcome!(registry::status_results: CertStatus, write_status_result, read_status_result);
outcome!(registry::release_hold_results: CertStatus, write_status_result, read_status_result);
outcome!(registry::crl_results: Vec<u8>, write_der_result, |r| read_der_result(r, "CRL"));
outcome!(registry::info_results: IssuerInfo, write_info_result, read_info_result);
outcome!(registry::refresh_responder_results: IssuerInfo, write_info_result, read_info_result);
outcome!(registry::add_successor_results: IssuerInfo, write_info_result, read_info_result);

/// Server: fills `health`'s Results (anyone may ask; it has no error).
pub(crate) fn write_health_results(mut r: wire::ocspd::health_results::Builder<'_>, h: &OcspdHealth) {
    write_health(r.reborrow().init_health(), h);
}

/// Client: reads `health`'s Results.
pub(crate) fn read_health_results(r: wire::ocspd::health_results::Reader<'_>) -> Result<OcspdHealth, CallError> {
    Ok(read_health(r.get_health()?)?)
}

// --- each method's Params -----------------------------------------------------

/// A serial number is an INTEGER's content octets: at most 20 (RFC 5280 4.1.2.2),
/// a little slack for CAs that get it wrong.
const MAX_SERIAL_BYTES: usize = 32;

fn check_serial(serial: &[u8]) -> Result<(), IpcError> {
    if serial.is_empty() || serial.len() > MAX_SERIAL_BYTES {
        return Err(IpcError::invalid(format!(
            "a serial number has 1 to {MAX_SERIAL_BYTES} bytes, not {}",
            serial.len()
        )));
    }
    Ok(())
}

pub(crate) fn write_registry(mut p: wire::ocspd::registry_params::Builder<'_>, issuer: &str) {
    p.set_issuer(issuer);
}

pub(crate) fn read_registry(p: capnp::Result<wire::ocspd::registry_params::Reader<'_>>) -> Result<String, IpcError> {
    p.map_err(|e| malformed("registry request", e)).and_then(|p| text(p.get_issuer(), "issuer"))
}

pub(crate) fn write_record_issued(p: wire::registry::record_issued_params::Builder<'_>, cert: &IssuedCert) {
    write_issued(p.init_cert(), cert);
}

pub(crate) fn read_record_issued(
    p: capnp::Result<wire::registry::record_issued_params::Reader<'_>>,
) -> Result<IssuedCert, IpcError> {
    p.map_err(|e| malformed("record request", e))
        .and_then(|p| read_issued(p.get_cert()))
        .and_then(|c| check_serial(&c.serial).map(|()| c))
}

pub(crate) fn write_revoke(p: wire::registry::revoke_params::Builder<'_>, revocation: &Revocation) {
    write_revocation(p.init_revocation(), revocation);
}

pub(crate) fn read_revoke(p: capnp::Result<wire::registry::revoke_params::Reader<'_>>) -> Result<Revocation, IpcError> {
    p.map_err(|e| malformed("revoke request", e))
        .and_then(|p| read_revocation(p.get_revocation()))
        .and_then(|r| check_serial(&r.serial).map(|()| r))
}

pub(crate) fn write_status(mut p: wire::registry::status_params::Builder<'_>, serial: &[u8]) {
    p.set_serial(serial);
}

pub(crate) fn read_status(p: capnp::Result<wire::registry::status_params::Reader<'_>>) -> Result<Vec<u8>, IpcError> {
    p.map_err(|e| malformed("status request", e))
        .and_then(|p| data(p.get_serial(), "serial"))
        .and_then(|s| check_serial(&s).map(|()| s))
}

pub(crate) fn write_release_hold(mut p: wire::registry::release_hold_params::Builder<'_>, serial: &[u8]) {
    p.set_serial(serial);
}

pub(crate) fn read_release_hold(
    p: capnp::Result<wire::registry::release_hold_params::Reader<'_>>,
) -> Result<Vec<u8>, IpcError> {
    p.map_err(|e| malformed("release request", e))
        .and_then(|p| data(p.get_serial(), "serial"))
        .and_then(|s| check_serial(&s).map(|()| s))
}

pub(crate) fn write_crl(p: wire::registry::crl_params::Builder<'_>, which: CrlSelector) {
    write_selector(p.init_which(), which);
}

pub(crate) fn read_crl(p: capnp::Result<wire::registry::crl_params::Reader<'_>>) -> Result<CrlSelector, IpcError> {
    p.map_err(|e| malformed("CRL request", e)).and_then(|p| read_selector(p.get_which()))
}

pub(crate) fn write_add_successor(mut p: wire::registry::add_successor_params::Builder<'_>, name: &str) {
    p.set_name(name);
}

pub(crate) fn read_add_successor(
    p: capnp::Result<wire::registry::add_successor_params::Reader<'_>>,
) -> Result<String, IpcError> {
    p.map_err(|e| malformed("request", e)).and_then(|p| text(p.get_name(), "issuer name"))
}
