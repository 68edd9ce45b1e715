//! The Cluster Autoscaler's own test cases for these formats (kubernetes/autoscaler
//! `cloudprovider/clusterapi/*_test.go`, OpenShift's fork `cloudprovider/openshift/*_test.go`),
//! with the inputs as written there, plus property tests.

use super::*;
use proptest::prelude::*;

fn taint(key: &str, value: Option<&str>, effect: TaintEffect) -> Taint {
    Taint {
        key: key.into(),
        value: value.map(str::to_string),
        effect,
    }
}

/// `TestAnnotations` (clusterapi_unstructured_test.go): taints and labels annotations.
#[test]
fn cas_test_annotations_taints_and_labels() {
    let t = parse_taints("key1=value1:NoSchedule,key2=value2:NoExecute");
    assert!(t.bad.is_empty());
    assert_eq!(
        t.value,
        vec![
            taint("key1", Some("value1"), TaintEffect::NoSchedule),
            taint("key2", Some("value2"), TaintEffect::NoExecute),
        ]
    );
    let l = parse_labels("key3=value3,key4=value4,key5=value5");
    assert!(l.bad.is_empty());
    assert_eq!(l.value.len(), 3);
    assert_eq!(l.value["key3"], "value3");
    assert_eq!(l.value["key4"], "value4");
    assert_eq!(l.value["key5"], "value5");
    // README / TestNodeGroupTemplateNodeInfo: the annotation taint overrides the spec taint.
    let t = parse_taints("dedicated=gpu-override:NoSchedule");
    assert_eq!(
        t.value,
        vec![taint(
            "dedicated",
            Some("gpu-override"),
            TaintEffect::NoSchedule
        )]
    );
    // TemplateNodeInfo: "kubernetes.io/arch=arm64,my-custom-label=custom-value".
    let l = parse_labels("kubernetes.io/arch=arm64,my-custom-label=custom-value");
    assert_eq!(l.value["kubernetes.io/arch"], "arm64");
    assert_eq!(l.value["my-custom-label"], "custom-value");
}

/// Taint entries CAS' `parseTaint` treats specially, and what we do (docs/annotations.md,
/// intended differences: an unreadable taint is kept conservatively, never dropped).
#[test]
fn taint_entries_cas_skips_or_weakens_are_kept_conservatively() {
    // CAS: key only, empty effect (the scheduler ignores it). Ours: NoSchedule, reported.
    let t = parse_taints("dedicated=gpu");
    assert_eq!(
        t.value,
        vec![taint("dedicated", Some("gpu"), TaintEffect::NoSchedule)]
    );
    assert!(matches!(t.bad[0].error, ValueError::MissingTaintEffect(_)));
    // CAS: effect "Sometimes" kept as is (ignored by the scheduler). Ours: NoSchedule.
    let t = parse_taints("a=b:Sometimes");
    assert_eq!(
        t.value,
        vec![taint("a", Some("b"), TaintEffect::NoSchedule)]
    );
    assert!(matches!(
        t.bad[0].error,
        ValueError::UnknownTaintEffect { .. }
    ));
    // CAS: "invalid taint spec" (skipped). Ours: the placeholder taint.
    for bad in [
        "a=b=c:NoSchedule",
        "a:b:NoSchedule",
        "=b:NoSchedule",
        "a b:NoSchedule",
    ] {
        let t = parse_taints(bad);
        assert_eq!(t.value, vec![unparsed_taint()], "{bad}");
        assert_eq!(t.bad.len(), 1, "{bad}");
    }
    // CAS: invalid value -> skipped. Ours: the key, no value.
    let t = parse_taints("a=b c:NoExecute");
    assert_eq!(t.value, vec![taint("a", None, TaintEffect::NoExecute)]);
    assert!(matches!(t.bad[0].error, ValueError::InvalidValue(_)));
    // Good entries next to bad ones are kept; spaces and empty entries are harmless.
    let t = parse_taints(" gpu=true:NoSchedule ,, x:Bad, dedicated:NoExecute,");
    assert_eq!(
        t.value,
        vec![
            taint("gpu", Some("true"), TaintEffect::NoSchedule),
            taint("x", None, TaintEffect::NoSchedule),
            taint("dedicated", None, TaintEffect::NoExecute),
        ]
    );
    assert_eq!(t.bad.len(), 1);
    assert_eq!(parse_taints("").value, vec![]);
}

