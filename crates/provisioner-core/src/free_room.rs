//! The most free room of any node in each block of the existing-node order, and of each
//! span of blocks above them: lets the first-fit scan for a pod skip 64 full nodes at a time,
//! and whole spans of 512, 4,096, ... nodes when none of them has room.
//!
//! Placing a pod on an existing node is first fit in Karpenter's node order, so in a full
//! cluster every pod of a consolidation simulation walked past most of the cluster before it
//! found room; the scan grew with the cluster and made a 10,000-node pass cost more per
//! candidate than a 1,000-node one. With blocks alone a pod that fits nowhere still stepped
//! over every block (157 at 10,000 nodes, most of a simulation's first-fit time: scale round
//! 9 in `benches/README.md`); the levels above make that a handful of steps. A span is skipped
//! only when no node in it has the CPU, the memory or the pod slot the pod asks for, so the
//! first fit found is the same node.
//!
//! Each entry is an upper bound of its span's free room: exact when computed; a block is kept
//! exact when a pod lands in it (recounted), the spans above only grow with it (see
//! [`FreeRoom::refresh`]). A removed node is left counted until its block is next recounted;
//! that only makes the bound looser, never wrong.

use crate::chunked::Chunked;
use crate::model::Resources;
use crate::state::NodeState;

/// Nodes per block of the existing-node order.
pub const BLOCK: usize = 64;

/// Entries of one level per entry of the level above.
const FANOUT: usize = 8;

/// Free CPU, memory and pod slots.
type Room = [i64; 3];

const NONE: Room = [i64::MIN; 3];

/// Most CPU-and-memory corners kept per block ([`Corners`]).
const CORNERS: usize = 6;

/// The CPU and memory room of the nodes of a block that no other node of it beats in both:
/// a pod fits some node by CPU and memory only if one of these holds it.
///
/// The most room in each dimension on its own says a block may fit when one node has the
/// CPU and another the memory. A cluster that consolidation has just filled is like that
/// everywhere (room left in scraps), and the first-fit scan walked node by node through
/// most of it for every pod it re-placed (scale round 11 in `benches/README.md`). Beyond
/// [`CORNERS`] corners, neighbours in CPU order are merged into their elementwise most: a
/// looser bound, never a wrong one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Corners {
    len: u8,
    at: [[i64; 2]; CORNERS],
}

impl Corners {
    const EMPTY: Corners = Corners {
        len: 0,
        at: [[i64::MIN; 2]; CORNERS],
    };

    fn points(&self) -> &[[i64; 2]] {
        self.at.get(..usize::from(self.len)).unwrap_or_default()
    }

    /// Whether some corner has `cpu` and `memory` together.
    fn holds(&self, cpu: i64, memory: i64) -> bool {
        self.points().iter().any(|p| cpu <= p[0] && memory <= p[1])
    }

    /// Whether some corner has strictly more of both than `room`, so a node with `room` is
    /// none of the corners and shrinking or removing it leaves them as they are.
    fn beat(&self, room: &Room) -> bool {
        self.points()
            .iter()
            .any(|p| room[0] < p[0] && room[1] < p[1])
    }

