//! The routes: which handler answers a request. Every POST goes through the
//! signed-request pipeline ([`Acme::authenticate`]) first, with the key
//! reference its endpoint takes.

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use signet_acme::ProblemType;
use signet_runtime::http::Body;
use signet_runtime::http::Handler;

use crate::server::{problem_with_status, read_body, AcmeHttp, Answer, KeyRule, Reply};
use crate::Acme;

impl Handler for AcmeHttp {
    fn handle(&self, req: Request<Body>) -> BoxFuture<'static, Response<Full<Bytes>>> {
        let acme = self.0.clone();
        Box::pin(async move { acme.route(req).await })
    }
}

impl Acme {
    async fn route(self: Arc<Self>, req: Request<Body>) -> Response<Full<Bytes>> {
        let path = req.uri().path().to_owned();
        let method = req.method().clone();
        let answer = match (method.clone(), path.as_str()) {
            (Method::GET | Method::HEAD, "/directory") => Ok(Reply {
                content_type: Some("application/json"),
                body: self.directory.clone(),
                ..Reply::empty(StatusCode::OK)
            }),
            (Method::HEAD, "/acme/new-nonce") => Ok(Reply::empty(StatusCode::OK)),
            (Method::GET, "/acme/new-nonce") => Ok(Reply::empty(StatusCode::NO_CONTENT)),
            (Method::GET | Method::HEAD, "/acme/issuer-cert") => Ok(Reply {
                content_type: Some("application/pkix-cert"),
                body: Bytes::from(self.ca().ca_der.clone()),
                ..Reply::empty(StatusCode::OK)
            }),
            (Method::GET | Method::HEAD, p) if p.starts_with("/acme/renewal-info/") => {
                self.renewal_info(&p["/acme/renewal-info/".len()..])
            }
            (Method::POST, p) if !Self::is_get_only(p) => self.post(&path, req).await,
            // A resource that exists, asked with the wrong method: 405; anything else 404.
            (Method::POST, p) => {
                let _ = read_body(req.into_body(), self.cfg.max_body_bytes).await;
                Err(problem_with_status(ProblemType::Malformed, 405, format!("POST is not allowed on {p}")))
            }
            (_, p) if post_rule(p).is_some() => Err(problem_with_status(
                ProblemType::Malformed,
                405,
                format!("{method} is not allowed on {p}; ACME resources take POST"),
            )),
            (_, p) if Self::is_get_only(p) => Err(problem_with_status(
                ProblemType::Malformed,
                405,
                format!("{method} is not allowed on {p}; it takes GET"),
            )),
            _ => Err(problem_with_status(ProblemType::Malformed, 404, format!("no resource at {path}"))),
        };
        self.respond(answer, &method)
    }

    /// The resources answered to GET only (the directory, newNonce, the issuer's certificate, ARI).
    fn is_get_only(p: &str) -> bool {
        matches!(p, "/directory" | "/acme/new-nonce" | "/acme/issuer-cert") || p.starts_with("/acme/renewal-info/")
    }

    async fn post(self: &Arc<Self>, path: &str, req: Request<Body>) -> Answer {
        let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let Some(rule) = post_rule(path) else {
            let _ = read_body(req.into_body(), self.cfg.max_body_bytes).await;
            return Err(problem_with_status(ProblemType::Malformed, 404, format!("no resource at {path}")));
        };
        let authed = self.authenticate(path, rule, req).await?;
        match segs.as_slice() {
            ["acme", "new-account"] => self.new_account(authed),
            ["acme", "revoke-cert"] => self.revoke_cert(authed).await,
            ["acme", "new-order"] => self.new_order(authed),
            ["acme", "key-change"] => self.key_change(authed),
            ["acme", "acct", id] => self.account(authed, id),
            ["acme", "acct", id, "orders"] => self.account_orders(authed, id),
            ["acme", "order", id] => self.order(authed, id),
            ["acme", "order", id, "finalize"] => self.finalize(authed, id).await,
            ["acme", "authz", id] => self.authz(authed, id),
            ["acme", "chall", authz, idx] => self.challenge(authed, authz, idx).await,
            ["acme", "cert", serial] => self.certificate(authed, serial, "0"),
            ["acme", "cert", serial, alt] => self.certificate(authed, serial, alt),
            _ => Err(problem_with_status(ProblemType::Malformed, 404, format!("no resource at {path}"))),
        }
    }
}

/// The key reference a POST to `path` takes; `None` when no resource there takes POST.
fn post_rule(path: &str) -> Option<KeyRule> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    Some(match segs.as_slice() {
        ["acme", "new-account"] => KeyRule::Jwk,
        ["acme", "revoke-cert"] => KeyRule::Either,
        ["acme", "new-order" | "key-change"]
        | ["acme", "acct", _]
        | ["acme", "acct", _, "orders"]
        | ["acme", "order", _]
        | ["acme", "order", _, "finalize"]
        | ["acme", "authz", _]
        | ["acme", "chall", _, _]
        | ["acme", "cert", _]
        | ["acme", "cert", _, _] => KeyRule::Kid,
        _ => return None,
    })
}
