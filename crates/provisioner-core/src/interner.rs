//! Each distinct value once, named by a small id.
//!
//! Many pods of a scheduling run carry equal values (the same node-selector term for every
//! replica of a deployment); keeping one copy and comparing ids saves both the copies and the
//! work of intersecting or comparing them again.

use foldhash::{HashMap, HashMapExt};
use std::hash::Hash;

/// Values by id and ids by value.
#[derive(Debug)]
pub struct Interner<T> {
    values: Vec<T>,
    ids: HashMap<T, u32>,
}

impl<T> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            values: Vec::new(),
            ids: HashMap::new(),
        }
    }
}

impl<T: Hash + Eq + Clone> Interner<T> {
    /// The id of `value`, new if it was not seen before.
    pub fn id(&mut self, value: T) -> u32 {
        if let Some(id) = self.ids.get(&value) {
            return *id;
        }
        let id = self.values.len() as u32;
        self.values.push(value.clone());
        self.ids.insert(value, id);
        id
    }

    /// The value of `id`.
    pub fn get(&self, id: u32) -> Option<&T> {
        self.values.get(id as usize)
    }

    /// The values, by id.
    pub fn into_values(self) -> Vec<T> {
        self.values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_share_an_id_and_ids_give_back_their_value() {
        let mut i = Interner::default();
        let a = i.id(vec!["zone-a".to_string()]);
        let b = i.id(vec!["zone-b".to_string()]);
        assert_ne!(a, b);
        assert_eq!(i.id(vec!["zone-a".to_string()]), a);
        assert_eq!(i.get(b), Some(&vec!["zone-b".to_string()]));
        assert_eq!(i.get(7), None);
    }
}
