//! `karpenter-capi ui`: a small web UI over the same library functions as the CLI.
//!
//! Security model: it listens on 127.0.0.1 by default. A random token is printed at start;
//! opening `/login?token=...` sets it as an HttpOnly, SameSite=Strict cookie, and every page
//! needs that cookie. Every change is a POST that must also carry a second random value
//! (the CSRF token) that only our own pages contain, and whose `Host` (and `Origin`, when
//! sent) must be the address we serve, so neither another site nor a DNS-rebinding page can
//! change anything. Requests without them change nothing and get 403.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::cas::{self, DisableOptions};
use crate::catalog::PriceCatalog;
use crate::discover;
use crate::explain::{self, Decision};
use crate::selection::Selection;
use crate::setup::{self, SetupOptions};
use crate::status;
use crate::{Clusters, Error};

/// Server state.
#[derive(Debug)]
pub struct UiState {
    pub clusters: Clusters,
    /// Our namespace (CAS hand-off record).
    pub namespace: String,
    pub token: String,
    pub csrf: String,
    /// Hosts accepted in `Host`/`Origin` (`127.0.0.1:port`, `localhost:port`).
    pub hosts: Vec<String>,
    /// Nodes and cost over time, sampled while the UI runs (see [`History`]).
    pub history: std::sync::Mutex<History>,
}

/// One sample of the cluster's size and cost.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Sample {
    /// Seconds since the epoch.
    pub at: i64,
    pub nodes: usize,
    pub cost_per_hour: f64,
    pub pending: usize,
}

/// A small ring of samples: the UI has no database, so "over time" means since it started
/// (at most [`History::CAP`] samples, one per [`SAMPLE_EVERY`] plus one per overview load).
#[derive(Debug, Clone, Default)]
pub struct History {
    pub samples: std::collections::VecDeque<Sample>,
}

/// How often the UI samples the cluster in the background.
pub const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

impl History {
    pub const CAP: usize = 720;

    /// Adds a sample, dropping the oldest beyond the cap.
    pub fn push(&mut self, s: Sample) {
        if self.samples.len() == Self::CAP {
            self.samples.pop_front();
        }
        self.samples.push_back(s);
    }

    /// An inline SVG line of one series (no JavaScript, no external assets).
    pub fn svg(&self, id: &str, value: impl Fn(&Sample) -> f64, label: &str) -> String {
        let (w, h) = (480.0, 80.0);
        let vals: Vec<(i64, f64)> = self.samples.iter().map(|s| (s.at, value(s))).collect();
        let Some(&(t0, _)) = vals.first() else {
            return String::new();
        };
        let t1 = vals.last().map_or(t0, |v| v.0).max(t0 + 1);
        let vmax = vals.iter().map(|v| v.1).fold(0.0_f64, f64::max).max(1e-9);
        let points: Vec<String> = vals
            .iter()
            .map(|(t, v)| {
                let x = (t - t0) as f64 / (t1 - t0) as f64 * w;
                let y = h - v / vmax * (h - 4.0) - 2.0;
                format!("{x:.1},{y:.1}")
            })
            .collect();
        format!(
            "<figure><svg id={id} width={w} height={h} viewBox=\"0 0 {w} {h}\" style=\"border:1px solid #ccc\"><polyline fill=none stroke=#2a6 stroke-width=2 points=\"{}\"/></svg><figcaption>{} (max {vmax:.4}, {} samples since the UI started)</figcaption></figure>",
            points.join(" "),
            escape(label),
            vals.len()
        )
    }
}

fn sample_of(s: &status::Status) -> Sample {
    Sample {
        at: karpenter_capi_controller::cloudprovider::CloudProvider::now(),
        nodes: s.nodes.len(),
        cost_per_hour: s.cost_per_hour,
        pending: s.pending.len(),
    }
}

fn record(st: &UiState, s: &status::Status) {
    if let Ok(mut h) = st.history.lock() {
        h.push(sample_of(s));
    }
}

