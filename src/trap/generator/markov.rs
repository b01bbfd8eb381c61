//! A word-level Markov chain of order ≥ 2, stored as one flat array of 8-byte cells.
//!
//! The state after a word is the last `order` words. Training sorts the corpus positions by
//! their state, so the positions that share a state form a run, and the words that follow them
//! are that state's possible next words, each as often as the corpus has it: the same
//! distribution as a transition table.
//!
//! The model keeps, for every corpus word, one cell: the word, and the run of the state that
//! ends at it (where the walk may go next). The cells are stored in run order, so the cells a
//! state may continue with are contiguous. A step reads the current cell and picks a uniformly
//! random cell from its run: one array, one read per step, no branch on the kind of state, no
//! hashing, no allocation. A state that occurs once is a run of one.
//!
//! The chain is pure: no I/O, no clock; the caller's RNG decides everything.

use std::collections::HashMap;

use rand::Rng;

use super::prefetch::prefetch;
use crate::support::numbers::below;

/// `Cell::successor` of the last corpus word, which has no next word: the walk restarts at a
/// sentence start, which costs nothing in quality.
const DEAD_END: u32 = u32::MAX;
// Any other `successor` names a run: where it starts in `cells` in the high bits and, in the
// low `Chain::len_bits` bits, its length; a length of 0 means the run is too long for those
// bits and the high bits index `long_runs` instead. Runs start below 2^index_bits - 1, so a
// packed successor never reaches `DEAD_END`.

/// The model: the vocabulary and the cells.
///
/// The layout is chosen for cache misses, which dominate generation: a walk step reads one
/// 8-byte cell, and the vocabulary is read only when a page writes a word.
pub struct Chain {
    /// Every distinct token as a page writes it: a space, then the HTML-escaped text, then (for
    /// the few words that escaping changes) the raw text; `COPY_BYTES` of padding at the end, so
    /// that a fixed-size copy from any word's start stays in bounds.
    arena: String,
    /// Per vocabulary id: where its text lies in `arena`, and its flags.
    words: Vec<WordEntry>,
    /// One per corpus word after the first `order - 1`, in run order.
    cells: Vec<Cell>,
    /// `[start, len]` of the runs too long to pack into a successor.
    long_runs: Vec<[u32; 2]>,
    /// Cells whose word begins a sentence (a capitalised word after a sentence end).
    sentence_starts: Vec<u32>,
    /// How many low bits of a successor hold its run's length.
    len_bits: u32,
}

/// One corpus word: its vocabulary id, and the run of the state that ends at it.
#[derive(Clone, Copy)]
struct Cell {
    /// The vocabulary id, with `TOKEN_ENDS_SENTENCE` set for a word that ends a sentence: a walk
    /// asks that at every step, and the vocabulary is one more table to miss the cache on.
    token: u32,
    /// `DEAD_END`, or the packed run.
    successor: u32,
}

/// One vocabulary entry.
#[derive(Clone, Copy)]
struct WordEntry {
    /// Where the space before the escaped text lies in `arena`.
    start: u32,
    /// Length of the escaped text.
    len: u16,
    flags: u8,
    /// For a word that escaping leaves alone, the length without its trailing punctuation (what a
    /// sentence cut short after it keeps); for one it changes, the length of the raw text that
    /// follows the escaped text.
    extra: u8,
}

/// Bytes a word copy moves at once: every word's space and escaped text up to this long is
/// copied as one fixed-size move (and the page's length set back), the rest byte-exact.
pub(crate) const COPY_BYTES: usize = 32;

/// A word of the corpus as the generator sees it.
#[derive(Clone, Copy, Debug)]
pub struct Word<'a> {
    /// The text, as in the corpus (not escaped).
    pub text: &'a str,
    /// Whether it ends a sentence.
    pub ends_sentence: bool,
    /// Whether it holds a character that HTML escaping changes; most words do not.
    pub needs_escape: bool,
}

