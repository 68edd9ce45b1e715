//! Property tests of the API types: durations parse to what they say, and any value of the
//! shared spec types survives a JSON round trip unchanged (what the controller writes is
//! what it reads back).

use karpenter_api::{
    Budget, DisruptionReason, NodeClassReference, NodeSelectorRequirementWithMinValues, Operator,
    parse_go_duration,
};
use proptest::prelude::*;

fn operator() -> impl Strategy<Value = Operator> {
    prop_oneof![
        Just(Operator::In),
        Just(Operator::NotIn),
        Just(Operator::Exists),
        Just(Operator::DoesNotExist),
        Just(Operator::Gt),
        Just(Operator::Lt),
        Just(Operator::Gte),
        Just(Operator::Lte),
    ]
}

fn requirement() -> impl Strategy<Value = NodeSelectorRequirementWithMinValues> {
    (
        "[a-z]{1,8}(\\.[a-z]{1,5})?/[a-z0-9-]{1,10}",
        proptest::option::of(1i64..=50),
        operator(),
        proptest::option::of(proptest::collection::vec("[a-zA-Z0-9.-]{0,12}", 0..5)),
    )
        .prop_map(
            |(key, min_values, operator, values)| NodeSelectorRequirementWithMinValues {
                key,
                min_values,
                operator,
                values,
            },
        )
}

fn budget() -> impl Strategy<Value = Budget> {
    (
        proptest::option::of("[0-9]{1,2}h[0-9]{1,2}m"),
        prop_oneof!["[0-9]{1,3}", "[0-9]{1,2}%"],
        proptest::option::of(proptest::collection::vec(
            prop_oneof![
                Just(DisruptionReason::Empty),
                Just(DisruptionReason::Drifted),
                Just(DisruptionReason::Underutilized)
            ],
            0..3,
        )),
        proptest::option::of(Just("@daily".to_string())),
    )
        .prop_map(|(duration, nodes, reasons, schedule)| Budget {
            duration,
            nodes,
            reasons,
            schedule,
        })
}

proptest! {
    #[test]
    fn go_durations_parse_to_their_seconds(h in 0u64..10_000, m in 0u64..600, s in 0u64..600) {
        let text = format!("{h}h{m}m{s}s");
        let parsed = parse_go_duration(&text).expect("valid duration");
        prop_assert_eq!(parsed.as_secs(), h * 3600 + m * 60 + s);
    }

    #[test]
    fn garbage_durations_are_errors_not_panics(text in "\\PC{0,12}") {
        let _ = parse_go_duration(&text);
    }

    #[test]
    fn requirements_round_trip(req in requirement()) {
        let json = serde_json::to_value(&req).expect("serialize");
        let back: NodeSelectorRequirementWithMinValues = serde_json::from_value(json).expect("deserialize");
        prop_assert_eq!(back, req);
    }

    #[test]
    fn budgets_round_trip(b in budget()) {
        let json = serde_json::to_string(&b).expect("serialize");
        let back: Budget = serde_json::from_str(&json).expect("deserialize");
        prop_assert_eq!(back, b);
    }

    #[test]
    fn node_class_refs_round_trip(group in "[a-z.]{1,20}", kind in "[A-Za-z]{1,20}", name in "[a-z0-9-]{1,20}") {
        let r = NodeClassReference { group, kind, name };
        let back: NodeClassReference = serde_json::from_value(serde_json::to_value(&r).expect("ser")).expect("de");
        prop_assert_eq!(back, r);
    }
}
