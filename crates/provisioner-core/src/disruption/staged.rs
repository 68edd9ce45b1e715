//! Staged merges: a merge the budgets forbid at once, done one budget's worth at a time.
//!
//! A NodePool's default budget is 10% of its nodes, rounded up: one node on any cluster under
//! twenty nodes. Karpenter then never merges there: replacing three half-empty nodes with one
//! needs three disruptions at once. On a small, quiet cluster that is where the money is (on
//! `openb`'s first 2,600 hours, three nodes at 1.36/h whose pods fit one node at 1.09/h, for
//! thousands of hours).
//!
//! A staged merge keeps the budget at every instant. Its first command launches the
//! replacement sized for the whole group and drains only the members the budget allows now
//! (the dearest first, so the cluster overspends least while the rest waits). The other
//! members, the *followers*, stay as they are; their pods were planned onto the replacement's
//! free room, so each can then go as a plain delete in a later loop, within the budget again,
//! on its own merit (the payback rule judges it like any other delete).
//!
//! The command is chosen on the whole merge's value: its saving once every follower has gone,
//! against every member's evictions. The risk is a follower that never goes (its pods change,
//! arrivals take the room, or kube-scheduler puts the drained pods elsewhere than planned):
//! the cluster then runs the larger replacement for fewer pods, and the next loop may find
//! the same merge with that replacement going first. So (in [`super::consolidation`]):
//! followers are few ([`super::DisruptionOptions::staged_merge_followers`]) and each must pay
//! back alone; staging waits while any node can simply be deleted; a staged merge goes onto
//! one new node, over nodes not still settling after an eviction, and saves more than its
//! members could each on their own; and re-validation checks the whole merge still holds
//! before the first step starts.

/// Splits a set the budgets forbid at once into what goes now and the followers.
///
/// Members are taken dearest first (then by name) while `allowed` accepts the part so far.
/// Returns the followers, in that order, or `None` when nothing may go now, when everything
/// may (no staging needed), or when more than `max_followers` would wait.
pub fn split<'n>(
    members: &[usize],
    max_followers: usize,
    price: &dyn Fn(usize) -> f64,
    name: &dyn Fn(usize) -> &'n str,
    allowed: &dyn Fn(&[usize]) -> bool,
) -> Option<Vec<usize>> {
    if max_followers == 0 {
        return None;
    }
    let mut order = members.to_vec();
    order.sort_by(|&a, &b| price(b).total_cmp(&price(a)).then(name(a).cmp(name(b))));
    let mut now: Vec<usize> = Vec::new();
    let mut followers: Vec<usize> = Vec::new();
    for m in order {
        now.push(m);
        if !allowed(&now) {
            now.pop();
            followers.push(m);
        }
    }
    (!now.is_empty() && !followers.is_empty() && followers.len() <= max_followers)
        .then_some(followers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(prices: &[f64], budget: usize, max_followers: usize) -> Option<Vec<usize>> {
        let members: Vec<usize> = (0..prices.len()).collect();
        let names: Vec<String> = (0..prices.len()).map(|i| format!("n{i}")).collect();
        split(
            &members,
            max_followers,
            &|m| prices[m],
            &|m| names[m].as_str(),
            &|now| now.len() <= budget,
        )
    }

    #[test]
    fn the_dearest_goes_first_and_the_rest_follow() {
        assert_eq!(run(&[0.4, 0.9, 0.5], 1, 4), Some(vec![2, 0]));
    }

    #[test]
    fn no_staging_when_the_budget_allows_all_or_nothing() {
        assert_eq!(run(&[0.4, 0.9], 2, 4), None);
        assert_eq!(run(&[0.4, 0.9], 0, 4), None);
    }

    #[test]
    fn too_many_followers_or_staging_off() {
        assert_eq!(run(&[0.4, 0.9, 0.5, 0.3], 1, 2), None);
        assert_eq!(run(&[0.4, 0.9, 0.5], 1, 0), None);
    }

    #[test]
    fn equal_prices_go_by_name() {
        assert_eq!(run(&[0.5, 0.5, 0.5], 1, 4), Some(vec![1, 2]));
    }

    proptest! {
        /// What goes now is allowed, the parts cover the set exactly once, and no follower is
        /// dearer than what goes now.
        #[test]
        fn a_split_is_a_partition_within_the_budget(
            prices in prop::collection::vec(0.01f64..5.0, 2..12),
            budget in 1usize..6,
        ) {
            let members: Vec<usize> = (0..prices.len()).collect();
            if let Some(followers) = run(&prices, budget, usize::MAX) {
                let now: Vec<usize> =
                    members.iter().copied().filter(|m| !followers.contains(m)).collect();
                prop_assert_eq!(now.len(), budget);
                prop_assert_eq!(now.len() + followers.len(), members.len());
                let cheapest_now = now.iter().map(|m| prices[*m]).fold(f64::MAX, f64::min);
                prop_assert!(followers.iter().all(|f| prices[*f] <= cheapest_now));
            } else {
                prop_assert!(prices.len() <= budget);
            }
        }
    }
}
