//! The Lua side of the rules: a sandboxed Lua 5.4 state per worker thread, built with the helpers
//! (`helpers.rs`) and the driver (`driver.rs`), and the request's text handed to the driver.
//!
//! Sandbox: only the `table`, `string`, `math` and `utf8` libraries, without `load`, `dofile`,
//! `loadfile`, `require`, `collectgarbage`, `print`, `rawset` or `string.dump`. Limits: the
//! watchdog (`watchdog.rs`) stops an evaluation that runs past its time limit, and each state has
//! a memory limit. The request is a per-thread table refilled for each request behind a
//! read-only proxy; the whole ruleset runs in one call into Lua.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Arc;

use mlua::{Function, Lua, LuaOptions, StdLib, Table, Value};

use super::driver::{self, CODE_TRAP, Driver, Outcome};
use super::helpers;
use super::lists::List;
use super::watchdog::Registration;
use super::{Compiled, Decision, FailMode, RuleOutcome, RulesError, Verdict};
use crate::facts::Facts;
use crate::numbers::Decimal;

/// Loading a script gets this many times a request's time limit.
const SETUP_LIMIT_FACTOR: u32 = 10;

/// One thread's Lua state for one ruleset generation.
struct ThreadRules {
    generation: u64,
    lua: Lua,
    /// Rule names, in order.
    names: Vec<Arc<str>>,
    /// The driver, which runs every rule in one call; the functions that record a rule's
    /// failure and return the trace (see `driver::SOURCE`).
    driver: Driver,
    failed: Function,
    last_trace: Function,
    /// The lists the helpers in `lua` point at.
    _lists: Vec<Arc<List>>,
    /// The state's evaluation clock.
    watch: Registration,
    /// The rule name of a decision no rule made.
    no_rule: Arc<str>,
}

thread_local! {
    static STATE: RefCell<Option<ThreadRules>> = const { RefCell::new(None) };
}

/// Compiles the ruleset in a fresh state and returns its rule names.
pub(super) fn check(compiled: &Compiled) -> Result<Vec<String>, RulesError> {
    let state = build(compiled)?;
    Ok(state.names.iter().map(|name| name.to_string()).collect())
}

/// Runs the rules on `facts` in this thread's state.
pub(super) fn evaluate(compiled: &Compiled, facts: &Facts, trace: Option<&mut Vec<RuleOutcome>>) -> Decision {
    STATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|state| state.generation != compiled.generation) {
            match build(compiled) {
                Ok(state) => *slot = Some(state),
                Err(error) => {
                    // The ruleset compiled at load, so this is a resource problem; apply the fail mode.
                    tracing::error!(%error, "cannot build a Lua state for the rules");
                    return failed(compiled.fail, &Arc::from("rules"), &error.to_string());
                }
            }
        }
        let state = slot.as_ref().expect("state built above");
        run(state, compiled, facts, trace)
    })
}

fn run(
    state: &ThreadRules,
    compiled: &Compiled,
    facts: &Facts,
    trace: Option<&mut Vec<RuleOutcome>>,
) -> Decision {
    BLOB.with(|cell| {
        let mut blob = cell.borrow_mut();
        // Held to the end: the failure path runs Lua too.
        let running = state.watch.start(compiled.limits.time);
        let ends = fill_blob(&mut blob, facts);
        // Flags and the ASN in one argument.
        let packed = i64::from(facts.history.rate_limited)
            | i64::from(facts.is_trap_url) << 1
            | i64::from(facts.geo.asn_org.is_some()) << 2
            | i64::from(facts.geo.country.is_some()) << 3
            | facts.geo.asn.map_or(0, |asn| 1 << 4 | i64::from(asn) << 5);
        let request = driver::Request {
            tracing: trace.is_some(),
            text: blob.as_str(),
            ends,
            trap_hits: facts.history.trap_hits,
            trap_score: facts.history.trap_score,
            request_rate: facts.history.request_rate,
            packed,
        };
        // A rule that ran over the time limit must leave the rules after it time, and not
        // stopped.
        let mut result = state.driver.evaluate(&request, || running.restart());
        let mut failures = Vec::new();
        let mut decision = loop {
            let message = match result {
                Ok(outcome) => break decided(state, outcome),
                Err(message) => clean_message(&message),
            };
            let index = state.failed.call::<usize>(message.as_str()).unwrap_or(0);
            // An error outside any rule (0) leaves nothing to resume at.
            let rule = state.names.get(index.wrapping_sub(1)).cloned();
            let resumable = rule.is_some() && compiled.fail == FailMode::Open;
            let rule = rule.unwrap_or_else(|| Arc::from("rules"));
            tracing::warn!(rule = &*rule, error = %message, script = %compiled.name, "rule failed");
            failures.push((rule.clone(), message.clone()));
            if !resumable {
                break failed(compiled.fail, &rule, &message);
            }
            result = state.driver.resume(|| running.restart());
        };
        // Every failure of the evaluation, not only the last.
        decision.failures = failures;
        if let Some(trace) = trace {
            let table = state.last_trace.call::<Option<Table>>(()).ok().flatten();
            trace.extend(
                pairs(&state.names, table.as_ref())
                    .into_iter()
                    .map(|(rule, result)| RuleOutcome { rule, result: Cow::Owned(result) }),
            );
        }
        // A rule that ran out of memory leaves garbage behind; collect it before the next request.
        if state.lua.used_memory() > compiled.limits.memory / 2 {
            let _ = state.lua.gc_collect();
        }
        decision
    })
}

