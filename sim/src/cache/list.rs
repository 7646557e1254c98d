//! Doubly linked queues threaded through a slab of entries by index: O(1) append, unlink and
//! move-to-tail, as the kernel's `list_head` queues give the RFC.

/// "No entry".
pub const NIL: u32 = u32::MAX;

/// Links an entry carries for the one queue it sits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Links {
    pub prev: u32,
    pub next: u32,
}

impl Default for Links {
    fn default() -> Links {
        Links {
            prev: NIL,
            next: NIL,
        }
    }
}

/// One queue: head is the oldest (reclaimed and scanned first), tail the newest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queue {
    pub head: u32,
    pub tail: u32,
    pub len: u32,
}

impl Default for Queue {
    fn default() -> Queue {
        Queue {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

/// Anything that stores `Links` per slot.
pub trait LinkStore {
    fn links(&mut self, slot: u32) -> &mut Links;
}

impl Queue {
    pub fn push_tail(&mut self, store: &mut impl LinkStore, slot: u32) {
        *store.links(slot) = Links {
            prev: self.tail,
            next: NIL,
        };
        if self.tail == NIL {
            self.head = slot;
        } else {
            store.links(self.tail).next = slot;
        }
        self.tail = slot;
        self.len += 1;
    }

    pub fn unlink(&mut self, store: &mut impl LinkStore, slot: u32) {
        let Links { prev, next } = *store.links(slot);
        if prev == NIL {
            self.head = next;
        } else {
            store.links(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            store.links(next).prev = prev;
        }
        *store.links(slot) = Links::default();
        self.len -= 1;
    }

    pub fn move_to_tail(&mut self, store: &mut impl LinkStore, slot: u32) {
        if self.tail != slot {
            self.unlink(store, slot);
            self.push_tail(store, slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Store(Vec<Links>);

    impl LinkStore for Store {
        fn links(&mut self, slot: u32) -> &mut Links {
            &mut self.0[slot as usize]
        }
    }

    fn order(queue: &Queue, store: &mut Store) -> Vec<u32> {
        let mut out = Vec::new();
        let mut cursor = queue.head;
        while cursor != NIL {
            out.push(cursor);
            cursor = store.links(cursor).next;
        }
        out
    }

    #[test]
    fn append_unlink_and_move_keep_order() {
        let mut store = Store(vec![Links::default(); 4]);
        let mut queue = Queue::default();
        for slot in 0..4 {
            queue.push_tail(&mut store, slot);
        }
        queue.move_to_tail(&mut store, 1);
        assert_eq!(order(&queue, &mut store), [0, 2, 3, 1]);
        queue.unlink(&mut store, 0);
        queue.unlink(&mut store, 1);
        assert_eq!(order(&queue, &mut store), [2, 3]);
        assert_eq!((queue.head, queue.tail, queue.len), (2, 3, 2));
    }
}
