//! Webhook alerts: a POST on each state change (`down`, `resolved`) and, while a check stays
//! down, a `reminder` every `repeat`. Each webhook has one sender task and a queue, so its
//! alerts arrive in the order the changes happened; a failed POST is retried three times.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;

use crate::checks::http::{client, fetch, HttpClient};
use crate::config::{HttpVersion, WebhookConfig, WebhookFormat};

/// Alerts queued per webhook before new ones are dropped (and logged).
const QUEUE: usize = 1024;

/// What happened to a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// It went down.
    Down,
    /// It came back up after being down.
    Resolved,
    /// It is still down.
    Reminder,
}

/// One alert.
#[derive(Clone, Debug, Serialize)]
pub struct Event {
    /// The check's name.
    pub check: String,
    /// Its kind (`http`, `ocsp`, ...).
    pub kind: &'static str,
    /// What happened.
    pub event: EventKind,
    /// The state now: `down` or `up`.
    pub state: &'static str,
    /// The last run's message.
    pub message: String,
    /// Unix time (s) of the run that caused the alert.
    pub time: u64,
    /// Unix time (s) since the check is in its state.
    pub since: u64,
}

impl Event {
    /// The body posted to a webhook of `format`.
    pub fn body(&self, format: WebhookFormat) -> Vec<u8> {
        let value = match format {
            WebhookFormat::Json => serde_json::to_value(self),
            WebhookFormat::Slack => {
                let text = match self.event {
                    EventKind::Down => format!(":red_circle: *{}* is DOWN: {}", self.check, self.message),
                    EventKind::Resolved => {
                        format!(":large_green_circle: *{}* is up again: {}", self.check, self.message)
                    }
                    EventKind::Reminder => format!(":red_circle: *{}* is still DOWN: {}", self.check, self.message),
                };
                Ok(serde_json::json!({ "text": text }))
            }
        };
        value.map(|v| v.to_string().into_bytes()).unwrap_or_default()
    }
}

/// The webhooks of the current config.
#[derive(Debug)]
pub struct Alerts {
    hooks: Vec<Hook>,
}

#[derive(Debug)]
struct Hook {
    checks: Vec<String>,
    repeat: Duration,
    tx: mpsc::Sender<Event>,
    /// Unix ms of the last alert per check, for reminders.
    last: Mutex<HashMap<String, u64>>,
}

impl Alerts {
    /// Starts a sender task per webhook (they end when this is dropped).
    pub fn start(hooks: &[WebhookConfig]) -> Result<Alerts, String> {
        let mut out = Vec::new();
        for (i, hook) in hooks.iter().enumerate() {
            let client =
                client(hook.ca_file.as_deref(), HttpVersion::Auto, true).map_err(|e| format!("webhooks[{i}]: {e}"))?;
            let (tx, rx) = mpsc::channel(QUEUE);
            tokio::spawn(deliver(client, hook.url.0.to_string(), hook.format, rx));
            out.push(Hook { checks: hook.checks.clone(), repeat: hook.repeat, tx, last: Mutex::new(HashMap::new()) });
        }
        Ok(Alerts { hooks: out })
    }

    /// No webhooks.
    pub fn none() -> Alerts {
        Alerts { hooks: Vec::new() }
    }

    /// Sends `event` to every webhook that takes its check.
    pub fn send(&self, event: &Event) {
        for hook in self.hooks.iter().filter(|h| h.wants(&event.check)) {
            hook.note(&event.check, event.time * 1000);
            hook.queue(event.clone());
        }
    }

    /// For a check still down after a run at `now_ms` (last alerted at `last_alert_ms` before
    /// a restart): sends a reminder to each webhook whose `repeat` has passed. Returns whether
    /// any was sent.
    pub fn remind(&self, event: &Event, now_ms: u64, last_alert_ms: u64) -> bool {
        let mut sent = false;
        for hook in self.hooks.iter().filter(|h| h.wants(&event.check) && !h.repeat.is_zero()) {
            let last = {
                let map = hook.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                map.get(&event.check).copied().unwrap_or(last_alert_ms)
            };
            if now_ms.saturating_sub(last) >= hook.repeat.as_millis() as u64 {
                hook.note(&event.check, now_ms);
                hook.queue(event.clone());
                sent = true;
            }
        }
        sent
    }
}

impl Hook {
    fn wants(&self, check: &str) -> bool {
        self.checks.is_empty() || self.checks.iter().any(|c| c == check)
    }

    fn note(&self, check: &str, at_ms: u64) {
        self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(check.to_owned(), at_ms);
    }

    fn queue(&self, event: Event) {
        if self.tx.try_send(event).is_err() {
            tracing::warn!("webhook queue full; alert dropped");
        }
    }
}

async fn deliver(client: HttpClient, url: String, format: WebhookFormat, mut rx: mpsc::Receiver<Event>) {
    while let Some(event) = rx.recv().await {
        let body = event.body(format);
        for attempt in 0..4u32 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_secs(1 << (attempt - 1))).await;
            }
            match fetch(&client, &url, Some(("application/json", body.clone()))).await {
                Ok((status, _)) if (200..300).contains(&status) => {
                    tracing::info!(check = %event.check, event = ?event.event, %url, "alert sent");
                    break;
                }
                Ok((status, _)) => tracing::warn!(%url, status, attempt, "webhook refused the alert"),
                Err(e) => tracing::warn!(%url, error = %e, attempt, "webhook unreachable"),
            }
        }
    }
}