/// 32 random bytes, hex.
pub fn random_token() -> Result<String, Error> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|e| Error::Invalid(format!("no randomness: {e}")))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Compares without an early exit, so timing does not reveal a prefix.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const COOKIE: &str = "kcapi_session";

fn authed(st: &UiState, headers: &HeaderMap) -> bool {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .any(|(k, v)| k == COOKIE && same(v, &st.token))
}

fn host_ok(st: &UiState, headers: &HeaderMap) -> bool {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !st.hosts.iter().any(|h| h == host) {
        return false;
    }
    match headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
        None => true,
        Some(origin) => st.hosts.iter().any(|h| origin == format!("http://{h}")),
    }
}

/// Checks a state-changing request: session cookie, CSRF field, Host/Origin.
fn may_change(st: &UiState, headers: &HeaderMap, form: &[(String, String)]) -> bool {
    authed(st, headers)
        && host_ok(st, headers)
        && form.iter().any(|(k, v)| k == "csrf" && same(v, &st.csrf))
}

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html><head><meta charset=utf-8><title>{t} - karpenter-capi</title>\
<style>body{{font-family:sans-serif;margin:1.5em;max-width:80em}}table{{border-collapse:collapse}}\
td,th{{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}}th{{background:#eee}}\
.bad{{color:#b00}}.ok{{color:#070}}.warn{{color:#a60}}pre{{background:#f6f6f6;padding:.5em;overflow:auto}}\
nav a{{margin-right:1em}}</style></head><body><nav><a href=/>Overview</a><a href=/setup>Setup</a>\
<a href=/cas>CAS hand-off</a><a href=/events>Decisions and events</a></nav><h1>{t}</h1>{body}</body></html>",
        t = escape(title)
    ))
}

fn error_page(e: &Error) -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        page(
            "Error",
            &format!("<p class=bad>{}</p>", escape(&e.to_string())),
        ),
    )
        .into_response()
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        page("Login needed", "<p>Open the URL with the token that <code>karpenter-capi ui</code> printed at start.</p>"),
    )
        .into_response()
}

fn forbidden() -> Response {
    (
        StatusCode::FORBIDDEN,
        page("Refused", "<p class=bad>This request lacks the session, the form token or a matching Host/Origin: nothing was changed.</p>"),
    )
        .into_response()
}

#[derive(Debug, serde::Deserialize)]
struct LoginQuery {
    token: String,
}

async fn login(State(st): State<Arc<UiState>>, Query(q): Query<LoginQuery>) -> Response {
    if !same(&q.token, &st.token) {
        return unauthorized();
    }
    (
        [(
            header::SET_COOKIE,
            format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", st.token),
        )],
        Redirect::to("/"),
    )
        .into_response()
}

