//! PKI checks: a certificate's OCSP status, a CRL's freshness.

use super::{Probed, Report};
use crate::config::CheckConfig;

/// A prepared OCSP check.
#[derive(Debug)]
pub struct OcspProbe {}

impl OcspProbe {
    /// Prepares the check.
    pub fn new(_c: &CheckConfig) -> Result<OcspProbe, String> {
        Ok(OcspProbe {})
    }

    /// One request.
    pub async fn run(&self) -> Probed {
        Err(Report::msg("not implemented"))
    }
}

/// A prepared CRL check.
#[derive(Debug)]
pub struct CrlProbe {}

impl CrlProbe {
    /// Prepares the check.
    pub fn new(_c: &CheckConfig) -> Result<CrlProbe, String> {
        Ok(CrlProbe {})
    }

    /// One fetch.
    pub async fn run(&self) -> Probed {
        Err(Report::msg("not implemented"))
    }
}
