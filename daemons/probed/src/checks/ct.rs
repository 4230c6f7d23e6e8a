//! CT log health.

use super::{Probed, Report};
use crate::config::CheckConfig;

/// A prepared CT check.
#[derive(Debug)]
pub struct CtProbe {}

impl CtProbe {
    /// Prepares the check.
    pub fn new(_c: &CheckConfig) -> Result<CtProbe, String> {
        Ok(CtProbe {})
    }

    /// One look at the log.
    pub async fn run(&self) -> Probed {
        Err(Report::msg("not implemented"))
    }
}
