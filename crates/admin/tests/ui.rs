//! The web UI over a real socket: login, every page, setup and CAS hand-off through the
//! forms, and requests without the session or the form token changing nothing.

#![allow(clippy::unwrap_used)]

mod support;

use capi_adapter::keys;
use karpenter_capi_admin::ui;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Reply {
    status: u16,
    headers: String,
    body: String,
}

async fn request(
    addr: &str,
    method: &str,
    path: &str,
    cookie: Option<&str>,
    form: Option<&str>,
    extra: &[(&str, &str)],
) -> Reply {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(c) = cookie {
        req.push_str(&format!("Cookie: {c}\r\n"));
    }
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = form.unwrap_or("");
    if form.is_some() {
        req.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Reply {
        status: head[9..12].parse().unwrap(),
        headers: head.to_string(),
        body: body.to_string(),
    }
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (c as char).to_string(),
            _ => format!("%{c:02X}"),
        })
        .collect()
}

fn csrf_of(page: &str) -> String {
    let at = page
        .find("name=csrf value=\"")
        .expect("a form with the CSRF token")
        + "name=csrf value=\"".len();
    page[at..at + 64].to_string()
}

#[tokio::test]
async fn ui_pages_forms_and_token_protection() {
    let (client, ns, clusters) = setup("ui").await;
    ensure_template_crd(&client).await;
    create_template(&client, &ns, "bare", serde_json::json!({"spec": {}})).await;
    create_cas(&client, &ns, "cluster-autoscaler", 1, &[]).await;
    let md = create_md(
        &client,
        &ns,
        "md",
        &[(keys::capi::KARPENTER_MEMBER, "")],
        &[
            (keys::cas::CPU, "bad"),
            (keys::cas::MEMORY, "8Gi"),
            (keys::capi::MAX_SIZE, "3"),
        ],
        "bare",
    )
    .await;
    let plain = create_md(
        &client,
        &ns,
        "plain",
        &[],
        &[(keys::cas::CPU, "2"), (keys::cas::MEMORY, "8Gi")],
        "bare",
    )
    .await;

    let (listener, state, url) = ui::bind(clusters, &ns, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(ui::serve(listener, state.clone()));

    // Without the token: nothing.
    assert_eq!(
        request(&addr, "GET", "/", None, None, &[]).await.status,
        401
    );
    assert_eq!(
        request(&addr, "GET", "/login?token=nope", None, None, &[])
            .await
            .status,
        401
    );
    let login = request(
        &addr,
        "GET",
        &url[url.find("/login").unwrap()..],
        None,
        None,
        &[],
    )
    .await;
    assert_eq!(login.status, 303);
    assert!(
        login.headers.contains("HttpOnly; SameSite=Strict"),
        "{}",
        login.headers
    );
    let cookie = format!("kcapi_session={}", state.token);
    let cookie = Some(cookie.as_str());

    let overview = request(&addr, "GET", "/", cookie, None, &[]).await;
    assert_eq!(overview.status, 200);
    assert!(overview.body.contains(&format!("{ns}/md")) && overview.body.contains("unpriced"));
    // Nodes with cost, the history sampled since start, pending pods (none in this test).
    assert!(
        overview.body.contains("id=nodes") && overview.body.contains("id=cost-history"),
        "{}",
        overview.body
    );
    let events = request(&addr, "GET", "/events", cookie, None, &[]).await;
    assert_eq!(events.status, 200);
    assert!(events.body.contains("Last decisions"), "{}", events.body);
    assert_eq!(
        request(&addr, "GET", "/events", None, None, &[])
            .await
            .status,
        401
    );
    assert_eq!(
        request(
            &addr,
            "GET",
            &format!("/explain?pod={ns}%2Fnope"),
            cookie,
            None,
            &[]
        )
        .await
        .status,
        500
    );
    assert!(state.history.lock().unwrap().samples.len() >= 2);
    let detail = request(
        &addr,
        "GET",
        &format!("/resource?id={}", enc(&md.to_string())),
        cookie,
        None,
        &[],
    )
    .await;
    assert_eq!(detail.status, 200);
    assert!(
        detail.body.contains("InvalidValue") && detail.body.contains(keys::cas::CPU),
        "{}",
        detail.body
    );

    let cas_page = request(&addr, "GET", "/cas", cookie, None, &[]).await;
    assert_eq!(cas_page.status, 200);
    assert!(cas_page.body.contains("OVERLAP"), "{}", cas_page.body);
    let csrf = csrf_of(&cas_page.body);

    // Changes without the form token, without the session, or from another origin: refused.
    assert_eq!(
        request(&addr, "POST", "/cas/disable", cookie, Some(""), &[])
            .await
            .status,
        403
    );
    assert_eq!(
        request(
            &addr,
            "POST",
            "/cas/disable",
            None,
            Some(&format!("csrf={csrf}")),
            &[]
        )
        .await
        .status,
        403
    );
    assert_eq!(
        request(
            &addr,
            "POST",
            "/cas/disable",
            cookie,
            Some(&format!("csrf={csrf}")),
            &[("Origin", "http://evil.example")]
        )
        .await
        .status,
        403
    );
    assert_eq!(
        deployment(&client, &ns, "cluster-autoscaler")
            .await
            .spec
            .unwrap()
            .replicas,
        Some(1)
    );

    let done = request(
        &addr,
        "POST",
        "/cas/disable",
        cookie,
        Some(&format!("csrf={csrf}")),
        &[("Origin", &format!("http://{addr}"))],
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(
        deployment(&client, &ns, "cluster-autoscaler")
            .await
            .spec
            .unwrap()
            .replicas,
        Some(0)
    );
    let done = request(
        &addr,
        "POST",
        "/cas/enable",
        cookie,
        Some(&format!("csrf={csrf}")),
        &[],
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(
        deployment(&client, &ns, "cluster-autoscaler")
            .await
            .spec
            .unwrap()
            .replicas,
        Some(1)
    );

    // Setup through the form: review (diff), then apply.
    let setup_page = request(&addr, "GET", "/setup", cookie, None, &[]).await;
    assert!(setup_page.body.contains(&plain.to_string()));
    let nodeclass = testenv::unique_name("ui-nc");
    let form = format!(
        "csrf={csrf}&action=plan&r={}&price=0.3&nodeclass={nodeclass}&nodepool=",
        enc(&plain.to_string())
    );
    let review = request(&addr, "POST", "/setup", cookie, Some(&form), &[]).await;
    assert_eq!(review.status, 200, "{}", review.body);
    assert!(
        review.body.contains("id=diff") && review.body.contains(keys::ours::PRICE_PER_HOUR),
        "{}",
        review.body
    );
    assert!(
        !annotations(&client, &plain)
            .await
            .contains_key(keys::ours::PRICE_PER_HOUR),
        "review changed something"
    );
    let apply = form.replace("action=plan", "action=apply");
    assert_eq!(
        request(
            &addr,
            "POST",
            "/setup",
            cookie,
            Some(&apply.replace(&csrf, "0")),
            &[]
        )
        .await
        .status,
        403
    );
    let applied = request(&addr, "POST", "/setup", cookie, Some(&apply), &[]).await;
    assert_eq!(applied.status, 200, "{}", applied.body);
    assert_eq!(
        annotations(&client, &plain).await[keys::ours::PRICE_PER_HOUR],
        "0.3"
    );
    assert!(
        annotations(&client, &md)
            .await
            .contains_key(keys::capi::MAX_SIZE),
        "unselected resource untouched"
    );
    server.abort();
}
