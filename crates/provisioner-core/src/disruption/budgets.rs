//! NodePool disruption budgets (`spec.disruption.budgets`), with Karpenter's semantics.
//!
//! For each NodePool and reason, the number of nodes that may be disrupted now is the most
//! restrictive *active* budget that applies to the reason, minus the pool's nodes that are
//! already disrupting (marked for deletion) or NotReady:
//!
//! - `nodes` is a count (`"5"`) or a percentage of the pool's initialized nodes (`"10%"`),
//!   rounded **up** (like PDB `maxUnavailable`: 5% of 10 nodes allows 1, not 0);
//! - a budget with no `reasons` applies to every reason;
//! - a budget with a `schedule` (UTC cron, 5 fields or an `@daily`-style macro) and a
//!   `duration` is active from each scheduled time for `duration`; the window may span midnight
//!   or days. Karpenter's test is "the first scheduled time after `now - duration` is not after
//!   `now`", i.e. a hit in `(now - duration, now]`; we use the same test;
//! - with no active budget for a reason, disruption for that reason is unlimited.
//!
//! A malformed budget (bad `nodes`, unparsable cron, a schedule without a duration or the
//! reverse) never gets ignored: Karpenter's `MustGetAllowedDisruptions` turns any budget error
//! into zero allowed disruptions for the whole NodePool, and so do we, and we report it.

use std::collections::BTreeMap;
use std::str::FromStr as _;

use chrono::{DateTime, TimeDelta, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::model::{Budget, DisruptionReason, NodePool, Snapshot};

/// Every reason budgets are computed for.
pub const REASONS: [DisruptionReason; 4] = [
    DisruptionReason::Empty,
    DisruptionReason::Underutilized,
    DisruptionReason::Drifted,
    DisruptionReason::Expired,
];

/// The `nodes` field of a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BudgetNodes {
    Count(u32),
    /// 0..=100.
    Percent(u32),
}

impl BudgetNodes {
    /// Parses `"5"` or `"10%"` with the CRD's pattern `^((100|[0-9]{1,2})%|[0-9]+)$`.
    pub fn parse(s: &str) -> Result<BudgetNodes, BudgetError> {
        let bad = || BudgetError::Nodes(s.to_string());
        if let Some(pct) = s.strip_suffix('%') {
            if pct.is_empty() || pct.len() > 3 || !pct.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            let v: u32 = pct.parse().map_err(|_| bad())?;
            if v > 100 || (pct.len() == 3 && v != 100) {
                return Err(bad());
            }
            Ok(BudgetNodes::Percent(v))
        } else {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            s.parse().map(BudgetNodes::Count).map_err(|_| bad())
        }
    }

    /// The number of nodes this allows out of `num_nodes`; percentages round up.
    pub fn limit(self, num_nodes: usize) -> u32 {
        match self {
            BudgetNodes::Count(n) => n,
            BudgetNodes::Percent(p) => {
                let scaled = (num_nodes as u64 * u64::from(p)).div_ceil(100);
                u32::try_from(scaled).unwrap_or(u32::MAX)
            }
        }
    }
}

/// Why a budget is malformed.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum BudgetError {
    #[error("nodes {0:?} is neither a count nor a percentage (e.g. \"5\" or \"10%\")")]
    Nodes(String),
    #[error("schedule {schedule:?} is not a valid cron expression: {error}")]
    Schedule { schedule: String, error: String },
    #[error("schedule {schedule:?} never fires")]
    ScheduleNeverFires { schedule: String },
    #[error("schedule is set without a duration")]
    ScheduleWithoutDuration,
    #[error("duration is set without a schedule")]
    DurationWithoutSchedule,
    #[error("duration {0}s is not positive")]
    Duration(i64),
    #[error("current time {0} is out of range")]
    Time(i64),
}

/// When a scheduled budget is active.
#[derive(Debug, Clone)]
pub struct Window {
    pub schedule: String,
    cron: Cron,
    pub duration_secs: i64,
}

impl Window {
    /// Whether a scheduled time falls in `(now - duration, now]`.
    pub fn is_active(&self, now: i64) -> Result<bool, BudgetError> {
        let now_t: DateTime<Utc> =
            DateTime::from_timestamp(now, 0).ok_or(BudgetError::Time(now))?;
        let start = now_t - TimeDelta::seconds(self.duration_secs);
        match self.cron.find_next_occurrence(&start, false) {
            Ok(next) => Ok(next <= now_t),
            Err(_) => Err(BudgetError::ScheduleNeverFires {
                schedule: self.schedule.clone(),
            }),
        }
    }
}

