//! The Lua side of the rules: a sandboxed Lua 5.4 state per worker thread, the read-only request
//! view scripts see, and the helpers written in Rust.
//!
//! Sandbox: only the `table`, `string`, `math` and `utf8` libraries, without `load`, `dofile`,
//! `loadfile`, `require`, `collectgarbage`, `print` or `string.dump`. Limits: a count hook every
//! 1000 instructions stops a call that exceeds its instruction or time budget, and each state has
//! a memory limit. The request is passed as scoped userdata (no table is built per call).

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use mlua::{
    AnyUserData, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, UserDataRegistry, Value,
    VmState,
};
use mlua::{UserDataFields, UserDataMethods};

use super::lists::{List, browser_claim};
use super::{Compiled, Decision, FailMode, RuleOutcome, RulesError, Verdict};
use crate::facts::Facts;

/// Instructions between two runs of the limit hook.
const HOOK_EVERY: u32 = 1000;

/// One thread's Lua state for one ruleset generation.
struct ThreadRules {
    generation: u64,
    lua: Lua,
    rules: Vec<(String, Function)>,
    budget: Arc<Budget>,
}

/// What the limit hook checks, reset before every rule call.
struct Budget {
    /// Hook runs left before the instruction limit.
    ticks: AtomicI64,
    /// Deadline as nanoseconds since `epoch`.
    deadline: AtomicI64,
    epoch: Instant,
}

thread_local! {
    static STATE: RefCell<Option<ThreadRules>> = const { RefCell::new(None) };
}

/// Compiles the ruleset in a fresh state and returns its rule names.
pub(super) fn check(compiled: &Compiled) -> Result<Vec<String>, RulesError> {
    let state = build(compiled)?;
    Ok(state.rules.into_iter().map(|(name, _)| name).collect())
}

/// Runs the rules on `facts` in this thread's state.
pub(super) fn evaluate(compiled: &Compiled, facts: &Facts) -> (Decision, Vec<RuleOutcome>) {
    STATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|state| state.generation != compiled.generation) {
            match build(compiled) {
                Ok(state) => *slot = Some(state),
                Err(error) => {
                    // The ruleset compiled at load, so this is a resource problem; apply the fail mode.
                    tracing::error!(%error, "cannot build a Lua state for the rules");
                    return (failed(compiled.fail, "rules", &error.to_string()), Vec::new());
                }
            }
        }
        let state = slot.as_ref().expect("state built above");
        run(state, compiled, facts)
    })
}

fn run(state: &ThreadRules, compiled: &Compiled, facts: &Facts) -> (Decision, Vec<RuleOutcome>) {
    let mut trace = Vec::with_capacity(state.rules.len());
    let limits = &compiled.limits;
    let result = state.lua.scope(|scope| {
        let request = scope.create_any_userdata_ref(facts)?;
        for (name, check) in &state.rules {
            state.budget.ticks.store(i64::from(limits.instructions / HOOK_EVERY).max(1), Ordering::Relaxed);
            let deadline = state.budget.epoch.elapsed() + limits.time;
            state.budget.deadline.store(deadline.as_nanos() as i64, Ordering::Relaxed);
            match check.call::<MultiValue>(&request) {
                Ok(values) => match outcome(&values) {
                    Ok(None) => trace.push(RuleOutcome { rule: name.clone(), result: "pass".into() }),
                    Ok(Some((verdict, reason))) => {
                        trace.push(RuleOutcome { rule: name.clone(), result: verdict.as_str().into() });
                        return Ok(Some(Decision { verdict, rule: name.clone(), reason }));
                    }
                    Err(message) => {
                        if let Some(decision) = rule_failed(compiled, name, &message, &mut trace) {
                            return Ok(Some(decision));
                        }
                    }
                },
                Err(error) => {
                    let message = error_message(&error);
                    if let Some(decision) = rule_failed(compiled, name, &message, &mut trace) {
                        return Ok(Some(decision));
                    }
                }
            }
        }
        Ok(None)
    });
    let decision = match result {
        Ok(Some(decision)) => decision,
        Ok(None) => Decision { verdict: Verdict::Allow, rule: String::new(), reason: String::new() },
        Err(error) => failed(compiled.fail, "rules", &error_message(&error)),
    };
    // A rule that ran out of memory leaves garbage behind; collect it before the next request.
    if state.lua.used_memory() > limits.memory / 2 {
        let _ = state.lua.gc_collect();
    }
    (decision, trace)
}

