//! notBefore/notAfter requested in newOrder (RFC 8555 §7.4): what a client may
//! ask for, checked when the order is created and again when it is finalized.
//! Pure functions over an injected clock.
//!
//! A request is accepted when:
//! - both times are whole seconds (X.509 times have no fractions);
//! - the validity period, `notAfter - notBefore + 1 s` (RFC 5280 counts both
//!   ends), is at most the order profile's `validity_seconds`, or the CA
//!   profile's maximum when the order profile names none (never more than it);
//! - notBefore lies within what signd's Issuer role signs: at most the CA
//!   profile's backdating plus 5 minutes of clock skew in the past, and at
//!   most 5 minutes in the future (signet-ca's `IssuerPolicy`), less
//!   [`SIGNING_MARGIN`] on each side. A certificate dated further ahead is
//!   not issued: the Issuer role would refuse it;
//! - notAfter is after notBefore and not yet past.
//!
//! With notBefore alone, notAfter is notBefore plus the profile's validity;
//! with notAfter alone, notBefore is the issuance time (backdated as the CA
//! profile says), as for an order without either. At finalize the same checks
//! run again with the clock then: an order whose notBefore has meanwhile
//! fallen too far into the past, or whose notAfter has passed, cannot be
//! issued and becomes invalid (the client orders again).

use std::time::Duration;

use signet_acme::{Problem, ProblemType};
use signet_ca::{Issuer, IssuerPolicy, Profile};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Room left between acmed's check and signd's (the time the request takes
/// from acmed to signd, and the two clocks): acmed accepts a notBefore this
/// much closer to now than signd would.
pub const SIGNING_MARGIN: Duration = Duration::from_secs(60);

/// The limits for orders of one profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// The profile's name (for the problem details).
    pub profile: String,
    /// The longest validity period, seconds (inclusive of both ends).
    pub max_validity: u64,
    /// The validity given when only notBefore is requested, seconds.
    pub default_validity: u64,
    /// How far before the issuance time notBefore is set when not requested.
    pub backdate: u64,
    /// How far notBefore may lie in the past, seconds.
    pub max_past: u64,
    /// How far notBefore may lie in the future, seconds.
    pub max_future: u64,
}

impl Bounds {
    /// The bounds for acmed profile `name` (whose `validity_seconds` is `validity`) under the
    /// CA profile `ca` of `issuer`, as signd's Issuer role will check them.
    pub fn new(name: &str, validity: Option<u64>, ca: &Profile, issuer: &Issuer) -> Bounds {
        let policy = IssuerPolicy::from_profile(ca, issuer.clone());
        let ca_max = ca.max_validity_seconds;
        let ca_default = ca.default_validity_seconds.unwrap_or(ca_max);
        Bounds {
            profile: name.to_owned(),
            max_validity: validity.unwrap_or(ca_max).min(ca_max),
            default_validity: validity.unwrap_or(ca_default).min(ca_max),
            backdate: ca.backdate_seconds,
            max_past: policy.max_backdate.saturating_sub(SIGNING_MARGIN).as_secs(),
            max_future: policy.max_forward.saturating_sub(SIGNING_MARGIN).as_secs(),
        }
    }
}

/// The requested times as Unix seconds; fractions of a second are refused.
pub fn requested(
    not_before: Option<OffsetDateTime>,
    not_after: Option<OffsetDateTime>,
) -> Result<(Option<i64>, Option<i64>), Problem> {
    let whole = |t: Option<OffsetDateTime>, what: &str| match t {
        Some(t) if t.nanosecond() != 0 => {
            Err(malformed(format!("{what} must be a whole second (certificate times have no fractions)")))
        }
        t => Ok(t.map(OffsetDateTime::unix_timestamp)),
    };
    Ok((whole(not_before, "notBefore")?, whole(not_after, "notAfter")?))
}

/// The exact validity to issue with at `now`: `None` when neither time was
/// requested (the profile's default applies), else (notBefore, notAfter).
pub fn resolve(
    not_before: Option<i64>,
    not_after: Option<i64>,
    b: &Bounds,
    now: i64,
) -> Result<Option<(i64, i64)>, Problem> {
    if not_before.is_none() && not_after.is_none() {
        return Ok(None);
    }
    if let Some(nb) = not_before {
        let (earliest, latest) = (now - b.max_past as i64, now + b.max_future as i64);
        if nb < earliest || nb > latest {
            return Err(malformed(format!(
                "notBefore {} is outside what this CA issues now: from {} to {} ({} s in the past to {} s in the future)",
                rfc3339(nb),
                rfc3339(earliest),
                rfc3339(latest),
                b.max_past,
                b.max_future,
            )));
        }
    }
    let nb = not_before.unwrap_or(now - b.backdate as i64);
    let na = not_after.unwrap_or(nb.saturating_add(b.default_validity as i64 - 1));
    if na < nb {
        return Err(malformed(format!("notAfter {} is before notBefore {}", rfc3339(na), rfc3339(nb))));
    }
    if na <= now {
        return Err(malformed(format!("notAfter {} has already passed", rfc3339(na))));
    }
    let period = (na - nb) as u64 + 1;
    if period > b.max_validity {
        return Err(malformed(format!(
            "the requested validity is {period} s (notAfter - notBefore + 1 s); profile {} allows at most {} s (notAfter up to {} for notBefore {})",
            b.profile,
            b.max_validity,
            rfc3339(nb.saturating_add(b.max_validity as i64 - 1)),
            rfc3339(nb),
        )));
    }
    Ok(Some((nb, na)))
}