impl Window {
    /// The next time after `now` the window may open or close (`None` when the schedule
    /// never fires again). A loop that skips evaluations while nothing changes must wake up
    /// then: a budget's window moving is a change no cluster event announces. The answer may
    /// be early (an occurrence inside an open window), never late.
    pub fn next_edge(&self, now: i64) -> Option<i64> {
        let now_t: DateTime<Utc> = DateTime::from_timestamp(now, 0)?;
        let opens = self
            .cron
            .find_next_occurrence(&now_t, false)
            .ok()
            .map(|t| t.timestamp());
        let start = now_t - TimeDelta::seconds(self.duration_secs);
        let closes = self
            .cron
            .find_next_occurrence(&start, false)
            .ok()
            .map(|t| t.timestamp() + self.duration_secs)
            .filter(|t| *t > now);
        match (opens, closes) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A budget after validation.
#[derive(Debug, Clone)]
pub struct ParsedBudget {
    pub nodes: BudgetNodes,
    /// Empty: every reason.
    pub reasons: Vec<DisruptionReason>,
    pub window: Option<Window>,
}

impl ParsedBudget {
    /// Validates a budget as the CRD and Karpenter would.
    pub fn parse(b: &Budget) -> Result<ParsedBudget, BudgetError> {
        let nodes = BudgetNodes::parse(b.nodes.trim())?;
        let window = match (&b.schedule, b.duration_secs) {
            (None, None) => None,
            (Some(_), None) => return Err(BudgetError::ScheduleWithoutDuration),
            (None, Some(_)) => return Err(BudgetError::DurationWithoutSchedule),
            (Some(s), Some(d)) => {
                if d <= 0 {
                    return Err(BudgetError::Duration(d));
                }
                Some(Window {
                    schedule: s.clone(),
                    cron: parse_cron(s)?,
                    duration_secs: d,
                })
            }
        };
        Ok(ParsedBudget {
            nodes,
            reasons: b.reasons.clone(),
            window,
        })
    }

    /// Whether the budget limits this reason.
    pub fn applies_to(&self, reason: DisruptionReason) -> bool {
        self.reasons.is_empty() || self.reasons.contains(&reason)
    }

    /// Whether the budget is in force at `now`.
    pub fn is_active(&self, now: i64) -> Result<bool, BudgetError> {
        match &self.window {
            None => Ok(true),
            Some(w) => w.is_active(now),
        }
    }
}

/// Karpenter parses schedules with robfig/cron's standard parser: five fields (no seconds, no
/// year) or a descriptor such as `@daily`; day-of-month and day-of-week are ORed when both are
/// restricted (Vixie cron), which is croner's default.
fn parse_cron(s: &str) -> Result<Cron, BudgetError> {
    let s = s.trim();
    let err = |e: String| BudgetError::Schedule {
        schedule: s.to_string(),
        error: e,
    };
    // Karpenter prefixes "TZ=UTC"; a user-written TZ= or CRON_TZ= prefix would change the
    // meaning, and the CRD documents UTC only, so reject it rather than silently ignore it.
    if s.starts_with("TZ=") || s.starts_with("CRON_TZ=") {
        return Err(err("time zones are not supported: schedules are UTC".into()));
    }
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    let cron = if s.starts_with('@') {
        Cron::from_str(s)
    } else {
        parser.parse(s)
    };
    cron.map_err(|e| err(e.to_string()))
}

/// A malformed budget, reported so the controller can put it on the NodePool's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetProblem {
    pub nodepool: String,
    /// Index in `spec.disruption.budgets`.
    pub budget: usize,
    pub error: BudgetError,
}

/// The budget state of one NodePool for one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetStatus {
    pub nodepool: String,
    pub reason: DisruptionReason,
    /// Initialized nodes of the pool (the base of percentages).
    pub total_nodes: u32,
    /// Nodes of the pool already being disrupted or NotReady.
    pub disrupting: u32,
    /// The most restrictive active budget; `None` when no budget is active (unlimited).
    pub limit: Option<u32>,
    /// Index of the budget that sets `limit`.
    pub limiting_budget: Option<usize>,
    /// What may still be disrupted: `max(limit - disrupting, 0)`, 0 when a budget is malformed.
    pub allowed: u32,
    /// A malformed budget blocks the pool.
    pub blocked: bool,
}

