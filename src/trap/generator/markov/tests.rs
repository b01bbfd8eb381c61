//! The Markov chain as a specification: training, walks that only take steps the corpus took,
//! determinism for a seed.

use std::collections::{HashMap, HashSet};

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use super::*;

/// A small corpus with enough sentences to train on.
fn corpus() -> String {
    let sentences = [
        "The cat sat on the mat.",
        "The cat ran to the door.",
        "A dog sat on the step!",
        "Where did the dog go?",
        "The door was open and the cat ran out.",
    ];
    let mut text = String::new();
    for i in 0..300 {
        text.push_str(sentences[i % sentences.len()]);
        text.push(' ');
    }
    text
}

#[test]
fn rejects_tiny_corpora_and_bad_orders() {
    assert!(matches!(Chain::train("One. Two. Three.", 2), Err(ChainError::TooSmall { .. })));
    assert!(matches!(Chain::train(&corpus(), 1), Err(ChainError::Order(1))));
    assert!(matches!(Chain::train(&corpus(), 7), Err(ChainError::Order(7))));
}

#[test]
fn sentence_starts_are_capitalised_words_after_a_sentence_end() {
    let chain = Chain::train(&corpus(), 2).unwrap();
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    for _ in 0..100 {
        let start = chain.sentence_start(&mut rng);
        assert!(chain.word(start).text.starts_with(char::is_uppercase), "{}", chain.word(start).text);
    }
}

#[test]
fn every_step_follows_a_transition_seen_in_the_corpus() {
    // Order-2 transitions of the corpus: (w1, w2) -> set of w3.
    let text = corpus();
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut seen: HashMap<(&str, &str), HashSet<&str>> = HashMap::new();
    for w in words.windows(3) {
        seen.entry((w[0], w[1])).or_default().insert(w[2]);
    }
    let chain = Chain::train(&text, 2).unwrap();
    let mut rng = Pcg64Mcg::seed_from_u64(2);
    let mut previous = None;
    let mut at = chain.sentence_start(&mut rng);
    let mut after_the_cat = HashSet::new();
    for _ in 0..5000 {
        let next = chain.step(at, &mut rng);
        let (word, next_word) = (chain.word(at).text, chain.word(next).text);
        // A dead end (the corpus's last word) restarts at a sentence start instead.
        if at.cell.successor == DEAD_END {
            previous = None;
            at = next;
            continue;
        }
        if let Some(previous) = previous {
            let allowed = &seen[&(previous, word)];
            assert!(allowed.contains(next_word), "({previous}, {word}) -> {next_word}");
            if (previous, word) == ("The", "cat") {
                after_the_cat.insert(next_word);
            }
        }
        previous = Some(word);
        at = next;
    }
    // Branching states really branch: "The cat" is followed by "sat" and "ran".
    assert_eq!(after_the_cat, HashSet::from(["sat", "ran"]));
}

#[test]
fn walked_sentences_start_capitalised_and_end_at_a_sentence_end() {
    let chain = Chain::train(&corpus(), 2).unwrap();
    let mut rng = Pcg64Mcg::seed_from_u64(4);
    let mut words = [[WordId::default(); 12]; 4];
    let mut lens = [0; 4];
    for _ in 0..50 {
        chain.walk_sentences(&mut rng, &mut words, &mut lens);
        for (sentence, &len) in words.iter().zip(&lens) {
            let text: Vec<&str> = sentence[..len].iter().map(|&id| chain.word_by_id(id).text).collect();
            assert!(text[0].starts_with(char::is_uppercase), "{text:?}");
            // Either the chain ended the sentence, or it reached the longest length.
            assert!(chain.word_by_id(sentence[len - 1]).ends_sentence || len == 12, "{text:?}");
            assert!(text[..len - 1].iter().all(|word| !word.ends_with(['.', '?', '!'])), "{text:?}");
        }
    }
}

#[test]
fn same_seed_same_walk() {
    let chain = Chain::train(&corpus(), 3).unwrap();
    let walk = |seed| {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let mut at = chain.sentence_start(&mut rng);
        let mut out = Vec::new();
        for _ in 0..200 {
            out.push(chain.word(at).text.to_string());
            at = chain.step(at, &mut rng);
        }
        out
    };
    assert_eq!(walk(5), walk(5));
    assert_ne!(walk(5), walk(6));
}

#[test]
fn the_end_of_the_corpus_restarts_at_a_sentence() {
    let mut text = corpus();
    text.push_str("Unique closing words here");
    let chain = Chain::train(&text, 2).unwrap();
    let last =
        (0..chain.len() as u32).map(|i| chain.position(i)).find(|&at| chain.word(at).text == "here").unwrap();
    let mut rng = Pcg64Mcg::seed_from_u64(3);
    for _ in 0..20 {
        let next = chain.step(last, &mut rng);
        assert!(chain.word(next).text.starts_with(char::is_uppercase));
    }
}

#[test]
fn runs_too_long_to_pack_walk_the_same_as_packed_ones() {
    let packed = Chain::train(&corpus(), 2).unwrap();
    assert!(packed.long_runs.is_empty(), "a small corpus packs every run");
    // Repack with 4 length bits, so that runs of 16 or more ("The cat" has ~120) are long.
    let mut long = Chain::train(&corpus(), 2).unwrap();
    let runs: Vec<_> = long.cells.iter().map(|cell| long.run(cell.successor)).collect();
    let mut long_runs = Vec::new();
    for (cell, run) in long.cells.iter_mut().zip(runs) {
        if let Some((start, len)) = run {
            cell.successor = if len < 16 {
                ((start as u32) << 4) | len as u32
            } else {
                long_runs.push([start as u32, len as u32]);
                ((long_runs.len() - 1) as u32) << 4
            };
        }
    }
    assert!(!long_runs.is_empty());
    long.long_runs = long_runs;
    long.len_bits = 4;

    let walk = |chain: &Chain| {
        let mut rng = Pcg64Mcg::seed_from_u64(9);
        let mut at = chain.sentence_start(&mut rng);
        (0..2000)
            .map(|_| {
                at = chain.step(at, &mut rng);
                chain.word(at).text.to_string()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(walk(&packed), walk(&long));
}

#[test]
fn the_packed_sort_of_order_2_orders_states_like_comparing_them() {
    // Token ids up to the largest allowed, so that packing would show any overlap of fields.
    // (Higher orders sort by the comparison itself.)
    let mut rng = Pcg64Mcg::seed_from_u64(11);
    let tokens: Vec<u32> = (0..3000)
        .map(|i| {
            if i % 7 == 0 {
                TOKEN_ENDS_SENTENCE - 1 - below(&mut rng, 3) as u32
            } else {
                below(&mut rng, 5) as u32
            }
        })
        .collect();
    let state = |p: u32| &tokens[p as usize - 1..=p as usize];
    let mut expected: Vec<u32> = (1..tokens.len() - 1).map(|p| p as u32).collect();
    expected.sort_by(|&a, &b| state(a).cmp(state(b)).then(a.cmp(&b)));
    assert_eq!(sorted_by_state(&tokens, 2), expected);
}

#[test]
fn flags_mark_sentence_ends_inside_quotes() {
    assert_eq!(word_flags("end.\""), ENDS_SENTENCE | NEEDS_ESCAPE);
    assert_eq!(word_flags("end."), ENDS_SENTENCE);
    assert_eq!(word_flags("Why?"), ENDS_SENTENCE | STARTS_UPPER);
    assert_eq!(word_flags("and,"), 0);
}
