//! The open nodes of a greedy pass, in the order items try them, and per item profile the
//! nodes that profile may still join.
//!
//! A node that rejects an item for lack of a compatible shape (its shapes only narrow) or for a
//! group limit (its group counts only grow) rejects every item of that profile for good, so
//! first fit skips it from then on. At 100,000 pods (20,000 open nodes, 79 profiles) scanning
//! every open node was most of a pass. Two layouts, chosen by whether a node's position
//! changes when it takes an item:
//!
//! - **Stable positions** ([`NodeOrder::Creation`]): one list per profile, in creation order,
//!   of the nodes that had not rejected it when it was last tidied; a node that takes an item
//!   stays where it is, so nothing moves (moving it anyway, in every profile's list, was a
//!   sixth of a 100,000-pod run). Closed and rejecting nodes are marked, skipped, and dropped
//!   when a list's skipped entries reach an eighth of it (a tidy costs no more than eight
//!   times the skipping it saves). Plain vectors: B-tree lists per profile were a tenth of a
//!   20,000-pod run's memory.
//! - **Moving positions** ([`NodeOrder::FewestPods`]): a node moves after every item it takes,
//!   so per-profile lists cost two B-tree operations per profile per item. Instead there is
//!   one ordered set and a bit per (profile, node) that says "rejected for good"; a scan tests
//!   the bit. Rejected nodes are still walked past (207 million times on 100,000 benchmark
//!   pods, mostly hostname anti-affinity replicas passing their siblings' nodes), but that
//!   measured 1.6 s for the pass against 1.95 s with per-profile lists. A profile that most
//!   open nodes rejected (a zone's pods past the other zones' nodes) gets an ordered set of
//!   its own, kept in step with the shared one, so its scans stop walking past them; the
//!   other profiles keep the shared set and the bit.
//!
//! Both answer "the open nodes of this profile, in order" identically.

use std::cell::Cell;
use std::collections::{BTreeSet, HashMap};

use super::greedy::NodeOrder;

/// A node's place in the order: (order key, node index).
pub type Entry = (usize, usize);

/// The open nodes and their per-profile views.
pub struct OpenLists {
    layout: Layout,
}

enum Layout {
    Stable(Stable),
    Moving(Moving),
}

/// See "Stable positions" above.
#[derive(Default)]
struct Stable {
    /// Every node opened, by index, in order (closed ones dropped when a profile's list is
    /// made). Lists hold 4-byte indices: 79 lists of 20,000 nodes are otherwise 25 MB.
    all: Vec<u32>,
    /// Per node index: its order key (it never changes).
    keys: Vec<usize>,
    lists: HashMap<u32, StableList>,
    /// One bit per node index: closed.
    closed: Vec<u64>,
}

#[derive(Default)]
struct StableList {
    entries: Vec<u32>,
    /// One bit per node index: rejected this profile for good.
    rejected: Vec<u64>,
    /// Entries walked past as closed or rejected since the last tidy.
    skipped: Cell<usize>,
}

/// See "Moving positions" above.
#[derive(Default)]
struct Moving {
    open: BTreeSet<Entry>,
    /// Per profile, one bit per node index: rejected for good.
    rejected: HashMap<u32, Vec<u64>>,
    /// Per profile: open nodes that rejected it.
    rejecting: HashMap<u32, usize>,
    /// Profiles most open nodes rejected: the open nodes that did not, in order.
    own: HashMap<u32, BTreeSet<Entry>>,
    /// Open nodes below which a profile keeps the shared set (a walk is short anyway).
    own_from: usize,
}

impl Moving {
    fn reject(&mut self, profile: u32, entry: Entry) {
        let bits = self.rejected.entry(profile).or_default();
        if bit(bits, entry.1) {
            return;
        }
        set_bit(bits, entry.1);
        if let Some(own) = self.own.get_mut(&profile) {
            own.remove(&entry);
            return;
        }
        let n = self.rejecting.entry(profile).or_default();
        *n += 1;
        if *n * 2 > self.open.len() && self.open.len() >= self.own_from {
            let own = self
                .open
                .iter()
                .filter(|(_, idx)| !bit(bits, *idx))
                .copied()
                .collect();
            self.own.insert(profile, own);
        }
    }