const ENDS_SENTENCE: u8 = 1;
/// The bit of `Cell::token` that copies `ENDS_SENTENCE`; vocabulary ids stay below it.
const TOKEN_ENDS_SENTENCE: u32 = 1 << 31;
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
/// Longest word kept, in bytes; it must fit `WordEntry::extra`.
const MAX_WORD_BYTES: usize = 200;
const MIN_SENTENCES: usize = 20;

impl Chain {
    /// Trains a chain of `order` on whitespace-separated words of `text`.
    pub fn train(text: &str, order: usize) -> Result<Self, ChainError> {
        if !(2..=6).contains(&order) {
            return Err(ChainError::Order(order));
        }
        // foldhash rather than SipHash: the corpus is the operator's, not an attacker's, and
        // hashing every word is a sixth of training.
        let mut ids: HashMap<&str, u32, foldhash::fast::RandomState> = HashMap::default();
        let mut arena = String::new();
        let mut words = Vec::new();
        let mut tokens = Vec::new();
        // Longer "words" are not prose (a URL, a run of symbols); leaving them out keeps entries small.
        for word in text.split_whitespace().filter(|word| word.len() <= MAX_WORD_BYTES) {
            let id = *ids.entry(word).or_insert_with(|| {
                words.push(arena_entry(&mut arena, word));
                (words.len() - 1) as u32
            });
            tokens.push(id);
        }
        arena.extend(std::iter::repeat_n(' ', COPY_BYTES));
        if tokens.len() >= u32::MAX as usize - 2 || words.len() >= TOKEN_ENDS_SENTENCE as usize {
            return Err(ChainError::TooLarge(tokens.len()));
        }
        drop(ids);

        // A sentence starts at a capitalised word after a sentence end.
        let starts: Vec<usize> = (order..tokens.len())
            .filter(|&q| {
                words[tokens[q - 1] as usize].flags & ENDS_SENTENCE != 0
                    && words[tokens[q] as usize].flags & STARTS_UPPER != 0
            })
            .collect();
        if tokens.len() < MIN_WORDS || starts.len() < MIN_SENTENCES {
            return Err(ChainError::TooSmall {
                words: tokens.len(),
                sentences: starts.len(),
                min_words: MIN_WORDS,
                min_sentences: MIN_SENTENCES,
            });
        }
        let (cells, cell_of, long_runs, len_bits) = cells(&tokens, &words, order)?;
        let sentence_starts = starts.into_iter().map(|q| cell_of[q]).collect();
        arena.shrink_to_fit();
        Ok(Chain { arena, words, cells, long_runs, sentence_starts, len_bits })
    }

    /// A random position whose word begins a sentence.
    #[inline]
    pub fn sentence_start<R: Rng + ?Sized>(&self, rng: &mut R) -> Position {
        self.position(self.start_cell(rng))
    }

    /// The position of the next word after `at`; at a dead end, a fresh sentence start.
    #[inline]
    pub fn step<R: Rng + ?Sized>(&self, at: Position, rng: &mut R) -> Position {
        self.position(self.next_cell(at.cell, rng))
    }

