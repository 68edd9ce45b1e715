//! The report JSON matches the report's JSON Schema, and the committed scenario schema
//! (docs/simulator.schema.json) matches the code.

use std::path::Path;

use karpenter_capi_simulator::{report, run, scenario};
use serde_json::Value;

/// A small JSON Schema checker for what schemars emits: `$ref` into `$defs`, `type` (string
/// or list), `properties`, `required`, `items`, `anyOf`/`oneOf`, `enum`, `const`,
/// `additionalProperties: false`, and `format: uint*` as non-negative.
fn check(schema: &Value, root: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        match root.get("$defs").and_then(|d| d.get(name)) {
            Some(s) => check(s, root, v, path, errors),
            None => errors.push(format!("{path}: unresolved {r}")),
        }
        return;
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = schema.get(key).and_then(Value::as_array) {
            let ok = alts.iter().any(|s| {
                let mut e = Vec::new();
                check(s, root, v, path, &mut e);
                e.is_empty()
            });
            if !ok {
                errors.push(format!("{path}: matches none of {key}"));
            }
            return;
        }
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        });
        if !ok {
            errors.push(format!("{path}: expected {types:?}, got {v}"));
            return;
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        errors.push(format!("{path}: {v} not in enum"));
    }
    if let Some(c) = schema.get("const")
        && c != v
    {
        errors.push(format!("{path}: {v} is not {c}"));
    }
    if let Some(f) = schema.get("format").and_then(Value::as_str)
        && f.starts_with("uint")
        && v.as_f64().is_some_and(|x| x < 0.0)
    {
        errors.push(format!("{path}: negative {f}"));
    }
    if let Some(obj) = v.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for req in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(k) = req.as_str()
                && !obj.contains_key(k)
            {
                errors.push(format!("{path}: missing required `{k}`"));
            }
        }
        for (k, val) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(s, root, val, &format!("{path}.{k}"), errors),
                None => {
                    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                        errors.push(format!("{path}: unexpected property `{k}`"));
                    } else if let Some(ap) =
                        schema.get("additionalProperties").filter(|a| a.is_object())
                    {
                        check(ap, root, val, &format!("{path}.{k}"), errors);
                    }
                }
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            check(items, root, x, &format!("{path}[{i}]"), errors);
        }
    }
}

#[test]
fn report_json_matches_its_schema() -> Result<(), Box<dyn std::error::Error>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tiny-optimal.yaml");
    let ls = scenario::load(&path)?;
    let rep = run::run(&ls, &run::RunOptions::default())?;
    let v = serde_json::to_value(&rep)?;
    let schema = report::json_schema();
    let mut errors = Vec::new();
    check(&schema, &schema, &v, "$", &mut errors);
    assert!(errors.is_empty(), "{errors:#?}");
    // And the checker does catch a broken report.
    let mut broken = v.clone();
    if let Some(o) = broken.as_object_mut() {
        o.remove("runs");
        o.insert("extra".into(), Value::Bool(true));
    }
    let mut errors = Vec::new();
    check(&schema, &schema, &broken, "$", &mut errors);
    assert_eq!(errors.len(), 2, "{errors:?}");
    // Round trip.
    let back: report::Report = serde_json::from_value(v)?;
    assert_eq!(back.runs.len(), rep.runs.len());
    Ok(())
}

#[test]
fn examples_match_the_scenario_schema() -> Result<(), Box<dyn std::error::Error>> {
    let schema = scenario::json_schema();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir)? {
        let p = entry?.path();
        if p.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&p)?;
        let v: Value = serde_saphyr::from_str(&text)?;
        let mut errors = Vec::new();
        check(&schema, &schema, &v, "$", &mut errors);
        assert!(errors.is_empty(), "{}: {errors:#?}", p.display());
        scenario::parse(&text, &p.display().to_string())?;
        n += 1;
    }
    assert!(n >= 2, "examples found: {n}");
    Ok(())
}

#[test]
fn committed_scenario_schema_is_current() -> Result<(), Box<dyn std::error::Error>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/simulator.schema.json");
    let want = serde_json::to_string_pretty(&scenario::json_schema())? + "\n";
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &want)?;
        return Ok(());
    }
    assert!(
        have == want,
        "docs/simulator.schema.json is stale: regenerate with `UPDATE_SCHEMA=1 cargo test -p karpenter-capi-simulator --test report_schema` or `karpenter-capi-sim schema > docs/simulator.schema.json`"
    );
    Ok(())
}
