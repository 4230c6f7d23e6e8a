//! Shared daemon plumbing: config, logging, sd_notify, socket activation, signals, HTTP scaffold, metrics.