    /// Walks `L` sentences from fresh sentence starts, one step of each in turn, each ending
    /// where the chain ends a sentence or at `W` words; `lens` gets their lengths.
    ///
    /// A walk is a chain of dependent reads, most of which miss the cache on a multi-megabyte
    /// model. So each step picks the cell its sentence goes to next, prefetches it, and moves on
    /// to the other sentences; the next round reads the cell, by then usually in cache.
    pub fn walk_sentences<R: Rng + Clone, const L: usize, const W: usize>(
        &self,
        rng: &mut R,
        words: &mut [[WordId; W]; L],
        lens: &mut [usize; L],
    ) {
        // A local copy of the RNG stays in registers; it is written back at the end.
        let mut local = rng.clone();
        let mut pending: [u32; L] = std::array::from_fn(|_| self.start_cell(&mut local));
        // The lanes still walking are the first `walking` of `live`: an ended lane is swapped
        // out, so a round visits only live lanes (the longest of the sentences is often twice
        // the mean).
        let mut live: [usize; L] = std::array::from_fn(|lane| lane);
        let mut walking = L;
        *lens = [W; L];
        #[expect(clippy::needless_range_loop, reason = "each step writes to several lanes' sentences")]
        for step in 0..W {
            let mut i = 0;
            while i < walking {
                let lane = live[i % L] % L;
                let here = self.cell(pending[lane]);
                words[lane][step] = WordId(here.token & !TOKEN_ENDS_SENTENCE);
                if here.token & TOKEN_ENDS_SENTENCE != 0 {
                    lens[lane] = step + 1;
                    walking -= 1;
                    live[i % L] = live[walking % L];
                    continue;
                }
                pending[lane] = self.next_cell(here, &mut local);
                i += 1;
            }
            if walking == 0 {
                break;
            }
        }
        *rng = local;
    }

    /// The cell after `cell`, picked by `rng` and prefetched.
    #[inline(always)]
    fn next_cell<R: Rng + ?Sized>(&self, cell: Cell, rng: &mut R) -> u32 {
        let next = match self.run(cell.successor) {
            Some((start, len)) => start + below(rng, len),
            None => return self.start_cell(rng),
        };
        prefetch(&self.cells, next);
        next as u32
    }

    /// A random sentence start's cell, prefetched.
    #[inline(always)]
    fn start_cell<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let cell = self.sentence_starts.get(below(rng, self.sentence_starts.len())).copied().unwrap_or(0);
        prefetch(&self.cells, cell as usize);
        cell
    }

    /// Where the run that `successor` names lies in `cells`; `None` at a dead end.
    #[inline(always)]
    fn run(&self, successor: u32) -> Option<(usize, usize)> {
        if successor == DEAD_END {
            return None;
        }
        let high = (successor >> self.len_bits) as usize;
        match (successor & ((1 << self.len_bits) - 1)) as usize {
            0 => self.long_runs.get(high).map(|&[start, len]| (start as usize, len as usize)),
            len => Some((high, len)),
        }
    }

    #[inline(always)]
    fn cell(&self, index: u32) -> Cell {
        // Every cell index the chain hands out is in bounds; the fallback only keeps this total.
        self.cells.get(index as usize).copied().unwrap_or(Cell { token: 0, successor: DEAD_END })
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
    #[inline]
    pub fn word_by_id(&self, id: WordId) -> Word<'_> {
        let entry = self.words[id.0 as usize];
        let escaped = entry.start as usize + 1;
        let (start, len) = if entry.flags & NEEDS_ESCAPE != 0 {
            (escaped + entry.len as usize, entry.extra as usize)
        } else {
            (escaped, entry.len as usize)
        };
        Word {
            text: self.arena.get(start..start + len).unwrap_or_default(),
            ends_sentence: entry.flags & ENDS_SENTENCE != 0,
            needs_escape: entry.flags & NEEDS_ESCAPE != 0,
        }
    }

    /// Bytes the words `ids` take as running text (each escaped and after a space).
    pub fn run_bytes(&self, ids: &[WordId]) -> usize {
        ids.iter().map(|id| self.words.get(id.0 as usize).map_or(0, |entry| entry.len as usize + 1)).sum()
    }

    /// Writes the words `ids` as running text, each escaped and after a space, at the start of
    /// `to`, which must hold `run_bytes(ids) + COPY_BYTES`; returns the bytes written.
    ///
    /// Each word is one `COPY_BYTES` move from the arena (the bytes past the word are
    /// overwritten by the next one, or are slack): a handful of instructions per word, where
    /// appending words one by one costs a capacity check and a variable-length copy each.
    pub fn write_run(&self, to: &mut [u8], ids: &[WordId]) -> usize {
        let (entries, arena) = (&self.words[..], self.arena.as_bytes());
        let mut pos = 0;
        for id in ids {
            let Some(entry) = entries.get(id.0 as usize) else { continue };
            let (from, len) = (entry.start as usize, entry.len as usize + 1);
            copy_word(to, pos, arena, from, len);
            pos += len;
        }
        pos
    }

    /// Word `id` as page text: escaped, after a space when `spaced`, and cut before its
    /// trailing punctuation when `cut` (a sentence cut short there gets a full stop instead).
    /// Returns the arena from the text's start (so that a short word can be copied as one
    /// `COPY_BYTES` move) and the text's length; `None` for a cut word that escaping changes:
    /// cutting its escaped text could split an entity, so the caller cuts the raw text.
    #[inline(always)]
    pub fn html(&self, id: WordId, spaced: bool, cut: bool) -> Option<(&[u8], usize)> {
        let entry = self.words.get(id.0 as usize)?;
        let mut len = entry.len as usize;
        if cut {
            if entry.flags & NEEDS_ESCAPE != 0 {
                return None;
            }
            len = entry.extra as usize;
        }
        let start = entry.start as usize + usize::from(!spaced);
        Some((self.arena.as_bytes().get(start..)?, len + usize::from(spaced)))
    }

    /// The position of cell `index` (`0..len()`; walks use `step`).
    pub fn position(&self, index: u32) -> Position {
        Position { index, cell: self.cell(index) }
    }

    /// Cells in the model: one per corpus word after the first `order - 1`.
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
        self.arena.capacity()
            + size_of::<WordEntry>() * self.words.capacity()
            + size_of::<Cell>() * self.cells.capacity()
            + size_of::<[u32; 2]>() * self.long_runs.capacity()
            + 4 * self.sentence_starts.capacity()
    }
}