fn malformed(detail: String) -> Problem {
    Problem::new(ProblemType::Malformed, detail)
}

fn rfc3339(secs: i64) -> String {
    OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| secs.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const NOW: i64 = 1_780_000_000;

    fn bounds() -> Bounds {
        Bounds {
            profile: "classic".into(),
            max_validity: 90 * 86_400,
            default_validity: 60 * 86_400,
            backdate: 3600,
            max_past: 3840,
            max_future: 240,
        }
    }

    fn check(nb: Option<i64>, na: Option<i64>) -> Result<Option<(i64, i64)>, String> {
        resolve(nb, na, &bounds(), NOW).map_err(|p| p.detail.unwrap_or_default())
    }

    #[test]
    fn windows_within_the_profile_are_kept_exactly() {
        assert_eq!(check(None, None), Ok(None));
        assert_eq!(check(Some(NOW), Some(NOW + 86_400)), Ok(Some((NOW, NOW + 86_400))));
        // The whole maximum, and the edges of the notBefore range.
        assert_eq!(check(Some(NOW), Some(NOW + 90 * 86_400 - 1)), Ok(Some((NOW, NOW + 90 * 86_400 - 1))));
        assert!(check(Some(NOW - 3840), Some(NOW + 1)).is_ok());
        assert!(check(Some(NOW + 240), Some(NOW + 241)).is_ok());
        // One side only: the other as without a request.
        assert_eq!(check(Some(NOW + 60), None), Ok(Some((NOW + 60, NOW + 60 + 60 * 86_400 - 1))));
        assert_eq!(check(None, Some(NOW + 7 * 86_400)), Ok(Some((NOW - 3600, NOW + 7 * 86_400))));
    }

    #[test]
    fn what_the_profile_does_not_allow_is_refused_with_the_limits() {
        let e = check(Some(NOW), Some(NOW + 90 * 86_400)).unwrap_err();
        assert!(e.contains("7776001 s") && e.contains("profile classic allows at most 7776000 s"), "{e}");
        let e = check(None, Some(NOW + 90 * 86_400)).unwrap_err();
        assert!(e.contains("allows at most"), "{e}");
        let e = check(Some(NOW - 3841), Some(NOW + 60)).unwrap_err();
        assert!(e.contains("3840 s in the past to 240 s in the future"), "{e}");
        assert!(check(Some(NOW + 241), None).unwrap_err().contains("outside"));
        assert!(check(Some(NOW + 365 * 86_400), None).is_err());
        let e = check(Some(NOW + 100), Some(NOW + 50)).unwrap_err();
        assert!(e.contains("before notBefore"), "{e}");
        let e = check(Some(NOW - 100), Some(NOW - 1)).unwrap_err();
        assert!(e.contains("already passed"), "{e}");
        // At finalize a day later, the same order no longer fits.
        assert!(resolve(Some(NOW), Some(NOW + 86_400 * 2), &bounds(), NOW + 86_400)
            .unwrap_err()
            .detail
            .unwrap()
            .contains("outside"));
    }

    #[test]
    fn fractions_of_a_second_are_refused() {
        let t = |s: &str| Some(OffsetDateTime::parse(s, &Rfc3339).unwrap());
        assert_eq!(requested(t("2026-05-28T20:26:40Z"), None).unwrap(), (Some(NOW), None));
        assert_eq!(requested(None, t("2026-05-28T22:26:40+02:00")).unwrap(), (None, Some(NOW)));
        let p = requested(t("2026-05-28T20:26:40.5Z"), None).unwrap_err();
        assert!(p.detail.unwrap().contains("whole second"));
    }

    #[test]
    fn bounds_follow_the_issuer_policy() {
        let mut ca: Profile = toml::from_str(
            "name = \"tls\"\nmax_validity_seconds = 8640000\ndefault_validity_seconds = 7776000\nbackdate_seconds = 3600\n\
             allowed_ekus = [\"server-auth\"]\ndefault_ekus = [\"server-auth\"]\nallowed_key_algorithms = [\"ecdsa-p256\"]\n",
        )
        .unwrap();
        let key = openssl::pkey::PKey::from_ec_key(
            openssl::ec::EcKey::generate(
                &openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        let issuer = Issuer::new(
            "CN=CA".parse().unwrap(),
            &key.public_key_to_der().unwrap(),
            signet_ipc::SignatureScheme::Default,
        )
        .unwrap();
        let b = Bounds::new("short", Some(518_400), &ca, &issuer);
        assert_eq!(
            (b.max_validity, b.default_validity, b.backdate, b.max_past, b.max_future),
            (518_400, 518_400, 3600, 3840, 240)
        );
        let b = Bounds::new("classic", None, &ca, &issuer);
        assert_eq!((b.max_validity, b.default_validity), (8_640_000, 7_776_000));
        ca.max_validity_seconds = 86_400;
        assert_eq!(Bounds::new("short", Some(518_400), &ca, &issuer).max_validity, 86_400);
    }
}
