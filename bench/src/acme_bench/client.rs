//! The ACME client (RFC 8555) one benchmark task drives: nonces, signed
//! requests, the account, orders, authorizations, challenges, finalization
//! and the certificate download, over one keep-alive connection.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bytes::Bytes;
use hyper::Method;
use openssl::pkey::{PKey, Private};
use serde::de::DeserializeOwned;
use serde_json::json;
use signet_acme::jws::sign::{self, Signer};
use signet_acme::jws::Algorithm;
use signet_acme::types::{
    Authorization, AuthorizationStatus, Challenge, ChallengeStatus, Directory, Identifier, NewOrder, Order, OrderStatus,
};
use signet_acme::{Jwk, Problem};
use tokio::time::Instant;

use super::error::Error;
use super::http::{Connection, Response};
use super::keys::KeyType;

const JOSE: &str = "application/jose+json";
const PEM_CHAIN: &str = "application/pem-certificate-chain";

/// How long to wait between polls, and for how long to poll.
#[derive(Clone, Copy, Debug)]
pub struct Polling {
    /// The wait between polls when the server sends no Retry-After, and the
    /// most a Retry-After is honoured for.
    pub interval: Duration,
    /// How long a resource may stay pending or processing.
    pub timeout: Duration,
}

impl Polling {
    /// The wait before the next poll: the server's Retry-After, capped at
    /// the interval (a benchmark cannot wait whole seconds per poll).
    pub fn wait(&self, retry_after: Option<Duration>) -> Duration {
        retry_after.map_or(self.interval, |r| r.min(self.interval))
    }
}

/// The account: its key (ES256, P-256), public JWK and URL (`kid`).
struct Account {
    key: PKey<Private>,
    jwk: Jwk,
    url: Option<String>,
}

impl Account {
    /// A new key, no account yet.
    fn generate() -> Result<Account, Error> {
        let key = KeyType::EcP256.generate().map_err(Error::crypto)?;
        let jwk = sign::public_jwk(&key).map_err(Error::crypto)?;
        Ok(Account { key, jwk, url: None })
    }
}

/// An ACME client with one account and one connection.
pub struct Client {
    conn: Connection,
    directory: Directory,
    account: Account,
    nonce: Option<String>,
    polling: Polling,
    /// `badNonce` refusals retried so far.
    pub bad_nonce_retries: u64,
}

impl Client {
    /// Fetches the directory at `directory_url` over `conn` and makes a new
    /// account key (the account itself is made by [`Client::create_account`]).
    pub async fn new(mut conn: Connection, directory_url: &str, polling: Polling) -> Result<Client, Error> {
        let response = conn.send(Method::GET, directory_url, None, None, Bytes::new()).await?;
        let response = success(directory_url, response)?;
        let directory: Directory = decode(directory_url, &response)?;
        let nonce = response.header("replay-nonce").map(str::to_owned);
        Ok(Client { conn, directory, account: Account::generate()?, nonce, polling, bad_nonce_retries: 0 })
    }

    /// The account key's public JWK (for key authorizations).
    pub fn jwk(&self) -> &Jwk {
        &self.account.jwk
    }

    /// Connections opened so far.
    pub fn connections_opened(&self) -> u64 {
        self.conn.opened
    }

    /// The account URL, once the account is made.
    pub fn account_url(&self) -> Option<&str> {
        self.account.url.as_deref()
    }

    /// The server's directory.
    pub fn directory(&self) -> &Directory {
        &self.directory
    }

    /// Drops the account: a new key, no account URL (the next
    /// [`Client::create_account`] makes a new account).
    pub fn forget_account(&mut self) -> Result<(), Error> {
        self.account = Account::generate()?;
        Ok(())
    }

    /// A POST-as-GET of `url` (`accept`: the media type asked for).
    pub async fn post_as_get(&mut self, url: &str, accept: Option<&'static str>) -> Result<Response, Error> {
        self.post(url, b"", accept).await
    }

    /// An unsigned GET of `url` (the directory, renewalInfo).
    pub async fn get(&mut self, url: &str) -> Result<Response, Error> {
        let response = self.conn.send(Method::GET, url, None, None, Bytes::new()).await?;
        success(url, response)
    }

    /// newAccount, agreeing to the terms of service; remembers the account URL.
    pub async fn create_account(&mut self) -> Result<(), Error> {
        let url = self.directory.new_account.clone();
        let payload = json!({"termsOfServiceAgreed": true}).to_string();
        let response = self.post(&url, payload.as_bytes(), None).await?;
        let location = location(&url, &response)?;
        self.account.url = Some(location);
        Ok(())
    }

