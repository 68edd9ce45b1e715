//! Per-domain counts of a topology group, cheap to clone and, for domains known up front
//! (a hostname group's one domain per existing node), readable by position.
//!
//! Consolidation clones one cluster state per simulation; a hostname-keyed group holds one
//! count per node, so copying plain maps made every simulation cost as much as the cluster is
//! large (profiles: about half of a simulation at 1,000 nodes was cloning and dropping them).
//! A clone copies an overlay only (the domains this state changed), and the overlay is folded
//! into a new shared base when it grows past a fraction of it.
//!
//! The existing-node first fit reads a hostname group's count for every node with room it
//! walks past; by name that is a label lookup and a hashed string on node data that no longer
//! fits the cache, and the number of such nodes grows with the cluster (`benches/README.md`,
//! scale round 8). Domains interned in a [`DomainIds`] are kept in an array instead, so that
//! read is one index.

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::sync::Arc;

/// Domain names numbered once per cluster (the hostnames of its existing nodes).
#[derive(Debug, Default)]
pub struct DomainIds {
    by_name: HashMap<String, u32>,
    names: Vec<String>,
}

impl DomainIds {
    /// Numbers each distinct name in order of first appearance.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> DomainIds {
        let mut ids = DomainIds::default();
        for n in names {
            if !ids.by_name.contains_key(n) {
                ids.by_name.insert(n.to_string(), ids.names.len() as u32);
                ids.names.push(n.to_string());
            }
        }
        ids
    }

    /// The number of a domain, if interned.
    pub fn id(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// An interned domain's slot holds this until something is added to it.
const ABSENT: i32 = i32::MIN;

/// Counts of interned domains, by number: a shared array and a private overlay.
#[derive(Debug, Clone)]
struct Dense {
    ids: Arc<DomainIds>,
    /// Grown to the interner's size on the first fold (a group made during a simulation and
    /// touching few nodes never allocates one slot per node).
    base: Arc<Vec<i32>>,
    /// Hashed, not ordered: the first fit reads it for every node with room it walks past,
    /// and a state is cloned once per simulation. As a B-tree of up to an eighth of a
    /// 10,000-node base, a read cost about 200 instructions and a clone one allocation per
    /// tree node (`benches/README.md`, scale round 12). Nothing iterates it in order.
    overlay: HashMap<u32, i32>,
    /// Slots of `base` that are not [`ABSENT`].
    base_present: usize,
}

impl Dense {
    fn get(&self, id: u32) -> Option<i32> {
        match self.overlay.get(&id) {
            Some(c) => Some(*c),
            None => self.base.get(id as usize).copied().filter(|c| *c != ABSENT),
        }
    }

    fn fold(&mut self) {
        if self.overlay.is_empty() {
            return;
        }
        let base = Arc::make_mut(&mut self.base);
        if base.len() < self.ids.len() {
            base.resize(self.ids.len(), ABSENT);
        }
        for (id, c) in std::mem::take(&mut self.overlay) {
            if let Some(slot) = base.get_mut(id as usize) {
                if *slot == ABSENT {
                    self.base_present += 1;
                }
                *slot = c;
            }
        }
    }
}

/// A count per domain: a shared base map and a small private overlay, plus the same for
/// interned domains by number when made with [`Counts::with_ids`]. Reads see
/// `base + overlay`; a domain is *present* (see [`Counts::len`]) once anything was added to
/// it, as a map entry would be.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    base: Arc<HashMap<String, i32>>,
    overlay: BTreeMap<String, i32>,
    dense: Option<Dense>,
    /// Domains present in any part.
    present: usize,
    /// Domains whose count is above zero.
    positive: usize,
}

impl Counts {
    /// Empty counts that keep the domains of `ids` by number.
    pub fn with_ids(ids: Arc<DomainIds>) -> Counts {
        Counts {
            dense: Some(Dense {
                ids,
                base: Arc::default(),
                overlay: HashMap::default(),
                base_present: 0,
            }),
            ..Counts::default()
        }
    }

    /// Whether these counts keep `ids`' domains by number (so [`Counts::get_id`] answers).
    pub fn uses_ids(&self, ids: &Arc<DomainIds>) -> bool {
        self.dense
            .as_ref()
            .is_some_and(|d| Arc::ptr_eq(&d.ids, ids))
    }

