//! An LDAP directory as a user source (FreeIPA-style): sign-in binds as the
//! user (RFC 4513 §5.1.3 simple bind), then reads, as that user, its
//! display name and email and the names of the groups it is a member of.
//!
//! Nothing is cached between sign-ins: each opens a connection, and the
//! whole exchange is bounded by `timeout_ms`. A wrong password is
//! [`LoginError::Refused`]; anything else that goes wrong (no answer, a
//! refused connection, a TLS failure, an unexpected result code) is
//! [`LoginError::Unavailable`].

use std::time::Duration;

use ldap3::{dn_escape, ldap_escape, LdapConnAsync, LdapConnSettings, LdapError, Scope, SearchEntry};

use crate::config::LdapConfig;
use crate::users::LoginError;

/// LDAP result codes (RFC 4511 Appendix A.1) that mean "these credentials do
/// not sign in": inappropriateAuthentication, invalidCredentials,
/// unwillingToPerform (e.g. a locked account).
const REFUSED_CODES: [u32; 3] = [48, 49, 53];
/// noSuchObject: a search base that is not there is an empty answer.
const NO_SUCH_OBJECT: u32 = 32;

/// What the directory says of a user who bound.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirectoryUser {
    /// The display name (`name_attribute`), when it has an acceptable one.
    pub name: Option<String>,
    /// The email (`email_attribute`), when it has an acceptable one.
    pub email: Option<String>,
    /// The groups' names (`group_attribute`) that are acceptable group names.
    pub groups: Vec<String>,
}

/// A configured directory.
#[derive(Clone)]
pub struct Ldap {
    config: LdapConfig,
    /// The TLS connector with `ca_file`'s certificates, when there is one.
    connector: Option<native_tls::TlsConnector>,
}

impl std::fmt::Debug for Ldap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ldap").field("url", &self.config.url).finish_non_exhaustive()
    }
}

impl Ldap {
    /// The directory of `[ldap]`, with `ca_file` read.
    pub fn new(config: &LdapConfig) -> Result<Self, String> {
        config.check()?;
        let connector = match &config.ca_file {
            None => None,
            Some(path) => {
                let pem = std::fs::read(path).map_err(|e| format!("ldap.ca_file {}: {e}", path.display()))?;
                let mut builder = native_tls::TlsConnector::builder();
                let mut any = false;
                for block in pem_blocks(&pem) {
                    let cert = native_tls::Certificate::from_pem(block.as_bytes())
                        .map_err(|e| format!("ldap.ca_file {}: {e}", path.display()))?;
                    builder.add_root_certificate(cert);
                    any = true;
                }
                if !any {
                    return Err(format!("ldap.ca_file {}: no PEM certificate in it", path.display()));
                }
                Some(builder.build().map_err(|e| format!("ldap.ca_file {}: {e}", path.display()))?)
            }
        };
        Ok(Self { config: config.clone(), connector })
    }

    /// The user's DN: `user_dn` with `{user}` replaced by the RFC 4514-escaped name.
    pub fn user_dn(&self, user: &str) -> String {
        self.config.user_dn.replace("{user}", &dn_escape(user))
    }

    /// The group search filter for a user: `{dn}` and `{user}` RFC 4515-escaped.
    pub fn group_filter(&self, dn: &str, user: &str) -> String {
        self.config.group_filter.replace("{dn}", &ldap_escape(dn)).replace("{user}", &ldap_escape(user))
    }

    /// Binds as `user` with `password` and reads what the directory says of
    /// it, within `timeout_ms`. The name must already be a valid user name.
    pub async fn authenticate(&self, user: &str, password: &str) -> Result<DirectoryUser, LoginError> {
        // An empty password would be an unauthenticated bind (RFC 4513
        // §5.1.2), which servers answer with success.
        if password.is_empty() || password.len() > crate::users::MAX_PASSWORD {
            return Err(LoginError::Refused);
        }
        let limit = Duration::from_millis(self.config.timeout_ms);
        match tokio::time::timeout(limit, self.exchange(user, password, limit)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(LoginError::Unavailable(format!(
                "LDAP {}: no answer within {} ms",
                self.config.url, self.config.timeout_ms
            ))),
        }
    }