    fn of(rooms: impl Iterator<Item = Room>) -> Corners {
        let mut front = [[0i64; 2]; BLOCK];
        let mut n = 0usize;
        for r in rooms {
            let r = [r[0], r[1]];
            if front.iter().take(n).any(|p| p[0] >= r[0] && p[1] >= r[1]) {
                continue;
            }
            // Drop the points `r` beats, keeping the rest in place.
            let mut kept = 0usize;
            for i in 0..n {
                let Some(&p) = front.get(i) else { break };
                if !(r[0] >= p[0] && r[1] >= p[1])
                    && let Some(slot) = front.get_mut(kept)
                {
                    *slot = p;
                    kept += 1;
                }
            }
            match front.get_mut(kept) {
                Some(slot) => {
                    *slot = r;
                    n = kept + 1;
                }
                // More rooms than a block has nodes: fold the extra one into the last point
                // (a looser bound, never a lost room).
                None => {
                    if let Some(last) = front.last_mut() {
                        *last = [last[0].max(r[0]), last[1].max(r[1])];
                    }
                    n = kept;
                }
            }
        }
        let front = front.get_mut(..n).unwrap_or_default();
        // By CPU, least first, so that merged neighbours are close in CPU.
        front.sort_unstable();
        let mut out = Corners::EMPTY;
        let groups = n.min(CORNERS);
        for g in 0..groups {
            // Group `g` of `groups` contiguous runs, as its elementwise most.
            let (lo, hi) = (g * n / groups, (g + 1) * n / groups);
            let most = front
                .get(lo..hi)
                .unwrap_or_default()
                .iter()
                .fold([i64::MIN; 2], |m, p| [m[0].max(p[0]), m[1].max(p[1])]);
            if let Some(slot) = out.at.get_mut(g) {
                *slot = most;
            }
        }
        out.len = u8::try_from(groups).unwrap_or(0);
        out
    }
}

/// One block's summary: the most free room of any node in it, each dimension on its own,
/// and its [`Corners`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    most: Room,
    corners: Corners,
}

/// Blocks per copy-on-write chunk of [`FreeRoom::blocks`] (a kilobyte).
const BLOCKS_PER_CHUNK: usize = 8;

/// Per block its [`Block`] summary; then per [`FANOUT`] entries of the level below, up to a
/// level of one entry.
#[derive(Debug, Clone, Default)]
pub struct FreeRoom {
    /// Copied on write in chunks: every simulation clones the state and changes a few
    /// blocks, and copying all of them (128 bytes a block, 20 KB at 10,000 nodes) made the
    /// clone grow with the cluster (`benches/README.md`, scale round 13).
    blocks: Chunked<Block, BLOCKS_PER_CHUNK>,
    /// `spans[k]` per `FANOUT^(k+1)` blocks.
    spans: Vec<Vec<Room>>,
}

/// A node's free room. Unbounded capacities count as unbounded so that the comparison can
/// never be stricter than the fit check's saturating sums.
fn room_of(ns: &NodeState) -> Room {
    let free = |alloc: i64, used: i64| {
        if alloc >= i64::MAX / 2 {
            i64::MAX
        } else {
            alloc.saturating_sub(used)
        }
    };
    [
        free(ns.allocatable.cpu_milli, ns.used.cpu_milli),
        free(ns.allocatable.memory, ns.used.memory),
        free(ns.allocatable.pods, ns.used.pods),
    ]
}

impl Block {
    /// The summary of block `b` of the `len` nodes (removed nodes left out).
    fn of<'a>(b: usize, len: usize, node: &impl Fn(usize) -> Option<&'a NodeState>) -> Block {
        let mut rooms = [NONE; BLOCK];
        let mut n = 0usize;
        for ns in (b * BLOCK..((b + 1) * BLOCK).min(len)).filter_map(node) {
            if !ns.removed
                && let Some(slot) = rooms.get_mut(n)
            {
                *slot = room_of(ns);
                n += 1;
            }
        }
        let rooms = rooms.get(..n).unwrap_or_default();
        Block {
            most: max_of(rooms.iter()),
            corners: Corners::of(rooms.iter().copied()),
        }
    }
}

fn max_of<'a>(rooms: impl Iterator<Item = &'a Room>) -> Room {
    let mut best = NONE;
    for r in rooms {
        for (m, v) in best.iter_mut().zip(r) {
            *m = (*m).max(*v);
        }
    }
    best
}

fn holds(room: &Room, requests: &Resources) -> bool {
    requests.cpu_milli <= room[0] && requests.memory <= room[1] && requests.pods <= room[2]
}