async fn overview(State(st): State<Arc<UiState>>, headers: HeaderMap) -> Response {
    if !authed(&st, &headers) {
        return unauthorized();
    }
    let d = match discover::discover(&st.clusters, &st.namespace).await {
        Ok(d) => d,
        Err(e) => return error_page(&e),
    };
    let mut b = String::from(
        "<h2>Scalable resources</h2><table><tr><th>Resource</th><th>Instance type</th><th>CPU</th><th>Memory</th><th>Zones</th><th>Price</th><th>Min/Max</th><th>Replicas</th><th>Member</th><th>CAS</th><th>Problems</th></tr>",
    );
    for r in &d.resources {
        let cap = |n: &str| {
            r.capacity
                .iter()
                .find(|c| c.resource == n)
                .and_then(|c| c.value.clone())
                .unwrap_or_else(|| "-".into())
        };
        let _ = write!(
            b,
            "<tr><td><a href=\"/resource?id={idq}\">{id}</a></td><td>{it}</td><td>{cpu}</td><td>{mem}</td><td>{z}</td><td>{p}</td><td>{min}/{max}</td><td>{rep}</td><td>{m}</td><td>{cas}</td><td>{pr}</td></tr>",
            idq = escape(&urlencode(&r.id)),
            id = escape(&format!("{}/{}", r.namespace, r.name)),
            it = escape(r.instance_type.as_deref().unwrap_or("-")),
            cpu = escape(&cap("cpu")),
            mem = escape(&cap("memory")),
            z = escape(&r.zones.join(",")),
            p = if r.price.per_hour.is_some() {
                escape(&r.price_text())
            } else {
                "<span class=warn>unpriced</span>".into()
            },
            min = r.min.map_or("?".into(), |m| m.to_string()),
            max = escape(&r.max_text()),
            rep = r.replicas,
            m = if r.member {
                "<span class=ok>yes</span>"
            } else {
                "no"
            },
            cas = if r.cas.is_empty() {
                "no".to_string()
            } else if r.cas_active {
                "<span class=warn>yes</span>".into()
            } else {
                "yes (stopped)".into()
            },
            pr = if r.problems.is_empty() {
                "<span class=ok>ok</span>".to_string()
            } else {
                format!("<span class=bad>{}</span>", r.problems.len())
            },
        );
    }
    b.push_str("</table>");
    match status::status(&st.clusters).await {
        Ok(s) => {
            record(&st, &s);
            b.push_str(&nodes_html(&st, &s));
            b.push_str(&pending_html(&s));
        }
        Err(e) => {
            let _ = write!(
                b,
                "<p class=bad>Nodes and pending pods unavailable: {}</p>",
                escape(&e.to_string())
            );
        }
    }
    page("Overview", &b).into_response()
}

fn nodepools_html(s: &status::Status) -> String {
    let mut b = String::from(
        "<h2>NodePools</h2><table id=nodepools><tr><th>Name</th><th>NodeClass</th><th>Nodes</th><th>Limits</th><th>Usage</th><th>Ready</th></tr>",
    );
    let kv = |m: &std::collections::BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for p in &s.nodepools {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&p.name),
            escape(&p.nodeclass),
            p.nodes,
            escape(&kv(&p.limits)),
            escape(&kv(&p.usage)),
            if p.ready {
                "<span class=ok>yes</span>"
            } else {
                "<span class=warn>no</span>"
            }
        );
    }
    b.push_str("</table>");
    b
}

fn nodes_html(st: &UiState, s: &status::Status) -> String {
    let mut b = nodepools_html(s);
    let _ = write!(
        b,
        "<h2>Nodes</h2><p>{} nodes, <b id=cost>{}</b></p>",
        s.nodes.len(),
        crate::output::per_hour(s.cost_per_hour)
    );
    if let Ok(h) = st.history.lock() {
        b.push_str(&h.svg("nodes-history", |x| x.nodes as f64, "nodes over time"));
        b.push_str(&h.svg(
            "cost-history",
            |x| x.cost_per_hour,
            "cost per hour over time",
        ));
    }
    b.push_str("<table id=nodes><tr><th>Node</th><th>NodePool</th><th>Type</th><th>Zone</th><th>Ready</th><th>Pods</th><th>$/h</th></tr>");
    let o = |x: &Option<String>| escape(x.as_deref().unwrap_or("-"));
    for n in &s.nodes {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.4}</td></tr>",
            escape(&n.name),
            o(&n.nodepool),
            o(&n.instance_type),
            o(&n.zone),
            if n.ready {
                "yes"
            } else {
                "<span class=warn>no</span>"
            },
            n.pods,
            n.price_per_hour
        );
    }
    b.push_str("</table>");
    b
}