fn decided(state: &ThreadRules, Outcome { index, code, reason }: Outcome) -> Decision {
    let rule = state.names.get(index.wrapping_sub(1)).cloned().unwrap_or_else(|| state.no_rule.clone());
    let verdict = match code {
        CODE_TRAP => Verdict::Trap,
        _ => Verdict::Allow,
    };
    Decision { verdict, rule, reason: reason.unwrap_or_default(), failures: Vec::new() }
}

thread_local! {
    /// The request's text for the driver, refilled for each request (see `fill_blob`).
    static BLOB: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Writes the request's text fields into `blob`: method, proto, host, URI, User-Agent, address,
/// key, ASN name and country back to back, then the headers as `\nname: value\n...`. Returns the
/// end offset of each field (and of the path within the URI), which the driver cuts them at.
fn fill_blob(blob: &mut String, facts: &Facts) -> [usize; 10] {
    blob.clear();
    let mut ends = [0; 10];
    for (end, field) in ends.iter_mut().zip([&facts.method, &facts.proto, &facts.host]) {
        blob.push_str(field);
        *end = blob.len();
    }
    // The URI whole; the path ends where its `?` is.
    ends[3] = blob.len() + facts.path().len();
    blob.push_str(&facts.uri);
    ends[4] = blob.len();
    blob.push_str(facts.user_agent());
    ends[5] = blob.len();
    let address_start = blob.len();
    push_address(blob, facts.address);
    ends[6] = blob.len();
    if facts.key.is_address(facts.address) {
        blob.extend_from_within(address_start..ends[6]);
    } else {
        let _ = write!(blob, "{}", facts.key);
    }
    ends[7] = blob.len();
    blob.push_str(facts.geo.asn_org.as_deref().unwrap_or_default());
    ends[8] = blob.len();
    blob.push_str(facts.geo.country.as_deref().unwrap_or_default());
    ends[9] = blob.len();
    blob.push('\n');
    // Already `name: value\n` each, names lowercase, no newline inside a value.
    blob.push_str(facts.headers.as_text());
    ends
}

/// Appends an address as text; IPv4, the common case, without going through `fmt`.
fn push_address(out: &mut String, address: IpAddr) {
    match address {
        IpAddr::V4(v4) => {
            for (index, octet) in v4.octets().into_iter().enumerate() {
                if index > 0 {
                    out.push('.');
                }
                out.push_str(Decimal::new(usize::from(octet), 1).as_str());
            }
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// The driver's `[index, text, index, text, ...]` list as (rule name, text) pairs.
fn pairs(names: &[Arc<str>], table: Option<&Table>) -> Vec<(Arc<str>, String)> {
    let Some(table) = table else { return Vec::new() };
    let values: Vec<Value> = table.sequence_values::<Value>().flatten().collect();
    values
        .chunks(2)
        .filter_map(|pair| match pair {
            [Value::Integer(index), Value::String(text)] => {
                let name = names.get((*index as usize).wrapping_sub(1))?.clone();
                Some((name, text.to_string_lossy()))
            }
            _ => None,
        })
        .collect()
}

/// Lua's and mlua's error texts, reduced to their first line with friendlier wording.
fn clean_message(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default();
    let first = first.strip_prefix("runtime error: ").unwrap_or(first);
    if first.contains("not enough memory") {
        return "memory limit exceeded".into();
    }
    first.to_string()
}

fn failed(mode: FailMode, rule: &Arc<str>, message: &str) -> Decision {
    let verdict = match mode {
        FailMode::Open => Verdict::Allow,
        FailMode::Closed => Verdict::Trap,
    };
    Decision {
        verdict,
        rule: rule.clone(),
        reason: format!("rule failed: {message}"),
        failures: vec![(rule.clone(), message.to_string())],
    }
}

fn error_message(error: &mlua::Error) -> String {
    match error {
        mlua::Error::CallbackError { cause, .. } => error_message(cause),
        mlua::Error::MemoryError(_) => "memory limit exceeded".into(),
        other => other.to_string().lines().next().unwrap_or_default().to_string(),
    }
}

/// Builds a sandboxed state, runs the script and collects its rules.
fn build(compiled: &Compiled) -> Result<ThreadRules, RulesError> {
    let script_error =
        |error: mlua::Error| RulesError::Script(format!("{}: {}", compiled.name, error_message(&error)));
    let lua =
        Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::UTF8, LuaOptions::default())
            .map_err(script_error)?;
    let watch = Registration::new(&lua).map_err(RulesError::Script)?;
    let running = watch.start(compiled.limits.time * SETUP_LIMIT_FACTOR);
    let Prepared { names, driver, failed, last_trace, lists } = prepare(&lua, compiled)?;
    drop(running);
    Ok(ThreadRules {
        generation: compiled.generation,
        lua,
        names,
        driver,
        failed,
        last_trace,
        _lists: lists,
        watch,
        no_rule: Arc::from(""),
    })
}

/// A loaded script's rule names and its driver's functions.
struct Prepared {
    names: Vec<Arc<str>>,
    lists: Vec<Arc<List>>,
    driver: Driver,
    failed: Function,
    last_trace: Function,
}

/// Sandboxes the state, installs the helpers, runs the script and builds the driver over its
/// rules.
fn prepare(lua: &Lua, compiled: &Compiled) -> Result<Prepared, RulesError> {
    let script_error =
        |error: mlua::Error| RulesError::Script(format!("{}: {}", compiled.name, error_message(&error)));
    sandbox(lua).map_err(script_error)?;
    let lists = helpers::install(lua, compiled).map_err(script_error)?;
    lua.globals().set("trap_threshold", compiled.trap_threshold).map_err(script_error)?;
    lua.set_memory_limit(compiled.limits.memory).map_err(script_error)?;
    let returned: Value = lua
        .load(compiled.source.as_str())
        .set_name(format!("@{}", compiled.name))
        .eval()
        .map_err(|error| RulesError::Script(error_message(&error)))?;
    let Value::Table(list) = returned else {
        return Err(RulesError::Script(format!(
            "{}: the script must return a list of rules ({{ name = ..., check = function(r) ... end }})",
            compiled.name
        )));
    };
    let mut names = Vec::new();
    let checks = lua.create_table().map_err(script_error)?;
    for (index, entry) in list.sequence_values::<Table>().enumerate() {
        let entry = entry.map_err(|_| {
            RulesError::Script(format!("{}: rule {} is not a table", compiled.name, index + 1))
        })?;
        let name: String = entry
            .get("name")
            .map_err(|_| RulesError::Script(format!("{}: rule {} has no name", compiled.name, index + 1)))?;
        let check: Function = entry.get("check").map_err(|_| {
            RulesError::Script(format!("{}: rule `{name}` has no check function", compiled.name))
        })?;
        checks.push(check).map_err(script_error)?;
        names.push(Arc::from(name));
    }
    let tostring: Function = lua.globals().get("tostring").map_err(script_error)?;
    let type_of: Function = lua.globals().get("type").map_err(script_error)?;
    let setmetatable: Function = lua.globals().get("setmetatable").map_err(script_error)?;
    let error: Function = lua.globals().get("error").map_err(script_error)?;
    let (evaluate, failed, resume, last_trace): (Function, Function, Function, Function) = lua
        .load(driver::SOURCE)
        .set_name("=quagmire rule driver")
        .call((checks, tostring, type_of, setmetatable, error))
        .map_err(script_error)?;
    let driver = Driver::new(lua, evaluate, resume).map_err(script_error)?;
    Ok(Prepared { names, driver, failed, last_trace, lists })
}

/// Removes what could read files, load code or inspect the host from the globals, and refuses
/// `__gc` metamethods: a finalizer runs whenever Lua collects, even when the state closes, outside
/// any evaluation's time limit.
fn sandbox(lua: &Lua) -> mlua::Result<()> {
    lua.load(
        r#"
        local setmetatable, rawget, error = setmetatable, rawget, error
        _G.setmetatable = function(table, metatable)
          if metatable ~= nil and rawget(metatable, "__gc") ~= nil then
            error("rules cannot set __gc metamethods", 2)
          end
          return setmetatable(table, metatable)
        end
        "#,
    )
    .set_name("=quagmire sandbox")
    .exec()?;
    let globals = lua.globals();
    // `rawset` could write through the read-only request view.
    for name in ["dofile", "loadfile", "load", "require", "collectgarbage", "print", "rawset"] {
        globals.set(name, Value::Nil)?;
    }
    let string: Table = globals.get("string")?;
    string.set("dump", Value::Nil)?;
    Ok(())
}
