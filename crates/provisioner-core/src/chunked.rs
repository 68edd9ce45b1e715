//! A vector copied on write in chunks: a clone shares every chunk and a change copies only
//! the chunk it changes, so a simulation that removes one node and places a few pods copies a
//! few chunks instead of the whole cluster (nodes, the free-room summaries), or of every pod
//! an incremental search has moved so far (placed pods), or of every node removed so far.
//!
//! `N` entries per chunk: 64 where an entry is small next to what a simulation touches
//! (nodes); fewer where a simulation touches entries spread over the whole vector and each
//! copied chunk counts (the free-room blocks).

use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct Chunked<T, const N: usize = 64> {
    chunks: Vec<Arc<Vec<T>>>,
    len: usize,
}

impl<T, const N: usize> Default for Chunked<T, N> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Clone, const N: usize> Chunked<T, N> {
    pub(crate) fn from_vec(items: Vec<T>) -> Chunked<T, N> {
        let len = items.len();
        let chunks = items.chunks(N).map(|c| Arc::new(c.to_vec())).collect();
        Chunked { chunks, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i / N).and_then(|c| c.get(i % N))
    }

    /// The entry for a change (its chunk is copied first if another state shares it).
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.chunks
            .get_mut(i / N)
            .and_then(|c| Arc::make_mut(c).get_mut(i % N))
    }

    pub fn push(&mut self, item: T) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < N => Arc::make_mut(c).push(item),
            _ => {
                let mut v = Vec::with_capacity(N);
                v.push(item);
                self.chunks.push(Arc::new(v));
            }
        }
        self.len += 1;
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flat_map(|c| c.iter())
    }
}

impl<T: Clone, const N: usize> FromIterator<T> for Chunked<T, N> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        Chunked::from_vec(items.into_iter().collect())
    }
}

impl<T, const N: usize> std::ops::Index<usize> for Chunked<T, N> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        &self.chunks[i / N][i % N]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Reads like a plain vector through pushes and changes, and a clone taken at any
        /// point keeps what it held while the original goes on changing.
        #[test]
        fn reads_like_a_vector_and_clones_do_not_share_changes(
            ops in proptest::collection::vec((0u8..3, 0usize..200, 0u32..1000), 0..300),
        ) {
            let mut c: Chunked<u32, 8> = Chunked::from_vec(vec![7; 20]);
            let mut model = vec![7u32; 20];
            let mut kept: Vec<(Chunked<u32, 8>, Vec<u32>)> = Vec::new();
            for (op, i, v) in ops {
                match op {
                    0 => {
                        c.push(v);
                        model.push(v);
                    }
                    1 => {
                        if let Some(slot) = c.get_mut(i) {
                            *slot = v;
                        }
                        if let Some(slot) = model.get_mut(i) {
                            *slot = v;
                        }
                    }
                    _ => kept.push((c.clone(), model.clone())),
                }
                proptest::prop_assert_eq!(c.len(), model.len());
            }
            proptest::prop_assert_eq!(c.iter().copied().collect::<Vec<_>>(), model.clone());
            for (k, m) in &kept {
                proptest::prop_assert_eq!(k.iter().copied().collect::<Vec<_>>(), m.clone());
                for (i, v) in m.iter().enumerate() {
                    proptest::prop_assert_eq!(k.get(i), Some(v));
                    proptest::prop_assert_eq!(&k[i], v);
                }
            }
        }
    }
}