fn pending_html(s: &status::Status) -> String {
    let mut b = String::from("<h2>Pending pods</h2>");
    if s.pending.is_empty() {
        b.push_str("<p class=ok>None.</p>");
        return b;
    }
    b.push_str("<table id=pending><tr><th>Pod</th><th>What the autoscaler would do</th></tr>");
    for p in &s.pending {
        let _ = write!(
            b,
            "<tr><td><a href=\"/explain?pod={}\">{}</a></td><td{}>{}</td></tr>",
            escape(&urlencode(&p.pod)),
            escape(&p.pod),
            if p.schedulable { "" } else { " class=bad" },
            escape(&p.outcome)
        );
    }
    b.push_str("</table>");
    let g = &s.gap;
    let _ = write!(
        b,
        "<p id=gap>Next decision: {} new nodes, {}; lower bound {}; gap {}.</p>",
        g.new_nodes,
        crate::output::per_hour(g.cost_per_hour),
        g.lower_bound_per_hour
            .map_or("unknown".into(), crate::output::per_hour),
        g.gap_percent
            .map_or("unknown".into(), |x| format!("{x:.1}%"))
    );
    b
}

async fn events_page(State(st): State<Arc<UiState>>, headers: HeaderMap) -> Response {
    if !authed(&st, &headers) {
        return unauthorized();
    }
    let s = match status::status(&st.clusters).await {
        Ok(s) => s,
        Err(e) => return error_page(&e),
    };
    record(&st, &s);
    let mut b = String::from(
        "<h2>NodeClaims</h2><table id=nodeclaims><tr><th>Name</th><th>NodePool</th><th>Phase</th><th>Node</th><th>Type</th><th>Zone</th><th>$/h</th></tr>",
    );
    let o = |x: &Option<String>| escape(x.as_deref().unwrap_or("-"));
    for c in &s.nodeclaims {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.4}</td></tr>",
            escape(&c.name),
            escape(&c.nodepool),
            escape(&c.phase),
            o(&c.node),
            o(&c.instance_type),
            o(&c.zone),
            c.price_per_hour
        );
    }
    b.push_str("</table><h2>Last decisions (events from karpenter-capi)</h2>");
    if s.events.is_empty() {
        b.push_str("<p>No events from the controller (it has not acted, or events expired).</p>");
    } else {
        b.push_str(
            "<table id=events><tr><th>Time</th><th>Object</th><th>Reason</th><th>Note</th></tr>",
        );
        for e in &s.events {
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td{}>{}</td><td>{}</td></tr>",
                escape(&e.time),
                escape(&e.object),
                if e.warning { " class=warn" } else { "" },
                escape(&e.reason),
                escape(&e.note)
            );
        }
        b.push_str("</table>");
    }
    b.push_str(&pending_html(&s));
    if !s.notes.is_empty() {
        b.push_str("<h2>Notes</h2><ul>");
        for n in &s.notes {
            let _ = write!(b, "<li class=warn>{}</li>", escape(n));
        }
        b.push_str("</ul>");
    }
    page("Decisions and events", &b).into_response()
}

#[derive(Debug, serde::Deserialize)]
struct PodQuery {
    pod: String,
}

async fn explain_page(
    State(st): State<Arc<UiState>>,
    headers: HeaderMap,
    Query(q): Query<PodQuery>,
) -> Response {
    if !authed(&st, &headers) {
        return unauthorized();
    }
    let e = match explain::explain(&st.clusters, &q.pod).await {
        Ok(e) => e,
        Err(e) => return error_page(&e),
    };
    let text = crate::output::explain_text(&e, crate::output::Style { color: false });
    let verdict = match &e.decision {
        Decision::Launch { instance_type, .. } => format!(
            "<p class=ok id=verdict>Would launch {}</p>",
            escape(instance_type)
        ),
        Decision::Unschedulable { .. } => {
            "<p class=bad id=verdict>Nothing can be launched for it</p>".to_string()
        }
        _ => String::new(),
    };
    page(
        &format!("Why is {} pending?", e.pod),
        &format!("{verdict}<pre id=explain>{}</pre>", escape(&text)),
    )
    .into_response()
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (c as char).to_string()
            }
            _ => format!("%{c:02X}"),
        })
        .collect()
}

#[derive(Debug, serde::Deserialize)]
struct IdQuery {
    id: String,
}