    /// [`Ldap::authenticate`] from a blocking thread (where
    /// [`crate::users::authenticate`] runs): on the current runtime when
    /// there is one, else on a small one of its own.
    pub fn authenticate_blocking(&self, user: &str, password: &str) -> Result<DirectoryUser, LoginError> {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle.block_on(self.authenticate(user, password)),
            Err(_) => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| LoginError::Unavailable(format!("a runtime for LDAP: {e}")))?
                .block_on(self.authenticate(user, password)),
        }
    }

    async fn exchange(&self, user: &str, password: &str, limit: Duration) -> Result<DirectoryUser, LoginError> {
        let url = &self.config.url;
        let down = |what: &str, e: LdapError| LoginError::Unavailable(format!("LDAP {url}: {what}: {e}"));
        let mut settings = LdapConnSettings::new().set_conn_timeout(limit).set_starttls(self.config.starttls);
        if let Some(connector) = &self.connector {
            settings = settings.set_connector(connector.clone());
        }
        let (conn, mut ldap) = LdapConnAsync::with_settings(settings, url).await.map_err(|e| down("connect", e))?;
        ldap3::drive!(conn);
        let dn = self.user_dn(user);
        let bound = ldap.simple_bind(&dn, password).await.map_err(|e| down("bind", e))?;
        if REFUSED_CODES.contains(&bound.rc) {
            tracing::debug!(dn = %dn, rc = bound.rc, "LDAP bind refused");
            return Err(LoginError::Refused);
        }
        if bound.rc != 0 {
            return Err(LoginError::Unavailable(format!("LDAP {url}: bind as {dn}: {bound}")));
        }
        let c = &self.config;
        let mut out = DirectoryUser::default();
        let attrs = [c.name_attribute.as_str(), c.email_attribute.as_str()];
        for entry in self.search(&mut ldap, &dn, Scope::Base, "(objectClass=*)", &attrs).await? {
            let first = |a: &str| entry.attrs.get(a).and_then(|v| v.first()).cloned();
            out.name = first(&c.name_attribute).filter(|n| acceptable_name(n));
            out.email = first(&c.email_attribute).filter(|e| crate::admin::check_email(e).is_ok());
        }
        if let Some(base) = &c.base_dn {
            let filter = self.group_filter(&dn, user);
            for entry in self.search(&mut ldap, base, Scope::Subtree, &filter, &[c.group_attribute.as_str()]).await? {
                let Some(g) = entry.attrs.get(&c.group_attribute).and_then(|v| v.first()) else { continue };
                if crate::admin::check_groups(std::slice::from_ref(g)).is_err() {
                    tracing::debug!(group = %g, "an LDAP group whose name tokend does not accept is left out");
                } else if !out.groups.contains(g) && out.groups.len() < crate::admin::MAX_LIST {
                    out.groups.push(g.clone());
                }
            }
        }
        let _ = ldap.unbind().await;
        Ok(out)
    }

    async fn search(
        &self,
        ldap: &mut ldap3::Ldap,
        base: &str,
        scope: Scope,
        filter: &str,
        attrs: &[&str],
    ) -> Result<Vec<SearchEntry>, LoginError> {
        let url = &self.config.url;
        let found = ldap
            .search(base, scope, filter, attrs.to_vec())
            .await
            .map_err(|e| LoginError::Unavailable(format!("LDAP {url}: search {base} {filter}: {e}")))?;
        match found.1.rc {
            0 => Ok(found.0.into_iter().map(SearchEntry::construct).collect()),
            NO_SUCH_OBJECT => Ok(Vec::new()),
            _ => Err(LoginError::Unavailable(format!("LDAP {url}: search {base} {filter}: {}", found.1))),
        }
    }
}

/// A display name tokend keeps: what `signetctl oauth user` would accept.
fn acceptable_name(name: &str) -> bool {
    !name.is_empty() && name.chars().count() <= crate::admin::MAX_NAME && !name.chars().any(char::is_control)
}