    /// newOrder for `identifier`: the order's URL and the order.
    pub async fn new_order(&mut self, identifier: Identifier) -> Result<(String, Order), Error> {
        let url = self.directory.new_order.clone();
        let payload = NewOrder {
            identifiers: vec![identifier],
            not_before: None,
            not_after: None,
            profile: None,
            replaces: None,
        };
        let payload = serde_json::to_vec(&payload).map_err(|e| Error::Protocol(e.to_string()))?;
        let response = self.post(&url, &payload, None).await?;
        let order_url = location(&url, &response)?;
        Ok((order_url, decode(&url, &response)?))
    }

    /// POST-as-GET of an authorization.
    pub async fn authorization(&mut self, url: &str) -> Result<(Authorization, Option<Duration>), Error> {
        let response = self.post(url, b"", None).await?;
        Ok((decode(url, &response)?, retry_after(&response)))
    }

    /// Tells the server the challenge at `url` is ready (payload `{}`): the
    /// challenge's status in the answer (if it parses) and its Retry-After.
    pub async fn respond(&mut self, url: &str) -> Result<(Option<ChallengeStatus>, Option<Duration>), Error> {
        let response = self.post(url, b"{}", None).await?;
        let status = serde_json::from_slice::<Challenge>(&response.body).ok().map(|c| c.status);
        Ok((status, retry_after(&response)))
    }

    /// Polls the authorization at `url` until it leaves `pending`; an error
    /// unless it became `valid`. `first_wait` is the Retry-After of the
    /// response that prompted the polling.
    pub async fn poll_authorization(
        &mut self,
        url: &str,
        first_wait: Option<Duration>,
    ) -> Result<Authorization, Error> {
        let deadline = Instant::now() + self.polling.timeout;
        let mut wait = self.polling.wait(first_wait);
        loop {
            tokio::time::sleep(wait).await;
            let (authz, retry) = self.authorization(url).await?;
            match authz.status {
                AuthorizationStatus::Valid => return Ok(authz),
                AuthorizationStatus::Pending if Instant::now() < deadline => wait = self.polling.wait(retry),
                AuthorizationStatus::Pending => {
                    return Err(Error::PollTimeout {
                        what: "authorization",
                        status: "pending".into(),
                        secs: self.polling.timeout.as_secs(),
                    })
                }
                _ => return Err(Error::Invalid { what: "authorization", problem: authz_problem(&authz) }),
            }
        }
    }

