//! A word-level Markov chain of order ≥ 2, stored as flat arrays over the corpus itself.
//!
//! The state after a word is the last `order` words. Instead of a map from states to successor
//! lists, every corpus position `p` knows how to continue: if its state occurs once in the corpus,
//! the next word is simply the one at `p + 1` (most states, and a sequential read); otherwise `p`
//! points at a group listing every position where its state occurs, and a uniformly chosen one of
//! them gives the next word. That is the same distribution as a transition table, built with one
//! sort, and a step costs two or three array reads and no hashing or allocation.
//!
//! The chain is pure: no I/O, no clock; the caller's RNG decides everything.

use std::collections::HashMap;

use rand::Rng;

use crate::trap_url::below;

/// `successor[p]` for a state that occurs once: continue at `p + 1`.
const CONTINUE: u32 = u32::MAX;
/// `successor[p]` for a state with no continuation anywhere (the end of the corpus).
const DEAD_END: u32 = u32::MAX - 1;

/// The model: corpus tokens as ids, the vocabulary, and the successor structure.
pub struct Chain {
    /// Every distinct token's text, concatenated; token `i` spans `ends[i-1]..ends[i]`.
    vocabulary: String,
    ends: Vec<u32>,
    /// Per vocabulary id: `ENDS_SENTENCE` and `STARTS_UPPER` bits.
    flags: Vec<u8>,
    /// The corpus as vocabulary ids.
    tokens: Vec<u32>,
    /// Per corpus position: `CONTINUE`, `DEAD_END`, or an index into `groups`.
    successor: Vec<u32>,
    /// Groups laid out as `[len, position, position, ...]`, one per repeated state.
    groups: Vec<u32>,
    /// Positions that begin a sentence (a capitalised word after a sentence end).
    sentence_starts: Vec<u32>,
}

const ENDS_SENTENCE: u8 = 1;
const STARTS_UPPER: u8 = 2;

/// Why a corpus cannot train a chain.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// Too little text to generate from.
    #[error(
        "the corpus has {words} words and {sentences} sentences; at least {min_words} words and {min_sentences} sentences are needed"
    )]
    TooSmall {
        /// Words found.
        words: usize,
        /// Sentence starts found.
        sentences: usize,
        /// Words needed.
        min_words: usize,
        /// Sentence starts needed.
        min_sentences: usize,
    },
    /// More text than 32-bit positions can address.
    #[error("the corpus has {0} words; at most 4 billion are supported")]
    TooLarge(usize),
    /// An order the chain cannot use.
    #[error("Markov order {0} is out of range (2 to 6)")]
    Order(usize),
}

const MIN_WORDS: usize = 1000;
const MIN_SENTENCES: usize = 20;

impl Chain {
    /// Trains a chain of `order` on whitespace-separated words of `text`.
    pub fn train(text: &str, order: usize) -> Result<Self, ChainError> {
        if !(2..=6).contains(&order) {
            return Err(ChainError::Order(order));
        }
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let mut vocabulary = String::new();
        let mut ends = Vec::new();
        let mut flags = Vec::new();
        let mut tokens = Vec::new();
        for word in text.split_whitespace() {
            let id = *ids.entry(word).or_insert_with(|| {
                vocabulary.push_str(word);
                ends.push(vocabulary.len() as u32);
                flags.push(word_flags(word));
                (ends.len() - 1) as u32
            });
            tokens.push(id);
        }
        if tokens.len() >= u32::MAX as usize - 2 {
            return Err(ChainError::TooLarge(tokens.len()));
        }
        drop(ids);

        let sentence_starts: Vec<u32> = (1..tokens.len().saturating_sub(order))
            .filter(|&p| {
                flags[tokens[p - 1] as usize] & ENDS_SENTENCE != 0
                    && flags[tokens[p] as usize] & STARTS_UPPER != 0
            })
            .map(|p| p as u32)
            .collect();
        if tokens.len() < MIN_WORDS || sentence_starts.len() < MIN_SENTENCES {
            return Err(ChainError::TooSmall {
                words: tokens.len(),
                sentences: sentence_starts.len(),
                min_words: MIN_WORDS,
                min_sentences: MIN_SENTENCES,
            });
        }

        let (successor, groups) = successors(&tokens, order);
        vocabulary.shrink_to_fit();
        Ok(Chain { vocabulary, ends, flags, tokens, successor, groups, sentence_starts })
    }

