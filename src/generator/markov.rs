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

use crate::numbers::below;

/// `successor[p]` for a state that occurs once: continue at `p + 1`.
const CONTINUE: u32 = u32::MAX;
/// `successor[p]` for a state with no continuation anywhere (the end of the corpus).
const DEAD_END: u32 = u32::MAX - 1;

/// The model: the corpus as cells, the vocabulary, and the groups of repeated states.
///
/// The layout is chosen for cache misses, which dominate generation: a corpus position's token
/// and successor share one 8-byte cell, a vocabulary entry is one 8-byte record, and a group
/// holds the positions to continue at, not the positions of the state.
pub struct Chain {
    /// Every distinct token's text, concatenated.
    vocabulary: String,
    /// Per vocabulary id: where its text lies in `vocabulary`, and its flags.
    words: Vec<WordEntry>,
    /// Per corpus position.
    cells: Vec<Cell>,
    /// Groups laid out as `[header, next, next, ...]`, one per repeated state: the header's
    /// `index` is the group's length, and each entry is a position to continue at together with
    /// a copy of its cell, so a branching step reads one entry and not the corpus cell too.
    groups: Vec<GroupEntry>,
    /// Positions that begin a sentence (a capitalised word after a sentence end).
    sentence_starts: Vec<u32>,
}

/// One corpus position: its vocabulary id, and `CONTINUE`, `DEAD_END` or an index into `groups`.
#[derive(Clone, Copy)]
struct Cell {
    token: u32,
    successor: u32,
}

/// A position to continue at, with a copy of its cell.
#[derive(Clone, Copy)]
struct GroupEntry {
    index: u32,
    cell: Cell,
}

/// One vocabulary entry.
#[derive(Clone, Copy)]
struct WordEntry {
    start: u32,
    len: u16,
    flags: u8,
}

/// A word of the corpus as the generator sees it.
#[derive(Clone, Copy, Debug)]
pub struct Word<'a> {
    /// The text, as in the corpus (not escaped).
    pub text: &'a str,
    /// The text after a space, as running text writes it.
    pub spaced: &'a str,
    /// Whether it ends a sentence.
    pub ends_sentence: bool,
    /// Whether it holds a character that HTML escaping changes; most words do not.
    pub needs_escape: bool,
}

const ENDS_SENTENCE: u8 = 1;
const STARTS_UPPER: u8 = 2;
const NEEDS_ESCAPE: u8 = 4;

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
/// Longest word kept, in bytes; it must fit `WordEntry::len`.
const MAX_WORD_BYTES: usize = 200;
const MIN_SENTENCES: usize = 20;