async fn resource(
    State(st): State<Arc<UiState>>,
    headers: HeaderMap,
    Query(q): Query<IdQuery>,
) -> Response {
    if !authed(&st, &headers) {
        return unauthorized();
    }
    let d = match discover::discover(&st.clusters, &st.namespace).await {
        Ok(d) => d,
        Err(e) => return error_page(&e),
    };
    let Some(r) = d.resources.iter().find(|r| r.id == q.id) else {
        return (
            StatusCode::NOT_FOUND,
            page("Not found", "<p>No such resource.</p>"),
        )
            .into_response();
    };
    let mut b = format!(
        "<p><code>{}</code></p><h2>Capacity</h2><table><tr><th>Resource</th><th>Value</th><th>Source</th></tr>",
        escape(&r.id)
    );
    for c in &r.capacity {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td{}>{}</td></tr>",
            escape(&c.resource),
            escape(c.value.as_deref().unwrap_or("-")),
            if c.required_missing { " class=bad" } else { "" },
            escape(&c.source)
        );
    }
    let _ = write!(
        b,
        "</table><p>Price: {} &middot; min {} / max {} &middot; member: {} &middot; CAS: {}</p>",
        escape(&r.price_text()),
        r.min.map_or("?".into(), |m| m.to_string()),
        escape(&r.max_text()),
        if r.member {
            "yes"
        } else {
            "no (setup adds the member label)"
        },
        if r.cas.is_empty() {
            "none".to_string()
        } else {
            escape(&r.cas.join(", "))
        }
    );
    b.push_str("<h2>Problems</h2>");
    if r.problems.is_empty() {
        b.push_str("<p class=ok>None.</p>");
    } else {
        b.push_str("<ul>");
        for p in &r.problems {
            let _ = write!(
                b,
                "<li class=bad><b>{}</b> {}: {} <br><small>Fix: set or correct <code>{}</code> on {} (or run Setup).</small></li>",
                escape(p.reason),
                escape(&p.key),
                escape(&p.message),
                escape(&p.key),
                escape(&p.object)
            );
        }
        b.push_str("</ul>");
    }
    if !r.cas_differences.is_empty() {
        b.push_str("<h2>Where CAS reads it differently</h2><ul>");
        for c in &r.cas_differences {
            let _ = write!(b, "<li>{}</li>", escape(c));
        }
        b.push_str("</ul>");
    }
    page(&format!("{}/{}", r.namespace, r.name), &b).into_response()
}

async fn setup_form(State(st): State<Arc<UiState>>, headers: HeaderMap) -> Response {
    if !authed(&st, &headers) {
        return unauthorized();
    }
    let d = match discover::discover(&st.clusters, &st.namespace).await {
        Ok(d) => d,
        Err(e) => return error_page(&e),
    };
    let mut b = format!(
        "<form method=post action=/setup><input type=hidden name=csrf value=\"{}\"><input type=hidden name=action value=plan><h2>Resources</h2>",
        escape(&st.csrf)
    );
    for r in &d.resources {
        let _ = write!(
            b,
            "<label><input type=checkbox name=r value=\"{}\"> {}</label><br>",
            escape(&r.id),
            escape(&r.id)
        );
    }
    b.push_str("<p><label>Price per hour for unpriced resources <input name=price></label></p>\
<p><label>Catalog CSV path (on the machine running the UI) <input name=catalog size=60></label></p>\
<p><label>NodeClass <input name=nodeclass value=default></label> <label>NodePool <input name=nodepool value=default></label></p>\
<button>Show the changes</button></form>");
    page("Setup", &b).into_response()
}

fn field<'a>(form: &'a [(String, String)], k: &str) -> Option<&'a str> {
    form.iter()
        .find(|(key, v)| key == k && !v.trim().is_empty())
        .map(|(_, v)| v.trim())
}