/// Logs a failed rule and returns the decision its fail mode gives, if it decides.
fn rule_failed(
    compiled: &Compiled,
    rule: &str,
    message: &str,
    trace: &mut Vec<RuleOutcome>,
) -> Option<Decision> {
    tracing::warn!(rule, error = message, script = %compiled.name, "rule failed");
    trace.push(RuleOutcome { rule: rule.to_string(), result: format!("error: {message}") });
    match compiled.fail {
        FailMode::Open => None,
        FailMode::Closed => Some(failed(FailMode::Closed, rule, message)),
    }
}

fn failed(mode: FailMode, rule: &str, message: &str) -> Decision {
    let verdict = match mode {
        FailMode::Open => Verdict::Allow,
        FailMode::Closed => Verdict::Trap,
    };
    Decision { verdict, rule: rule.to_string(), reason: format!("rule failed: {message}") }
}

/// A rule's return values: nothing (pass), or `"allow"`/`"trap"`/`"deny"` and a reason.
fn outcome(values: &MultiValue) -> Result<Option<(Verdict, String)>, String> {
    let mut values = values.iter();
    let verdict = match values.next() {
        None | Some(Value::Nil) => return Ok(None),
        Some(Value::String(text)) => match text.to_str().map(|s| s.to_string()).as_deref() {
            Ok("allow") => Verdict::Allow,
            Ok("trap") | Ok("deny") => Verdict::Trap,
            Ok(other) => return Err(format!("returned \"{other}\"; expected \"allow\", \"trap\" or nil")),
            Err(_) => return Err("returned a non-UTF-8 string".into()),
        },
        Some(other) => {
            return Err(format!("returned a {}; expected \"allow\", \"trap\" or nil", other.type_name()));
        }
    };
    let reason = match values.next() {
        Some(Value::String(text)) => text.to_string_lossy(),
        _ => String::new(),
    };
    Ok(Some((verdict, reason)))
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
    sandbox(&lua).map_err(script_error)?;
    register_request(&lua).map_err(script_error)?;
    install_helpers(&lua, compiled).map_err(script_error)?;

    let budget = Arc::new(Budget {
        ticks: AtomicI64::new(i64::MAX),
        deadline: AtomicI64::new(i64::MAX),
        epoch: Instant::now(),
    });
    let hook_budget = budget.clone();
    lua.set_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), move |_, _| {
        if hook_budget.ticks.fetch_sub(1, Ordering::Relaxed) <= 0 {
            return Err(mlua::Error::runtime("instruction limit exceeded"));
        }
        if hook_budget.epoch.elapsed().as_nanos() as i64 > hook_budget.deadline.load(Ordering::Relaxed) {
            return Err(mlua::Error::runtime("time limit exceeded"));
        }
        Ok(VmState::Continue)
    })
    .map_err(script_error)?;

    // Loading the script runs under the same limits as a rule call.
    budget.ticks.store(i64::from(compiled.limits.instructions / HOOK_EVERY).max(1) * 10, Ordering::Relaxed);
    let deadline = budget.epoch.elapsed() + compiled.limits.time * 10;
    budget.deadline.store(deadline.as_nanos() as i64, Ordering::Relaxed);
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
    let mut rules = Vec::new();
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
        rules.push((name, check));
    }
    Ok(ThreadRules { generation: compiled.generation, lua, rules, budget })
}

/// Removes what could read files, load code or inspect the host from the globals.
fn sandbox(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    for name in ["dofile", "loadfile", "load", "require", "collectgarbage", "print"] {
        globals.set(name, Value::Nil)?;
    }
    let string: Table = globals.get("string")?;
    string.set("dump", Value::Nil)?;
    Ok(())
}

