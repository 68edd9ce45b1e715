//! Which scalable resources a command may touch: names and/or a label selector, or all of
//! them when asked explicitly. `setup` never touches anything outside the selection.

use std::collections::BTreeMap;

use capi_adapter::{ResourceId, ScalableResource};
use serde::{Deserialize, Serialize};

use crate::Error;

/// One clause of a kubectl-style equality-based selector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Clause {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

/// Parses `k=v,k2!=v2,k3,!k4` (`==` is `=`). Set-based clauses (`in (...)`) are refused.
pub fn parse_selector(s: &str) -> Result<Vec<Clause>, Error> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if part.contains(" in ") || part.contains(" notin ") || part.contains('(') {
            return Err(Error::Invalid(format!(
                "selector clause {part:?}: only k=v, k!=v, k and !k are supported"
            )));
        }
        let clause = if let Some((k, v)) = part.split_once("!=") {
            Clause::NotEquals(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            Clause::Equals(k.trim().into(), v.trim().into())
        } else if let Some(k) = part.strip_prefix('!') {
            Clause::NotExists(k.trim().into())
        } else {
            Clause::Exists(part.into())
        };
        let key = match &clause {
            Clause::Equals(k, _)
            | Clause::NotEquals(k, _)
            | Clause::Exists(k)
            | Clause::NotExists(k) => k,
        };
        if key.is_empty() {
            return Err(Error::Invalid(format!(
                "selector clause {part:?} has no key"
            )));
        }
        out.push(clause);
    }
    Ok(out)
}

fn matches(clauses: &[Clause], labels: &BTreeMap<String, String>) -> bool {
    clauses.iter().all(|c| match c {
        Clause::Equals(k, v) => labels.get(k) == Some(v),
        Clause::NotEquals(k, v) => labels.get(k) != Some(v),
        Clause::Exists(k) => labels.contains_key(k),
        Clause::NotExists(k) => !labels.contains_key(k),
    })
}

/// What the user selected.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    /// `name`, `namespace/name` or `Kind.group/namespace/name`.
    pub names: Vec<String>,
    pub selector: Option<String>,
    pub all: bool,
}

impl Selection {
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.selector.is_none() && !self.all
    }

    fn name_matches(name: &str, id: &ResourceId) -> bool {
        if let Ok(full) = name.parse::<ResourceId>() {
            return &full == id;
        }
        match name.split_once('/') {
            Some((ns, n)) => ns == id.namespace && n == id.name,
            None => name == id.name,
        }
    }

    /// The selected resources (names OR'ed, then ANDed with the selector). Names that match
    /// nothing are an error, so a typo never silently selects nothing.
    pub fn apply<'a>(
        &self,
        resources: &'a [ScalableResource],
    ) -> Result<Vec<&'a ScalableResource>, Error> {
        if self.is_empty() {
            return Err(Error::NothingSelected);
        }
        let clauses = match &self.selector {
            Some(s) => parse_selector(s)?,
            None => Vec::new(),
        };
        for name in &self.names {
            if !resources.iter().any(|r| Self::name_matches(name, &r.id)) {
                return Err(Error::Invalid(format!(
                    "no scalable resource named {name:?}"
                )));
            }
        }
        Ok(resources
            .iter()
            .filter(|r| {
                self.names.is_empty() || self.names.iter().any(|n| Self::name_matches(n, &r.id))
            })
            .filter(|r| matches(&clauses, &r.labels))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_clauses() {
        let c = parse_selector("a=1, b!=2,c,!d").unwrap();
        let labels: BTreeMap<String, String> = [
            ("a".to_string(), "1".to_string()),
            ("c".to_string(), String::new()),
        ]
        .into();
        assert!(matches(&c, &labels));
        let mut other = labels.clone();
        other.insert("d".into(), "x".into());
        assert!(!matches(&c, &other));
        assert!(parse_selector("a in (b)").is_err());
        assert!(parse_selector("=x").is_err());
    }
}