impl FreeRoom {
    /// Whether some node of block `b` may hold `requests`; unknown blocks may.
    fn block_holds(&self, b: usize, requests: &Resources) -> bool {
        self.blocks.get(b).is_none_or(|k| {
            holds(&k.most, requests) && k.corners.holds(requests.cpu_milli, requests.memory)
        })
    }

    /// Whether a node with `room` may be what block `b`'s summary holds: its room reaches
    /// the block's most in some dimension, or no corner beats it in both CPU and memory.
    /// A node that made neither can shrink or go without a recount.
    fn may_make_bound(&self, b: usize, room: &Room) -> bool {
        self.blocks
            .get(b)
            .is_none_or(|k| room.iter().zip(&k.most).any(|(r, m)| r >= m) || !k.corners.beat(room))
    }

    /// The summary of every block; `node(i)` is the node at position `i` of the order.
    pub fn build<'a>(len: usize, node: impl Fn(usize) -> Option<&'a NodeState>) -> FreeRoom {
        let blocks: Vec<Block> = (0..len.div_ceil(BLOCK))
            .map(|b| Block::of(b, len, &node))
            .collect();
        let most: Vec<Room> = blocks.iter().map(|k| k.most).collect();
        let mut spans: Vec<Vec<Room>> = Vec::new();
        loop {
            let below = spans.last().unwrap_or(&most);
            if below.len() <= 1 {
                break;
            }
            let up = below.chunks(FANOUT).map(|c| max_of(c.iter())).collect();
            spans.push(up);
        }
        FreeRoom {
            blocks: Chunked::from_vec(blocks),
            spans,
        }
    }

    /// Recounts the block holding position `pos` after a node in it changed. The spans above
    /// only take in room the block gained: a pod landing shrinks room, and recounting every
    /// span for it cost more than the skips saved at 1,000 nodes (callgrind); a span whose
    /// room went is then a looser bound, so the scan looks inside it and finds the same block.
    ///
    /// `taken`: what the node just took. When its room before that was below the block's
    /// bound in every dimension, the bound came from other nodes and still holds: nothing is
    /// recounted (a recount reads 64 nodes, and at 5,000 nodes that was a tenth of a
    /// consolidation simulation, mostly cache misses).
    pub fn refresh<'a>(
        &mut self,
        pos: usize,
        len: usize,
        taken: &Resources,
        node: impl Fn(usize) -> Option<&'a NodeState>,
    ) {
        let mut i = pos / BLOCK;
        if let Some(ns) = node(pos) {
            let now = room_of(ns);
            let before = [
                now[0].saturating_add(taken.cpu_milli),
                now[1].saturating_add(taken.memory),
                now[2].saturating_add(taken.pods),
            ];
            let took = taken.cpu_milli >= 0 && taken.memory >= 0 && taken.pods >= 0;
            if took && !self.may_make_bound(i, &before) {
                return;
            }
        }
        let room = self.recount(i, len, &node);
        for level in &mut self.spans {
            i /= FANOUT;
            let Some(slot) = level.get_mut(i) else { return };
            if slot.iter().zip(&room).all(|(s, r)| s >= r) {
                return;
            }
            for (s, r) in slot.iter_mut().zip(room) {
                *s = (*s).max(r);
            }
        }
    }

    /// Takes nodes that went away (`positions`, marked removed) out of their blocks' bounds,
    /// and recomputes the spans above those blocks from the level below.
    ///
    /// Without this a removed node's room stayed in its block until a pod landing there
    /// recounted it, and landing pods recount only when they held the bound. A consolidation
    /// simulation removes its candidates, usually the emptiest nodes and so the ones holding
    /// their blocks' bounds: with a tenth of the cluster removed nearly every block kept
    /// looking open, and each pod to re-place walked node by node through most of the
    /// cluster (scale round 11 in `benches/README.md`).
    pub fn forget<'a>(
        &mut self,
        positions: &[usize],
        len: usize,
        node: impl Fn(usize) -> Option<&'a NodeState>,
    ) {
        let mut changed: Vec<usize> = Vec::new();
        for &pos in positions {
            let b = pos / BLOCK;
            if changed.last() == Some(&b) {
                continue;
            }
            if b >= self.blocks.len() {
                continue;
            }
            if node(pos).is_none_or(|ns| self.may_make_bound(b, &room_of(ns))) {
                changed.push(b);
            }
        }
        if changed.is_empty() {
            return;
        }
        changed.sort_unstable();
        changed.dedup();
        for &b in &changed {
            let _ = self.recount(b, len, &node);
        }
        for k in 0..self.spans.len() {
            for c in changed.iter_mut() {
                *c /= FANOUT;
            }
            changed.dedup();
            let (below, above) = self.spans.split_at_mut(k);
            let Some(level) = above.first_mut() else {
                return;
            };
            for &i in &changed {
                let most = match below.last() {
                    Some(below) => max_of(below.iter().skip(i * FANOUT).take(FANOUT)),
                    None => max_of(
                        (i * FANOUT..(i + 1) * FANOUT)
                            .filter_map(|b| self.blocks.get(b))
                            .map(|k| &k.most),
                    ),
                };
                if let Some(slot) = level.get_mut(i) {
                    *slot = most;
                }
            }
        }
    }

    fn recount<'a>(
        &mut self,
        b: usize,
        len: usize,
        node: &impl Fn(usize) -> Option<&'a NodeState>,
    ) -> Room {
        let fresh = Block::of(b, len, node);
        if let Some(slot) = self.blocks.get_mut(b) {
            *slot = fresh;
        }
        fresh.most
    }

    /// Every level: the blocks' most room, then the spans (tests compare them with a fresh
    /// build).
    #[cfg(test)]
    fn levels(&self) -> Vec<Vec<Room>> {
        let mut out = vec![self.blocks.iter().map(|k| k.most).collect::<Vec<_>>()];
        out.extend(self.spans.iter().cloned());
        out
    }

    #[cfg(test)]
    fn corners(&self) -> Vec<Corners> {
        self.blocks.iter().map(|k| k.corners).collect()
    }

    /// Whether some node of the block starting at `pos` may hold `requests` (CPU, memory and
    /// a pod slot; the fit check itself decides the rest). Unknown blocks may. The scan uses
    /// [`FreeRoom::next_may_fit`]; this is its block-by-block reference in tests.
    #[cfg(test)]
    pub fn may_fit(&self, pos: usize, requests: &Resources) -> bool {
        self.block_holds(pos / BLOCK, requests)
    }

    /// From `pos` (the start of a block), the start of the first block at or after it that
    /// may hold `requests`, skipping whole spans where no node has the room; `len` or more
    /// when none may. Every block it steps over has no node with that room.
    pub fn next_may_fit(&self, mut pos: usize, len: usize, requests: &Resources) -> usize {
        if self.blocks.is_empty() {
            return pos;
        }
        while pos < len {
            let block = pos / BLOCK;
            // The block itself first: when it may fit (the common case) one comparison.
            if self.block_holds(block, requests) {
                return pos;
            }
            // No room in it: skip the widest span starting here without room either.
            let mut span = 1;
            for level in &self.spans {
                let wider = span * FANOUT;
                if !block.is_multiple_of(wider)
                    || level.get(block / wider).is_none_or(|r| holds(r, requests))
                {
                    break;
                }
                span = wider;
            }
            pos = (block + span) * BLOCK;
        }
        pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(cpu_free: i64, removed: bool) -> NodeState {
        NodeState {
            used: Resources::with_pods(1000 - cpu_free, 0, 1),
            allocatable: Resources::with_pods(1000, 1 << 30, 110),
            ports: Default::default(),
            removed,
            pods: Default::default(),
        }
    }

    #[test]
    fn a_block_is_skipped_only_when_no_node_in_it_fits() {
        let mut nodes: Vec<NodeState> = (0..BLOCK * 2).map(|_| node(0, false)).collect();
        nodes[BLOCK + 5] = node(500, false);
        let f = FreeRoom::build(nodes.len(), |i| nodes.get(i));
        let want = Resources::with_pods(400, 0, 1);
        assert!(!f.may_fit(0, &want));
        assert!(f.may_fit(BLOCK, &want));
        assert!(!f.may_fit(BLOCK, &Resources::with_pods(600, 0, 1)));
        // A removed node's room does not count once its block is recounted.
        nodes[BLOCK + 5].removed = true;
        let mut f = f;
        f.refresh(BLOCK + 5, nodes.len(), &Resources::default(), |i| {
            nodes.get(i)
        });
        assert!(!f.may_fit(BLOCK, &want));
    }

    proptest::proptest! {
        /// Through room shrinking and growing and nodes going, the blocks stay what a fresh
        /// build gives, the spans stay bounds of it, and the span skip stops at the first block
        /// a block-by-block scan would.
        #[test]
        fn skipping_spans_finds_the_block_a_block_scan_finds(
            len in 1usize..6000,
            rooms in proptest::collection::vec((0usize..6000, 0i64..1000), 0..8),
            // Mostly pods landing (a node filled up), some nodes going, a few gaining room.
            changes in proptest::collection::vec(
                (0usize..6000, proptest::prop_oneof![4 => proptest::strategy::Just(0i64), 1 => 0i64..1000], proptest::bool::weighted(0.1)),
                0..40,
            ),
            want in 1i64..1000,
            starts in proptest::collection::vec(0usize..50, 1..6),
        ) {
            // Mostly full nodes with room in a few (as a consolidation simulation sees it).
            let mut nodes: Vec<NodeState> = (0..len).map(|_| node(0, false)).collect();
            for (at, cpu_free) in rooms {
                nodes[at % len] = node(cpu_free, false);
            }
            let mut f = FreeRoom::build(len, |i| nodes.get(i));
            for (at, cpu_free, removed) in changes {
                let at = at % len;
                // What a landing pod took (nothing when the node gained room or went).
                let was = nodes[at].allocatable.cpu_milli - nodes[at].used.cpu_milli;
                let taken = Resources::with_pods((was - cpu_free).max(0), 0, 0);
                nodes[at] = node(cpu_free, removed);
                f.refresh(at, len, &taken, |i| nodes.get(i));
            }
            // Blocks exact, spans bounds of what a fresh build gives.
            let fresh = FreeRoom::build(len, |i| nodes.get(i));
            let (levels, fresh_levels) = (f.levels(), fresh.levels());
            proptest::prop_assert_eq!(&levels[0], &fresh_levels[0]);
            proptest::prop_assert_eq!(levels.len(), fresh_levels.len());
            for (kept, exact) in levels.iter().zip(&fresh_levels).skip(1) {
                for (k, e) in kept.iter().zip(exact) {
                    proptest::prop_assert!(k.iter().zip(e).all(|(k, e)| k >= e), "{:?} < {:?}", k, e);
                }
            }
            let want = Resources::with_pods(want, 0, 1);
            for s in starts {
                let pos = (s * BLOCK).min(len.div_ceil(BLOCK) * BLOCK);
                let scan = (pos..len)
                    .step_by(BLOCK)
                    .find(|p| f.may_fit(*p, &want))
                    .unwrap_or(len);
                let skip = f.next_may_fit(pos, len, &want);
                proptest::prop_assert_eq!(skip.min(len), scan);
                // Never past a node that has the room.
                let truth = (pos..len)
                    .find(|&p| !nodes[p].removed && nodes[p].used.fits_with(&want, &nodes[p].allocatable))
                    .map_or(len, |p| p / BLOCK * BLOCK);
                proptest::prop_assert!(skip.min(len) <= truth, "skipped to {} past room at {}", skip, truth);
            }
        }
    }

    fn node2(cpu_free: i64, mem_free: i64, removed: bool) -> NodeState {
        NodeState {
            used: Resources::with_pods(1000 - cpu_free, 1000 - mem_free, 1),
            allocatable: Resources::with_pods(1000, 1000, 110),
            ports: Default::default(),
            removed,
            pods: Default::default(),
        }
    }

    proptest::proptest! {
        /// CPU and memory both vary, pods land (taking both), nodes go: the scan never passes
        /// a node with the room, every block's corners hold what its nodes hold, and a block
        /// whose corners were not merged keeps exactly the corners a fresh build gives.
        #[test]
        fn corners_stay_sound_through_landings_and_removals(
            len in 1usize..400,
            rooms in proptest::collection::vec((0usize..400, 0i64..1000, 0i64..1000), 0..200),
            changes in proptest::collection::vec(
                (0usize..400, 0i64..1000, 0i64..1000, proptest::bool::weighted(0.15)),
                0..60,
            ),
            wants in proptest::collection::vec((1i64..1000, 1i64..1000), 1..8),
        ) {
            let mut nodes: Vec<NodeState> = (0..len).map(|_| node2(0, 0, false)).collect();
            for (at, c, m) in rooms {
                nodes[at % len] = node2(c, m, false);
            }
            let mut f = FreeRoom::build(len, |i| nodes.get(i));
            for (at, take_cpu, take_mem, removed) in changes {
                let at = at % len;
                if nodes[at].removed {
                    continue;
                }
                if removed {
                    nodes[at].removed = true;
                    f.forget(&[at], len, |i| nodes.get(i));
                    continue;
                }
                // A pod landing: takes what the node has left, at most the draw.
                let r = room_of(&nodes[at]);
                let taken = Resources::with_pods(take_cpu.min(r[0]), take_mem.min(r[1]), 1);
                nodes[at].used.add_assign(&taken);
                f.refresh(at, len, &taken, |i| nodes.get(i));
            }
            let fresh = FreeRoom::build(len, |i| nodes.get(i));
            proptest::prop_assert_eq!(&f.levels()[0], &fresh.levels()[0]);
            for (b, (kept, exact)) in f.corners().iter().zip(&fresh.corners()).enumerate() {
                if usize::from(kept.len) < CORNERS {
                    proptest::prop_assert_eq!(kept, exact, "block {}", b);
                }
                for p in exact.points() {
                    proptest::prop_assert!(kept.holds(p[0], p[1]), "block {}: {:?} lost from {:?}", b, p, kept);
                }
            }
            for (c, m) in wants {
                let want = Resources::with_pods(c, m, 1);
                let skip = f.next_may_fit(0, len, &want).min(len);
                let truth = (0..len)
                    .find(|&p| !nodes[p].removed && nodes[p].used.fits_with(&want, &nodes[p].allocatable))
                    .map_or(len, |p| p / BLOCK * BLOCK);
                proptest::prop_assert!(skip <= truth, "skipped to {} past room at {}", skip, truth);
            }
        }
    }

    proptest::proptest! {
        /// Nodes going away (a consolidation simulation's candidates) leave every level what a
        /// fresh build of the cluster without them gives: no removed node's room keeps a
        /// block or a span looking open.
        #[test]
        fn removed_nodes_leave_the_bounds_of_a_fresh_build(
            len in 1usize..6000,
            rooms in proptest::collection::vec((0usize..6000, 0i64..1000), 0..200),
            gone in proptest::collection::vec(0usize..6000, 0..300),
        ) {
            let mut nodes: Vec<NodeState> = (0..len).map(|_| node(0, false)).collect();
            for (at, cpu_free) in rooms {
                nodes[at % len] = node(cpu_free, false);
            }
            let mut f = FreeRoom::build(len, |i| nodes.get(i));
            let mut gone: Vec<usize> = gone.into_iter().map(|g| g % len).collect();
            gone.sort_unstable();
            gone.dedup();
            for &g in &gone {
                nodes[g].removed = true;
            }
            f.forget(&gone, len, |i| nodes.get(i));
            let fresh = FreeRoom::build(len, |i| nodes.get(i));
            proptest::prop_assert_eq!(f.levels(), fresh.levels());
        }
    }

    #[test]
    fn a_block_with_cpu_on_one_node_and_memory_on_another_is_skipped() {
        // Block 0: CPU room on one node, memory room on another; block 1: both on one node.
        let scrap = |cpu: i64, mem: i64| NodeState {
            used: Resources::with_pods(1000 - cpu, (1 << 30) - mem, 1),
            ..node(0, false)
        };
        let mut nodes: Vec<NodeState> = (0..BLOCK * 2).map(|_| scrap(0, 0)).collect();
        nodes[3] = scrap(800, 1 << 20);
        nodes[9] = scrap(100, 1 << 29);
        nodes[BLOCK + 7] = scrap(600, 1 << 28);
        let f = FreeRoom::build(nodes.len(), |i| nodes.get(i));
        let want = Resources::with_pods(500, 1 << 27, 1);
        assert!(!f.may_fit(0, &want), "no node of block 0 has both");
        assert_eq!(f.next_may_fit(0, nodes.len(), &want), BLOCK);
        // Each half alone still fits block 0.
        assert!(f.may_fit(0, &Resources::with_pods(800, 0, 1)));
        assert!(f.may_fit(0, &Resources::with_pods(0, 1 << 29, 1)));
    }

    proptest::proptest! {
        /// The corners hold every request some node holds (CPU and memory), and only those
        /// while no corners had to be merged.
        #[test]
        fn corners_hold_what_some_node_holds(
            rooms in proptest::collection::vec((0i64..64, 0i64..64), 0..=80),
            asks in proptest::collection::vec((0i64..70, 0i64..70), 1..20),
        ) {
            let rooms: Vec<Room> = rooms.into_iter().map(|(c, m)| [c, m, 1]).collect();
            let c = Corners::of(rooms.iter().copied());
            let exact = usize::from(c.len) < CORNERS;
            for (cpu, mem) in asks {
                let some = rooms.iter().any(|r| cpu <= r[0] && mem <= r[1]);
                if some {
                    proptest::prop_assert!(c.holds(cpu, mem));
                } else if exact {
                    proptest::prop_assert!(!c.holds(cpu, mem), "{:?} holds ({}, {})", c, cpu, mem);
                }
            }
        }
    }

    #[test]
    fn a_full_cluster_is_passed_and_room_in_its_last_node_found() {
        let nodes: Vec<NodeState> = (0..BLOCK * 512).map(|_| node(0, false)).collect();
        let f = FreeRoom::build(nodes.len(), |i| nodes.get(i));
        assert_eq!(f.levels().len(), 4, "512 blocks: 512, 64, 8 and 1 entries");
        let want = Resources::with_pods(1, 0, 1);
        assert!(f.next_may_fit(0, nodes.len(), &want) >= nodes.len());
        // Room in the very last node only: found, and nothing before it.
        let mut nodes = nodes;
        let last = nodes.len() - 1;
        nodes[last] = node(10, false);
        let mut f = f;
        f.refresh(last, nodes.len(), &Resources::default(), |i| nodes.get(i));
        assert_eq!(
            f.next_may_fit(0, nodes.len(), &want),
            (last / BLOCK) * BLOCK
        );
    }

    #[test]
    fn unbounded_capacity_is_never_skipped() {
        let mut n = node(0, false);
        n.allocatable.cpu_milli = i64::MAX;
        n.used.cpu_milli = 10;
        let nodes = [n];
        let f = FreeRoom::build(1, |i| nodes.get(i));
        assert!(f.may_fit(0, &Resources::with_pods(i64::MAX - 5, 0, 1)));
    }
}
