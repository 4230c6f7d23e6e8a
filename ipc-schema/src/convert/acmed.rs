//! acmed's admin interface (`acmed.capnp`): its structs, each method's Params and Results.

use super::{
    data, malformed, outcome, read_error, read_text_result, read_union, text, write_error, write_text_result, CallError,
};
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

fn write_key_result(b: wire::eab_key_result::Builder<'_>, outcome: Result<EabKey, IpcError>) {
    match outcome {
        Ok(k) => write_eab_key(b.init_ok(), &k),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_key_result(r: wire::eab_key_result::Reader<'_>) -> Result<EabKey, IpcError> {
    match r.which().map_err(|e| malformed("EAB key result", e))? {
        wire::eab_key_result::Ok(k) => read_eab_key(k.map_err(|e| malformed("EAB key", e))?),
        wire::eab_key_result::Err(e) => Err(read_error(e)),
    }
}

fn write_key_list_result(b: wire::eab_key_list_result::Builder<'_>, outcome: Result<Vec<EabKey>, IpcError>) {
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

fn read_key_list_result(r: wire::eab_key_list_result::Reader<'_>) -> Result<Vec<EabKey>, IpcError> {
    match r.which().map_err(|e| malformed("EAB key list result", e))? {
        wire::eab_key_list_result::Ok(list) => {
            list.map_err(|e| malformed("EAB key list", e))?.iter().map(read_eab_key).collect()
        }
        wire::eab_key_list_result::Err(e) => Err(read_error(e)),
    }
}

fn write_health(mut b: wire::acmed_health::Builder<'_>, h: &AcmedHealth) {
    b.set_ok(h.ok);
    b.set_version(h.version.as_str());
    b.set_uptime_secs(h.uptime_secs);
    b.set_accounts(h.accounts);
    b.set_eab_keys(h.eab_keys);
    b.set_external_account_required(h.external_account_required);
}

fn read_health(r: wire::acmed_health::Reader<'_>) -> Result<AcmedHealth, IpcError> {
    Ok(AcmedHealth {
        ok: r.get_ok(),
        version: text(r.get_version(), "version")?,
        uptime_secs: r.get_uptime_secs(),
        accounts: r.get_accounts(),
        eab_keys: r.get_eab_keys(),
        external_account_required: r.get_external_account_required(),
    })
}

// --- each method's Results ----------------------------------------------------

fn write_admin_result(
    mut b: wire::acme_admin_result::Builder<'_>,
    outcome: Result<wire::acme_admin::Client, IpcError>,
) {
    match outcome {
        Ok(c) => b.set_ok(c),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_admin_result(r: wire::acme_admin_result::Reader<'_>) -> Result<wire::acme_admin::Client, CallError> {
    read_union!(r, acme_admin_result, "admin result", |a| a?)
}

outcome!(acmed::admin_results: wire::acme_admin::Client, write_admin_result, read_admin_result);
outcome!(acme_admin::eab_create_results: EabKey, write_key_result, read_key_result);
outcome!(acme_admin::eab_list_results: Vec<EabKey>, write_key_list_result, read_key_list_result);
outcome!(acme_admin::eab_show_results: EabKey, write_key_result, read_key_result);
outcome!(acme_admin::eab_delete_results: EabKey, write_key_result, read_key_result);
outcome!(acme_admin::use_issuer_results: String, write_text_result, |r| read_text_result(r, "issuer name"));

/// Server: fills `health`'s Results (anyone may ask; it has no error).
pub(crate) fn write_health_results(mut r: wire::acmed::health_results::Builder<'_>, h: &AcmedHealth) {
    write_health(r.reborrow().init_health(), h);
}

/// Client: reads `health`'s Results.
pub(crate) fn read_health_results(r: wire::acmed::health_results::Reader<'_>) -> Result<AcmedHealth, CallError> {
    Ok(read_health(r.get_health()?)?)
}

// --- each method's Params -----------------------------------------------------

pub(crate) fn write_eab_create(mut p: wire::acme_admin::eab_create_params::Builder<'_>, key_id: &str, note: &str) {
    p.set_key_id(key_id);
    p.set_note(note);
}

pub(crate) fn read_eab_create(
    p: capnp::Result<wire::acme_admin::eab_create_params::Reader<'_>>,
) -> Result<(String, String), IpcError> {
    p.map_err(|e| malformed("EAB create request", e))
        .and_then(|p| Ok((text(p.get_key_id(), "key id")?, text(p.get_note(), "note")?)))
}

pub(crate) fn write_eab_show(mut p: wire::acme_admin::eab_show_params::Builder<'_>, key_id: &str) {
    p.set_key_id(key_id);
}

pub(crate) fn read_eab_show(
    p: capnp::Result<wire::acme_admin::eab_show_params::Reader<'_>>,
) -> Result<String, IpcError> {
    p.map_err(|e| malformed("EAB show request", e)).and_then(|p| text(p.get_key_id(), "key id"))
}

pub(crate) fn write_eab_delete(mut p: wire::acme_admin::eab_delete_params::Builder<'_>, key_id: &str) {
    p.set_key_id(key_id);
}

pub(crate) fn read_eab_delete(
    p: capnp::Result<wire::acme_admin::eab_delete_params::Reader<'_>>,
) -> Result<String, IpcError> {
    p.map_err(|e| malformed("EAB delete request", e)).and_then(|p| text(p.get_key_id(), "key id"))
}

pub(crate) fn write_use_issuer(mut p: wire::acme_admin::use_issuer_params::Builder<'_>, name: &str) {
    p.set_name(name);
}

pub(crate) fn read_use_issuer(
    p: capnp::Result<wire::acme_admin::use_issuer_params::Reader<'_>>,
) -> Result<String, IpcError> {
    p.map_err(|e| malformed("use issuer request", e)).and_then(|p| text(p.get_name(), "issuer name"))
}
