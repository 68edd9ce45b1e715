//! Taints and tolerations, with the kube-scheduler's matching rules.

use crate::model::{Taint, TaintEffect, Toleration, TolerationOperator};

impl Toleration {
    /// Whether this toleration tolerates `taint`: an empty key with `Exists` matches every
    /// key, a missing effect every effect; `Equal` compares values (a missing value is "").
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(e) = self.effect
            && e != taint.effect
        {
            return false;
        }
        match &self.key {
            None => self.operator == TolerationOperator::Exists,
            Some(k) if k.is_empty() => self.operator == TolerationOperator::Exists,
            Some(k) => {
                if *k != taint.key {
                    return false;
                }
                match self.operator {
                    TolerationOperator::Exists => true,
                    TolerationOperator::Equal => {
                        self.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
                    }
                }
            }
        }
    }

    /// Tolerates every taint (`operator: Exists` with no key), as daemonsets often do.
    pub fn everything() -> Toleration {
        Toleration {
            key: None,
            operator: TolerationOperator::Exists,
            value: None,
            effect: None,
        }
    }

    /// `key=value:effect` toleration (helper).
    pub fn equal(key: &str, value: &str, effect: Option<TaintEffect>) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: TolerationOperator::Equal,
            value: Some(value.into()),
            effect,
        }
    }
}

impl Taint {
    /// `key=value:effect` (helper).
    pub fn new(key: &str, value: Option<&str>, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect,
        }
    }
}

/// The first taint a pod does not tolerate, if any. `PreferNoSchedule` taints count only when
/// `strict_prefer` is set: Karpenter first treats them as hard and relaxes that last.
pub fn first_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    strict_prefer: bool,
) -> Option<&'a Taint> {
    taints.iter().find(|t| {
        if t.effect == TaintEffect::PreferNoSchedule && !strict_prefer {
            return false;
        }
        !tolerations.iter().any(|tol| tol.tolerates(t))
    })
}

/// Whether every hard taint is tolerated.
pub fn tolerates_all(taints: &[Taint], tolerations: &[Toleration], strict_prefer: bool) -> bool {
    first_untolerated(taints, tolerations, strict_prefer).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_scheduler_matching_rules() {
        let t = Taint::new("gpu", Some("true"), TaintEffect::NoSchedule);
        assert!(Toleration::everything().tolerates(&t));
        assert!(Toleration::equal("gpu", "true", None).tolerates(&t));
        assert!(Toleration::equal("gpu", "true", Some(TaintEffect::NoSchedule)).tolerates(&t));
        assert!(!Toleration::equal("gpu", "true", Some(TaintEffect::NoExecute)).tolerates(&t));
        assert!(!Toleration::equal("gpu", "false", None).tolerates(&t));
        let exists = Toleration {
            key: Some("gpu".into()),
            operator: TolerationOperator::Exists,
            ..Default::default()
        };
        assert!(exists.tolerates(&t));
        let no_value = Taint::new("dedicated", None, TaintEffect::NoExecute);
        assert!(
            Toleration {
                key: Some("dedicated".into()),
                ..Default::default()
            }
            .tolerates(&no_value)
        );
    }

    #[test]
    fn prefer_no_schedule_is_soft_unless_strict() {
        let taints = vec![Taint::new("soft", None, TaintEffect::PreferNoSchedule)];
        assert!(tolerates_all(&taints, &[], false));
        assert!(!tolerates_all(&taints, &[], true));
    }
}
