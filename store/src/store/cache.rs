//! The store's caches of whole entries: delta bases by id, decoded blocks by where they lie.

use std::collections::HashMap;
use std::sync::Arc;

use crate::block::Block;

/// Recently read, verified entries kept whole under a key whose bytes never change: the
/// raw bytes of delta bases by id, so reading the versions of one object decompresses each
/// link of their chain once, and decoded blocks by location, so reading their members
/// decompresses each once.
pub(super) struct Cache<K, T> {
    items: HashMap<K, Arc<T>>,
    order: std::collections::VecDeque<K>,
    bytes: usize,
    budget: usize,
}

/// Something a [`Cache`] weighs by its bytes in memory.
pub(super) trait Weigh {
    fn weight(&self) -> usize;
}

impl Weigh for Vec<u8> {
    fn weight(&self) -> usize {
        self.len()
    }
}

impl Weigh for Block {
    fn weight(&self) -> usize {
        self.raw_len()
    }
}

/// How many bytes of delta bases a store keeps at hand.
pub(super) const BASE_CACHE_BYTES: usize = 32 << 20;

/// How many bytes of decoded blocks a store keeps at hand.
pub(super) const BLOCK_CACHE_BYTES: usize = 32 << 20;

impl<K: std::hash::Hash + Eq + Clone, T: Weigh> Cache<K, T> {
    pub(super) fn new(budget: usize) -> Self {
        Cache {
            items: HashMap::new(),
            order: std::collections::VecDeque::new(),
            bytes: 0,
            budget,
        }
    }

    pub(super) fn get(&self, key: &K) -> Option<Arc<T>> {
        self.items.get(key).cloned()
    }

    pub(super) fn insert(&mut self, key: K, item: Arc<T>) {
        let weight = item.weight();
        if weight > self.budget / 4 || self.items.contains_key(&key) {
            return;
        }
        self.bytes += weight;
        self.items.insert(key.clone(), item);
        self.order.push_back(key);
        while self.bytes > self.budget {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(r) = self.items.remove(&old) {
                self.bytes -= r.weight();
            }
        }
    }
}
