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
use crate::selection::Selection;
use crate::setup::{self, SetupOptions};
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
<a href=/cas>CAS hand-off</a></nav><h1>{t}</h1>{body}</body></html>",
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
    page("Overview", &b).into_response()
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
    });
    let url = format!("http://{local}/login?token={}", state.token);
    Ok((listener, state, url))
}

/// Serves until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, state: Arc<UiState>) -> Result<(), Error> {
    axum::serve(listener, router(state)).await?;
    Ok(())
}
