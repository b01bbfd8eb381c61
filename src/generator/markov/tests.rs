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
    let mut at = chain.sentence_start(&mut rng);
    let mut after_the_cat = HashSet::new();
    for _ in 0..5000 {
        let next = chain.step(at, &mut rng);
        // The state at a position is the word before it and the word itself.
        let last = at.index() as usize + 1 == chain.len();
        if at.index() > 0 && !last {
            let state = (chain.word(chain.position(at.index() - 1)).text, chain.word(at).text);
            let allowed = &seen[&state];
            assert!(allowed.contains(chain.word(next).text), "{state:?} -> {}", chain.word(next).text);
            if state == ("The", "cat") {
                after_the_cat.insert(chain.word(next).text);
            }
        }
        at = next;
    }
    // Branching states really branch: "The cat" is followed by "sat" and "ran".
    assert_eq!(after_the_cat, HashSet::from(["sat", "ran"]));
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
    let last = chain.position(chain.len() as u32 - 1);
    assert_eq!(chain.word(last).text, "here");
    let mut rng = Pcg64Mcg::seed_from_u64(3);
    let next = chain.step(last, &mut rng);
    assert!(chain.word(next).text.starts_with(char::is_uppercase));
}

#[test]
fn flags_mark_sentence_ends_inside_quotes() {
    assert_eq!(word_flags("end.\""), ENDS_SENTENCE | NEEDS_ESCAPE);
    assert_eq!(word_flags("end."), ENDS_SENTENCE);
    assert_eq!(word_flags("Why?"), ENDS_SENTENCE | STARTS_UPPER);
    assert_eq!(word_flags("and,"), 0);
}