/// A position of a walk: a cell (the chain's state is the `order` words ending at its word),
/// with a copy of it so that the walk reads each cell once.
#[derive(Clone, Copy)]
pub struct Position {
    index: u32,
    cell: Cell,
}

impl Position {
    /// The cell's index, for seeding things that must repeat for the same position.
    pub fn index(self) -> u32 {
        self.index
    }

    /// The vocabulary id of the word here.
    #[inline]
    pub fn word_id(self) -> WordId {
        WordId(self.cell.token & !TOKEN_ENDS_SENTENCE)
    }
}

/// A vocabulary id: a word of the chain, without the position it was found at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WordId(u32);

/// Appends `word` to the arena (space, escaped text, and the raw text if escaping changed it)
/// and returns its entry.
fn arena_entry(arena: &mut String, word: &str) -> WordEntry {
    let flags = word_flags(word);
    arena.push(' ');
    let start = arena.len() - 1;
    let mut escaped = Vec::with_capacity(word.len());
    crate::trap::generator::escape::push_escaped(&mut escaped, word);
    arena.push_str(std::str::from_utf8(&escaped).unwrap_or(word));
    let extra = if flags & NEEDS_ESCAPE != 0 {
        arena.push_str(word);
        word.len()
    } else {
        word.trim_end_matches(|c: char| !c.is_alphanumeric()).len()
    };
    WordEntry { start: start as u32, len: escaped.len() as u16, flags, extra: extra as u8 }
}

/// Copies `text[from..from + len]` to `to[pos..]`: as one `COPY_BYTES` move when both hold that
/// many bytes there (the arena's padding sees to it for every short word, and the page's slack
/// for the destination), so the bytes past the word are overwritten by whatever comes next.
#[inline(always)]
pub(super) fn copy_word(to: &mut [u8], pos: usize, text: &[u8], from: usize, len: usize) {
    match (text.get(from..from + COPY_BYTES), to.get_mut(pos..pos + COPY_BYTES)) {
        (Some(block), Some(to)) if len <= COPY_BYTES => to.copy_from_slice(block),
        _ => copy_exact(to, pos, text, from, len),
    }
}