impl Chain {
    /// Trains a chain of `order` on whitespace-separated words of `text`.
    pub fn train(text: &str, order: usize) -> Result<Self, ChainError> {
        if !(2..=6).contains(&order) {
            return Err(ChainError::Order(order));
        }
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let mut vocabulary = String::new();
        let mut words = Vec::new();
        let mut tokens = Vec::new();
        // Longer "words" are not prose (a URL, a run of symbols); leaving them out keeps entries small.
        for word in text.split_whitespace().filter(|word| word.len() <= MAX_WORD_BYTES) {
            let id = *ids.entry(word).or_insert_with(|| {
                // Each word is stored after a space, so that a word in running text is one copy.
                vocabulary.push(' ');
                words.push(WordEntry {
                    start: vocabulary.len() as u32,
                    len: word.len() as u16,
                    flags: word_flags(word),
                });
                vocabulary.push_str(word);
                (words.len() - 1) as u32
            });
            tokens.push(id);
        }
        if tokens.len() >= u32::MAX as usize - 2 {
            return Err(ChainError::TooLarge(tokens.len()));
        }
        drop(ids);

        let sentence_starts: Vec<u32> = (1..tokens.len().saturating_sub(order))
            .filter(|&p| {
                words[tokens[p - 1] as usize].flags & ENDS_SENTENCE != 0
                    && words[tokens[p] as usize].flags & STARTS_UPPER != 0
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

        let (successor, items) = successors(&tokens, order);
        let cells: Vec<Cell> =
            tokens.iter().zip(successor).map(|(&token, successor)| Cell { token, successor }).collect();
        let groups = items
            .into_iter()
            .map(|item| match item {
                GroupItem::Header(len) => {
                    GroupEntry { index: len, cell: Cell { token: 0, successor: DEAD_END } }
                }
                GroupItem::Next(index) => GroupEntry { index, cell: cells[index as usize] },
            })
            .collect();
        vocabulary.shrink_to_fit();
        Ok(Chain { vocabulary, words, cells, groups, sentence_starts })
    }

    /// A random position whose word begins a sentence.
    #[inline]
    pub fn sentence_start<R: Rng + ?Sized>(&self, rng: &mut R) -> Position {
        let index = self.sentence_starts[below(rng, self.sentence_starts.len())];
        Position { index, cell: self.cells[index as usize] }
    }

    /// The position of the next word after `at`; at a dead end, a fresh sentence start.
    #[inline]
    pub fn step<R: Rng + ?Sized>(&self, at: Position, rng: &mut R) -> Position {
        match at.cell.successor {
            CONTINUE => Position { index: at.index + 1, cell: self.cells[at.index as usize + 1] },
            DEAD_END => self.sentence_start(rng),
            group => {
                let group = group as usize;
                let len = self.groups[group].index as usize;
                let next = self.groups[group + 1 + below(rng, len)];
                Position { index: next.index, cell: next.cell }
            }
        }
    }

    /// The word at `at`.
    #[inline]
    pub fn word(&self, at: Position) -> Word<'_> {
        self.word_by_id(at.word_id())
    }

    /// Whether the word with vocabulary id `id` ends a sentence (what a walk needs to know).
    #[inline]
    pub fn ends_sentence(&self, id: WordId) -> bool {
        self.words[id.0 as usize].flags & ENDS_SENTENCE != 0
    }

    /// The word with vocabulary id `id`.
    #[inline(always)]
    pub fn word_by_id(&self, id: WordId) -> Word<'_> {
        let entry = self.words[id.0 as usize];
        let start = entry.start as usize;
        Word {
            text: &self.vocabulary[start..start + entry.len as usize],
            spaced: &self.vocabulary[start - 1..start + entry.len as usize],
            ends_sentence: entry.flags & ENDS_SENTENCE != 0,
            needs_escape: entry.flags & NEEDS_ESCAPE != 0,
        }
    }

    /// The position at corpus index `index` (for tests and tools; walks use `step`).
    pub fn position(&self, index: u32) -> Position {
        Position { index, cell: self.cells[index as usize] }
    }

    /// Corpus length in words.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Whether the corpus is empty (never true for a trained chain).
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Number of distinct words.
    pub fn vocabulary_len(&self) -> usize {
        self.words.len()
    }

    /// Approximate heap bytes held by the model.
    pub fn heap_bytes(&self) -> usize {
        self.vocabulary.capacity()
            + size_of::<WordEntry>() * self.words.capacity()
            + size_of::<Cell>() * self.cells.capacity()
            + size_of::<GroupEntry>() * self.groups.capacity()
            + 4 * self.sentence_starts.capacity()
    }
}

/// A position in the corpus (the chain's state is the `order` words ending here), carrying a
/// copy of its cell so that the walk reads each cell once.
#[derive(Clone, Copy)]
pub struct Position {
    index: u32,
    cell: Cell,
}

impl Position {
    /// The corpus index, for seeding things that must repeat for the same position.
    pub fn index(self) -> u32 {
        self.index
    }

    /// The vocabulary id of the word here.
    #[inline]
    pub fn word_id(self) -> WordId {
        WordId(self.cell.token)
    }
}

/// A vocabulary id: a word of the chain, without the position it was found at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WordId(u32);

/// What `successors` lays out before cells are copied in.
enum GroupItem {
    Header(u32),
    Next(u32),
}

fn word_flags(word: &str) -> u8 {
    let mut flags = 0;
    if word.chars().next().is_some_and(char::is_uppercase) {
        flags |= STARTS_UPPER;
    }
    if word.contains(['&', '<', '>', '"', '\'']) {
        flags |= NEEDS_ESCAPE;
    }
    let trimmed = word.trim_end_matches(['"', '\'', ')', ']']);
    if trimmed.ends_with(['.', '?', '!']) {
        flags |= ENDS_SENTENCE;
    }
    flags
}

/// Builds the successor array and groups: positions sorted by their state, then one pass over
/// runs of equal states.
fn successors(tokens: &[u32], order: usize) -> (Vec<u32>, Vec<GroupItem>) {
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
            groups.push(GroupItem::Header(run.len() as u32));
            groups.extend(run.iter().map(|p| GroupItem::Next(p + 1)));
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