/// The PEM blocks of a file of certificates, each with its armor.
fn pem_blocks(pem: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(pem);
    let mut out = Vec::new();
    let mut rest = text.as_ref();
    while let Some(start) = rest.find("-----BEGIN CERTIFICATE-----") {
        let Some(len) = rest[start..].find("-----END CERTIFICATE-----") else { break };
        let end = start + len + "-----END CERTIFICATE-----".len();
        out.push(rest[start..end].to_owned());
        rest = &rest[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ldap(extra: &str) -> Ldap {
        let text =
            format!("url = \"ldap://127.0.0.1:1\"\nuser_dn = \"uid={{user}},cn=users,dc=example,dc=net\"\n{extra}");
        Ldap::new(&toml::from_str(&text).unwrap()).unwrap()
    }

    #[test]
    fn names_are_escaped_in_dns_rfc4514() {
        let l = ldap("");
        assert_eq!(l.user_dn("alice"), "uid=alice,cn=users,dc=example,dc=net");
        assert_eq!(l.user_dn("a.b@c-d_e"), "uid=a.b@c-d_e,cn=users,dc=example,dc=net");
        // Not valid user names, but the escaping must hold for any value.
        assert_eq!(l.user_dn("x,cn=admins"), "uid=x\\2ccn\\3dadmins,cn=users,dc=example,dc=net");
        assert_eq!(l.user_dn("a+b\"c\\d<e>f;g"), "uid=a\\2bb\\22c\\5cd\\3ce\\3ef\\3bg,cn=users,dc=example,dc=net");
        assert_eq!(l.user_dn("#lead "), "uid=\\23lead\\20,cn=users,dc=example,dc=net");
        assert_eq!(l.user_dn(" x"), "uid=\\20x,cn=users,dc=example,dc=net");
    }

    #[test]
    fn values_are_escaped_in_filters_rfc4515() {
        let l = ldap("group_filter = \"(&(objectClass=groupOfNames)(|(member={dn})(memberUid={user})))\"");
        assert_eq!(
            l.group_filter("uid=alice,dc=x", "alice"),
            "(&(objectClass=groupOfNames)(|(member=uid=alice,dc=x)(memberUid=alice)))"
        );
        assert_eq!(
            l.group_filter("uid=a*)(x=\\,dc=x", "a*)(\0"),
            "(&(objectClass=groupOfNames)(|(member=uid=a\\2a\\29\\28x=\\5c,dc=x)(memberUid=a\\2a\\29\\28\\00)))"
        );
    }

    #[test]
    fn an_empty_password_never_binds() {
        // The port is closed: reaching the network would be Unavailable, not Refused.
        let l = ldap("");
        assert!(matches!(l.authenticate_blocking("alice", ""), Err(LoginError::Refused)));
        assert!(matches!(l.authenticate_blocking("alice", "pw"), Err(LoginError::Unavailable(_))));
    }

    #[test]
    fn a_silent_directory_times_out() {
        // A listener that accepts and never answers.
        let quiet = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = quiet.local_addr().unwrap().port();
        let text = format!("url = \"ldap://127.0.0.1:{port}\"\nuser_dn = \"uid={{user}},dc=x\"\ntimeout_ms = 300");
        let l = Ldap::new(&toml::from_str(&text).unwrap()).unwrap();
        let t = std::time::Instant::now();
        let e = l.authenticate_blocking("alice", "pw");
        assert!(matches!(&e, Err(LoginError::Unavailable(why)) if why.contains("300 ms")), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        drop(quiet);
    }

    #[test]
    fn pem_blocks_are_split() {
        let two = "junk\n-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n\
                   -----BEGIN CERTIFICATE-----\nBB==\n-----END CERTIFICATE-----\n";
        let blocks = pem_blocks(two.as_bytes());
        assert_eq!(blocks.len(), 2);
        assert!(blocks[1].contains("BB=="));
        assert!(pem_blocks(b"nothing").is_empty());
    }
}
