//! The HTTP side beside the scaffold's `/healthz` and `/metrics`: the status page at `/` (one
//! server-rendered HTML document: inline CSS, inline SVG sparklines, refreshed by
//! `<meta http-equiv=refresh>`; no JavaScript, nothing fetched from elsewhere) and the JSON API
//! (`/api/checks`, `/api/checks/<name>`).

use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde::Serialize;
use signet_runtime::http::Body;
use signet_runtime::http::{html_escape as esc, text_response, Handler};

use crate::scheduler::{Check, Scheduler};

/// One check as the API shows it.
#[derive(Debug, Serialize)]
pub struct CheckView {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: &'static str,
    /// Its description.
    pub description: Option<String>,
    /// `up`, `down` or `unknown`.
    pub state: &'static str,
    /// Unix time (s) since the state holds (0: never decided).
    pub since: u64,
    /// Failed runs in a row.
    pub failures: u32,
    /// Passed runs in a row.
    pub successes: u32,
    /// The last run, if any.
    pub last: Option<RunView>,
    /// Uptime in percent over 24 hours, 7 and 30 days (null: no runs in the window).
    pub uptime: Uptime,
    /// The run interval in seconds.
    pub interval_seconds: f64,
    /// The last run's gauges by metric name.
    pub gauges: serde_json::Map<String, serde_json::Value>,
    /// Recent runs, oldest first.
    pub recent: Vec<RunView>,
}

/// Uptime percentages.
#[derive(Debug, Serialize)]
pub struct Uptime {
    /// Last 24 hours.
    #[serde(rename = "24h")]
    pub day: Option<f64>,
    /// Last 7 days.
    #[serde(rename = "7d")]
    pub week: Option<f64>,
    /// Last 30 days.
    #[serde(rename = "30d")]
    pub month: Option<f64>,
}

/// One run.
#[derive(Debug, Serialize)]
pub struct RunView {
    /// Unix time (ms).
    pub time_ms: u64,
    /// Whether it passed.
    pub ok: bool,
    /// How long it took (s).
    pub duration_seconds: f64,
    /// What was seen or wrong (the last run only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The view of `check` now.
pub fn view(scheduler: &Scheduler, check: &Check) -> CheckView {
    let status = check.status().clone();
    let [day, week, month] = check.uptime(scheduler.history());
    let s = &status.stored;
    CheckView {
        name: check.name.clone(),
        kind: check.config.kind.as_str(),
        description: check.config.description.clone(),
        state: s.state.as_str(),
        since: s.since_ms / 1000,
        failures: s.failures,
        successes: s.successes,
        last: s.last.as_ref().map(|r| RunView {
            time_ms: s.last_run_ms,
            ok: r.ok,
            duration_seconds: r.duration_us as f64 / 1e6,
            message: Some(r.message.clone()),
        }),
        uptime: Uptime { day, week, month },
        interval_seconds: check.schedule.interval.as_secs_f64(),
        gauges: status.gauges.iter().map(|(g, v)| (g.metric().0.to_owned(), serde_json::json!(v))).collect(),
        recent: status
            .recent
            .iter()
            .map(|(t, ok, us)| RunView { time_ms: *t, ok: *ok, duration_seconds: *us as f64 / 1e6, message: None })
            .collect(),
    }
}

/// The handler for everything but `/healthz` and `/metrics`.
pub struct Web {
    scheduler: Arc<Scheduler>,
    refresh_seconds: u32,
}

impl Web {
    /// Serves `scheduler`'s checks; the page refreshes every `refresh_seconds`.
    pub fn new(scheduler: Arc<Scheduler>, refresh_seconds: u32) -> Web {
        Web { scheduler, refresh_seconds }
    }