fn setup_options(form: &[(String, String)]) -> Result<SetupOptions, Error> {
    let names: Vec<String> = form
        .iter()
        .filter(|(k, _)| k == "r")
        .map(|(_, v)| v.clone())
        .collect();
    let price = match field(form, "price") {
        Some(p) => Some(
            capi_adapter::parse::parse_price(p)
                .map_err(|e| Error::Invalid(format!("price: {e}")))?,
        ),
        None => None,
    };
    let catalog = match field(form, "catalog") {
        Some(p) => Some(PriceCatalog::load(std::path::Path::new(p))?),
        None => None,
    };
    Ok(SetupOptions {
        selection: Selection {
            names,
            selector: None,
            all: false,
        },
        catalog,
        price,
        nodeclass: field(form, "nodeclass").unwrap_or("default").to_string(),
        nodepool: field(form, "nodepool").map(str::to_string),
    })
}

async fn setup_post(
    State(st): State<Arc<UiState>>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    if !may_change(&st, &headers, &form) {
        return forbidden();
    }
    let opts = match setup_options(&form) {
        Ok(o) => o,
        Err(e) => return error_page(&e),
    };
    let plan = match setup::plan(&st.clusters, &opts).await {
        Ok(p) => p,
        Err(e) => return error_page(&e),
    };
    if field(&form, "action") == Some("apply") {
        return match setup::apply(&st.clusters, &plan).await {
            Ok(done) => {
                let items: String = done
                    .iter()
                    .map(|d| format!("<li>{}</li>", escape(d)))
                    .collect();
                page(
                    "Setup applied",
                    &format!("<ul id=done>{items}</ul><p><a href=/>Back to the overview</a></p>"),
                )
                .into_response()
            }
            Err(e) => error_page(&e),
        };
    }
    let mut b = String::new();
    if plan.is_empty() {
        b.push_str("<p class=ok>Nothing to change.</p>");
    } else {
        let _ = write!(
            b,
            "<h2>Diff</h2><pre id=diff>{}</pre>",
            escape(&plan.diff())
        );
    }
    if !plan.notes.is_empty() {
        b.push_str("<h2>Needs you</h2><ul>");
        for n in &plan.notes {
            let _ = write!(b, "<li class=warn>{}</li>", escape(n));
        }
        b.push_str("</ul>");
    }
    if !plan.is_empty() {
        b.push_str("<form method=post action=/setup>");
        for (k, v) in form.iter().filter(|(k, _)| k != "action") {
            let _ = write!(
                b,
                "<input type=hidden name=\"{}\" value=\"{}\">",
                escape(k),
                escape(v)
            );
        }
        b.push_str("<input type=hidden name=action value=apply><button id=apply>Apply these changes</button></form>");
    }
    page("Setup: review", &b).into_response()
}

async fn cas_page(State(st): State<Arc<UiState>>, headers: HeaderMap) -> Response {
    if !authed(&st, &headers) {
        return unauthorized();
    }
    let s = match cas::status(&st.clusters, &st.namespace).await {
        Ok(s) => s,
        Err(e) => return error_page(&e),
    };
    let text = crate::output::cas_table(&s, crate::output::Style { color: false });
    let csrf = escape(&st.csrf);
    let b = format!(
        "<pre id=status>{}</pre>\
<form method=post action=/cas/disable><input type=hidden name=csrf value=\"{csrf}\">\
<label><input type=checkbox name=force value=1> force past ambiguities</label> <button id=disable>Disable CAS (hand over to karpenter-capi)</button></form><br>\
<form method=post action=/cas/enable><input type=hidden name=csrf value=\"{csrf}\"><button id=enable>Enable CAS (restore what was there)</button></form>",
        escape(&text)
    );
    page("Cluster Autoscaler hand-off", &b).into_response()
}

