//! CAA (RFC 8659, with the RFC 8657 `accounturi` and `validationmethods`
//! parameters) and dns-persist-01 records, as pure decisions over records the
//! caller looked up.
//!
//! The caller climbs the DNS tree (the name, then each parent) and hands over
//! the first non-empty CAA RRset it finds; [`check`] decides. Both CAA
//! `issue` values and dns-persist-01 TXT records use the grammar
//! `[issuer-domain-name] *(";" key "=" value)` that [`IssuerValue::parse`] reads.

use crate::problem::{AcmeError, ProblemType};

/// One CAA record as looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaaRecord {
    /// The issuer-critical flag (bit 0 of the flags octet, i.e. 128).
    pub critical: bool,
    /// The property tag (`issue`, `issuewild`, `iodef`, ...), any case.
    pub tag: String,
    /// The property value, as text.
    pub value: String,
}

/// An `issue`/`issuewild` value or a dns-persist-01 record: an issuer domain
/// name (empty when the value starts with `;`) and its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerValue {
    /// The issuer domain name, lowercased, without a trailing dot.
    pub domain: String,
    /// `key=value` parameters in order, keys lowercased.
    pub params: Vec<(String, String)>,
}

impl IssuerValue {
    /// Parses `name; key=value; ...` (whitespace around tokens allowed).
    /// `None` when the syntax is broken: RFC 8659 §4.2 treats such a record
    /// as one that does not authorise this CA.
    pub fn parse(value: &str) -> Option<IssuerValue> {
        let mut parts = value.split(';');
        let domain = parts.next()?.trim().trim_end_matches('.').to_ascii_lowercase();
        if !domain.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') {
            return None;
        }
        let mut params = Vec::new();
        for p in parts {
            let p = p.trim();
            if p.is_empty() {
                continue;
            }
            let (k, v) = p.split_once('=')?;
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty()
                || !k.chars().all(|c| c.is_ascii_alphanumeric())
                || v.chars().any(|c| c.is_whitespace() || c == ';')
            {
                return None;
            }
            params.push((k.to_ascii_lowercase(), v.to_owned()));
        }
        Some(IssuerValue { domain, params })
    }

    /// The value of parameter `key`, if present.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Whether this names one of `identities` and its RFC 8657 parameters
    /// admit `account_uri` validating with `method`.
    fn admits(&self, identities: &[String], account_uri: &str, method: &str) -> bool {
        if self.domain.is_empty()
            || !identities.iter().any(|i| i.trim_end_matches('.').eq_ignore_ascii_case(&self.domain))
        {
            return false;
        }
        if let Some(uri) = self.param("accounturi") {
            if uri != account_uri {
                return false;
            }
        }
        if let Some(methods) = self.param("validationmethods") {
            if !methods.split(',').any(|m| m.trim() == method) {
                return false;
            }
        }
        true
    }
}

/// Decides whether the relevant CAA RRset lets this CA (known by
/// `identities`) issue for a name, for `account_uri` validating with
/// `method` (e.g. `http-01`). `wildcard` selects `issuewild` when present.
/// An empty RRset allows issuance. The refusal is a `caa` problem.
pub fn check(
    records: &[CaaRecord],
    identities: &[String],
    wildcard: bool,
    account_uri: &str,
    method: &str,
) -> Result<(), AcmeError> {
    let known = ["issue", "issuewild", "iodef", "issuemail", "issuevmc", "contactemail", "contactphone"];
    if let Some(r) = records.iter().find(|r| r.critical && !known.iter().any(|k| r.tag.eq_ignore_ascii_case(k))) {
        return Err(AcmeError::new(ProblemType::Caa, format!("CAA record with unknown critical property {:?}", r.tag)));
    }
    let of = |tag: &str| records.iter().filter(|r| r.tag.eq_ignore_ascii_case(tag)).collect::<Vec<_>>();
    let issuewild = of("issuewild");
    let relevant = if wildcard && !issuewild.is_empty() { issuewild } else { of("issue") };
    if relevant.is_empty() {
        return Ok(());
    }
    if relevant.iter().any(|r| IssuerValue::parse(&r.value).is_some_and(|v| v.admits(identities, account_uri, method)))
    {
        return Ok(());
    }
    let property = if wildcard && !of("issuewild").is_empty() { "issuewild" } else { "issue" };
    Err(AcmeError::new(
        ProblemType::Caa,
        format!(
            "CAA {property} records do not authorise {} for this account and method {method}",
            identities.first().map(String::as_str).unwrap_or("this CA")
        ),
    ))
}

