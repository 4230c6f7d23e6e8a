//! SystemTime <-> X.509 / OCSP time, at whole seconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use der::asn1::{GeneralizedTime, UtcTime};
use der::DateTime;
use x509_cert::time::Time;
use x509_ocsp::OcspGeneralizedTime;

use crate::CaError;

/// Drops sub-second precision (X.509 times have whole seconds).
pub(crate) fn whole_seconds(t: SystemTime) -> Result<SystemTime, CaError> {
    let d = t.duration_since(UNIX_EPOCH).map_err(|_| CaError::TimeOutOfRange)?;
    Ok(UNIX_EPOCH + Duration::from_secs(d.as_secs()))
}

fn date_time(t: SystemTime) -> Result<DateTime, CaError> {
    let d = t.duration_since(UNIX_EPOCH).map_err(|_| CaError::TimeOutOfRange)?;
    DateTime::from_unix_duration(Duration::from_secs(d.as_secs())).map_err(|_| CaError::TimeOutOfRange)
}

/// RFC 5280 4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050.
pub(crate) fn x509_time(t: SystemTime) -> Result<Time, CaError> {
    let dt = date_time(t)?;
    if dt.year() < 2050 {
        Ok(Time::UtcTime(UtcTime::from_date_time(dt).map_err(|_| CaError::TimeOutOfRange)?))
    } else {
        Ok(Time::GeneralTime(GeneralizedTime::from_date_time(dt)))
    }
}

/// OCSP times are always GeneralizedTime.
pub(crate) fn ocsp_time(t: SystemTime) -> Result<OcspGeneralizedTime, CaError> {
    Ok(OcspGeneralizedTime(GeneralizedTime::from_date_time(date_time(t)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_before_2050_generalized_after() {
        let t2049 = UNIX_EPOCH + Duration::from_secs(2_524_607_999); // 2049-12-31T23:59:59Z
        assert!(matches!(x509_time(t2049).unwrap(), Time::UtcTime(_)));
        let t2050 = t2049 + Duration::from_secs(1);
        assert!(matches!(x509_time(t2050).unwrap(), Time::GeneralTime(_)));
        assert_eq!(x509_time(t2050).unwrap().to_system_time(), t2050);
    }
}