    fn answer(&self, method: &Method, path: &str) -> Response<Full<Bytes>> {
        if method != Method::GET && method != Method::HEAD {
            return text_response(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        }
        match path {
            "/" | "/index.html" => {
                let views: Vec<CheckView> = self.scheduler.checks().iter().map(|c| view(&self.scheduler, c)).collect();
                let mut resp = Response::new(Full::new(Bytes::from(page(&views, self.refresh_seconds))));
                let h = resp.headers_mut();
                h.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
                h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
                // Nothing but what the page itself carries.
                h.insert(
                    CONTENT_SECURITY_POLICY,
                    HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; img-src data:"),
                );
                resp
            }
            "/api/checks" => {
                let views: Vec<CheckView> = self.scheduler.checks().iter().map(|c| view(&self.scheduler, c)).collect();
                json(StatusCode::OK, &serde_json::json!({ "checks": views }))
            }
            _ => match path.strip_prefix("/api/checks/") {
                Some(name) => {
                    let name = percent_decode(name);
                    match self.scheduler.check(&name) {
                        Some(c) => json(StatusCode::OK, &view(&self.scheduler, &c)),
                        None => json(StatusCode::NOT_FOUND, &serde_json::json!({ "error": "no such check" })),
                    }
                }
                None => text_response(StatusCode::NOT_FOUND, "not found\n"),
            },
        }
    }
}

impl Handler for Web {
    fn handle(&self, req: Request<Body>) -> BoxFuture<'static, Response<Full<Bytes>>> {
        let resp = self.answer(req.method(), req.uri().path());
        Box::pin(async move { resp })
    }
}

fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Full<Bytes>> {
    let body = serde_json::to_vec_pretty(value).unwrap_or_default();
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn pct(p: Option<f64>) -> String {
    p.map_or_else(|| "–".to_owned(), |p| format!("{p:.2}%"))
}

/// An inline SVG sparkline of the recent durations; failed runs are red dots.
fn sparkline(recent: &[RunView]) -> String {
    const W: f64 = 120.0;
    const H: f64 = 24.0;
    if recent.is_empty() {
        return String::new();
    }
    let max = recent.iter().map(|r| r.duration_seconds).fold(0.0_f64, f64::max).max(1e-6);
    let step = if recent.len() > 1 { W / (recent.len() - 1) as f64 } else { 0.0 };
    let point = |i: usize, r: &RunView| (i as f64 * step, H - 2.0 - (r.duration_seconds / max) * (H - 4.0));
    let points: Vec<String> = recent
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (x, y) = point(i, r);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let mut svg = format!(
        "<svg class=\"spark\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\" \
         aria-label=\"latency of the last {} runs\"><polyline fill=\"none\" stroke=\"#4a7\" stroke-width=\"1.5\" \
         points=\"{}\"/>",
        recent.len(),
        points.join(" ")
    );
    for (i, r) in recent.iter().enumerate().filter(|(_, r)| !r.ok) {
        let (x, y) = point(i, r);
        let _ = write!(svg, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2\" fill=\"#c33\"/>");
    }
    svg.push_str("</svg>");
    svg
}

/// The status page.
pub fn page(views: &[CheckView], refresh_seconds: u32) -> String {
    let down = views.iter().filter(|v| v.state == "down").count();
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{refresh_seconds}\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} probed status</title><style>\
         body{{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;background:#fafafa}}\
         h1{{font-size:1.4em}} table{{border-collapse:collapse;width:100%;background:#fff}}\
         th,td{{padding:.4em .6em;border-bottom:1px solid #ddd;text-align:left;vertical-align:middle}}\
         th{{background:#f0f0f0}} .state{{font-weight:bold;border-radius:3px;padding:.1em .5em;color:#fff}}\
         .up{{background:#2a7}} .down{{background:#c33}} .unknown{{background:#888}}\
         .msg{{color:#555;font-size:.9em;max-width:40em;overflow-wrap:anywhere}} .num{{text-align:right}}\
         .summary{{margin:1em 0;font-size:1.1em}}\
         </style></head><body><h1>probed</h1>",
        if down > 0 { format!("({down} down)") } else { String::new() }
    );
    let _ = write!(
        html,
        "<p class=\"summary\" id=\"summary\">{} checks: {} up, {down} down, {} unknown</p>",
        views.len(),
        views.iter().filter(|v| v.state == "up").count(),
        views.iter().filter(|v| v.state == "unknown").count()
    );
    html.push_str(
        "<table><thead><tr><th>Check</th><th>Kind</th><th>State</th><th>Last run</th><th class=\"num\">24 h</th>\
         <th class=\"num\">7 d</th><th class=\"num\">30 d</th><th>Latency</th></tr></thead><tbody>",
    );
    for v in views {
        let (dur, msg) = match &v.last {
            Some(l) => (format!("{:.1} ms", l.duration_seconds * 1000.0), l.message.clone().unwrap_or_default()),
            None => (String::new(), "not run yet".to_owned()),
        };
        let _ = write!(
            html,
            "<tr id=\"check-{name}\" data-state=\"{state}\"><td><b>{name}</b>{desc}</td><td>{kind}</td>\
             <td><span class=\"state {state}\">{state}</span></td><td>{dur}<div class=\"msg\">{msg}</div></td>\
             <td class=\"num\">{d}</td><td class=\"num\">{w}</td><td class=\"num\">{m}</td><td>{spark}</td></tr>",
            name = esc(&v.name),
            desc = v.description.as_deref().map(|d| format!("<div class=\"msg\">{}</div>", esc(d))).unwrap_or_default(),
            kind = v.kind,
            state = v.state,
            msg = esc(&msg),
            d = pct(v.uptime.day),
            w = pct(v.uptime.week),
            m = pct(v.uptime.month),
            spark = sparkline(&v.recent),
        );
    }
    html.push_str("</tbody></table></body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_escapes_and_draws() {
        let v = CheckView {
            name: "a<b>".into(),
            kind: "http",
            description: None,
            state: "down",
            since: 0,
            failures: 1,
            successes: 0,
            last: Some(RunView { time_ms: 1, ok: false, duration_seconds: 0.01, message: Some("x & y".into()) }),
            uptime: Uptime { day: Some(50.0), week: None, month: None },
            interval_seconds: 1.0,
            gauges: serde_json::Map::new(),
            recent: vec![
                RunView { time_ms: 1, ok: true, duration_seconds: 0.01, message: None },
                RunView { time_ms: 2, ok: false, duration_seconds: 0.02, message: None },
            ],
        };
        let html = page(&[v], 10);
        assert!(html.contains("a&lt;b&gt;") && html.contains("x &amp; y"), "{html}");
        assert!(html.contains("http-equiv=\"refresh\" content=\"10\""));
        assert!(html.contains("<polyline") && html.contains("<circle"));
        assert!(html.contains("50.00%"));
        assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("https://"));
        assert_eq!(percent_decode("a%20b%2"), "a b%2");
    }
}
