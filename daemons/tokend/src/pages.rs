//! The server-rendered pages: sign-in, consent, sign-out, and messages.
//!
//! Plain HTML forms that work without JavaScript (there is none). Every
//! value from a request or the store is escaped by [`esc`]; every form
//! carries a CSRF token (see `web`). The responses forbid framing and
//! caching and send no referrer.

use std::fmt::Write as _;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, REFERRER_POLICY, X_FRAME_OPTIONS};
use hyper::{Response, StatusCode};
pub use signet_runtime::http::html_escape as esc;

const STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;background:#f4f5f7;color:#1d2330;margin:0}\
main{max-width:26rem;margin:8vh auto;background:#fff;border:1px solid #d8dce3;border-radius:8px;padding:2rem}\
h1{font-size:1.3rem;margin:0 0 1rem}p.note{color:#5a6272;font-size:.9rem}\
label{display:block;margin:.8rem 0 .2rem;font-weight:600}\
input[type=text],input[type=password]{width:100%;box-sizing:border-box;padding:.5rem;border:1px solid #b9c0cc;border-radius:4px;font-size:1rem}\
button{margin-top:1.2rem;padding:.55rem 1.2rem;font-size:1rem;border-radius:4px;border:1px solid #2456c7;background:#2f63d8;color:#fff;cursor:pointer}\
button.secondary{background:#fff;color:#2456c7}\
.error{background:#fdecec;border:1px solid #e5a3a3;color:#8a1f1f;padding:.6rem;border-radius:4px}\
ul.scopes{padding-left:1.2rem}code{font-size:.9rem}";

/// A whole page around `body`.
pub fn page(status: StatusCode, title: &str, body: &str) -> Response<Full<Bytes>> {
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body><main>{body}</main></body></html>\n",
        esc(title)
    );
    let mut r = Response::new(Full::new(Bytes::from(html)));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    r
}

/// A page that only says something (an error the browser cannot be sent back with).
pub fn message(status: StatusCode, title: &str, text: &str) -> Response<Full<Bytes>> {
    page(status, title, &format!("<h1>{}</h1><p>{}</p>", esc(title), esc(text)))
}

/// The sign-in form. `authz` is the authorization request, carried through.
pub fn login(
    status: StatusCode,
    client: &str,
    authz: &str,
    csrf: &str,
    user: &str,
    error: Option<&str>,
) -> Response<Full<Bytes>> {
    let mut b = String::new();
    let _ = write!(b, "<h1>Sign in</h1><p class=\"note\">to continue to <strong>{}</strong></p>", esc(client));
    if let Some(e) = error {
        let _ = write!(b, "<p class=\"error\" role=\"alert\">{}</p>", esc(e));
    }
    let _ = write!(
        b,
        "<form method=\"post\" action=\"login\">\
         <input type=\"hidden\" name=\"authz\" value=\"{}\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label for=\"username\">User name</label>\
         <input type=\"text\" id=\"username\" name=\"username\" value=\"{}\" autocomplete=\"username\" required autofocus>\
         <label for=\"password\">Password</label>\
         <input type=\"password\" id=\"password\" name=\"password\" autocomplete=\"current-password\" required>\
         <button type=\"submit\">Sign in</button></form>",
        esc(authz),
        esc(csrf),
        esc(user)
    );
    page(status, "Sign in", &b)
}

/// What a scope lets the client do, for the consent page.
fn describe(scope: &str) -> String {
    match scope {
        "openid" => "confirm who you are".into(),
        "profile" => "see your name and user name".into(),
        "email" => "see your email address".into(),
        "groups" => "see the groups you belong to".into(),
        "offline_access" => "stay connected when you are not signed in".into(),
        other => format!("use <code>{}</code>", esc(other)),
    }
}

/// The scopes' list (its `<ul>` opened by the caller) and the Allow / Deny
/// form posting to `action` with the hidden field `carried` and the CSRF token.
fn decide(b: &mut String, scopes: &[String], action: &str, carried: (&str, &str), csrf: &str) {
    if scopes.is_empty() {
        b.push_str("<li>know that you signed in</li>");
    }
    for s in scopes {
        let _ = write!(b, "<li>{}</li>", describe(s));
    }
    let _ = write!(
        b,
        "</ul><form method=\"post\" action=\"{action}\">\
         <input type=\"hidden\" name=\"{}\" value=\"{}\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <button type=\"submit\" name=\"decision\" value=\"allow\">Allow</button> \
         <button type=\"submit\" name=\"decision\" value=\"deny\" class=\"secondary\">Deny</button></form>",
        carried.0,
        esc(carried.1),
        esc(csrf)
    );
}

/// The consent form.
pub fn consent(client: &str, user: &str, scopes: &[String], authz: &str, csrf: &str) -> Response<Full<Bytes>> {
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>Allow access?</h1><p><strong>{}</strong> asks, for <strong>{}</strong>, to:</p><ul class=\"scopes\">",
        esc(client),
        esc(user)
    );
    decide(&mut b, scopes, "consent", ("authz", authz), csrf);
    page(StatusCode::OK, "Allow access?", &b)
}

/// The sign-out confirmation (RP-initiated logout without a usable `id_token_hint`).
pub fn logout_confirm(params: &[(&str, &str)], csrf: &str) -> Response<Full<Bytes>> {
    let mut b =
        String::from("<h1>Sign out?</h1><p>You will be signed out of every application that uses this sign-in.</p>");
    b.push_str("<form method=\"post\" action=\"logout\">");
    for (k, v) in params {
        let _ = write!(b, "<input type=\"hidden\" name=\"{}\" value=\"{}\">", esc(k), esc(v));
    }
    let _ = write!(
        b,
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\" name=\"confirm\" value=\"yes\">Sign out</button></form>",
        esc(csrf)
    );
    page(StatusCode::OK, "Sign out?", &b)
}

/// The device page before sign-in: the code and the user's credentials.
pub fn device_login(
    status: StatusCode,
    user_code: &str,
    user: &str,
    csrf: &str,
    error: Option<&str>,
) -> Response<Full<Bytes>> {
    let mut b =
        String::from("<h1>Connect a device</h1><p class=\"note\">Sign in, then check the code your device shows.</p>");
    if let Some(e) = error {
        let _ = write!(b, "<p class=\"error\" role=\"alert\">{}</p>", esc(e));
    }
    let _ = write!(
        b,
        "<form method=\"post\" action=\"device\"><input type=\"hidden\" name=\"step\" value=\"login\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label for=\"user_code\">Code</label>\
         <input type=\"text\" id=\"user_code\" name=\"user_code\" value=\"{}\" autocomplete=\"off\" required>\
         <label for=\"username\">User name</label>\
         <input type=\"text\" id=\"username\" name=\"username\" value=\"{}\" autocomplete=\"username\" required>\
         <label for=\"password\">Password</label>\
         <input type=\"password\" id=\"password\" name=\"password\" autocomplete=\"current-password\" required>\
         <button type=\"submit\">Sign in</button></form>",
        esc(csrf),
        esc(user_code),
        esc(user)
    );
    page(status, "Connect a device", &b)
}

/// The device page when signed in: enter the code.
pub fn device_code(user_code: &str, csrf: &str, error: Option<&str>) -> Response<Full<Bytes>> {
    let mut b = String::from("<h1>Connect a device</h1>");
    if let Some(e) = error {
        let _ = write!(b, "<p class=\"error\" role=\"alert\">{}</p>", esc(e));
    }
    let _ = write!(
        b,
        "<form method=\"post\" action=\"device\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label for=\"user_code\">The code your device shows</label>\
         <input type=\"text\" id=\"user_code\" name=\"user_code\" value=\"{}\" autocomplete=\"off\" required autofocus>\
         <button type=\"submit\">Continue</button></form>",
        esc(csrf),
        esc(user_code)
    );
    let status = if error.is_some() { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    page(status, "Connect a device", &b)
}

/// The device consent form.
pub fn device_consent(
    client: &str,
    user: &str,
    scopes: &[String],
    user_code: &str,
    csrf: &str,
) -> Response<Full<Bytes>> {
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>Allow this device?</h1><p>The device showing <strong>{}</strong> runs <strong>{}</strong>, \
         and asks, for <strong>{}</strong>, to:</p><ul class=\"scopes\">",
        esc(user_code),
        esc(client),
        esc(user)
    );
    decide(&mut b, scopes, "device", ("user_code", user_code), csrf);
    page(StatusCode::OK, "Allow this device?", &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_from_outside_is_escaped() {
        assert_eq!(esc("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        let r = login(StatusCode::OK, "<script>", "a=\"b\"&c", "t", "\"><x", Some("<b>"));
        let body = futures::executor::block_on(http_body_util::BodyExt::collect(r.into_body())).unwrap().to_bytes();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(!body.contains("<script>") && !body.contains("\"><x") && !body.contains("<b>"));
        assert!(body.contains("value=\"a=&quot;b&quot;&amp;c\""));
    }
}