    /// The count of a domain (0 when absent).
    pub fn get(&self, domain: &str) -> i32 {
        self.lookup(domain).unwrap_or(0)
    }

    /// The count of the interned domain `id` (0 when absent); `None` when these counts keep
    /// no interned domains.
    pub fn get_id(&self, id: u32) -> Option<i32> {
        self.dense.as_ref().map(|d| d.get(id).unwrap_or(0))
    }

    fn interned(&self, domain: &str) -> Option<u32> {
        self.dense.as_ref().and_then(|d| d.ids.id(domain))
    }

    fn lookup(&self, domain: &str) -> Option<i32> {
        self.lookup_as(domain, self.interned(domain))
    }

    /// [`Counts::lookup`] with the domain's number already looked up.
    fn lookup_as(&self, domain: &str, id: Option<u32>) -> Option<i32> {
        if let Some(id) = id
            && let Some(d) = &self.dense
        {
            return d.get(id);
        }
        self.overlay
            .get(domain)
            .or_else(|| self.base.get(domain))
            .copied()
    }

    /// Adds `k` to a domain, making it present.
    pub fn add(&mut self, domain: &str, k: i32) {
        let id = self.interned(domain);
        self.add_as(domain, id, k);
    }

    /// [`Counts::add`] with the domain's number already looked up (one hash, not three).
    fn add_as(&mut self, domain: &str, id: Option<u32>, k: i32) {
        let old = self.lookup_as(domain, id);
        if old.is_none() {
            self.present += 1;
        }
        let old = old.unwrap_or(0);
        let new = old + k;
        if old > 0 {
            self.positive -= 1;
        }
        if new > 0 {
            self.positive += 1;
        }
        match (id, self.dense.as_mut()) {
            (Some(id), Some(d)) => {
                d.overlay.insert(id, new);
            }
            _ => match self.overlay.get_mut(domain) {
                Some(c) => *c = new,
                None => {
                    self.overlay.insert(domain.to_string(), new);
                }
            },
        }
        self.compact();
    }

    /// [`Counts::add`] (`by` above 0) or [`Counts::decrement`] (below 0) of the interned
    /// domain `id`, for counts that keep domains by number ([`Counts::uses_ids`]): the caller
    /// knows the number, so the name is neither looked up nor hashed.
    pub fn change_id(&mut self, id: u32, by: i32) {
        if self.dense.is_none() {
            return;
        }
        if by >= 0 {
            self.add_as("", Some(id), by);
        } else if self.lookup_as("", Some(id)).is_some() {
            self.add_as("", Some(id), -1);
        }
    }

    /// Subtracts one from a domain that is present (an absent domain stays absent).
    pub fn decrement(&mut self, domain: &str) {
        let id = self.interned(domain);
        if self.lookup_as(domain, id).is_some() {
            self.add_as(domain, id, -1);
        }
    }

    /// Domains present (as a map's length).
    pub fn len(&self) -> usize {
        self.present
    }

    /// Whether every count lives in the shared base.
    pub fn overlay_is_empty(&self) -> bool {
        self.overlay.is_empty() && self.dense.as_ref().is_none_or(|d| d.overlay.is_empty())
    }

    /// No domain present.
    pub fn is_empty(&self) -> bool {
        self.present == 0
    }

    /// Whether some domain counts above zero.
    pub fn any_positive(&self) -> bool {
        self.positive > 0
    }

    /// Every present domain and its count, in domain order.
    pub fn to_map(&self) -> BTreeMap<String, i32> {
        let mut m: BTreeMap<String, i32> = self.base.iter().map(|(k, v)| (k.clone(), *v)).collect();
        for (k, v) in &self.overlay {
            m.insert(k.clone(), *v);
        }
        if let Some(d) = &self.dense {
            for (id, name) in d.ids.names.iter().enumerate() {
                if let Some(c) = d.get(id as u32) {
                    m.insert(name.clone(), c);
                }
            }
        }
        m
    }

    /// A copy that shares nothing with `self` and keeps every domain by name (the
    /// straightforward reference in tests).
    #[cfg(test)]
    pub(crate) fn unshared(&self) -> Counts {
        let mut c = Counts::default();
        for (k, v) in self.to_map() {
            c.add(&k, v);
        }
        c
    }