/// Label entries: CAS skips entries without `=`, keeps anything else unvalidated, and the
/// last of a repeated key wins.
#[test]
fn label_entries() {
    let l = parse_labels("tier=gpu,novalue,a=1,a=2,bad key=x,k=b=c,ok=");
    assert_eq!(l.value["tier"], "gpu");
    assert_eq!(l.value["a"], "2");
    assert_eq!(l.value["ok"], "");
    assert!(!l.value.contains_key("k"));
    let errors: Vec<&ValueError> = l.bad.iter().map(|b| &b.error).collect();
    assert!(matches!(errors[0], ValueError::MalformedPair(_)));
    assert!(matches!(errors[1], ValueError::DuplicateKey(_)));
    assert!(matches!(errors[2], ValueError::InvalidKey(_)));
    assert!(matches!(errors[3], ValueError::InvalidValue(_)));
    assert_eq!(l.bad.len(), 4);
    // Kubernetes' rules: prefix lower-case DNS subdomain, name <= 63, value <= 63.
    assert!(validate_key("Example.com/x").is_err());
    assert!(validate_key("example.com/X_y.z").is_ok());
    assert!(validate_key(&format!("x/{}", "a".repeat(64))).is_err());
    assert!(validate_value(&"v".repeat(63)).is_ok());
    assert!(validate_value(&"v".repeat(64)).is_err());
    let long = parse_labels(&format!("a={}", "v".repeat(5000)));
    assert!(long.value.is_empty());
    assert!(
        long.bad[0].entry.len() < 100,
        "clipped: {}",
        long.bad[0].entry
    );
}

/// `TestParseCSIDriverAnnotation` (clusterapi_unstructured_test.go), every case.
#[test]
fn cas_test_parse_csi_driver_annotation() {
    let cases: Vec<(&str, Vec<(&str, Option<i64>)>)> = vec![
        ("", vec![]),
        ("ebs.csi.aws.com=25", vec![("ebs.csi.aws.com", Some(25))]),
        (
            "ebs.csi.aws.com=25,efs.csi.aws.com=16,disk.csi.azure.com=16",
            vec![
                ("ebs.csi.aws.com", Some(25)),
                ("efs.csi.aws.com", Some(16)),
                ("disk.csi.azure.com", Some(16)),
            ],
        ),
        (
            " ebs.csi.aws.com = 25 , efs.csi.aws.com = 16 ",
            vec![("ebs.csi.aws.com", Some(25)), ("efs.csi.aws.com", Some(16))],
        ),
        (
            "ebs.csi.aws.com=1000",
            vec![("ebs.csi.aws.com", Some(1000))],
        ),
        ("ebs.csi.aws.com25", vec![]),
        ("=25", vec![]),
        ("ebs.csi.aws.com=abc", vec![]),
        ("ebs.csi.aws.com=-5", vec![]),
        // Zero: the driver without a limit.
        ("ebs.csi.aws.com=0", vec![("ebs.csi.aws.com", None)]),
        ("ebs.csi.aws.com=25.5", vec![]),
        (
            "ebs.csi.aws.com=25,invalid-format,efs.csi.aws.com=16,=10,disk.csi.azure.com=0",
            vec![
                ("ebs.csi.aws.com", Some(25)),
                ("efs.csi.aws.com", Some(16)),
                ("disk.csi.azure.com", None),
            ],
        ),
        (
            "ebs.csi.aws.com=25,,efs.csi.aws.com=16,",
            vec![("ebs.csi.aws.com", Some(25)), ("efs.csi.aws.com", Some(16))],
        ),
        (
            "ebs.csi.aws.com=2147483647",
            vec![("ebs.csi.aws.com", Some(2_147_483_647))],
        ),
    ];
    for (input, expected) in cases {
        let got = parse_csi_limits(input);
        let expected: BTreeMap<String, Option<i64>> = expected
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(got.value, expected, "{input:?}");
    }
    // Beyond CAS' int32: rejected, as CAS' ParseInt(.., 32) does.
    assert!(
        parse_csi_limits("ebs.csi.aws.com=2147483648")
            .value
            .is_empty()
    );
}