    fn close(&mut self, entry: Entry) {
        self.open.remove(&entry);
        for own in self.own.values_mut() {
            own.remove(&entry);
        }
        for (profile, bits) in &self.rejected {
            if bit(bits, entry.1)
                && let Some(n) = self.rejecting.get_mut(profile)
            {
                *n = n.saturating_sub(1);
            }
        }
    }
}

impl OpenLists {
    pub fn new(order: NodeOrder) -> OpenLists {
        Self::with_own_from(order, 64)
    }

    /// As [`Self::new`], a profile getting its own set once `own_from` nodes are open.
    fn with_own_from(order: NodeOrder, own_from: usize) -> OpenLists {
        let layout = match order {
            NodeOrder::Creation => Layout::Stable(Stable::default()),
            NodeOrder::FewestPods => Layout::Moving(Moving {
                own_from,
                ..Moving::default()
            }),
        };
        OpenLists { layout }
    }

    /// Prepares a profile's view on its first item: every open node may take it.
    pub fn ensure(&mut self, profile: u32) {
        match &mut self.layout {
            Layout::Stable(st) => {
                if st.lists.contains_key(&profile) {
                    return;
                }
                let closed = &st.closed;
                st.all.retain(|idx| !bit(closed, *idx as usize));
                st.lists.insert(
                    profile,
                    StableList {
                        entries: st.all.clone(),
                        ..StableList::default()
                    },
                );
            }
            Layout::Moving(mv) => {
                mv.rejected.entry(profile).or_default();
            }
        }
    }

    /// The open nodes an item of `profile` may join, in order.
    pub fn scan(&mut self, profile: u32) -> Box<dyn Iterator<Item = Entry> + '_> {
        match &mut self.layout {
            Layout::Stable(st) => {
                let (closed, keys) = (&st.closed, &st.keys);
                let Some(list) = st.lists.get_mut(&profile) else {
                    return Box::new(std::iter::empty());
                };
                if list.skipped.get() >= (list.entries.len() / 8).max(64) {
                    let rejected = &list.rejected;
                    list.entries
                        .retain(|idx| !bit(closed, *idx as usize) && !bit(rejected, *idx as usize));
                    list.skipped.set(0);
                }
                let list = &*list;
                Box::new(list.entries.iter().filter_map(move |idx| {
                    let idx = *idx as usize;
                    if bit(closed, idx) || bit(&list.rejected, idx) {
                        list.skipped.set(list.skipped.get() + 1);
                        return None;
                    }
                    Some((keys.get(idx).copied().unwrap_or_default(), idx))
                }))
            }
            Layout::Moving(mv) => {
                if let Some(own) = mv.own.get(&profile) {
                    return Box::new(own.iter().copied());
                }
                let rejected = mv.rejected.get(&profile);
                Box::new(
                    mv.open
                        .iter()
                        .copied()
                        .filter(move |(_, idx)| !rejected.is_some_and(|b| bit(b, *idx))),
                )
            }
        }
    }

    /// A node rejected `profile` for good.
    pub fn reject(&mut self, profile: u32, entry: Entry) {
        match &mut self.layout {
            Layout::Stable(st) => {
                if let Some(l) = st.lists.get_mut(&profile) {
                    set_bit(&mut l.rejected, entry.1);
                }
            }
            Layout::Moving(mv) => {
                if mv.rejected.contains_key(&profile) {
                    mv.reject(profile, entry);
                }
            }
        }
    }

    /// A new node opens: it is last in creation order and joins every profile's view.
    pub fn add(&mut self, entry: Entry) {
        match &mut self.layout {
            Layout::Stable(st) => {
                let (key, idx) = entry;
                if st.keys.len() <= idx {
                    st.keys.resize(idx + 1, 0);
                }
                if let Some(k) = st.keys.get_mut(idx) {
                    *k = key;
                }
                st.all.push(idx as u32);
                for l in st.lists.values_mut() {
                    l.entries.push(idx as u32);
                }
            }
            Layout::Moving(mv) => {
                mv.open.insert(entry);
                for own in mv.own.values_mut() {
                    own.insert(entry);
                }
            }
        }
    }

    /// A node took an item and stays open under key `to`. In creation order a node never
    /// moves (`to` is `from`).
    pub fn moved(&mut self, from: Entry, to: Entry) {
        if from == to {
            return;
        }
        match &mut self.layout {
            Layout::Stable(_) => debug_assert_eq!(from, to, "creation order moved a node"),
            Layout::Moving(mv) => {
                mv.open.remove(&from);
                mv.open.insert(to);
                for own in mv.own.values_mut() {
                    if own.remove(&from) {
                        own.insert(to);
                    }
                }
            }
        }
    }

    /// A node can take no remaining item: it leaves every view for good.
    pub fn close(&mut self, entry: Entry) {
        match &mut self.layout {
            Layout::Stable(st) => set_bit(&mut st.closed, entry.1),
            Layout::Moving(mv) => mv.close(entry),
        }
    }
}

