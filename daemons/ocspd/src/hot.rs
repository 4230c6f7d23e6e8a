//! Answers to OCSP requests asked again and again, kept ready to send.
//!
//! Relying parties and CDNs ask about the same certificates over and over,
//! byte for byte the same request (RFC 5019 clients send one CertID, SHA-1,
//! no nonce). For those the work of an answer — decoding the URL's base64,
//! parsing the request, reading the pre-signed response from the store and
//! formatting its caching headers — gives the same bytes every time. Here
//! the request's bytes (the GET path's base64, or the POST body) map to the
//! response and its headers, so a repeated request costs one hash lookup.
//!
//! Rules that keep this exact:
//! - **only pre-signed answers from the store** are kept: never a nonce's,
//!   an `unknown`, an error, or one signed for several certificates;
//! - **an entry is good while the store is unchanged**: it records
//!   [`signet_store::Store::commits`] read before the store was, and any
//!   commit since (a revocation, a new certificate, a refreshed response)
//!   makes every entry a miss, answered from the store as before. A
//!   revocation is acknowledged only after its commit is counted, so no
//!   answer from before it is served once it has been acknowledged;
//! - **and while it is fresh**: not at or past its nextUpdate, like the
//!   store's own answers;
//! - **bounded**: at most [`MAX_ENTRIES`] requests of at most
//!   [`MAX_KEY_BYTES`] each; when full, the table starts again empty.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use hyper::header::HeaderValue;

use crate::core::Freshness;

/// The most requests kept.
pub const MAX_ENTRIES: usize = 4096;

/// Longer requests are answered without being kept (an RFC 5019 GET is
/// about 100 bytes; a padded or signed request is not what repeats).
pub const MAX_KEY_BYTES: usize = 512;

/// How a request arrived: a GET's base64 and a POST's DER are kept apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// The base64 of a GET path, as sent.
    Get,
    /// A POST body, DER.
    Post,
}

/// One answer, ready to send.
#[derive(Debug)]
pub struct Hot {
    /// The OCSPResponse, DER.
    pub der: Bytes,
    /// Its entity tag, with its quotes.
    pub etag: String,
    /// The caching headers that do not change with the time of day.
    pub headers: CacheHeaders,
    /// How long caches may keep it.
    pub freshness: Freshness,
    /// [`signet_store::Store::commits`] before the store was read.
    commits: u64,
}

/// ETag, Last-Modified, Expires, and Cache-Control at the longest max-age.
#[derive(Clone, Debug)]
pub struct CacheHeaders {
    /// ETag.
    pub etag: Option<HeaderValue>,
    /// Last-Modified: thisUpdate.
    pub last_modified: HeaderValue,
    /// Expires: nextUpdate.
    pub expires: HeaderValue,
    /// Cache-Control when max-age is [`Freshness::max_age_cap`].
    pub capped: Option<HeaderValue>,
}

impl CacheHeaders {
    /// The headers for a response tagged `etag` with `freshness`.
    pub fn new(etag: &str, freshness: &Freshness) -> Self {
        Self {
            etag: HeaderValue::from_str(etag).ok(),
            last_modified: http_date(freshness.this_update),
            expires: http_date(freshness.next_update),
            capped: cache_control(freshness.max_age_cap),
        }
    }
}

/// `Cache-Control` for `max_age` seconds (RFC 5019 6.2).
pub fn cache_control(max_age: u64) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("max-age={max_age}, public, no-transform, must-revalidate")).ok()
}

/// An HTTP-date (IMF-fixdate) for Unix seconds `secs`.
pub fn http_date(secs: i64) -> HeaderValue {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs.max(0) as u64);
    // An HTTP-date is plain ASCII.
    HeaderValue::from_str(&httpdate::fmt_http_date(t))
        .unwrap_or_else(|_| HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"))
}

/// The answers kept, by request.
#[derive(Default)]
pub struct HotAnswers {
    tables: RwLock<Tables>,
}

#[derive(Default)]
struct Tables {
    get: HashMap<Box<[u8]>, Arc<Hot>>,
    post: HashMap<Box<[u8]>, Arc<Hot>>,
}