/// `TestParseGPUCapacity`, `TestParseMaxPodsCapacity` (upstream) and the OpenShift fork's
/// `TestParseMemoryCapacity` downstream (`memoryMb`) cases: these keys are integers.
#[test]
fn cas_integer_keys() {
    assert_eq!(parse_int("13"), Ok(13));
    for bad in [
        "not-a-quantity",
        "13Mi",
        "456Mi",
        "8Gi",
        "1.5",
        "1k",
        "1e3",
        "0x10",
        "",
    ] {
        assert!(
            matches!(parse_int(bad), Err(ValueError::NotAnInteger(_))),
            "{bad}"
        );
    }
    assert_eq!(parse_int("1024"), Ok(1024));
    assert_eq!(parse_int("+7"), Ok(7));
    assert_eq!(parse_int("-7"), Ok(-7));
    assert!(parse_int("99999999999999999999").is_err());
}

/// `TestUtilParseScalingBounds` values, one key at a time (the combination is in
/// instance_types_tests).
#[test]
fn cas_scaling_bound_values() {
    assert_eq!(parse_count("0"), Ok(0));
    assert_eq!(parse_count("1"), Ok(1));
    assert!(matches!(parse_count("-1"), Err(ValueError::Negative(_))));
    assert!(matches!(
        parse_count("not-an-int"),
        Err(ValueError::NotAnInteger(_))
    ));
}

#[test]
fn prices_and_capacity_types() {
    assert_eq!(parse_price("0.096"), Ok(0.096));
    assert_eq!(parse_price("12"), Ok(12.0));
    assert!(matches!(parse_price("-0.1"), Err(ValueError::Negative(_))));
    for bad in ["NaN", "inf", "1e3", "$1"] {
        assert!(matches!(parse_price(bad), Err(ValueError::NotADecimal(_))));
    }
    assert_eq!(parse_capacity_type("spot"), Ok(CapacityType::Spot));
    assert!(parse_capacity_type("preemptible").is_err());
}

#[test]
fn clip_bounds_quoted_values() {
    assert_eq!(clip("short"), "short");
    let c = clip(&"x".repeat(18_000));
    assert!(c.len() < 100 && c.ends_with("(18000 bytes)"), "{c}");
    // Multi-byte characters are never cut in half.
    let c = clip(&"é".repeat(100));
    assert!(c.starts_with('é'));
}

/// A good entry: a valid key, a valid value, a known effect.
fn good_taint() -> impl Strategy<Value = (String, Option<String>, usize)> {
    (
        "[a-z]([a-z0-9-]{0,6}[a-z0-9])?(\\.[a-z]([a-z0-9-]{0,4}[a-z0-9])?)?/[A-Za-z0-9]([A-Za-z0-9_.-]{0,10}[A-Za-z0-9])?|[a-z][a-z0-9]{0,10}",
        proptest::option::of("[A-Za-z0-9]([A-Za-z0-9_.-]{0,8}[A-Za-z0-9])?"),
        0usize..3,
    )
}