/// Decides whether a dns-persist-01 TXT record (draft-ietf-acme-dns-persist)
/// authorises `account_uri`: it names one of `identities`, its `accounturi`
/// equals the account URL, `policy=wildcard` is present for a wildcard, and
/// `persistUntil` (Unix seconds), when present, is not past `now`.
pub fn persist_record_admits(txt: &str, identities: &[String], account_uri: &str, wildcard: bool, now: i64) -> bool {
    let Some(v) = IssuerValue::parse(txt) else { return false };
    if v.domain.is_empty() || !identities.iter().any(|i| i.eq_ignore_ascii_case(&v.domain)) {
        return false;
    }
    if v.param("accounturi") != Some(account_uri) {
        return false;
    }
    if wildcard && !v.param("policy").is_some_and(|p| p.eq_ignore_ascii_case("wildcard")) {
        return false;
    }
    match v.param("persistuntil") {
        None => true,
        Some(t) => t.parse::<i64>().is_ok_and(|t| t >= now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(tag: &str, value: &str) -> CaaRecord {
        CaaRecord { critical: false, tag: tag.into(), value: value.into() }
    }
    const ME: &str = "signet.test";
    const ACCT: &str = "https://ca/acme/acct/1";

    fn ids() -> Vec<String> {
        vec![ME.into()]
    }

    #[test]
    fn no_records_or_only_iodef_allow() {
        assert!(check(&[], &ids(), false, ACCT, "http-01").is_ok());
        assert!(check(&[rec("iodef", "mailto:x@y")], &ids(), false, ACCT, "http-01").is_ok());
    }

    #[test]
    fn issue_must_name_this_ca() {
        assert!(check(&[rec("issue", "signet.test")], &ids(), false, ACCT, "http-01").is_ok());
        assert!(check(&[rec("issue", "SIGNET.test.")], &ids(), false, ACCT, "http-01").is_ok());
        let e = check(&[rec("issue", "other.example")], &ids(), false, ACCT, "http-01").unwrap_err();
        assert_eq!(e.kind, ProblemType::Caa);
        assert!(check(&[rec("issue", ";")], &ids(), false, ACCT, "http-01").is_err());
        assert!(
            check(&[rec("issue", "other.example"), rec("issue", "signet.test")], &ids(), false, ACCT, "dns-01").is_ok()
        );
    }

    #[test]
    fn wildcards_use_issuewild_when_present() {
        let rs = [rec("issue", "signet.test"), rec("issuewild", ";")];
        assert!(check(&rs, &ids(), false, ACCT, "dns-01").is_ok());
        assert!(check(&rs, &ids(), true, ACCT, "dns-01").is_err());
        assert!(check(&[rec("issue", "signet.test")], &ids(), true, ACCT, "dns-01").is_ok());
    }

    #[test]
    fn rfc8657_parameters_restrict() {
        let bound = [rec("issue", &format!("signet.test; accounturi={ACCT}"))];
        assert!(check(&bound, &ids(), false, ACCT, "http-01").is_ok());
        assert!(check(&bound, &ids(), false, "https://ca/acme/acct/2", "http-01").is_err());
        let methods = [rec("issue", "signet.test; validationmethods=dns-01,tls-alpn-01")];
        assert!(check(&methods, &ids(), false, ACCT, "dns-01").is_ok());
        assert!(check(&methods, &ids(), false, ACCT, "tls-alpn-01").is_ok());
        assert!(check(&methods, &ids(), false, ACCT, "http-01").is_err());
    }

    #[test]
    fn unknown_critical_property_forbids() {
        let rs = [CaaRecord { critical: true, tag: "future".into(), value: "x".into() }, rec("issue", "signet.test")];
        assert!(check(&rs, &ids(), false, ACCT, "http-01").is_err());
        let rs = [CaaRecord { critical: false, tag: "future".into(), value: "x".into() }, rec("issue", "signet.test")];
        assert!(check(&rs, &ids(), false, ACCT, "http-01").is_ok());
    }

    #[test]
    fn broken_values_do_not_authorise() {
        assert_eq!(IssuerValue::parse("signet.test; accounturi"), None);
        assert_eq!(IssuerValue::parse("sig net.test"), None);
        assert!(check(&[rec("issue", "signet.test; =x")], &ids(), false, ACCT, "http-01").is_err());
        let v = IssuerValue::parse(" signet.test ; a=1;b=2 ").unwrap();
        assert_eq!(v.domain, "signet.test");
        assert_eq!(v.param("b"), Some("2"));
    }

    #[test]
    fn persist_records() {
        let good = format!("signet.test; accounturi={ACCT}");
        assert!(persist_record_admits(&good, &ids(), ACCT, false, 0));
        assert!(!persist_record_admits(&good, &ids(), ACCT, true, 0));
        assert!(persist_record_admits(&format!("{good}; policy=wildcard"), &ids(), ACCT, true, 0));
        assert!(!persist_record_admits(&good, &ids(), "https://ca/acme/acct/9", false, 0));
        assert!(!persist_record_admits("other.example; accounturi=x", &ids(), "x", false, 0));
        assert!(!persist_record_admits("signet.test", &ids(), ACCT, false, 0));
        assert!(persist_record_admits(&format!("{good}; persistUntil=100"), &ids(), ACCT, false, 100));
        assert!(!persist_record_admits(&format!("{good}; persistUntil=100"), &ids(), ACCT, false, 101));
    }
}