    /// Folds a large overlay into a new base, so clones stay small.
    fn compact(&mut self) {
        let (dense_overlay, dense_base) = self
            .dense
            .as_ref()
            .map_or((0, 0), |d| (d.overlay.len(), d.base_present));
        let overlay = self.overlay.len() + dense_overlay;
        if overlay <= 32 || overlay * 8 <= self.base.len() + dense_base {
            return;
        }
        self.fold();
    }

    /// Folds the whole overlay into the base: for a state about to be cloned many times. An
    /// overlay may hold up to an eighth of the base between compactions, and copying that
    /// per clone made a consolidation simulation's cost grow with the cluster (hostname
    /// groups have a domain per node).
    pub fn fold(&mut self) {
        if let Some(d) = self.dense.as_mut() {
            d.fold();
        }
        if self.overlay.is_empty() {
            return;
        }
        let base = Arc::make_mut(&mut self.base);
        for (k, v) in std::mem::take(&mut self.overlay) {
            base.insert(k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// `Counts` reads like a plain map through adds, decrements, compaction, folds and
        /// clones that go on changing independently, with or without interned domains (half
        /// of the domains used here are interned), by name and by number.
        #[test]
        fn counts_behave_like_a_map(
            interned in proptest::bool::ANY,
            ops in proptest::collection::vec((0u8..5, 0u16..120, -2i32..4), 0..400),
        ) {
            let ids = Arc::new(DomainIds::from_names(
                (0..60).map(|d| format!("d{d}")).collect::<Vec<_>>().iter().map(String::as_str),
            ));
            let mut fast = if interned { Counts::with_ids(Arc::clone(&ids)) } else { Counts::default() };
            let mut model: BTreeMap<String, i32> = BTreeMap::new();
            let mut snapshots: Vec<(Counts, BTreeMap<String, i32>)> = Vec::new();
            for (op, d, k) in ops {
                let d = format!("d{d}");
                match op {
                    0 => {
                        fast.add(&d, k);
                        *model.entry(d).or_insert(0) += k;
                    }
                    1 => {
                        fast.decrement(&d);
                        if let Some(c) = model.get_mut(&d) {
                            *c -= 1;
                        }
                    }
                    // By number where the domain is interned (a negative change is a
                    // decrement, as `ClusterState` uses it), by name otherwise.
                    4 => {
                        match ids.id(&d).filter(|_| fast.uses_ids(&ids)) {
                            Some(id) => fast.change_id(id, k),
                            None if k < 0 => fast.decrement(&d),
                            None => fast.add(&d, k),
                        }
                        if k >= 0 {
                            *model.entry(d).or_insert(0) += k;
                        } else if let Some(c) = model.get_mut(&d) {
                            *c -= 1;
                        }
                    }
                    2 => snapshots.push((fast.clone(), model.clone())),
                    _ => {
                        fast.fold();
                        proptest::prop_assert!(fast.overlay_is_empty());
                    }
                }
                proptest::prop_assert_eq!(fast.len(), model.len());
                proptest::prop_assert_eq!(fast.any_positive(), model.values().any(|c| *c > 0));
            }
            proptest::prop_assert_eq!(fast.to_map(), model.clone());
            proptest::prop_assert_eq!(fast.uses_ids(&ids), interned);
            for (c, m) in &snapshots {
                proptest::prop_assert_eq!(&c.to_map(), m);
                for (d, v) in m {
                    proptest::prop_assert_eq!(c.get(d), *v);
                }
                for d in 0..60u32 {
                    let want = m.get(&format!("d{d}")).copied().unwrap_or(0);
                    proptest::prop_assert_eq!(c.get_id(d), interned.then_some(want));
                }
            }
        }
    }

    #[test]
    fn a_group_touching_few_domains_allocates_no_slot_per_domain() {
        let ids = Arc::new(DomainIds::from_names(
            (0..10_000)
                .map(|d| format!("n{d}"))
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str),
        ));
        let mut c = Counts::with_ids(ids);
        for d in 0..32 {
            c.add(&format!("n{d}"), 1);
        }
        assert_eq!(c.dense.as_ref().map(|d| d.base.len()), Some(0));
        c.add("n32", 1);
        // Past 32 changed domains over an empty base the overlay folds: now one slot each.
        assert_eq!(c.dense.as_ref().map(|d| d.base.len()), Some(10_000));
        assert!(c.overlay_is_empty());
        assert_eq!(c.get_id(32), Some(1));
        assert_eq!(c.get_id(33), Some(0));
    }
}
