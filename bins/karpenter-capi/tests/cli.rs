//! The CLI binary end to end: documented exit codes, output formats, completions, against
//! the test control plane.

#![allow(clippy::unwrap_used)]

use std::process::Command;

fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
        .args(args)
        .env("KUBECONFIG", testenv::kubeconfig_path())
        .env_remove("CLUSTER_API_KUBECONFIG")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn completions_and_help_document_exit_codes() {
    let (code, out, _) = cli(&["completions", "bash"]);
    assert_eq!(code, 0);
    assert!(out.contains("karpenter-capi") && out.contains("discover"));
    let (code, out, _) = cli(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("Exit codes"));
}

#[tokio::test]
async fn exit_codes_and_formats_against_the_control_plane() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "cli").await;
    // Empty namespace: nothing to discover, JSON is machine-readable, no colour when piped.
    let (code, out, err) = cli(&[
        "discover",
        "-o",
        "json",
        "--only-namespace",
        &ns,
        "--namespace",
        &ns,
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["resources"], serde_json::json!([]));
    let (code, out, _) = cli(&["discover", "--only-namespace", &ns]);
    assert_eq!(code, 0);
    assert!(out.starts_with("RESOURCE") && !out.contains('\x1b'));
    // Nothing selected: bad input.
    let (code, _, err) = cli(&["setup", "--only-namespace", &ns]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nothing selected"));
    // No hand-off record: 4.
    let (code, _, err) = cli(&["cas", "enable", "--namespace", &ns]);
    assert_eq!(code, 4, "{err}");
    // An unreadable kubeconfig: bad input, with the path named.
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
        .args(["discover", "--kubeconfig", "/nonexistent/kubeconfig"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/kubeconfig"));
}
