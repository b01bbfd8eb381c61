//! A memo, per thread, of what token lists answered for texts seen recently.
//!
//! A verdict looks a request's User-Agent up in several token lists (AI crawlers, HTTP
//! libraries, archives, link previews, search engines), some more than once across the rules,
//! and every walk of a list's automaton over a hundred-byte User-Agent costs more than the rest
//! of the lookup. The same few browsers' User-Agents make most requests, so each answer is kept
//! under (list, text) and served again while its slot is not taken by another. An answer is
//! served only for the same list and the same text, compared whole, so the memo is exact;
//! entries are never stale because a list's answers never change (a reloaded list is a new
//! list with a new id).

use std::cell::RefCell;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

/// Slots per thread; a text hashes to one.
const SLOTS: usize = 256;
/// Longer texts are not kept: User-Agents are shorter, and this bounds the memo at 128 KiB a
/// thread.
const MAX_TEXT: usize = 512;

/// A unique id for each token list built in the process.
pub(super) fn next_list_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A list's answer for a text: the index of the token found, if any.
pub(super) type Answer = Option<u32>;

struct Slot {
    list: u64,
    text: Vec<u8>,
    answer: Answer,
}

thread_local! {
    // Seeded per thread, so that no client can aim texts at one slot.
    static SLOTS_OF_THIS_THREAD: (foldhash::fast::RandomState, RefCell<Vec<Slot>>) =
        (foldhash::fast::RandomState::default(), RefCell::new(Vec::new()));
}

/// What `list` answers for `text`, from the memo or from `find` (whose answer is kept).
pub(super) fn answer(list: u64, text: &[u8], find: impl FnOnce() -> Answer) -> Answer {
    if text.len() > MAX_TEXT {
        return find();
    }
    let (index, kept) = SLOTS_OF_THIS_THREAD.with(|(hasher, slots)| {
        let index = (hasher.hash_one((list, text)) as usize) % SLOTS;
        let slots = slots.borrow();
        let kept =
            slots.get(index).filter(|slot| slot.list == list && slot.text == text).map(|slot| slot.answer);
        (index, kept)
    });
    if let Some(answer) = kept {
        return answer;
    }
    let answer = find();
    SLOTS_OF_THIS_THREAD.with(|(_, slots)| {
        let mut slots = slots.borrow_mut();
        if slots.is_empty() {
            slots.resize_with(SLOTS, || Slot { list: 0, text: Vec::new(), answer: None });
        }
        let slot = &mut slots[index];
        slot.list = list;
        slot.text.clear();
        slot.text.extend_from_slice(text);
        slot.answer = answer;
    });
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_served_again_only_for_the_same_list_and_the_same_text() {
        let (list, other) = (next_list_id(), next_list_id());
        assert_eq!(answer(list, b"Mozilla/5.0 GPTBot/1.2", || Some(3)), Some(3));
        assert_eq!(answer(list, b"Mozilla/5.0 GPTBot/1.2", || unreachable!("kept")), Some(3));
        assert_eq!(answer(other, b"Mozilla/5.0 GPTBot/1.2", || None), None, "another list's answer");
        assert_eq!(answer(list, b"Mozilla/5.0 GPTBot/1.3", || Some(4)), Some(4), "another text");
        // Texts past the limit are looked up every time.
        let long = vec![b'a'; MAX_TEXT + 1];
        assert_eq!(answer(list, &long, || Some(1)), Some(1));
        assert_eq!(answer(list, &long, || Some(2)), Some(2));
    }

    #[test]
    fn a_text_that_takes_another_texts_slot_leaves_no_wrong_answer_behind() {
        let list = next_list_id();
        // Enough texts that many share a slot: each is answered by its own lookup or its own
        // kept answer, never another's.
        for round in 0..2 {
            for n in 0..4 * SLOTS as u32 {
                let text = format!("agent/{n}");
                let found = answer(list, text.as_bytes(), || Some(n));
                assert_eq!(found, Some(n), "round {round}");
            }
        }
    }
}