    /// Finalizes the order with `csr` (DER). A finalize refused with
    /// `orderNotReady` (the server has not yet seen the authorization turn
    /// valid) is retried after a poll interval, until the poll timeout.
    pub async fn finalize(&mut self, finalize_url: &str, csr: &[u8]) -> Result<(Order, Option<Duration>), Error> {
        let payload = json!({"csr": URL_SAFE_NO_PAD.encode(csr)}).to_string();
        let deadline = Instant::now() + self.polling.timeout;
        loop {
            match self.post(finalize_url, payload.as_bytes(), None).await {
                Ok(response) => return Ok((decode(finalize_url, &response)?, retry_after(&response))),
                Err(Error::Problem { problem, .. })
                    if problem.kind == signet_acme::ProblemType::OrderNotReady && Instant::now() < deadline =>
                {
                    tokio::time::sleep(self.polling.interval).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Polls the order at `url` until it is `valid` (an error if it becomes
    /// `invalid` or stays pending too long); `order` is its last known state.
    pub async fn poll_order(
        &mut self,
        url: &str,
        mut order: Order,
        mut retry: Option<Duration>,
    ) -> Result<Order, Error> {
        let deadline = Instant::now() + self.polling.timeout;
        loop {
            match order.status {
                OrderStatus::Valid => return Ok(order),
                OrderStatus::Invalid => {
                    return Err(Error::Invalid { what: "order", problem: order.error.map(Box::new) })
                }
                status if Instant::now() >= deadline => {
                    return Err(Error::PollTimeout {
                        what: "order",
                        status: format!("{status:?}").to_lowercase(),
                        secs: self.polling.timeout.as_secs(),
                    })
                }
                _ => {}
            }
            tokio::time::sleep(self.polling.wait(retry)).await;
            let response = self.post(url, b"", None).await?;
            retry = retry_after(&response);
            order = decode(url, &response)?;
        }
    }

    /// Downloads the certificate chain (PEM) at `url`.
    pub async fn download(&mut self, url: &str) -> Result<Bytes, Error> {
        let response = self.post(url, b"", Some(PEM_CHAIN)).await?;
        Ok(response.body)
    }

    /// revokeCert (RFC 8555 §7.6) of `cert_der`, signed by this account, with
    /// CRL reason code `reason`.
    pub async fn revoke(&mut self, cert_der: &[u8], reason: u8) -> Result<(), Error> {
        let url = self.directory.revoke_cert.clone();
        let payload = json!({"certificate": URL_SAFE_NO_PAD.encode(cert_der), "reason": reason}).to_string();
        self.post(&url, payload.as_bytes(), None).await.map(drop)
    }

    /// A signed POST to `url` (`payload` empty: POST-as-GET), signed with the
    /// account URL once there is an account, else with the JWK. A `badNonce`
    /// refusal is retried once with the nonce it carried.
    async fn post(&mut self, url: &str, payload: &[u8], accept: Option<&'static str>) -> Result<Response, Error> {
        match self.post_once(url, payload, accept).await {
            Err(e) if e.is_bad_nonce() => {
                self.bad_nonce_retries += 1;
                self.post_once(url, payload, accept).await
            }
            other => other,
        }
    }

    async fn post_once(&mut self, url: &str, payload: &[u8], accept: Option<&'static str>) -> Result<Response, Error> {
        let nonce = match self.nonce.take() {
            Some(nonce) => nonce,
            None => self.new_nonce().await?,
        };
        let signer = match &self.account.url {
            Some(kid) => Signer::Kid(kid),
            None => Signer::Jwk,
        };
        let jws = sign::request_with_jwk(
            Algorithm::Es256,
            &self.account.key,
            &self.account.jwk,
            signer,
            Some(&nonce),
            url,
            payload,
        )
        .map_err(Error::crypto)?;
        let body = Bytes::from(serde_json::to_vec(&jws).map_err(Error::crypto)?);
        let response = self.conn.send(Method::POST, url, Some(JOSE), accept, body).await?;
        self.nonce = response.header("replay-nonce").map(str::to_owned);
        success(url, response)
    }

    /// A fresh nonce from newNonce (HEAD).
    pub async fn new_nonce(&mut self) -> Result<String, Error> {
        let url = self.directory.new_nonce.clone();
        let response = self.conn.send(Method::HEAD, &url, None, None, Bytes::new()).await?;
        let response = success(&url, response)?;
        response
            .header("replay-nonce")
            .map(str::to_owned)
            .ok_or_else(|| Error::Protocol(format!("{url}: no Replay-Nonce header")))
    }
}

/// The response if its status is a success; else the problem it carries.
pub fn success(url: &str, response: Response) -> Result<Response, Error> {
    if response.status < 400 {
        return Ok(response);
    }
    match serde_json::from_slice::<Problem>(&response.body) {
        Ok(problem) => Err(Error::Problem { url: url.to_owned(), status: response.status, problem: Box::new(problem) }),
        Err(_) => {
            let body = String::from_utf8_lossy(&response.body[..response.body.len().min(200)]).into_owned();
            Err(Error::Status { url: url.to_owned(), status: response.status, body })
        }
    }
}

fn decode<T: DeserializeOwned>(url: &str, response: &Response) -> Result<T, Error> {
    serde_json::from_slice(&response.body).map_err(|e| Error::Protocol(format!("{url}: unexpected JSON: {e}")))
}

fn location(url: &str, response: &Response) -> Result<String, Error> {
    response.header("location").map(str::to_owned).ok_or_else(|| Error::Protocol(format!("{url}: no Location header")))
}

/// A Retry-After header as a wait: delay-seconds, or an HTTP-date from now.
pub fn retry_after(response: &Response) -> Option<Duration> {
    parse_retry_after(response.header("retry-after")?, std::time::SystemTime::now())
}

fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The reason an authorization is not valid: its own error if any, else
/// the first challenge's that has one.
fn authz_problem(authz: &Authorization) -> Option<Box<Problem>> {
    authz.challenges.iter().find_map(|c| c.error.clone()).map(Box::new)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::SystemTime;

    use super::*;

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(5));
        assert_eq!(parse_retry_after(&later, now), Some(Duration::from_secs(5)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(5));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn polling_caps_retry_after() {
        let p = Polling { interval: Duration::from_millis(50), timeout: Duration::from_secs(1) };
        assert_eq!(p.wait(None), Duration::from_millis(50));
        assert_eq!(p.wait(Some(Duration::from_secs(1))), Duration::from_millis(50));
        assert_eq!(p.wait(Some(Duration::ZERO)), Duration::ZERO);
    }

    #[test]
    fn error_statuses_become_problems() {
        let response =
            |status, body: &'static str| Response { status, headers: Default::default(), body: Bytes::from(body) };
        let e = success("u", response(400, r#"{"type":"urn:ietf:params:acme:error:badNonce","detail":"stale"}"#))
            .unwrap_err();
        assert!(e.is_bad_nonce());
        let e = success("u", response(502, "<html>bad gateway</html>")).unwrap_err();
        assert_eq!(e.category(), "http502");
        assert!(success("u", response(201, "{}")).is_ok());
    }
}
