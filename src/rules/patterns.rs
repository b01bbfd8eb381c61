//! Text matching in rules in bounded time: the guard that refuses backtracking Lua patterns, and
//! `re`, regular expressions with the `regex` crate's linear-time guarantee.
//!
//! Lua's pattern matcher backtracks: `string.find(("a"):rep(26), ("a?"):rep(26) .. ("a"):rep(26))`
//! runs for seconds inside one C call, where no time limit can stop it. Patterns are linear
//! when no item repeats, so the sandbox's `string.find` (unless `plain`), `match`, `gmatch` and
//! `gsub` accept patterns without quantifiers (`*`, `+`, `-`, `?`) or `%b`: anchors, classes,
//! sets, captures and `%f` stay usable. Anything more goes through `re`:
//! - `re.test(s, regex)`: whether `regex` matches somewhere in `s`;
//! - `re.find(s, regex [, init])`: start and end (1-based, inclusive) of the first match;
//! - `re.match(s, regex)`: the first match's captures, or the whole match if it has none.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use mlua::{Function, Lua, MultiValue, Table, Value};
use regex::bytes::{Regex, RegexBuilder};

/// Compiled expressions kept per Lua state; past this the cache starts again.
const CACHE: usize = 128;
/// Bounds on one expression's compiled size, so a rule cannot spend the memory limit's worth of
/// heap outside Lua's accounting.
const SIZE_LIMIT: usize = 1 << 20;
const DFA_SIZE_LIMIT: usize = 2 << 20;

/// Why a Lua pattern is refused, or `None` when it matches in linear time.
pub(super) fn backtracking(pattern: &[u8]) -> Option<&'static str> {
    let mut i = usize::from(pattern.first() == Some(&b'^'));
    while i < pattern.len() {
        // One single-character item: a character, `.`, `%x`, or a set.
        match pattern[i] {
            b'(' | b')' => {
                i += 1;
                continue;
            }
            b'%' => match pattern.get(i + 1) {
                Some(b'b') => return Some("%b"),
                // `%f[set]` is a zero-width frontier, `%1` a back reference: neither repeats.
                Some(b'f') => {
                    i = set_end(pattern, i + 2);
                    continue;
                }
                Some(digit) if digit.is_ascii_digit() => {
                    i += 2;
                    continue;
                }
                _ => i += 2,
            },
            b'[' => i = set_end(pattern, i),
            b'$' if i + 1 == pattern.len() => return None,
            _ => i += 1,
        }
        if let Some(quantifier @ (b'*' | b'+' | b'-' | b'?')) = pattern.get(i) {
            return Some(match quantifier {
                b'*' => "*",
                b'+' => "+",
                b'-' => "-",
                _ => "?",
            });
        }
    }
    None
}

/// The index after the set starting at `start` (`[`), as Lua's matcher reads it: a `]` right
/// after `[` or `[^` is a member, `%` escapes the next byte. An unclosed set ends the pattern
/// (Lua reports it as malformed).
fn set_end(pattern: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    if pattern.get(i) == Some(&b'^') {
        i += 1;
    }
    // The first member is taken whatever it is.
    loop {
        match pattern.get(i) {
            None => return pattern.len(),
            Some(b'%') => i += 2,
            Some(_) => i += 1,
        }
        if pattern.get(i) == Some(&b']') {
            return i + 1;
        }
    }
}

/// The sandbox's pattern guard: raises an error naming the quantifier for a backtracking
/// pattern; lets anything else through (Lua reports type errors itself).
pub(super) fn guard(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|_, pattern: Value| {
        let Value::String(pattern) = pattern else { return Ok(()) };
        match backtracking(&pattern.as_bytes()) {
            None => Ok(()),
            Some(item) => Err(mlua::Error::runtime(format!(
                "Lua patterns with `{item}` are not available in rules (their matching can take \
                 exponential time); use re.find / re.match / re.test with a regular expression, \
                 or string.find(s, text, 1, true) for plain text"
            ))),
        }
    })
}