fn report_page(title: &str, r: Result<cas::HandoffReport, Error>) -> Response {
    match r {
        Ok(r) => {
            let mut b = String::from("<ul id=done>");
            for a in &r.actions {
                let _ = write!(b, "<li>{}</li>", escape(a));
            }
            for w in &r.warnings {
                let _ = write!(b, "<li class=warn>{}</li>", escape(w));
            }
            b.push_str("</ul><p><a href=/cas>Back</a></p>");
            page(title, &b).into_response()
        }
        Err(e @ Error::Refused(_)) => (
            StatusCode::CONFLICT,
            page(
                "Refused",
                &format!(
                    "<p class=bad id=refused>{}</p><p><a href=/cas>Back</a></p>",
                    escape(&e.to_string())
                ),
            ),
        )
            .into_response(),
        Err(e) => error_page(&e),
    }
}

async fn cas_disable(
    State(st): State<Arc<UiState>>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    if !may_change(&st, &headers, &form) {
        return forbidden();
    }
    let opts = DisableOptions {
        force: field(&form, "force").is_some(),
        stop_after: None,
        ..DisableOptions::default()
    };
    report_page(
        "CAS disabled",
        cas::disable(&st.clusters, &st.namespace, &opts).await,
    )
}

async fn cas_enable(
    State(st): State<Arc<UiState>>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    if !may_change(&st, &headers, &form) {
        return forbidden();
    }
    report_page(
        "CAS enabled",
        cas::enable(&st.clusters, &st.namespace).await,
    )
}

/// The router (tests drive it over a real socket).
pub fn router(state: Arc<UiState>) -> Router {
    Router::new()
        .route("/login", get(login))
        .route("/", get(overview))
        .route("/resource", get(resource))
        .route("/setup", get(setup_form).post(setup_post))
        .route("/cas", get(cas_page))
        .route("/cas/disable", post(cas_disable))
        .route("/cas/enable", post(cas_enable))
        .route("/events", get(events_page))
        .route("/explain", get(explain_page))
        .with_state(state)
}

/// Binds `addr` and returns the listener, the state (token in it) and the login URL.
pub async fn bind(
    clusters: Clusters,
    namespace: &str,
    addr: SocketAddr,
) -> Result<(tokio::net::TcpListener, Arc<UiState>, String), Error> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let mut hosts = vec![local.to_string()];
    if local.ip().is_loopback() {
        hosts.push(format!("localhost:{}", local.port()));
    }
    let state = Arc::new(UiState {
        clusters,
        namespace: namespace.to_string(),
        token: random_token()?,
        csrf: random_token()?,
        hosts,
        history: std::sync::Mutex::new(History::default()),
    });
    let url = format!("http://{local}/login?token={}", state.token);
    Ok((listener, state, url))
}

/// Serves until the process ends, sampling nodes and cost every [`SAMPLE_EVERY`].
pub async fn serve(listener: tokio::net::TcpListener, state: Arc<UiState>) -> Result<(), Error> {
    let sampler = {
        let st = state.clone();
        tokio::spawn(async move {
            loop {
                match status::status(&st.clusters).await {
                    Ok(s) => record(&st, &s),
                    Err(e) => tracing::debug!(error = %e, "UI history sample failed"),
                }
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
        })
    };
    let served = axum::serve(listener, router(state)).await;
    sampler.abort();
    served?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: i64, nodes: usize, cost: f64) -> Sample {
        Sample {
            at,
            nodes,
            cost_per_hour: cost,
            pending: 0,
        }
    }

    #[test]
    fn history_keeps_the_newest_samples_and_draws_them() {
        let mut h = History::default();
        assert_eq!(h.svg("x", |s| s.nodes as f64, "nodes"), "");
        for i in 0..(History::CAP + 5) {
            h.push(sample(i as i64, i % 3, 0.5));
        }
        assert_eq!(h.samples.len(), History::CAP);
        assert_eq!(h.samples.front().unwrap().at, 5);
        let svg = h.svg("cost", |s| s.cost_per_hour, "cost");
        assert!(svg.contains("<svg id=cost"));
        // A constant series is drawn at the top: every point's y is 2.0.
        assert!(svg.contains("480.0,2.0"), "{svg}");
        assert!(svg.contains("720 samples"));
    }
}
