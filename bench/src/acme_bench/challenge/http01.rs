//! The http-01 responder (RFC 8555 §8.3): serves
//! `/.well-known/acme-challenge/{token}` from a token → key authorization map
//! that every client task publishes into.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, PoisonError, RwLock};

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// The path prefix the validator requests.
const PREFIX: &str = "/.well-known/acme-challenge/";

/// The published key authorizations, by token.
#[derive(Default)]
pub struct Tokens(RwLock<HashMap<String, String>>);

impl Tokens {
    /// Serves `key_authorization` for `token` until [`Tokens::remove`].
    pub fn insert(&self, token: &str, key_authorization: &str) {
        self.0.write().unwrap_or_else(PoisonError::into_inner).insert(token.to_owned(), key_authorization.to_owned());
    }

    /// Stops serving `token`.
    pub fn remove(&self, token: &str) {
        self.0.write().unwrap_or_else(PoisonError::into_inner).remove(token);
    }

    /// The answer to a GET of `path`: the key authorization, or 404.
    fn answer(&self, path: &str) -> Response<Full<Bytes>> {
        let found = path
            .strip_prefix(PREFIX)
            .and_then(|token| self.0.read().unwrap_or_else(PoisonError::into_inner).get(token).cloned());
        let mut response = match found {
            Some(key_authorization) => Response::new(Full::new(Bytes::from(key_authorization))),
            None => {
                let mut r = Response::new(Full::new(Bytes::from_static(b"no such token\n")));
                *r.status_mut() = StatusCode::NOT_FOUND;
                r
            }
        };
        response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        response
    }
}

/// Accepts validators' connections on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, tokens: Arc<Tokens>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors and the like: try again shortly.
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let tokens = Arc::clone(&tokens);
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                let response = tokens.answer(request.uri().path());
                async move { Ok::<_, Infallible>(response) }
            });
            // A validator that goes away mid-request is its own business.
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn serves_published_tokens_only() {
        let tokens = Tokens::default();
        tokens.insert("tok", "tok.thumb");
        let r = tokens.answer("/.well-known/acme-challenge/tok");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.into_body().collect().await.unwrap().to_bytes(), "tok.thumb");
        assert_eq!(tokens.answer("/.well-known/acme-challenge/other").status(), StatusCode::NOT_FOUND);
        assert_eq!(tokens.answer("/tok").status(), StatusCode::NOT_FOUND);
        tokens.remove("tok");
        assert_eq!(tokens.answer("/.well-known/acme-challenge/tok").status(), StatusCode::NOT_FOUND);
    }
}
