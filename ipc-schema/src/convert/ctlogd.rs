//! ctlogd's admin interface (`ctlogd.capnp`): its structs, each method's Params and Results.

use super::{data, malformed, outcome, read_error, read_union, text, write_error, CallError};
use crate::ctlogd_capnp as wire;
use crate::types::*;

fn write_shard(mut b: wire::shard::Builder<'_>, s: &CtShard) {
    b.set_name(s.name.as_str());
    b.set_log_id(&s.log_id[..]);
    b.set_public_key(&s.public_key[..]);
    b.set_has_window(s.window.is_some());
    let (start, end) = s.window.unwrap_or((0, 0));
    b.set_not_after_start_unix_secs(start);
    b.set_not_after_end_unix_secs(end);
    b.set_url(s.url.as_str());
    b.set_tree_size(s.tree_size);
    b.set_added_at_run_time(s.added_at_run_time);
    b.set_log_list_entry(s.log_list_entry.as_str());
}

fn read_shard(r: wire::shard::Reader<'_>) -> Result<CtShard, IpcError> {
    Ok(CtShard {
        name: text(r.get_name(), "shard name")?,
        log_id: data(r.get_log_id(), "log ID")?,
        public_key: data(r.get_public_key(), "public key")?,
        window: r.get_has_window().then(|| (r.get_not_after_start_unix_secs(), r.get_not_after_end_unix_secs())),
        url: text(r.get_url(), "URL")?,
        tree_size: r.get_tree_size(),
        added_at_run_time: r.get_added_at_run_time(),
        log_list_entry: text(r.get_log_list_entry(), "log list entry")?,
    })
}

fn write_shard_result(b: wire::shard_result::Builder<'_>, outcome: Result<CtShard, IpcError>) {
    match outcome {
        Ok(s) => write_shard(b.init_ok(), &s),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_shard_result(r: wire::shard_result::Reader<'_>) -> Result<CtShard, IpcError> {
    match r.which().map_err(|e| malformed("shard result", e))? {
        wire::shard_result::Ok(s) => read_shard(s.map_err(|e| malformed("shard", e))?),
        wire::shard_result::Err(e) => Err(read_error(e)),
    }
}

fn write_shard_list_result(b: wire::shard_list_result::Builder<'_>, outcome: Result<Vec<CtShard>, IpcError>) {
    let shards = match outcome {
        Ok(s) => s,
        Err(e) => return write_error(b.init_err(), &e),
    };
    let mut list = b.init_ok(shards.len() as u32);
    for (i, s) in shards.iter().enumerate() {
        // Indexes come from `shards`, which sized the list.
        write_shard(list.reborrow().get(i as u32), s);
    }
}

fn read_shard_list_result(r: wire::shard_list_result::Reader<'_>) -> Result<Vec<CtShard>, IpcError> {
    match r.which().map_err(|e| malformed("shard list result", e))? {
        wire::shard_list_result::Ok(list) => {
            list.map_err(|e| malformed("shard list", e))?.iter().map(read_shard).collect()
        }
        wire::shard_list_result::Err(e) => Err(read_error(e)),
    }
}

fn write_health(mut b: wire::ctlogd_health::Builder<'_>, h: &CtlogdHealth) {
    b.set_ok(h.ok);
    b.set_version(h.version.as_str());
    b.set_uptime_secs(h.uptime_secs);
    b.set_logs(h.logs);
}

fn read_health(r: wire::ctlogd_health::Reader<'_>) -> Result<CtlogdHealth, IpcError> {
    Ok(CtlogdHealth {
        ok: r.get_ok(),
        version: text(r.get_version(), "version")?,
        uptime_secs: r.get_uptime_secs(),
        logs: r.get_logs(),
    })
}

// --- each method's Results ----------------------------------------------------

fn write_admin_result(mut b: wire::ct_admin_result::Builder<'_>, outcome: Result<wire::ct_admin::Client, IpcError>) {
    match outcome {
        Ok(c) => b.set_ok(c),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_admin_result(r: wire::ct_admin_result::Reader<'_>) -> Result<wire::ct_admin::Client, CallError> {
    read_union!(r, ct_admin_result, "admin result", |a| a?)
}

outcome!(ctlogd::admin_results: wire::ct_admin::Client, write_admin_result, read_admin_result);
outcome!(ct_admin::add_shard_results: CtShard, write_shard_result, read_shard_result);
outcome!(ct_admin::list_shards_results: Vec<CtShard>, write_shard_list_result, read_shard_list_result);

/// Server: fills `health`'s Results (anyone may ask; it has no error).
pub(crate) fn write_health_results(mut r: wire::ctlogd::health_results::Builder<'_>, h: &CtlogdHealth) {
    write_health(r.reborrow().init_health(), h);
}

/// Client: reads `health`'s Results.
pub(crate) fn read_health_results(r: wire::ctlogd::health_results::Reader<'_>) -> Result<CtlogdHealth, CallError> {
    Ok(read_health(r.get_health()?)?)
}

// --- each method's Params -----------------------------------------------------

pub(crate) fn write_add_shard(p: wire::ct_admin::add_shard_params::Builder<'_>, spec: &CtShardSpec) {
    let mut b = p.init_spec();
    b.set_name(spec.name.as_str());
    b.set_signd_log(spec.signd_log.as_str());
    b.set_not_after_start_unix_secs(spec.not_after_start_unix_secs);
    b.set_not_after_end_unix_secs(spec.not_after_end_unix_secs);
    b.set_description(spec.description.as_str());
}

pub(crate) fn read_add_shard(
    p: capnp::Result<wire::ct_admin::add_shard_params::Reader<'_>>,
) -> Result<CtShardSpec, IpcError> {
    let spec = p.and_then(|p| p.get_spec()).map_err(|e| malformed("add shard request", e))?;
    Ok(CtShardSpec {
        name: text(spec.get_name(), "shard name")?,
        signd_log: text(spec.get_signd_log(), "signd log")?,
        not_after_start_unix_secs: spec.get_not_after_start_unix_secs(),
        not_after_end_unix_secs: spec.get_not_after_end_unix_secs(),
        description: text(spec.get_description(), "description")?,
    })
}