/// The request view: read-only fields and `r:header(name)`.
fn register_request(lua: &Lua) -> mlua::Result<()> {
    lua.register_userdata_type::<Facts>(|registry: &mut UserDataRegistry<Facts>| {
        registry.add_field_method_get("method", |_, r| Ok(r.method.clone()));
        registry.add_field_method_get("proto", |_, r| Ok(r.proto.clone()));
        registry.add_field_method_get("host", |_, r| Ok(r.host.clone()));
        registry.add_field_method_get("uri", |_, r| Ok(r.uri.clone()));
        registry.add_field_method_get("path", |_, r| Ok(r.path().to_string()));
        registry.add_field_method_get("query", |_, r| Ok(r.query().to_string()));
        registry.add_field_method_get("user_agent", |_, r| Ok(r.user_agent().to_string()));
        registry.add_field_method_get("ip", |_, r| Ok(r.address.to_string()));
        registry.add_field_method_get("key", |_, r| Ok(r.key.to_string()));
        registry.add_field_method_get("asn", |_, r| Ok(r.geo.asn));
        registry.add_field_method_get("asn_org", |_, r| Ok(r.geo.asn_org.clone()));
        registry.add_field_method_get("country", |_, r| Ok(r.geo.country.clone()));
        registry.add_field_method_get("trap_hits", |_, r| Ok(r.history.trap_hits));
        registry.add_field_method_get("trap_score", |_, r| Ok(r.history.trap_score));
        registry.add_field_method_get("request_rate", |_, r| Ok(r.history.request_rate));
        registry.add_field_method_get("rate_limited", |_, r| Ok(r.history.rate_limited));
        registry.add_field_method_get("is_trap_url", |_, r| Ok(r.is_trap_url));
        registry.add_method("header", |_, r, name: String| Ok(r.header(&name).map(str::to_string)));
    })
}

/// `lists.<name>` with `:find(...)`, and `browser(ua)`.
fn install_helpers(lua: &Lua, compiled: &Compiled) -> mlua::Result<()> {
    lua.register_userdata_type::<Arc<List>>(|registry| {
        // `list:find(x)`: the matching token, the network's label (or true), or the ASN's name
        // (or true); nil when `x` is not in the list.
        registry.add_method("find", |lua, list, value: Value| {
            let found = match (list.as_ref(), &value) {
                (List::Tokens(tokens), Value::String(text)) => {
                    tokens.find(&text.to_string_lossy()).map(|token| label_value(lua, token))
                }
                (List::Networks(networks), Value::String(text)) => text
                    .to_string_lossy()
                    .parse()
                    .ok()
                    .and_then(|address| networks.find(address))
                    .map(|label| label_value(lua, label)),
                (List::Asns(asns), Value::Integer(asn)) => {
                    u32::try_from(*asn).ok().and_then(|asn| asns.find(asn)).map(|name| label_value(lua, name))
                }
                (List::Asns(asns), Value::Number(asn)) => {
                    asns.find(*asn as u32).map(|name| label_value(lua, name))
                }
                (_, Value::Nil) => None,
                (list, other) => {
                    return Err(mlua::Error::runtime(format!(
                        "a list of {} cannot look up a {}",
                        list.kind(),
                        other.type_name()
                    )));
                }
            };
            Ok(found.unwrap_or(Value::Nil))
        });
        registry.add_method("len", |_, list, ()| Ok(list.len()));
        // `list:claimed(ua)`: for a labelled network list, the label the user agent names.
        registry.add_method("claimed", |_, list, user_agent: Option<String>| match list.as_ref() {
            List::Networks(networks) => {
                Ok(user_agent.as_deref().and_then(|ua| networks.claimed(ua)).map(str::to_string))
            }
            other => Err(mlua::Error::runtime(format!(
                "claimed() needs a labelled network list, not {}",
                other.kind()
            ))),
        });
    })?;
    let lists = lua.create_table()?;
    for (name, list) in &compiled.lists {
        let list: AnyUserData = lua.create_any_userdata(list.clone())?;
        lists.set(name.as_str(), list)?;
    }
    lua.globals().set("lists", lists)?;
    // browser(ua) -> family, major, minor; nil when the UA claims no mainstream browser.
    let browser = lua.create_function(|lua, user_agent: Option<String>| {
        let Some(claim) = user_agent.as_deref().and_then(browser_claim) else {
            return Ok(MultiValue::new());
        };
        Ok(MultiValue::from_vec(vec![
            Value::String(lua.create_string(claim.family)?),
            Value::Integer(i64::from(claim.major)),
            Value::Integer(i64::from(claim.minor)),
        ]))
    })?;
    lua.globals().set("browser", browser)?;
    Ok(())
}

fn label_value(lua: &Lua, label: &str) -> Value {
    if label.is_empty() {
        return Value::Boolean(true);
    }
    lua.create_string(label).map(Value::String).unwrap_or(Value::Boolean(true))
}