/// Allowed disruptions per NodePool and reason for one snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budgets {
    pub statuses: Vec<BudgetStatus>,
    pub problems: Vec<BudgetProblem>,
    #[serde(skip)]
    index: BTreeMap<(String, DisruptionReason), usize>,
}

/// The most restrictive active limit (`None`: unlimited) and the index of the budget setting it.
pub type PoolLimit = (Option<u32>, Option<usize>);

/// The limit set by a NodePool's budgets for a reason at `now`, Karpenter's
/// `GetAllowedDisruptionsByReason`: `Ok(None)` = unlimited; `Err` lists every malformed budget
/// (of any reason: one bad budget blocks the whole pool).
pub fn pool_limit(
    pool: &NodePool,
    num_nodes: usize,
    reason: DisruptionReason,
    now: i64,
) -> Result<PoolLimit, Vec<(usize, BudgetError)>> {
    let mut errors = Vec::new();
    let mut best: Option<(u32, usize)> = None;
    for (i, b) in pool.disruption.budgets.iter().enumerate() {
        let parsed = match ParsedBudget::parse(b) {
            Ok(p) => p,
            Err(e) => {
                errors.push((i, e));
                continue;
            }
        };
        let active = match parsed.is_active(now) {
            Ok(a) => a,
            Err(e) => {
                errors.push((i, e));
                continue;
            }
        };
        if active && parsed.applies_to(reason) {
            let limit = parsed.nodes.limit(num_nodes);
            if best.is_none_or(|(l, _)| limit < l) {
                best = Some((limit, i));
            }
        }
    }
    if errors.is_empty() {
        Ok((best.map(|b| b.0), best.map(|b| b.1)))
    } else {
        Err(errors)
    }
}

impl Budgets {
    /// Computes every pool's budgets. Counts follow Karpenter's `BuildDisruptionBudgetMapping`:
    /// only managed, initialized nodes count, and those NotReady or marked for deletion are
    /// already disrupting.
    pub fn compute(snapshot: &Snapshot) -> Budgets {
        let mut counts: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
        for n in &snapshot.nodes {
            let Some(pool) = n.nodepool.as_deref() else {
                continue;
            };
            if n.in_flight || !n.initialized {
                continue;
            }
            let e = counts.entry(pool).or_default();
            e.0 += 1;
            if !n.ready || n.marked_for_deletion {
                e.1 += 1;
            }
        }
        let mut out = Budgets::default();
        let mut pools: Vec<&NodePool> = snapshot.nodepools.iter().collect();
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        for pool in pools {
            let (total, disrupting) = counts.get(pool.name.as_str()).copied().unwrap_or((0, 0));
            let mut reported = false;
            for reason in REASONS {
                let status = match pool_limit(pool, total as usize, reason, snapshot.now) {
                    Ok((limit, limiting_budget)) => BudgetStatus {
                        nodepool: pool.name.clone(),
                        reason,
                        total_nodes: total,
                        disrupting,
                        limit,
                        limiting_budget,
                        allowed: limit.map_or(u32::MAX, |l| l.saturating_sub(disrupting)),
                        blocked: false,
                    },
                    Err(errors) => {
                        if !reported {
                            reported = true;
                            out.problems
                                .extend(errors.into_iter().map(|(budget, error)| BudgetProblem {
                                    nodepool: pool.name.clone(),
                                    budget,
                                    error,
                                }));
                        }
                        BudgetStatus {
                            nodepool: pool.name.clone(),
                            reason,
                            total_nodes: total,
                            disrupting,
                            limit: Some(0),
                            limiting_budget: None,
                            allowed: 0,
                            blocked: true,
                        }
                    }
                };
                out.index
                    .insert((pool.name.clone(), reason), out.statuses.len());
                out.statuses.push(status);
            }
        }
        out
    }

    /// How many more nodes of `pool` may be disrupted for `reason`; 0 for an unknown pool.
    pub fn allowed(&self, pool: &str, reason: DisruptionReason) -> u32 {
        self.status(pool, reason).map_or(0, |s| s.allowed)
    }

