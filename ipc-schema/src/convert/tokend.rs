//! tokend's admin interface (`tokend.capnp`): its structs, each method's Params and Results.

use super::{malformed, outcome, read_error, read_union, set_text_list, text, text_list, write_error, CallError};
use crate::tokend_capnp as wire;
use crate::types::*;

fn write_client(mut b: wire::oauth_client::Builder<'_>, c: &OauthClient) {
    b.set_client_id(c.client_id.as_str());
    b.set_name(c.name.as_str());
    b.set_auth_method(c.auth_method.as_str());
    b.set_secret(c.secret.as_str());
    b.set_jwks(c.jwks.as_str());
    set_text_list(b.reborrow().init_scopes(c.scopes.len() as u32), &c.scopes);
    set_text_list(b.reborrow().init_audiences(c.audiences.len() as u32), &c.audiences);
    set_text_list(b.reborrow().init_grant_types(c.grant_types.len() as u32), &c.grant_types);
    b.set_created_unix_secs(c.created_unix_secs);
    b.set_secret_set_unix_secs(c.secret_set_unix_secs);
    set_text_list(b.reborrow().init_redirect_uris(c.redirect_uris.len() as u32), &c.redirect_uris);
    set_text_list(
        b.reborrow().init_post_logout_redirect_uris(c.post_logout_redirect_uris.len() as u32),
        &c.post_logout_redirect_uris,
    );
    b.set_tls_subject_dn(c.tls_subject_dn.as_str());
    b.set_tls_san_dns(c.tls_san_dns.as_str());
    b.set_tls_san_uri(c.tls_san_uri.as_str());
    b.set_tls_san_ip(c.tls_san_ip.as_str());
    b.set_tls_san_email(c.tls_san_email.as_str());
}

fn read_client(r: wire::oauth_client::Reader<'_>) -> Result<OauthClient, IpcError> {
    Ok(OauthClient {
        client_id: text(r.get_client_id(), "client id")?,
        name: text(r.get_name(), "client name")?,
        auth_method: text(r.get_auth_method(), "auth method")?,
        secret: text(r.get_secret(), "client secret")?,
        jwks: text(r.get_jwks(), "JWKS")?,
        scopes: text_list(r.get_scopes(), "scopes")?,
        audiences: text_list(r.get_audiences(), "audiences")?,
        grant_types: text_list(r.get_grant_types(), "grant types")?,
        created_unix_secs: r.get_created_unix_secs(),
        secret_set_unix_secs: r.get_secret_set_unix_secs(),
        redirect_uris: text_list(r.get_redirect_uris(), "redirect URIs")?,
        post_logout_redirect_uris: text_list(r.get_post_logout_redirect_uris(), "post-logout redirect URIs")?,
        tls_subject_dn: text(r.get_tls_subject_dn(), "TLS subject DN")?,
        tls_san_dns: text(r.get_tls_san_dns(), "TLS SAN dNSName")?,
        tls_san_uri: text(r.get_tls_san_uri(), "TLS SAN URI")?,
        tls_san_ip: text(r.get_tls_san_ip(), "TLS SAN iPAddress")?,
        tls_san_email: text(r.get_tls_san_email(), "TLS SAN rfc822Name")?,
    })
}