impl Tables {
    fn table(&self, via: Via) -> &HashMap<Box<[u8]>, Arc<Hot>> {
        match via {
            Via::Get => &self.get,
            Via::Post => &self.post,
        }
    }

    fn len(&self) -> usize {
        self.get.len() + self.post.len()
    }
}

impl HotAnswers {
    /// The answer kept for `request`, if it is still exact: the store has
    /// committed nothing since (`commits` is [`signet_store::Store::commits`]
    /// now) and `now` is before its nextUpdate.
    pub fn get(&self, via: Via, request: &[u8], commits: u64, now: i64) -> Option<Arc<Hot>> {
        let tables = self.tables.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let hot = tables.table(via).get(request)?;
        (hot.commits == commits && now < hot.freshness.next_update).then(|| hot.clone())
    }

    /// Keeps the answer to `request`, read from the store after `commits`
    /// was read from it; returns it.
    pub fn keep(
        &self,
        via: Via,
        request: &[u8],
        commits: u64,
        der: Bytes,
        etag: String,
        freshness: Freshness,
    ) -> Arc<Hot> {
        let headers = CacheHeaders::new(&etag, &freshness);
        let hot = Arc::new(Hot { der, etag, headers, freshness, commits });
        if request.len() <= MAX_KEY_BYTES {
            let mut tables = self.tables.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            if tables.len() >= MAX_ENTRIES {
                *tables = Tables::default();
            }
            let table = match via {
                Via::Get => &mut tables.get,
                Via::Post => &mut tables.post,
            };
            table.insert(request.into(), hot.clone());
        }
        hot
    }

    /// Requests kept now.
    pub fn len(&self) -> usize {
        self.tables.read().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(next_update: i64) -> Freshness {
        Freshness { this_update: 100, next_update, max_age_cap: 3600 }
    }

    #[test]
    fn an_answer_is_kept_until_the_store_commits_or_it_goes_stale() {
        let hot = HotAnswers::default();
        hot.keep(Via::Get, b"MEMw", 7, Bytes::from_static(b"resp"), "\"t\"".into(), fresh(1000));
        let got = hot.get(Via::Get, b"MEMw", 7, 999).expect("kept");
        assert_eq!(&got.der[..], b"resp");
        assert!(hot.get(Via::Get, b"MEMw", 8, 999).is_none(), "a commit since makes it a miss");
        assert!(hot.get(Via::Get, b"MEMw", 7, 1000).is_none(), "at nextUpdate it is stale");
        assert!(hot.get(Via::Post, b"MEMw", 7, 999).is_none(), "a POST body is another request");
        assert!(hot.get(Via::Get, b"MEMx", 7, 999).is_none());
    }

    #[test]
    fn the_table_is_bounded() {
        let hot = HotAnswers::default();
        let long = vec![b'M'; MAX_KEY_BYTES + 1];
        hot.keep(Via::Post, &long, 1, Bytes::new(), "\"t\"".into(), fresh(1000));
        assert!(hot.is_empty(), "a long request is answered, not kept");
        for i in 0..MAX_ENTRIES + 10 {
            hot.keep(Via::Get, format!("M{i}").as_bytes(), 1, Bytes::new(), "\"t\"".into(), fresh(1000));
            assert!(hot.len() <= MAX_ENTRIES);
        }
        assert!(hot.get(Via::Get, format!("M{}", MAX_ENTRIES + 9).as_bytes(), 1, 0).is_some(), "the latest is kept");
    }

    #[test]
    fn headers_follow_rfc_5019() {
        let h = CacheHeaders::new("\"abc\"", &Freshness { this_update: 0, next_update: 86_400, max_age_cap: 3600 });
        assert_eq!(h.last_modified, "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(h.expires, "Fri, 02 Jan 1970 00:00:00 GMT");
        assert_eq!(h.capped.unwrap(), "max-age=3600, public, no-transform, must-revalidate");
        assert_eq!(h.etag.unwrap(), "\"abc\"");
        let f = Freshness { this_update: 0, next_update: 100, max_age_cap: 3600 };
        assert_eq!(f.max_age(40), 60, "never past nextUpdate");
        assert_eq!(f.max_age(200), 0);
    }
}