    /// The status of one pool and reason.
    pub fn status(&self, pool: &str, reason: DisruptionReason) -> Option<&BudgetStatus> {
        // `index` is skipped by serde; fall back to a scan after deserialization.
        match self.index.get(&(pool.to_string(), reason)) {
            Some(&i) => self.statuses.get(i),
            None => self
                .statuses
                .iter()
                .find(|s| s.nodepool == pool && s.reason == reason),
        }
    }

    /// Whether a malformed budget blocks the pool.
    pub fn is_blocked(&self, pool: &str) -> bool {
        self.problems.iter().any(|p| p.nodepool == pool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Disruption, Node};

    const HOUR: i64 = 3600;
    /// 2026-11-30T00:00:00Z, a Monday.
    const MON_MIDNIGHT: i64 = 1_795_996_800;

    fn budget(nodes: &str) -> Budget {
        Budget {
            nodes: nodes.into(),
            reasons: vec![],
            schedule: None,
            duration_secs: None,
        }
    }

    fn scheduled(nodes: &str, schedule: &str, duration_secs: i64) -> Budget {
        Budget {
            nodes: nodes.into(),
            reasons: vec![],
            schedule: Some(schedule.into()),
            duration_secs: Some(duration_secs),
        }
    }

    fn pool(budgets: Vec<Budget>) -> NodePool {
        NodePool {
            name: "pool".into(),
            disruption: Disruption {
                budgets,
                ..Disruption::default()
            },
            ..NodePool::default()
        }
    }

    fn limit(p: &NodePool, n: usize, reason: DisruptionReason, now: i64) -> Option<u32> {
        pool_limit(p, n, reason, now).expect("valid budgets").0
    }

    #[test]
    fn monday_midnight_constant_is_right() {
        let t = DateTime::from_timestamp(MON_MIDNIGHT, 0).expect("in range");
        assert_eq!(t.to_rfc3339(), "2026-11-30T00:00:00+00:00");
        assert_eq!(chrono::Datelike::weekday(&t), chrono::Weekday::Mon);
    }

    #[test]
    fn counts_and_percent_rounding_up() {
        assert_eq!(BudgetNodes::parse("5"), Ok(BudgetNodes::Count(5)));
        assert_eq!(BudgetNodes::parse("10%"), Ok(BudgetNodes::Percent(10)));
        assert_eq!(BudgetNodes::Percent(10).limit(10), 1);
        assert_eq!(BudgetNodes::Percent(10).limit(11), 2, "1.1 rounds up");
        assert_eq!(
            BudgetNodes::Percent(5).limit(10),
            1,
            "0.5 rounds up, never blocks a small pool"
        );
        assert_eq!(BudgetNodes::Percent(0).limit(1000), 0);
        assert_eq!(BudgetNodes::Percent(100).limit(7), 7);
        assert_eq!(BudgetNodes::Percent(33).limit(0), 0);
        assert_eq!(BudgetNodes::Count(0).limit(100), 0);
    }

    #[test]
    fn malformed_nodes_values_are_rejected() {
        for bad in [
            "",
            "-1",
            "10 %",
            "101%",
            "1.5",
            "ten",
            "%",
            "050%x",
            "1000%",
            "99999999999",
        ] {
            assert!(
                BudgetNodes::parse(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
        assert_eq!(BudgetNodes::parse("100%"), Ok(BudgetNodes::Percent(100)));
        assert_eq!(BudgetNodes::parse("07%"), Ok(BudgetNodes::Percent(7)));
    }

    #[test]
    fn most_restrictive_active_budget_wins() {
        let p = pool(vec![budget("10"), budget("20%"), budget("3")]);
        assert_eq!(limit(&p, 100, DisruptionReason::Underutilized, 0), Some(3));
        let p = pool(vec![budget("10"), budget("2%")]);
        assert_eq!(limit(&p, 100, DisruptionReason::Underutilized, 0), Some(2));
    }

    #[test]
    fn no_budgets_means_unlimited() {
        let p = pool(vec![]);
        assert_eq!(limit(&p, 100, DisruptionReason::Empty, 0), None);
    }

    #[test]
    fn reasons_select_budgets() {
        let mut drift_only = budget("0");
        drift_only.reasons = vec![DisruptionReason::Drifted];
        let mut empty_under = budget("1");
        empty_under.reasons = vec![DisruptionReason::Empty, DisruptionReason::Underutilized];
        let p = pool(vec![drift_only, empty_under, budget("50%")]);
        assert_eq!(limit(&p, 10, DisruptionReason::Drifted, 0), Some(0));
        assert_eq!(limit(&p, 10, DisruptionReason::Empty, 0), Some(1));
        assert_eq!(limit(&p, 10, DisruptionReason::Underutilized, 0), Some(1));
        assert_eq!(limit(&p, 10, DisruptionReason::Expired, 0), Some(5));
    }

    #[test]
    fn cron_window_is_active_only_inside() {
        // Business hours block: 09:00 for 8h, every day.
        let p = pool(vec![scheduled("0", "0 9 * * *", 8 * HOUR), budget("10")]);
        let at = |h: i64| {
            limit(
                &p,
                10,
                DisruptionReason::Underutilized,
                MON_MIDNIGHT + h * HOUR,
            )
        };
        assert_eq!(at(8), Some(10), "before the window");
        assert_eq!(at(9), Some(0), "the scheduled instant itself is inside");
        assert_eq!(at(12), Some(0));
        assert_eq!(
            limit(
                &p,
                10,
                DisruptionReason::Underutilized,
                MON_MIDNIGHT + 17 * HOUR - 1
            ),
            Some(0)
        );
        assert_eq!(
            at(17),
            Some(10),
            "the window is half-open: (hit, hit + duration)"
        );
        assert_eq!(at(23), Some(10));
    }

    #[test]
    fn cron_window_edges_are_where_it_opens_and_closes() {
        let b = ParsedBudget::parse(&scheduled("0", "0 9 * * *", 8 * HOUR)).expect("valid");
        let w = b.window.expect("scheduled");
        assert_eq!(
            w.next_edge(MON_MIDNIGHT),
            Some(MON_MIDNIGHT + 9 * HOUR),
            "opens at 09:00"
        );
        assert_eq!(
            w.next_edge(MON_MIDNIGHT + 12 * HOUR),
            Some(MON_MIDNIGHT + 17 * HOUR),
            "inside: closes at 17:00"
        );
        assert_eq!(
            w.next_edge(MON_MIDNIGHT + 17 * HOUR),
            Some(MON_MIDNIGHT + 33 * HOUR),
            "closed: opens again the next morning"
        );
        // Every edge found is where the budget's state really flips.
        let mut t = MON_MIDNIGHT;
        for _ in 0..6 {
            let edge = w.next_edge(t).expect("fires daily");
            assert!(edge > t);
            assert_ne!(
                w.is_active(edge - 1).expect("in range"),
                w.is_active(edge).expect("in range"),
                "no flip at {edge}"
            );
            t = edge;
        }
    }

    #[test]
    fn cron_window_across_midnight() {
        // 22:00 for 4h: active 22:00..02:00 the next day.
        let p = pool(vec![scheduled("0", "0 22 * * *", 4 * HOUR)]);
        let at = |secs: i64| limit(&p, 10, DisruptionReason::Empty, MON_MIDNIGHT + secs);
        assert_eq!(at(-3 * HOUR), None, "21:00 Sunday: before");
        assert_eq!(at(-2 * HOUR), Some(0), "22:00 Sunday");
        assert_eq!(at(0), Some(0), "midnight");
        assert_eq!(at(HOUR + 59 * 60), Some(0), "01:59 Monday");
        assert_eq!(at(2 * HOUR), None, "02:00 Monday: over");
    }

    #[test]
    fn cron_window_on_weekdays_across_the_weekend() {
        // Friday 18:00 for 63h: the whole weekend until Monday 09:00.
        let p = pool(vec![scheduled("0", "0 18 * * 5", 63 * HOUR)]);
        let at = |secs: i64| limit(&p, 10, DisruptionReason::Drifted, MON_MIDNIGHT + secs);
        assert_eq!(at(0), Some(0), "Monday 00:00 is inside");
        assert_eq!(at(9 * HOUR - 1), Some(0));
        assert_eq!(at(9 * HOUR), None, "Monday 09:00 is outside");
        assert_eq!(at(-2 * 24 * HOUR), Some(0), "Saturday");
        assert_eq!(at(-(2 * 24 + 6) * HOUR - 1), None, "Friday 17:59:59");
    }

    #[test]
    fn macros_are_accepted() {
        let p = pool(vec![scheduled("0", "@daily", HOUR)]);
        assert_eq!(
            limit(&p, 10, DisruptionReason::Empty, MON_MIDNIGHT + 30 * 60),
            Some(0)
        );
        assert_eq!(
            limit(&p, 10, DisruptionReason::Empty, MON_MIDNIGHT + 2 * HOUR),
            None
        );
        let p = pool(vec![scheduled("0", "@hourly", 60)]);
        assert_eq!(
            limit(
                &p,
                10,
                DisruptionReason::Empty,
                MON_MIDNIGHT + 5 * HOUR + 30
            ),
            Some(0)
        );
        assert_eq!(
            limit(
                &p,
                10,
                DisruptionReason::Empty,
                MON_MIDNIGHT + 5 * HOUR + 90
            ),
            None
        );
    }

    #[test]
    fn malformed_budgets_block_the_pool_and_are_reported() {
        let cases = [
            budget("lots"),
            Budget {
                schedule: Some("0 9 * * *".into()),
                ..budget("1")
            },
            Budget {
                duration_secs: Some(60),
                ..budget("1")
            },
            scheduled("1", "not a cron", 60),
            scheduled("1", "0 9 * *", 60),
            scheduled("1", "0 0 9 * * *", 60),
            scheduled("1", "0 9 * * *", 0),
            scheduled("1", "0 0 30 2 *", 60),
            scheduled("1", "TZ=Europe/Paris 0 9 * * *", 60),
        ];
        for (i, bad) in cases.into_iter().enumerate() {
            // The bad budget only speaks of Drifted; it still blocks Empty.
            let mut bad = bad;
            bad.reasons = vec![DisruptionReason::Drifted];
            let p = pool(vec![budget("100%"), bad]);
            let snap = Snapshot {
                now: MON_MIDNIGHT,
                nodes: vec![Node {
                    name: "n".into(),
                    nodepool: Some("pool".into()),
                    initialized: true,
                    ready: true,
                    ..Node::default()
                }],
                nodepools: vec![p],
                ..Snapshot::default()
            };
            let b = Budgets::compute(&snap);
            assert_eq!(b.allowed("pool", DisruptionReason::Empty), 0, "case {i}");
            assert!(b.is_blocked("pool"), "case {i}");
            assert_eq!(
                b.problems.len(),
                1,
                "case {i}: reported once: {:?}",
                b.problems
            );
            assert_eq!(b.problems[0].budget, 1);
        }
    }

    #[test]
    fn disrupting_and_not_ready_nodes_consume_the_budget() {
        let node = |name: &str, ready: bool, deleting: bool| Node {
            name: name.into(),
            nodepool: Some("pool".into()),
            initialized: true,
            ready,
            marked_for_deletion: deleting,
            ..Node::default()
        };
        let mut nodes: Vec<Node> = (0..8)
            .map(|i| node(&format!("ok-{i}"), true, false))
            .collect();
        nodes.push(node("notready", false, false));
        nodes.push(node("deleting", true, true));
        // Neither uninitialized nor in-flight nodes count.
        nodes.push(Node {
            initialized: false,
            ..node("new", false, false)
        });
        nodes.push(Node {
            in_flight: true,
            ..node("flight", false, false)
        });
        let snap = Snapshot {
            nodes,
            nodepools: vec![pool(vec![budget("30%")])],
            ..Snapshot::default()
        };
        let b = Budgets::compute(&snap);
        let s = b
            .status("pool", DisruptionReason::Underutilized)
            .expect("status");
        assert_eq!(s.total_nodes, 10);
        assert_eq!(s.disrupting, 2);
        assert_eq!(s.limit, Some(3));
        assert_eq!(s.allowed, 1);
        assert_eq!(
            b.allowed("other", DisruptionReason::Underutilized),
            0,
            "unknown pool"
        );
    }

    #[test]
    fn allowed_never_goes_negative() {
        let nodes = (0..3)
            .map(|i| Node {
                name: format!("n{i}"),
                nodepool: Some("pool".into()),
                initialized: true,
                ..Node::default()
            })
            .collect();
        let snap = Snapshot {
            nodes,
            nodepools: vec![pool(vec![budget("1")])],
            ..Snapshot::default()
        };
        assert_eq!(
            Budgets::compute(&snap).allowed("pool", DisruptionReason::Empty),
            0
        );
    }
}
