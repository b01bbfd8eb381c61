//! The pool of sentences a page is written from, walked side by side.

use rand::Rng;

use super::markov::{Chain, WordId};

/// Sentences walked side by side. A power of two, since the walk reduces lane indexes modulo it
/// (24 measured slower than 16 for that reason); 16 beat 8, and 32 walked more sentences that
/// the page end then drops for no clear gain.
const LANES: usize = 16;
/// The longest sentence, in words.
pub(super) const MAX_SENTENCE_WORDS: usize = 60;

/// A pool of sentences walked side by side, handed out in order as the page needs them.
///
/// A walk is a chain of dependent reads, most of which miss the cache on a multi-megabyte
/// model, so walking one sentence at a time waits for one miss after another. Taking one step
/// in each of `LANES` sentences in turn lets their misses overlap. Sentences are walked to the
/// longest length any part of the page uses and cut when written.
pub(in crate::trap::generator) struct Walks {
    words: [[WordId; MAX_SENTENCE_WORDS]; LANES],
    lens: [usize; LANES],
    /// The next sentence to hand out; `LANES` when the pool is used up.
    next: usize,
}

impl Walks {
    pub(super) fn new() -> Self {
        Walks { words: [[WordId::default(); MAX_SENTENCE_WORDS]; LANES], lens: [0; LANES], next: LANES }
    }

    /// The pool's next sentence, cut at `max_words`; the pool is refilled with `LANES` fresh
    /// sentences when it is used up.
    pub(super) fn next<R: Rng + Clone>(&mut self, chain: &Chain, rng: &mut R, max_words: usize) -> &[WordId] {
        if self.next == LANES {
            chain.walk_sentences(rng, &mut self.words, &mut self.lens);
            self.next = 0;
        }
        let lane = self.next;
        self.next += 1;
        &self.words[lane][..self.lens[lane].min(max_words)]
    }
}