proptest! {
    #[test]
    fn parsers_never_panic(s in "\\PC{0,80}") {
        let _ = parse_taints(&s);
        let _ = parse_labels(&s);
        let _ = parse_csi_limits(&s);
        let _ = parse_count(&s);
        let _ = parse_int(&s);
        let _ = parse_price(&s);
        let _ = parse_capacity_type(&s);
        let _ = clip(&s);
    }

    /// Whatever sits next to them, good taint entries come back exactly, and every entry is
    /// either good or reported.
    #[test]
    fn taints_never_drop_a_good_entry(
        good in proptest::collection::vec(good_taint(), 0..4),
        noise in proptest::collection::vec("[a-zA-Z0-9./=: _-]{0,12}", 0..4),
    ) {
        let effects = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
        let mut entries: Vec<String> = Vec::new();
        for (i, (k, v, e)) in good.iter().enumerate() {
            entries.push(match v {
                Some(v) => format!("{k}={v}:{}", effects[*e]),
                None => format!("{k}:{}", effects[*e]),
            });
            if let Some(n) = noise.get(i) {
                entries.push(n.clone());
            }
        }
        let parsed = parse_taints(&entries.join(","));
        // The last entry of a key and effect wins; check the good ones that are last.
        for (i, (k, v, e)) in good.iter().enumerate() {
            let effect = parse_taint_effect(effects[*e]).unwrap();
            let later_same = good[i + 1..].iter().any(|(k2, _, e2)| k2 == k && e2 == e)
                || noise.iter().any(|n| n.contains(k.as_str()));
            if later_same { continue; }
            prop_assert!(
                parsed.value.contains(&Taint { key: k.clone(), value: v.clone(), effect }),
                "{:?} lost from {:?}", (k, v, e), parsed.value
            );
        }
        // No entry turns into no taint: each non-empty one is a taint (exact or
        // conservative), and one that is not exact is reported.
        for n in noise.iter().filter(|n| !n.trim().is_empty()) {
            let alone = parse_taints(n);
            prop_assert!(!alone.value.is_empty(), "{n:?} dropped");
        }
    }

    /// Good label entries survive bad neighbours; bad ones are reported with the entry.
    #[test]
    fn labels_never_drop_a_good_entry(
        good in proptest::collection::btree_map("[a-z][a-z0-9]{0,8}", "[a-z0-9]{0,8}", 0..5),
        noise in proptest::collection::vec("[A-Z /=:_-]{1,10}", 0..4),
    ) {
        let mut entries: Vec<String> = good.iter().map(|(k, v)| format!("{k}={v}")).collect();
        entries.extend(noise.iter().cloned());
        let parsed = parse_labels(&entries.join(","));
        for (k, v) in &good {
            prop_assert_eq!(parsed.value.get(k), Some(v));
        }
        for b in &parsed.bad {
            prop_assert!(!b.entry.is_empty());
        }
    }

    #[test]
    fn valid_taints_round_trip((key, value, effect) in good_taint()) {
        let effect_s = ["NoSchedule", "PreferNoSchedule", "NoExecute"][effect];
        let text = match &value {
            Some(v) => format!("{key}={v}:{effect_s}"),
            None => format!("{key}:{effect_s}"),
        };
        let parsed = parse_taints(&text);
        prop_assert!(parsed.bad.is_empty(), "{:?}", parsed.bad);
        prop_assert_eq!(parsed.value.len(), 1);
        prop_assert_eq!(&parsed.value[0].key, &key);
        prop_assert_eq!(&parsed.value[0].value, &value);
    }

    #[test]
    fn prices_are_finite_and_non_negative(s in "[-+]?[0-9]{0,30}(\\.[0-9]{0,30})?") {
        if let Ok(p) = parse_price(&s) {
            prop_assert!(p.is_finite() && p >= 0.0);
        }
    }

    #[test]
    fn integers_round_trip(n in any::<i64>()) {
        prop_assert_eq!(parse_int(&n.to_string()), Ok(n));
    }
}