fn write_client_result(b: wire::oauth_client_result::Builder<'_>, outcome: Result<OauthClient, IpcError>) {
    match outcome {
        Ok(c) => write_client(b.init_ok(), &c),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_client_result(r: wire::oauth_client_result::Reader<'_>) -> Result<OauthClient, IpcError> {
    match r.which().map_err(|e| malformed("client result", e))? {
        wire::oauth_client_result::Ok(c) => read_client(c.map_err(|e| malformed("client", e))?),
        wire::oauth_client_result::Err(e) => Err(read_error(e)),
    }
}

fn write_client_list_result(
    b: wire::oauth_client_list_result::Builder<'_>,
    outcome: Result<Vec<OauthClient>, IpcError>,
) {
    let clients = match outcome {
        Ok(c) => c,
        Err(e) => return write_error(b.init_err(), &e),
    };
    let mut list = b.init_ok(clients.len() as u32);
    for (i, c) in clients.iter().enumerate() {
        // Indexes come from `clients`, which sized the list.
        write_client(list.reborrow().get(i as u32), c);
    }
}

fn read_client_list_result(r: wire::oauth_client_list_result::Reader<'_>) -> Result<Vec<OauthClient>, IpcError> {
    match r.which().map_err(|e| malformed("client list result", e))? {
        wire::oauth_client_list_result::Ok(list) => {
            list.map_err(|e| malformed("client list", e))?.iter().map(read_client).collect()
        }
        wire::oauth_client_list_result::Err(e) => Err(read_error(e)),
    }
}

fn write_user(mut b: wire::oauth_user::Builder<'_>, u: &OauthUser) {
    b.set_user_name(u.user_name.as_str());
    b.set_name(u.name.as_str());
    b.set_email(u.email.as_str());
    set_text_list(b.reborrow().init_groups(u.groups.len() as u32), &u.groups);
    b.set_password(u.password.as_str());
    b.set_created_unix_secs(u.created_unix_secs);
    b.set_password_set_unix_secs(u.password_set_unix_secs);
    b.set_disabled(u.disabled);
}

fn read_user(r: wire::oauth_user::Reader<'_>) -> Result<OauthUser, IpcError> {
    Ok(OauthUser {
        user_name: text(r.get_user_name(), "user name")?,
        name: text(r.get_name(), "user's display name")?,
        email: text(r.get_email(), "email")?,
        groups: text_list(r.get_groups(), "groups")?,
        password: text(r.get_password(), "password")?,
        created_unix_secs: r.get_created_unix_secs(),
        password_set_unix_secs: r.get_password_set_unix_secs(),
        disabled: r.get_disabled(),
    })
}

fn write_user_result(b: wire::oauth_user_result::Builder<'_>, outcome: Result<OauthUser, IpcError>) {
    match outcome {
        Ok(u) => write_user(b.init_ok(), &u),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_user_result(r: wire::oauth_user_result::Reader<'_>) -> Result<OauthUser, IpcError> {
    match r.which().map_err(|e| malformed("user result", e))? {
        wire::oauth_user_result::Ok(u) => read_user(u.map_err(|e| malformed("user", e))?),
        wire::oauth_user_result::Err(e) => Err(read_error(e)),
    }
}

fn write_user_list_result(b: wire::oauth_user_list_result::Builder<'_>, outcome: Result<Vec<OauthUser>, IpcError>) {
    let users = match outcome {
        Ok(u) => u,
        Err(e) => return write_error(b.init_err(), &e),
    };
    let mut list = b.init_ok(users.len() as u32);
    for (i, u) in users.iter().enumerate() {
        // Indexes come from `users`, which sized the list.
        write_user(list.reborrow().get(i as u32), u);
    }
}

fn read_user_list_result(r: wire::oauth_user_list_result::Reader<'_>) -> Result<Vec<OauthUser>, IpcError> {
    match r.which().map_err(|e| malformed("user list result", e))? {
        wire::oauth_user_list_result::Ok(list) => {
            list.map_err(|e| malformed("user list", e))?.iter().map(read_user).collect()
        }
        wire::oauth_user_list_result::Err(e) => Err(read_error(e)),
    }
}

fn write_token_key(mut b: wire::token_key::Builder<'_>, k: &TokenKey) {
    b.set_key_id(k.key_id.as_str());
    b.set_alg(k.alg.as_str());
    b.set_first_seen_unix_secs(k.first_seen_unix_secs);
    b.set_superseded_unix_secs(k.superseded_unix_secs);
    b.set_signing(k.signing);
}

fn read_token_key(r: wire::token_key::Reader<'_>) -> Result<TokenKey, IpcError> {
    Ok(TokenKey {
        key_id: text(r.get_key_id(), "key id")?,
        alg: text(r.get_alg(), "alg")?,
        first_seen_unix_secs: r.get_first_seen_unix_secs(),
        superseded_unix_secs: r.get_superseded_unix_secs(),
        signing: r.get_signing(),
    })
}

fn write_key_list_result(b: wire::token_key_list_result::Builder<'_>, outcome: Result<Vec<TokenKey>, IpcError>) {
    let keys = match outcome {
        Ok(k) => k,
        Err(e) => return write_error(b.init_err(), &e),
    };
    let mut list = b.init_ok(keys.len() as u32);
    for (i, k) in keys.iter().enumerate() {
        // Indexes come from `keys`, which sized the list.
        write_token_key(list.reborrow().get(i as u32), k);
    }
}

fn read_key_list_result(r: wire::token_key_list_result::Reader<'_>) -> Result<Vec<TokenKey>, IpcError> {
    match r.which().map_err(|e| malformed("token key list result", e))? {
        wire::token_key_list_result::Ok(list) => {
            list.map_err(|e| malformed("token key list", e))?.iter().map(read_token_key).collect()
        }
        wire::token_key_list_result::Err(e) => Err(read_error(e)),
    }
}

fn write_health(mut b: wire::tokend_health::Builder<'_>, h: &TokendHealth) {
    b.set_ok(h.ok);
    b.set_version(h.version.as_str());
    b.set_uptime_secs(h.uptime_secs);
    b.set_clients(h.clients);
    b.set_signing_key(h.signing_key.as_str());
}

fn read_health(r: wire::tokend_health::Reader<'_>) -> Result<TokendHealth, IpcError> {
    Ok(TokendHealth {
        ok: r.get_ok(),
        version: text(r.get_version(), "version")?,
        uptime_secs: r.get_uptime_secs(),
        clients: r.get_clients(),
        signing_key: text(r.get_signing_key(), "signing key")?,
    })
}

// --- each method's Results ----------------------------------------------------

fn write_admin_result(
    mut b: wire::tokend_admin_result::Builder<'_>,
    outcome: Result<wire::tokend_admin::Client, IpcError>,
) {
    match outcome {
        Ok(c) => b.set_ok(c),
        Err(e) => write_error(b.init_err(), &e),
    }
}

fn read_admin_result(r: wire::tokend_admin_result::Reader<'_>) -> Result<wire::tokend_admin::Client, CallError> {
    read_union!(r, tokend_admin_result, "admin result", |a| a?)
}

outcome!(tokend::admin_results: wire::tokend_admin::Client, write_admin_result, read_admin_result);
outcome!(tokend_admin::client_create_results: OauthClient, write_client_result, read_client_result);
outcome!(tokend_admin::client_list_results: Vec<OauthClient>, write_client_list_result, read_client_list_result);
outcome!(tokend_admin::client_show_results: OauthClient, write_client_result, read_client_result);
outcome!(tokend_admin::client_delete_results: OauthClient, write_client_result, read_client_result);
outcome!(tokend_admin::client_rotate_secret_results: OauthClient, write_client_result, read_client_result);
outcome!(tokend_admin::key_list_results: Vec<TokenKey>, write_key_list_result, read_key_list_result);
outcome!(tokend_admin::key_refresh_results: Vec<TokenKey>, write_key_list_result, read_key_list_result);
outcome!(tokend_admin::user_create_results: OauthUser, write_user_result, read_user_result);
outcome!(tokend_admin::user_list_results: Vec<OauthUser>, write_user_list_result, read_user_list_result);
outcome!(tokend_admin::user_show_results: OauthUser, write_user_result, read_user_result);
outcome!(tokend_admin::user_delete_results: OauthUser, write_user_result, read_user_result);
outcome!(tokend_admin::user_set_password_results: OauthUser, write_user_result, read_user_result);
outcome!(tokend_admin::user_set_disabled_results: OauthUser, write_user_result, read_user_result);

/// Server: fills `health`'s Results (anyone may ask; it has no error).
pub(crate) fn write_health_results(mut r: wire::tokend::health_results::Builder<'_>, h: &TokendHealth) {
    write_health(r.reborrow().init_health(), h);
}

/// Client: reads `health`'s Results.
pub(crate) fn read_health_results(r: wire::tokend::health_results::Reader<'_>) -> Result<TokendHealth, CallError> {
    Ok(read_health(r.get_health()?)?)
}

// --- each method's Params -----------------------------------------------------

pub(crate) fn write_client_create(p: wire::tokend_admin::client_create_params::Builder<'_>, client: &OauthClient) {
    write_client(p.init_client(), client);
}

pub(crate) fn read_client_create(
    p: capnp::Result<wire::tokend_admin::client_create_params::Reader<'_>>,
) -> Result<OauthClient, IpcError> {
    p.and_then(|p| p.get_client()).map_err(|e| malformed("client create request", e)).and_then(read_client)
}

/// The methods whose only parameter is a client id: show, delete, rotate.
macro_rules! client_id_params {
    ($write:ident, $read:ident, $params:ident, $what:expr) => {
        pub(crate) fn $write(mut p: wire::tokend_admin::$params::Builder<'_>, client_id: &str) {
            p.set_client_id(client_id);
        }

        pub(crate) fn $read(p: capnp::Result<wire::tokend_admin::$params::Reader<'_>>) -> Result<String, IpcError> {
            p.map_err(|e| malformed($what, e)).and_then(|p| text(p.get_client_id(), "client id"))
        }
    };
}

client_id_params!(write_client_show, read_client_show, client_show_params, "client show request");
client_id_params!(write_client_delete, read_client_delete, client_delete_params, "client delete request");
client_id_params!(
    write_client_rotate_secret,
    read_client_rotate_secret,
    client_rotate_secret_params,
    "client secret rotation request"
);

pub(crate) fn write_user_create(p: wire::tokend_admin::user_create_params::Builder<'_>, user: &OauthUser) {
    write_user(p.init_user(), user);
}

pub(crate) fn read_user_create(
    p: capnp::Result<wire::tokend_admin::user_create_params::Reader<'_>>,
) -> Result<OauthUser, IpcError> {
    p.and_then(|p| p.get_user()).map_err(|e| malformed("user create request", e)).and_then(read_user)
}

/// The methods whose only parameter is a user name: show, delete.
macro_rules! user_name_params {
    ($write:ident, $read:ident, $params:ident, $what:expr) => {
        pub(crate) fn $write(mut p: wire::tokend_admin::$params::Builder<'_>, user_name: &str) {
            p.set_user_name(user_name);
        }

        pub(crate) fn $read(p: capnp::Result<wire::tokend_admin::$params::Reader<'_>>) -> Result<String, IpcError> {
            p.map_err(|e| malformed($what, e)).and_then(|p| text(p.get_user_name(), "user name"))
        }
    };
}

user_name_params!(write_user_show, read_user_show, user_show_params, "user show request");
user_name_params!(write_user_delete, read_user_delete, user_delete_params, "user delete request");

pub(crate) fn write_user_set_password(
    mut p: wire::tokend_admin::user_set_password_params::Builder<'_>,
    user_name: &str,
    password: &str,
) {
    p.set_user_name(user_name);
    p.set_password(password);
}

pub(crate) fn read_user_set_password(
    p: capnp::Result<wire::tokend_admin::user_set_password_params::Reader<'_>>,
) -> Result<(String, String), IpcError> {
    let p = p.map_err(|e| malformed("password change request", e))?;
    Ok((text(p.get_user_name(), "user name")?, text(p.get_password(), "password")?))
}

pub(crate) fn write_user_set_disabled(
    mut p: wire::tokend_admin::user_set_disabled_params::Builder<'_>,
    user_name: &str,
    disabled: bool,
) {
    p.set_user_name(user_name);
    p.set_disabled(disabled);
}

pub(crate) fn read_user_set_disabled(
    p: capnp::Result<wire::tokend_admin::user_set_disabled_params::Reader<'_>>,
) -> Result<(String, bool), IpcError> {
    let p = p.map_err(|e| malformed("user disable request", e))?;
    Ok((text(p.get_user_name(), "user name")?, p.get_disabled()))
}