/// The copy of a word longer than `COPY_BYTES`, out of line: keeping it out of the loop leaves
/// that loop its registers.
#[cold]
#[inline(never)]
fn copy_exact(to: &mut [u8], pos: usize, text: &[u8], from: usize, len: usize) {
    if let (Some(text), Some(to)) = (text.get(from..from + len), to.get_mut(pos..pos + len)) {
        to.copy_from_slice(text);
    }
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

/// The positions with a full state and a next word, sorted by their state, then by position.
fn sorted_by_state(tokens: &[u32], order: usize) -> Vec<u32> {
    let mut positions: Vec<u32> = (order - 1..tokens.len() - 1).map(|p| p as u32).collect();
    if order == 2 {
        // The default order: both tokens packed into one integer compare faster than slices,
        // and training is most of startup. A stable sort keeps equal states in position order.
        positions.sort_by_key(|&p| (u64::from(tokens[p as usize - 1]) << 32) | u64::from(tokens[p as usize]));
    } else {
        let state = |p: u32| &tokens[p as usize + 1 - order..=p as usize];
        positions.sort_unstable_by(|&a, &b| state(a).cmp(state(b)).then(a.cmp(&b)));
    }
    positions
}

/// Builds the cells: positions sorted by their state, so equal states form runs; then for each
/// corpus word, a cell in that order with the run of its own state. Also returns each word's
/// cell index (`u32::MAX` for the first `order - 1` words, which have none), the runs too long
/// to pack, and the packing's length bits.
#[allow(clippy::type_complexity)]
fn cells(
    tokens: &[u32],
    words: &[WordEntry],
    order: usize,
) -> Result<(Vec<Cell>, Vec<u32>, Vec<[u32; 2]>, u32), ChainError> {
    let len = tokens.len();
    // Positions with a full state and a next word; the cell for position p's next word sits at
    // p's rank in this order, so a run of equal states is a run of cells to continue with.
    let positions = sorted_by_state(tokens, order);
    let state = |p: u32| &tokens[p as usize + 1 - order..=p as usize];

    let index_bits = usize::BITS - positions.len().leading_zeros();
    if index_bits >= 32 {
        return Err(ChainError::TooLarge(len));
    }
    let len_bits = 32 - index_bits;
    let mut long_runs = Vec::new();
    // The run of the state ending at each position (the last word keeps `DEAD_END`).
    let mut successor = vec![DEAD_END; len];
    let mut run_start = 0;
    while run_start < positions.len() {
        let key = state(positions[run_start]);
        let mut run_end = run_start + 1;
        // Compared word by word in line: a slice comparison calls `memcmp` for a few bytes.
        while run_end < positions.len() && state(positions[run_end]).iter().zip(key).all(|(a, b)| a == b) {
            run_end += 1;
        }
        let run_len = (run_end - run_start) as u32;
        let packed = if u64::from(run_len) < 1 << len_bits {
            ((run_start as u32) << len_bits) | run_len
        } else {
            long_runs.push([run_start as u32, run_len]);
            ((long_runs.len() - 1) as u32) << len_bits
        };
        for &p in &positions[run_start..run_end] {
            successor[p as usize] = packed;
        }
        run_start = run_end;
    }

    let mut cell_of = vec![u32::MAX; len];
    let cells = positions
        .iter()
        .enumerate()
        .map(|(index, &p)| {
            let q = p as usize + 1;
            cell_of[q] = index as u32;
            let token = tokens[q];
            let ends = words[token as usize].flags & ENDS_SENTENCE != 0;
            Cell { token: token | if ends { TOKEN_ENDS_SENTENCE } else { 0 }, successor: successor[q] }
        })
        .collect();
    long_runs.shrink_to_fit();
    Ok((cells, cell_of, long_runs, len_bits))
}

#[cfg(test)]
mod tests;