fn bit(bits: &[u64], idx: usize) -> bool {
    bits.get(idx / 64)
        .is_some_and(|w| w & (1 << (idx % 64)) != 0)
}

fn set_bit(bits: &mut Vec<u64>, idx: usize) {
    let word = idx / 64;
    if bits.len() <= word {
        bits.resize(word + 1, 0);
    }
    if let Some(w) = bits.get_mut(word) {
        *w |= 1 << (idx % 64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One step of a pass, as the engine performs it.
    #[derive(Debug, Clone)]
    enum Op {
        Add,
        Ensure(u32),
        Reject(u32, usize),
        Move(usize),
        Close(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Add),
            (0u32..4).prop_map(Op::Ensure),
            (0u32..4, 0usize..40).prop_map(|(p, n)| Op::Reject(p, n)),
            (0usize..40).prop_map(Op::Move),
            (0usize..40).prop_map(Op::Close),
        ]
    }

    /// Both layouts, driven by the same steps with the keys of `order`, list every profile's
    /// nodes as a plain model does: open, not rejected, sorted.
    fn check(order: NodeOrder, own_from: usize, ops: &[Op]) {
        let mut lists = OpenLists::with_own_from(order, own_from);
        let mut keys: Vec<Option<usize>> = Vec::new();
        let mut ensured: BTreeSet<u32> = BTreeSet::new();
        let mut rejected: BTreeSet<(u32, usize)> = BTreeSet::new();
        let mut next_key = 1000usize;
        let key_of = |k: usize, idx: usize| match order {
            NodeOrder::Creation => (0, idx),
            NodeOrder::FewestPods => (k, idx),
        };
        for op in ops {
            match op {
                Op::Add => {
                    let idx = keys.len();
                    keys.push(Some(next_key));
                    lists.add(key_of(next_key, idx));
                    next_key += 1;
                }
                Op::Ensure(p) => {
                    lists.ensure(*p);
                    ensured.insert(*p);
                }
                Op::Reject(p, idx) => {
                    if let Some(Some(k)) = keys.get(*idx)
                        && ensured.contains(p)
                    {
                        lists.reject(*p, key_of(*k, *idx));
                        rejected.insert((*p, *idx));
                    }
                }
                Op::Move(idx) => {
                    if let Some(slot) = keys.get_mut(*idx)
                        && let Some(k) = *slot
                    {
                        let to = next_key % 7;
                        next_key += 1;
                        lists.moved(key_of(k, *idx), key_of(to, *idx));
                        *slot = Some(to);
                    }
                }
                Op::Close(idx) => {
                    if let Some(slot) = keys.get_mut(*idx)
                        && let Some(k) = slot.take()
                    {
                        lists.close(key_of(k, *idx));
                    }
                }
            }
            // After every step, so skipped entries pile up and lists get tidied.
            for p in &ensured {
                let mut want: Vec<Entry> = keys
                    .iter()
                    .enumerate()
                    .filter_map(|(idx, k)| Some(key_of((*k)?, idx)))
                    .filter(|(_, idx)| !rejected.contains(&(*p, *idx)))
                    .collect();
                want.sort();
                let got: Vec<Entry> = lists.scan(*p).collect();
                assert_eq!(got, want, "profile {p}");
            }
        }
    }

    proptest! {
        #[test]
        fn both_layouts_list_what_a_plain_model_lists(ops in prop::collection::vec(op(), 0..120)) {
            check(NodeOrder::Creation, 64, &ops);
            check(NodeOrder::FewestPods, 64, &ops);
            // Profiles get their own sets early, so most steps run through them.
            check(NodeOrder::FewestPods, 1, &ops);
        }
    }

    #[test]
    fn a_list_walked_past_many_closed_nodes_is_tidied_and_keeps_its_order() {
        let mut l = OpenLists::new(NodeOrder::Creation);
        l.ensure(0);
        for idx in 0..400 {
            l.add((0, idx));
        }
        for idx in (0..400).filter(|i| i % 4 != 3) {
            l.close((0, idx));
        }
        l.reject(0, (0, 7));
        let want: Vec<Entry> = (0..400)
            .filter(|i| i % 4 == 3 && *i != 7)
            .map(|i| (0, i))
            .collect();
        assert_eq!(l.scan(0).collect::<Vec<_>>(), want);
        // The first scan walked past 301 dead entries; the next one tidies first.
        assert_eq!(l.scan(0).collect::<Vec<_>>(), want);
        let Layout::Stable(st) = &l.layout else {
            panic!("creation order keeps stable lists");
        };
        assert_eq!(st.lists.get(&0).map(|x| x.entries.len()), Some(want.len()));
    }

    #[test]
    fn a_profile_most_nodes_rejected_scans_its_own_set_in_step_with_the_shared_one() {
        let mut l = OpenLists::with_own_from(NodeOrder::FewestPods, 1);
        l.ensure(0);
        for (k, idx) in [(5, 0), (6, 1), (7, 2)] {
            l.add((k, idx));
        }
        l.reject(0, (5, 0));
        l.reject(0, (6, 1));
        let Layout::Moving(mv) = &l.layout else {
            panic!("fewest-pods order moves nodes");
        };
        assert!(
            mv.own.contains_key(&0),
            "two of three nodes rejected profile 0"
        );
        l.add((8, 3));
        l.moved((7, 2), (9, 2));
        l.close((8, 3));
        l.add((1, 4));
        assert_eq!(l.scan(0).collect::<Vec<_>>(), vec![(1, 4), (9, 2)]);
        // A profile no node rejected still walks the shared set.
        l.ensure(1);
        assert_eq!(
            l.scan(1).collect::<Vec<_>>(),
            vec![(1, 4), (5, 0), (6, 1), (9, 2)]
        );
    }

    #[test]
    fn a_rejecting_node_is_skipped_and_others_keep_their_order() {
        let mut l = OpenLists::new(NodeOrder::FewestPods);
        l.ensure(0);
        for (k, idx) in [(5, 0), (3, 1), (4, 2)] {
            l.add((k, idx));
        }
        l.reject(0, (3, 1));
        assert_eq!(l.scan(0).collect::<Vec<_>>(), vec![(4, 2), (5, 0)]);
        l.ensure(1);
        assert_eq!(l.scan(1).collect::<Vec<_>>(), vec![(3, 1), (4, 2), (5, 0)]);
    }
}