/// The `re` table.
pub(super) fn re(lua: &Lua) -> mlua::Result<Table> {
    let cache: Rc<RefCell<HashMap<Vec<u8>, Regex>>> = Rc::default();
    let table = lua.create_table()?;
    let compiled = cache.clone();
    table.set(
        "test",
        lua.create_function(move |_, (subject, pattern): (mlua::LuaString, mlua::LuaString)| {
            with_regex(&compiled, &pattern.as_bytes(), |regex| Ok(regex.is_match(&subject.as_bytes())))
        })?,
    )?;
    let compiled = cache.clone();
    table.set(
        "find",
        lua.create_function(
            move |_, (subject, pattern, init): (mlua::LuaString, mlua::LuaString, Option<i64>)| {
                let subject = subject.as_bytes();
                let from = start_offset(init, subject.len());
                with_regex(&compiled, &pattern.as_bytes(), |regex| {
                    Ok(match regex.find_at(&subject, from) {
                        Some(found) => (Some(found.start() + 1), Some(found.end())),
                        None => (None, None),
                    })
                })
            },
        )?,
    )?;
    table.set(
        "match",
        lua.create_function(move |lua, (subject, pattern): (mlua::LuaString, mlua::LuaString)| {
            let subject = subject.as_bytes();
            with_regex(&cache, &pattern.as_bytes(), |regex| {
                let Some(captures) = regex.captures(&subject) else { return Ok(MultiValue::new()) };
                let wanted: Box<dyn Iterator<Item = _>> = if captures.len() > 1 {
                    Box::new(captures.iter().skip(1))
                } else {
                    Box::new(captures.iter())
                };
                wanted
                    .map(|group| match group {
                        Some(group) => lua.create_string(group.as_bytes()).map(Value::String),
                        None => Ok(Value::Nil),
                    })
                    .collect::<mlua::Result<MultiValue>>()
            })
        })?,
    )?;
    Ok(table)
}

/// Lua's `init`: 1-based, negative from the end, clamped to the subject.
fn start_offset(init: Option<i64>, len: usize) -> usize {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let init = init.unwrap_or(1);
    let from = if init > 0 {
        init - 1
    } else if init == 0 {
        0
    } else {
        (len_i + init).max(0)
    };
    usize::try_from(from.min(len_i)).unwrap_or(len)
}

fn with_regex<T>(
    cache: &RefCell<HashMap<Vec<u8>, Regex>>,
    pattern: &[u8],
    f: impl FnOnce(&Regex) -> mlua::Result<T>,
) -> mlua::Result<T> {
    if let Some(regex) = cache.borrow().get(pattern) {
        return f(regex);
    }
    let text = std::str::from_utf8(pattern)
        .map_err(|_| mlua::Error::runtime("re: the regular expression is not valid UTF-8"))?;
    let regex = RegexBuilder::new(text)
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(DFA_SIZE_LIMIT)
        .build()
        .map_err(|error| mlua::Error::runtime(format!("re: {}", first_line(&error.to_string()))))?;
    let result = f(&regex);
    let mut cache = cache.borrow_mut();
    if cache.len() >= CACHE {
        cache.clear();
    }
    cache.insert(pattern.to_vec(), regex);
    result
}

fn first_line(text: &str) -> String {
    text.lines().rfind(|line| !line.trim().is_empty()).unwrap_or(text).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_that_repeat_an_item_are_refused_and_the_rest_pass() {
        for linear in [
            "abc",
            "^/wp%-admin",
            "%.php$",
            "[a-z]",
            "[%-]",
            "[]]",
            "[^]x]",
            "^%d%d%d$",
            "(%a)%1",
            "%f[%w]",
            "a.b",
            "%",
            "[",
            "",
            "^",
            "$",
            "a$",
            "-x",
        ] {
            assert_eq!(backtracking(linear.as_bytes()), None, "{linear:?}");
        }
        for (backtracking_pattern, item) in [
            ("a*", "*"),
            ("^.+$", "+"),
            ("%d-x", "-"),
            ("a?", "?"),
            ("[a-z]*", "*"),
            ("%bxy", "%b"),
            ("(a?)", "?"),
            ("[]]+", "+"),
            ("%%*", "*"),
            ("-?", "?"),
        ] {
            assert_eq!(backtracking(backtracking_pattern.as_bytes()), Some(item), "{backtracking_pattern:?}");
        }
    }

    #[test]
    fn init_counts_like_lua() {
        assert_eq!(start_offset(None, 10), 0);
        assert_eq!(start_offset(Some(3), 10), 2);
        assert_eq!(start_offset(Some(-2), 10), 8);
        assert_eq!(start_offset(Some(-20), 10), 0);
        assert_eq!(start_offset(Some(50), 10), 10);
    }
}
