//! signd's interface (`signd.capnp`): its enums and structs, each method's
//! Params and Results.

use super::{
    data, malformed, outcome, read_data_list, read_der_result, read_error, read_text_result, read_union, set_text_list,
    text, text_list, write_data_list, write_der_result, write_error, write_text_result, CallError,
};
use crate::server::ServeOptions;
use crate::signd_capnp as wire;
use crate::types::*;

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

// --- structs ----------------------------------------------------------------

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

// --- result unions ----------------------------------------------------------

fn write_caller_result(b: wire::caller_result::Builder<'_>, outcome: Result<CallerInfo, IpcError>) {
    match outcome {
        Ok(c) => write_caller(b.init_ok(), &c),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_caller_result(r: wire::caller_result::Reader<'_>) -> Result<CallerInfo, CallError> {
    read_union!(r, caller_result, "result", |c| read_caller(c?)?)
}

fn write_key_result(b: wire::key_result::Builder<'_>, outcome: Result<KeyInfo, IpcError>) {
    match outcome {
        Ok(k) => write_key_info(b.init_ok(), &k),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_key_result(r: wire::key_result::Reader<'_>) -> Result<KeyInfo, CallError> {
    read_union!(r, key_result, "result", |k| read_key_info(k?)?)
}

fn write_key_list_result(b: wire::key_list_result::Builder<'_>, outcome: Result<Vec<KeyInfo>, IpcError>) {
    match outcome {
        Ok(keys) => write_key_list(b.init_ok(keys.len() as u32), &keys),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_key_list_result(r: wire::key_list_result::Reader<'_>) -> Result<Vec<KeyInfo>, CallError> {
    read_union!(r, key_list_result, "result", |k| read_key_list(k)?)
}

fn write_sign_result(mut b: wire::sign_result::Builder<'_>, outcome: Result<Vec<u8>, IpcError>) {
    match outcome {
        Ok(sig) => b.set_ok(&sig[..]),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_sign_result(r: wire::sign_result::Reader<'_>) -> Result<Vec<u8>, CallError> {
    read_union!(r, sign_result, "result", |s| data(s, "signature")?)
}

fn write_sign_batch_result(b: wire::sign_batch_result::Builder<'_>, outcome: Result<Vec<Vec<u8>>, IpcError>) {
    match outcome {
        Ok(sigs) => write_data_list(b.init_ok(sigs.len() as u32), &sigs),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_sign_batch_result(r: wire::sign_batch_result::Reader<'_>) -> Result<Vec<Vec<u8>>, CallError> {
    read_union!(r, sign_batch_result, "result", |s| read_data_list(s, usize::MAX)?)
}

/// Each call's outcome, in order.
type SignEach = Vec<Result<Vec<u8>, IpcError>>;

fn write_sign_each_result(b: wire::sign_each_result::Builder<'_>, outcome: Result<SignEach, IpcError>) {
    match outcome {
        Ok(each) => {
            let mut list = b.init_ok(each.len() as u32);
            for (i, outcome) in each.into_iter().enumerate() {
                write_sign_result(list.reborrow().get(i as u32), outcome);
            }
        }
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_sign_each_result(r: wire::sign_each_result::Reader<'_>) -> Result<SignEach, CallError> {
    read_union!(r, sign_each_result, "result", |list| {
        let list = list?;
        let mut each = Vec::with_capacity(list.len() as usize);
        for r in list.iter() {
            each.push(match r.which().map_err(|e| malformed("sign result", e))? {
                wire::sign_result::Ok(s) => data(s, "signature"),
                wire::sign_result::Err(e) => Err(read_error(e)),
            });
        }
        each
    })
}

fn write_audit_result(b: wire::audit_result::Builder<'_>, outcome: Result<Vec<AuditRecord>, IpcError>) {
    match outcome {
        Ok(records) => write_audit_list(b.init_ok(records.len() as u32), &records),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_audit_result(r: wire::audit_result::Reader<'_>) -> Result<Vec<AuditRecord>, CallError> {
    read_union!(r, audit_result, "result", |a| read_audit_list(a)?)
}

/// The reader and writer of a result union whose `ok` is a capability.
macro_rules! capability_result {
    ($write:ident, $read:ident, $union:ident, $client:ty, $what:literal) => {
        fn $write(mut b: wire::$union::Builder<'_>, outcome: Result<$client, IpcError>) {
            match outcome {
                Ok(c) => b.set_ok(c),
                Err(e) => write_error(b.init_err(), &e),
            }
        }

        fn $read(r: wire::$union::Reader<'_>) -> Result<$client, CallError> {
            read_union!(r, $union, $what, |c| c?)
        }
    };
}

capability_result!(write_signer_result, read_signer_result, signer_result, wire::signer::Client, "signer result");
capability_result!(write_admin_result, read_admin_result, admin_result, wire::admin::Client, "admin result");
capability_result!(write_issuer_result, read_issuer_result, issuer_result, wire::issuer::Client, "issuer result");
capability_result!(
    write_crl_signer_result,
    read_crl_signer_result,
    crl_signer_result,
    wire::crl_signer::Client,
    "CRL signer result"
);
capability_result!(
    write_ocsp_signer_result,
    read_ocsp_signer_result,
    ocsp_signer_result,
    wire::ocsp_signer::Client,
    "OCSP signer result"
);
capability_result!(
    write_log_signer_result,
    read_log_signer_result,
    log_signer_result,
    wire::log_signer::Client,
    "log signer result"
);

// --- each method's Results ----------------------------------------------------

outcome!(signd::whoami_results: CallerInfo, write_caller_result, read_caller_result);
outcome!(signd::signer_results: wire::signer::Client, write_signer_result, read_signer_result);
outcome!(signd::admin_results: wire::admin::Client, write_admin_result, read_admin_result);
outcome!(signd::issuer_results: wire::issuer::Client, write_issuer_result, read_issuer_result);
outcome!(signd::crl_signer_results: wire::crl_signer::Client, write_crl_signer_result, read_crl_signer_result);
outcome!(signd::ocsp_signer_results: wire::ocsp_signer::Client, write_ocsp_signer_result, read_ocsp_signer_result);
outcome!(signd::log_signer_results: wire::log_signer::Client, write_log_signer_result, read_log_signer_result);

outcome!(signer::list_keys_results: Vec<KeyInfo>, write_key_list_result, read_key_list_result);
outcome!(signer::public_key_results: KeyInfo, write_key_result, read_key_result);
outcome!(signer::sign_results: Vec<u8>, write_sign_result, read_sign_result);
outcome!(signer::sign_batch_results: Vec<Vec<u8>>, write_sign_batch_result, read_sign_batch_result);
outcome!(signer::sign_each_results: SignEach, write_sign_each_result, read_sign_each_result);

outcome!(admin::list_keys_results: Vec<KeyInfo>, write_key_list_result, read_key_list_result);
outcome!(admin::key_results: KeyInfo, write_key_result, read_key_result);
outcome!(admin::generate_key_results: KeyInfo, write_key_result, read_key_result);
outcome!(admin::import_key_results: KeyInfo, write_key_result, read_key_result);
outcome!(admin::audit_results: Vec<AuditRecord>, write_audit_result, read_audit_result);
outcome!(admin::issue_ocsp_responder_results: Vec<u8>, write_der_result, |r| {
    read_der_result(r, "responder certificate")
});
outcome!(admin::issue_issuing_ca_results: Vec<u8>, write_der_result, |r| read_der_result(r, "CA certificate"));
outcome!(admin::add_ct_log_results: Vec<u8>, write_der_result, |r| read_der_result(r, "log key"));

outcome!(issuer::sign_tbs_certificate_results: Vec<u8>, write_der_result, |r| read_der_result(r, "certificate"));
outcome!(issuer::ca_certificate_results: Vec<u8>, write_der_result, |r| read_der_result(r, "CA certificate"));
outcome!(issuer::profile_results: String, write_text_result, |r| read_text_result(r, "profile"));

outcome!(crl_signer::sign_tbs_cert_list_results: Vec<u8>, write_der_result, |r| read_der_result(r, "CRL"));
outcome!(crl_signer::ca_certificate_results: Vec<u8>, write_der_result, |r| read_der_result(r, "CA certificate"));
outcome!(crl_signer::profile_results: String, write_text_result, |r| read_text_result(r, "profile"));

outcome!(ocsp_signer::sign_response_data_results: Vec<u8>, write_der_result, |r| read_der_result(r, "OCSP response"));
outcome!(ocsp_signer::responder_certificate_results: Vec<u8>, write_der_result, |r| {
    read_der_result(r, "responder certificate")
});
outcome!(ocsp_signer::ca_certificate_results: Vec<u8>, write_der_result, |r| read_der_result(r, "CA certificate"));
outcome!(ocsp_signer::sign_each_results: SignEach, write_sign_each_result, read_sign_each_result);

outcome!(log_signer::sign_many_results: Vec<Vec<u8>>, write_sign_batch_result, read_sign_batch_result);
outcome!(log_signer::public_key_results: Vec<u8>, write_der_result, |r| read_der_result(r, "log public key"));

/// Server: fills `health`'s Results (anyone may ask; it has no error).
pub(crate) fn write_health_results(mut r: wire::signd::health_results::Builder<'_>, h: &Health) {
    write_health(r.reborrow().init_health(), h);
}

/// Client: reads `health`'s Results.
pub(crate) fn read_health_results(r: wire::signd::health_results::Reader<'_>) -> Result<Health, CallError> {
    Ok(read_health(r.get_health()?)?)
}

// --- each method's Params -----------------------------------------------------
//
// `write_*`: the client fills a method's Params. `read_*`: the server reads
// them; a malformed or oversized parameter is a typed error, never a panic.

/// Refuses a message over the configured limit.
pub(crate) fn check_size(opts: &ServeOptions, len: usize) -> Result<(), IpcError> {
    if len > opts.max_message_bytes {
        return Err(IpcError::new(
            ErrorKind::TooLarge,
            format!("message of {len} bytes is over the limit of {}", opts.max_message_bytes),
        ));
    }
    Ok(())
}

/// Reads one `Data` parameter and checks its size against the message limit.
fn read_der(r: capnp::Result<capnp::data::Reader<'_>>, opts: &ServeOptions, what: &str) -> Result<Vec<u8>, IpcError> {
    let der = data(r, what)?;
    check_size(opts, der.len())?;
    Ok(der)
}

pub(crate) fn write_signer(mut p: wire::signd::signer_params::Builder<'_>, role: &str) {
    p.set_role(role);
}

pub(crate) fn read_signer(p: capnp::Result<wire::signd::signer_params::Reader<'_>>) -> Result<String, IpcError> {
    p.map_err(|e| malformed("signer request", e)).and_then(|p| text(p.get_role(), "role"))
}

/// The Params of `issuer`, `crlSigner` and `ocspSigner`: a CA's name.
macro_rules! ca_name_params {
    ($write:ident, $read:ident, $params:ident, $what:literal) => {
        pub(crate) fn $write(mut p: wire::signd::$params::Builder<'_>, name: &str) {
            p.set_name(name);
        }

        pub(crate) fn $read(p: capnp::Result<wire::signd::$params::Reader<'_>>) -> Result<String, IpcError> {
            p.map_err(|e| malformed($what, e)).and_then(|p| text(p.get_name(), "issuer name"))
        }
    };
}

ca_name_params!(write_issuer, read_issuer, issuer_params, "issuer request");
ca_name_params!(write_crl_signer, read_crl_signer, crl_signer_params, "CRL signer request");
ca_name_params!(write_ocsp_signer, read_ocsp_signer, ocsp_signer_params, "OCSP signer request");

pub(crate) fn write_log_signer(mut p: wire::signd::log_signer_params::Builder<'_>, name: &str) {
    p.set_name(name);
}

/// The Params of `logSigner`: a CT log's name.
pub(crate) fn read_log_signer(
    p: capnp::Result<wire::signd::log_signer_params::Reader<'_>>,
) -> Result<String, IpcError> {
    p.map_err(|e| malformed("log signer request", e)).and_then(|p| text(p.get_name(), "log name"))
}

pub(crate) fn write_public_key(mut p: wire::signer::public_key_params::Builder<'_>, key_id: &str) {
    p.set_key_id(key_id);
}

pub(crate) fn read_public_key(
    p: capnp::Result<wire::signer::public_key_params::Reader<'_>>,
) -> Result<String, IpcError> {
    p.map_err(|e| malformed("request", e)).and_then(|p| text(p.get_key_id(), "key id"))
}

pub(crate) fn write_sign(
    mut p: wire::signer::sign_params::Builder<'_>,
    key_id: &str,
    scheme: SignatureScheme,
    message: &[u8],
) {
    p.set_key_id(key_id);
    p.set_scheme(scheme_to_wire(scheme));
    p.set_message(message);
}

/// The key id, scheme and message of a `sign`.
pub(crate) fn read_sign(
    p: capnp::Result<wire::signer::sign_params::Reader<'_>>,
    opts: &ServeOptions,
) -> Result<(String, SignatureScheme, Vec<u8>), IpcError> {
    let p = p.map_err(|e| malformed("sign request", e))?;
    let message = data(p.get_message(), "message")?;
    check_size(opts, message.len())?;
    Ok((text(p.get_key_id(), "key id")?, scheme_from_wire(p.get_scheme())?, message))
}

pub(crate) fn write_sign_batch(
    mut p: wire::signer::sign_batch_params::Builder<'_>,
    key_id: &str,
    scheme: SignatureScheme,
    messages: &[Vec<u8>],
) {
    p.set_key_id(key_id);
    p.set_scheme(scheme_to_wire(scheme));
    write_data_list(p.init_messages(messages.len() as u32), messages);
}

/// The key id, scheme and messages of a `signBatch`; each message within the limit.
pub(crate) fn read_sign_batch(
    p: capnp::Result<wire::signer::sign_batch_params::Reader<'_>>,
    opts: &ServeOptions,
) -> Result<(String, SignatureScheme, Vec<Vec<u8>>), IpcError> {
    let p = p.map_err(|e| malformed("sign batch request", e))?;
    let messages = read_data_list(p.get_messages(), opts.max_batch)?;
    for m in &messages {
        check_size(opts, m.len())?;
    }
    Ok((text(p.get_key_id(), "key id")?, scheme_from_wire(p.get_scheme())?, messages))
}

pub(crate) fn write_sign_each(
    mut p: wire::signer::sign_each_params::Builder<'_>,
    key_id: &str,
    scheme: SignatureScheme,
    messages: &[Vec<u8>],
) {
    p.set_key_id(key_id);
    p.set_scheme(scheme_to_wire(scheme));
    write_data_list(p.init_messages(messages.len() as u32), messages);
}

/// The key id, scheme and messages of a `signEach` (sizes are checked per
/// call by the server: an oversized message fails alone).
pub(crate) fn read_sign_each(
    p: capnp::Result<wire::signer::sign_each_params::Reader<'_>>,
    opts: &ServeOptions,
) -> Result<(String, SignatureScheme, Vec<Vec<u8>>), IpcError> {
    let p = p.map_err(|e| malformed("sign each request", e))?;
    let messages = read_data_list(p.get_messages(), opts.max_batch)?;
    Ok((text(p.get_key_id(), "key id")?, scheme_from_wire(p.get_scheme())?, messages))
}

pub(crate) fn write_admin_key(mut p: wire::admin::key_params::Builder<'_>, key_id: &str) {
    p.set_key_id(key_id);
}

pub(crate) fn read_admin_key(p: capnp::Result<wire::admin::key_params::Reader<'_>>) -> Result<String, IpcError> {
    p.map_err(|e| malformed("request", e)).and_then(|p| text(p.get_key_id(), "key id"))
}

pub(crate) fn write_generate_key(p: wire::admin::generate_key_params::Builder<'_>, spec: &KeySpec) {
    write_key_spec(p.init_spec(), spec);
}

pub(crate) fn read_generate_key(
    p: capnp::Result<wire::admin::generate_key_params::Reader<'_>>,
) -> Result<KeySpec, IpcError> {
    p.map_err(|e| malformed("request", e)).and_then(|p| read_key_spec(p.get_spec()))
}

pub(crate) fn write_import_key(mut p: wire::admin::import_key_params::Builder<'_>, spec: &KeySpec, pkcs8: &[u8]) {
    write_key_spec(p.reborrow().init_spec(), spec);
    p.set_pkcs8(pkcs8);
}

pub(crate) fn read_import_key(
    p: capnp::Result<wire::admin::import_key_params::Reader<'_>>,
) -> Result<(KeySpec, Vec<u8>), IpcError> {
    p.map_err(|e| malformed("request", e))
        .and_then(|p| Ok((read_key_spec(p.get_spec())?, data(p.get_pkcs8(), "pkcs8")?)))
}

pub(crate) fn write_audit(p: wire::admin::audit_params::Builder<'_>, query: &AuditQuery) {
    write_audit_query(p.init_query(), query);
}

pub(crate) fn read_audit(p: capnp::Result<wire::admin::audit_params::Reader<'_>>) -> Result<AuditQuery, IpcError> {
    p.map_err(|e| malformed("request", e)).and_then(|p| read_audit_query(p.get_query()))
}

pub(crate) fn write_issue_ocsp_responder(
    mut p: wire::admin::issue_ocsp_responder_params::Builder<'_>,
    issuer: &str,
    key_id: &str,
    validity_days: u32,
) {
    p.set_issuer(issuer);
    p.set_key_id(key_id);
    p.set_validity_days(validity_days);
}

pub(crate) fn read_issue_ocsp_responder(
    p: capnp::Result<wire::admin::issue_ocsp_responder_params::Reader<'_>>,
) -> Result<(String, String, u32), IpcError> {
    p.map_err(|e| malformed("request", e))
        .and_then(|p| Ok((text(p.get_issuer(), "issuer")?, text(p.get_key_id(), "key id")?, p.get_validity_days())))
}

pub(crate) fn write_issue_issuing_ca(mut p: wire::admin::issue_issuing_ca_params::Builder<'_>, spec: &IssuingCaSpec) {
    p.set_issuer(&spec.issuer);
    p.set_new_name(&spec.new_name);
    p.set_key_id(&spec.key_id);
    p.set_root_key_id(&spec.root_key_id);
    p.set_responder_key_id(&spec.responder_key_id);
    p.set_subject(&spec.subject);
    p.set_validity_days(spec.validity_days);
    p.set_crl_url(&spec.crl_url);
}

pub(crate) fn read_issue_issuing_ca(
    p: capnp::Result<wire::admin::issue_issuing_ca_params::Reader<'_>>,
) -> Result<IssuingCaSpec, IpcError> {
    let p = p.map_err(|e| malformed("request", e))?;
    Ok(IssuingCaSpec {
        issuer: text(p.get_issuer(), "issuer")?,
        new_name: text(p.get_new_name(), "new name")?,
        key_id: text(p.get_key_id(), "key id")?,
        root_key_id: text(p.get_root_key_id(), "root key id")?,
        responder_key_id: text(p.get_responder_key_id(), "responder key id")?,
        subject: text(p.get_subject(), "subject")?,
        validity_days: p.get_validity_days(),
        crl_url: text(p.get_crl_url(), "CRL URL")?,
    })
}

pub(crate) fn write_add_ct_log(
    mut p: wire::admin::add_ct_log_params::Builder<'_>,
    name: &str,
    key_id: &str,
    roles: &[String],
) {
    p.set_name(name);
    p.set_key_id(key_id);
    set_text_list(p.init_roles(roles.len() as u32), roles);
}

pub(crate) fn read_add_ct_log(
    p: capnp::Result<wire::admin::add_ct_log_params::Reader<'_>>,
) -> Result<(String, String, Vec<String>), IpcError> {
    let p = p.map_err(|e| malformed("request", e))?;
    Ok((text(p.get_name(), "log name")?, text(p.get_key_id(), "key id")?, text_list(p.get_roles(), "roles")?))
}

pub(crate) fn write_sign_tbs_certificate(mut p: wire::issuer::sign_tbs_certificate_params::Builder<'_>, tbs: &[u8]) {
    p.set_tbs(tbs);
}

pub(crate) fn read_sign_tbs_certificate(
    p: capnp::Result<wire::issuer::sign_tbs_certificate_params::Reader<'_>>,
    opts: &ServeOptions,
) -> Result<Vec<u8>, IpcError> {
    p.map_err(|e| malformed("sign certificate request", e)).and_then(|p| read_der(p.get_tbs(), opts, "TBSCertificate"))
}

pub(crate) fn write_sign_tbs_cert_list(mut p: wire::crl_signer::sign_tbs_cert_list_params::Builder<'_>, tbs: &[u8]) {
    p.set_tbs(tbs);
}

pub(crate) fn read_sign_tbs_cert_list(
    p: capnp::Result<wire::crl_signer::sign_tbs_cert_list_params::Reader<'_>>,
    opts: &ServeOptions,
) -> Result<Vec<u8>, IpcError> {
    p.map_err(|e| malformed("sign CRL request", e)).and_then(|p| read_der(p.get_tbs(), opts, "TBSCertList"))
}

pub(crate) fn write_sign_response_data(
    mut p: wire::ocsp_signer::sign_response_data_params::Builder<'_>,
    response_data: &[u8],
) {
    p.set_response_data(response_data);
}

pub(crate) fn read_sign_response_data(
    p: capnp::Result<wire::ocsp_signer::sign_response_data_params::Reader<'_>>,
    opts: &ServeOptions,
) -> Result<Vec<u8>, IpcError> {
    p.map_err(|e| malformed("sign OCSP request", e)).and_then(|p| read_der(p.get_response_data(), opts, "ResponseData"))
}

pub(crate) fn write_sign_response_data_each(
    p: wire::ocsp_signer::sign_each_params::Builder<'_>,
    response_data: &[Vec<u8>],
) {
    write_data_list(p.init_response_data(response_data.len() as u32), response_data);
}

/// The ResponseData of an OcspSigner `signEach`, no more than the batch
/// limit (sizes are checked per call by the server: an oversized one fails
/// alone).
pub(crate) fn read_sign_response_data_each(
    p: capnp::Result<wire::ocsp_signer::sign_each_params::Reader<'_>>,
    opts: &ServeOptions,
) -> Result<Vec<Vec<u8>>, IpcError> {
    let p = p.map_err(|e| malformed("sign OCSP each request", e))?;
    read_data_list(p.get_response_data(), opts.max_batch)
}

pub(crate) fn write_sign_many(p: wire::log_signer::sign_many_params::Builder<'_>, inputs: &[Vec<u8>]) {
    write_data_list(p.init_inputs(inputs.len() as u32), inputs);
}

/// The inputs of a `signMany`: no more than the batch limit, each within the
/// message limit.
pub(crate) fn read_sign_many(
    p: capnp::Result<wire::log_signer::sign_many_params::Reader<'_>>,
    opts: &ServeOptions,
) -> Result<Vec<Vec<u8>>, IpcError> {
    let p = p.map_err(|e| malformed("sign CT request", e))?;
    let inputs = read_data_list(p.get_inputs(), opts.max_batch)?;
    for i in &inputs {
        check_size(opts, i.len())?;
    }
    Ok(inputs)
}