    /// A random position whose word begins a sentence.
    pub fn sentence_start<R: Rng + ?Sized>(&self, rng: &mut R) -> Position {
        Position(self.sentence_starts[below(rng, self.sentence_starts.len())])
    }

    /// The position of the next word after `at`; at a dead end, a fresh sentence start.
    pub fn step<R: Rng + ?Sized>(&self, at: Position, rng: &mut R) -> Position {
        match self.successor[at.0 as usize] {
            CONTINUE => Position(at.0 + 1),
            DEAD_END => self.sentence_start(rng),
            group => {
                let group = group as usize;
                let len = self.groups[group] as usize;
                Position(self.groups[group + 1 + below(rng, len)] + 1)
            }
        }
    }

    /// The word at `at`, as it appears in the corpus (not escaped).
    pub fn word(&self, at: Position) -> &str {
        let id = self.tokens[at.0 as usize] as usize;
        let start = if id == 0 { 0 } else { self.ends[id - 1] as usize };
        &self.vocabulary[start..self.ends[id] as usize]
    }

    /// Whether the word at `at` ends a sentence.
    pub fn ends_sentence(&self, at: Position) -> bool {
        self.flags[self.tokens[at.0 as usize] as usize] & ENDS_SENTENCE != 0
    }

    /// Corpus length in words.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the corpus is empty (never true for a trained chain).
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Number of distinct words.
    pub fn vocabulary_len(&self) -> usize {
        self.ends.len()
    }

    /// Approximate heap bytes held by the model.
    pub fn heap_bytes(&self) -> usize {
        self.vocabulary.capacity()
            + 4 * (self.ends.capacity()
                + self.tokens.capacity()
                + self.successor.capacity()
                + self.groups.capacity()
                + self.sentence_starts.capacity())
            + self.flags.capacity()
    }
}

/// A position in the corpus: the chain's state is the `order` words ending here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position(u32);

impl Position {
    /// The corpus index, for seeding things that must repeat for the same position.
    pub fn index(self) -> u32 {
        self.0
    }
}

fn word_flags(word: &str) -> u8 {
    let mut flags = 0;
    if word.chars().next().is_some_and(char::is_uppercase) {
        flags |= STARTS_UPPER;
    }
    let trimmed = word.trim_end_matches(['"', '\'', ')', ']']);
    if trimmed.ends_with(['.', '?', '!']) {
        flags |= ENDS_SENTENCE;
    }
    flags
}

/// Builds the successor array and groups: positions sorted by their state, then one pass over
/// runs of equal states.
fn successors(tokens: &[u32], order: usize) -> (Vec<u32>, Vec<u32>) {
    let len = tokens.len();
    let mut successor = vec![DEAD_END; len];
    // Only positions with a next word and a full state take part; the rest stay dead ends.
    let mut positions: Vec<u32> = (order - 1..len - 1).map(|p| p as u32).collect();
    let state = |p: u32| &tokens[p as usize + 1 - order..=p as usize];
    positions.sort_unstable_by(|&a, &b| state(a).cmp(state(b)).then(a.cmp(&b)));

    let mut groups = Vec::new();
    let mut run_start = 0;
    while run_start < positions.len() {
        let key = state(positions[run_start]);
        let mut run_end = run_start + 1;
        while run_end < positions.len() && state(positions[run_end]) == key {
            run_end += 1;
        }
        let run = &positions[run_start..run_end];
        if run.len() == 1 {
            successor[run[0] as usize] = CONTINUE;
        } else {
            let group = groups.len() as u32;
            groups.push(run.len() as u32);
            groups.extend_from_slice(run);
            for &p in run {
                successor[p as usize] = group;
            }
        }
        run_start = run_end;
    }
    // The last word has no next word of its own, so it stays a dead end and the walk restarts
    // at a sentence start, which costs nothing in quality.
    groups.shrink_to_fit();
    (successor, groups)
}

#[cfg(test)]
mod tests;
