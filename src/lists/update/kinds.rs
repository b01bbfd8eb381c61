//! The reviewed table that gives each AI crawler from ai.robots.txt's `robots.json` its kind
//! (rules/ai-kinds.txt): by the key's `function` field, or by the key itself where the function
//! misleads. A key the table does not map gets no kind and is reported, never guessed.

use std::collections::HashMap;

use crate::vocabulary::AiKind;

/// The table shipped with quagmire.
const TABLE: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/rules/ai-kinds.txt"));

/// Kinds by function text and by key.
#[derive(Debug, Default)]
pub(crate) struct KindTable {
    functions: HashMap<String, AiKind>,
    keys: HashMap<String, AiKind>,
}

impl KindTable {
    /// The shipped table. It is checked by a test, so it always reads.
    pub(crate) fn shipped() -> KindTable {
        KindTable::parse(TABLE).unwrap_or_default()
    }

    /// Reads `text`: `<kind> function <text>` and `<kind> key <key>` lines; a line that starts
    /// with `#` is a comment (a function's text may itself hold a `#`).
    pub(crate) fn parse(text: &str) -> Result<KindTable, String> {
        let mut table = KindTable::default();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = || format!("rules/ai-kinds.txt, line {}", index + 1);
            let (kind, rest) = first_word(line);
            let (what, rest) = first_word(rest);
            let kind = AiKind::named(kind)
                .ok_or_else(|| format!("{}: `{kind}` is no kind; kinds are {}", at(), AiKind::names()))?;
            let map = match what {
                "function" => &mut table.functions,
                "key" => &mut table.keys,
                _ => {
                    return Err(format!("{}: expected `<kind> function <text>` or `<kind> key <key>`", at()));
                }
            };
            if rest.is_empty() {
                return Err(format!("{}: nothing after `{what}`", at()));
            }
            if let Some(earlier) = map.insert(rest.to_string(), kind)
                && earlier != kind
            {
                return Err(format!("{}: `{rest}` was {} already", at(), earlier.as_str()));
            }
        }
        Ok(table)
    }

    /// The kind of robots.json key `key`, whose `function` field is `function`.
    pub(crate) fn kind(&self, key: &str, function: Option<&str>) -> Option<AiKind> {
        self.keys.get(key).or_else(|| self.functions.get(function?.trim())).copied()
    }
}

/// The first word of `text` and what follows it, from its next non-space.
fn first_word(text: &str) -> (&str, &str) {
    text.split_once(char::is_whitespace).map_or((text, ""), |(word, rest)| (word, rest.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_reads_and_maps_each_kind() {
        let table = KindTable::parse(TABLE).unwrap();
        assert_eq!(
            table.kind("GPTBot", Some("Scrapes data to train OpenAI's products.")),
            Some(AiKind::Training)
        );
        assert_eq!(table.kind("ChatGPT-User", Some("AI Assistants")), Some(AiKind::Assistant));
        assert_eq!(table.kind("OAI-SearchBot", Some("Search result generation.")), Some(AiKind::AiSearch));
        assert_eq!(table.kind("Operator", Some("AI Agents")), Some(AiKind::Agent));
        assert_eq!(table.kind("Diffbot", Some("AI Data Providers")), Some(AiKind::Scraper));
        // A key line wins over its function.
        assert_eq!(table.kind("Lightpanda", Some("AI Data Scrapers")), Some(AiKind::Scraper));
        // Text the table does not know is no kind, not a guess.
        assert_eq!(table.kind("NewBot", Some("Something new.")), None);
        assert_eq!(table.kind("NewBot", None), None);
    }

    #[test]
    fn a_broken_table_says_which_line() {
        let error = KindTable::parse("# c\ntrainng function X\n").unwrap_err();
        assert!(error.contains("line 2") && error.contains("`trainng` is no kind"), "{error}");
        let error = KindTable::parse("training fn X\n").unwrap_err();
        assert!(error.contains("line 1") && error.contains("expected"), "{error}");
        let error = KindTable::parse("training function\n").unwrap_err();
        assert!(error.contains("nothing after"), "{error}");
        let error = KindTable::parse("training key A\nscraper key A\n").unwrap_err();
        assert!(error.contains("line 2") && error.contains("training already"), "{error}");
    }
}
