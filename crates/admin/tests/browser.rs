//! The web UI in a real headless Chromium (Debian's `chromium`), driven by playwright-core
//! from npm (`tests/ui/browser.mjs`): every page, setup and the CAS hand-off through the
//! forms, refused requests without the token. This test creates the cluster objects, serves
//! the UI, runs the script, and checks the cluster afterwards.
//!
//! Needs `node` and Chromium (`.ci/run` installs Chromium when missing). Without them the
//! test FAILS with what to install: a browser test that silently passes proves nothing.
//! `npm ci` runs here when `tests/ui/node_modules` is missing (the lockfile pins the one
//! package, so a fresh machine needs only the npm registry).

#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use capi_adapter::keys;
use karpenter_capi_admin::ui;
use support::*;

fn ui_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/ui")
}

fn chromium() -> String {
    std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into())
}

/// Node, Chromium and playwright-core, or a panic that says what is missing.
fn prerequisites() {
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.as_ref().is_ok_and(|o| o.status.success()),
        "BROWSER TEST CANNOT RUN: `node` is missing (apt-get install nodejs npm): {node:?}"
    );
    assert!(
        Path::new(&chromium()).exists(),
        "BROWSER TEST CANNOT RUN: Chromium not found at {} (apt-get install chromium, or set CHROMIUM)",
        chromium()
    );
    let dir = ui_dir();
    if !dir.join("node_modules/playwright-core").exists() {
        let out = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .output()
            .expect("run npm ci");
        assert!(
            out.status.success(),
            "BROWSER TEST CANNOT RUN: npm ci in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test]
async fn ui_in_headless_chromium() {
    prerequisites();
    let (client, ns, clusters) = setup("browser").await;
    ensure_template_crd(&client).await;
    create_template(&client, &ns, "bare", serde_json::json!({"spec": {}})).await;
    create_cas(&client, &ns, "cluster-autoscaler", 1, &[]).await;
    create_md(
        &client,
        &ns,
        "member",
        &[(keys::capi::KARPENTER_MEMBER, "")],
        &[
            (keys::cas::CPU, "2"),
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
    let server = tokio::spawn(ui::serve(listener, state));
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let started = std::time::Instant::now();
    let (u, n, s, c) = (url.clone(), ns.clone(), shots.clone(), chromium());
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(ui_dir().join("browser.mjs"))
            .args([&u, &n, &s.display().to_string()])
            .env("CHROMIUM", c)
            .output()
    })
    .await
    .unwrap()
    .expect("run node");
    let took = started.elapsed();
    server.abort();
    assert!(
        out.status.success(),
        "browser script failed after {took:?}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "browser test took {took:?}; screenshots in {}",
        shots.display()
    );
    for name in [
        "overview",
        "resource",
        "events",
        "cas",
        "setup-diff",
        "setup-applied",
        "cas-disabled",
        "cas-enabled",
    ] {
        let len = std::fs::metadata(shots.join(format!("{name}.png")))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(len > 1000, "screenshot {name}.png missing or empty");
    }

    // What the forms did, read back from the API server.
    let ann = annotations(&client, &plain).await;
    assert_eq!(
        ann.get(keys::ours::PRICE_PER_HOUR).map(String::as_str),
        Some("0.05"),
        "{ann:?}"
    );
    assert_eq!(
        deployment(&client, &ns, "cluster-autoscaler")
            .await
            .spec
            .unwrap()
            .replicas,
        Some(1),
        "enable restored CAS"
    );

    // Setup created a cluster-scoped NodeClass and NodePool named after the namespace.
    let dp = kube::api::DeleteParams::default();
    kube::Api::<karpenter_api::NodePool>::all(client.clone())
        .delete(&ns, &dp)
        .await
        .unwrap();
    kube::Api::<karpenter_api::ClusterAPINodeClass>::all(client.clone())
        .delete(&ns, &dp)
        .await
        .unwrap();
}
