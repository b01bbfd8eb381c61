//! The Lua side of the rules: a sandboxed Lua 5.4 state per rule worker, built with the sandbox
//! (`sandbox.lua`), the helpers (`helpers.rs`, `patterns.rs`) and the driver (`driver.rs`), and
//! the run of one request through it (the request's wire format is [`super::wire`]'s; the
//! states a thread keeps are [`super::kept`]'s).
//!
//! Sandbox: rule scripts see only the environment `sandbox.lua` builds (the `table`, `string`,
//! `math` and `utf8` libraries as read-only views, no `load`, `require`, `xpcall`, coroutines,
//! `collectgarbage`, `print`, `warn`, `rawset` or `string.dump`); what a rule writes to globals
//! is forgotten after its request. Limits: the watchdog (`watchdog.rs`) stops an evaluation
//! that uses more CPU time than its limit, each state has a memory limit, and a state that runs
//! out of memory is rebuilt. The whole ruleset runs in one call into Lua.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use mlua::{Function, Lua, LuaOptions, StdLib, Table, Value};

use super::driver::{self, CODE_CHALLENGE, CODE_TRAP, Driver, DriverOutcome};
use super::lists::List;
use super::watchdog::Registration;
use super::wire::Request;
use super::{
    Compiled, Decision, FailMode, Limits, RuleFailure, RuleOutcome, RulesError, Verdict, WHOLE_RULESET,
};
use super::{helpers, patterns, seal};
use crate::facts::{Coverage, Facts};
use crate::vocabulary::FailureKind;

/// Loading a script gets this many times a request's time limit.
const SETUP_LIMIT_FACTOR: u32 = 10;

/// The sandbox's source (see the file).
const SANDBOX: &str = include_str!("sandbox.lua");

/// One worker's Lua state for one ruleset generation, and everything that points into it.
///
/// Fields drop in declaration order, and that order is the one this state needs: the watchdog
/// slot leaves first (nothing may signal a thread about a state that is going), then the
/// handles into the state, then the state itself, and last the lists, which the helpers' C
/// closures point at for as long as the state lives.
struct ThreadRules {
    /// The state's evaluation clock.
    watch: Registration,
    /// The driver, which runs every rule in one call; the functions that record a rule's
    /// failure and return the trace (see `driver::SOURCE`).
    driver: Driver,
    failed: Function,
    last_trace: Function,
    lua: Lua,
    /// The lists the helpers in `lua` point at.
    _lists: Vec<Arc<List>>,
    generation: u64,
    /// Rule names, in order.
    names: Vec<Arc<str>>,
    /// The rule name of a decision no rule made.
    no_rule: Arc<str>,
    /// The lane's limits: the ruleset's, or the inline lane's tighter ones.
    limits: Limits,
    /// Memory in use past which a request's garbage is collected at once, before the next.
    collect_above: usize,
}

/// Compiles the ruleset in a fresh state and returns its rule names.
pub(super) fn check(compiled: &Compiled) -> Result<Vec<String>, RulesError> {
    let state = build(compiled, Lane::Full)?;
    Ok(state.names.iter().map(|name| name.to_string()).collect())
}

/// A thread's Lua state (built on first use and whenever the ruleset changes) and the buffer
/// it hands requests to the driver in. Bound to the thread that made it.
pub(super) struct Evaluator {
    state: Option<ThreadRules>,
    /// The request's text for the driver, refilled for each request (see `wire::Request::of`).
    blob: String,
    /// Whose limits the state runs under.
    lane: Lane,
}

/// The limits an evaluator's state runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lane {
    /// The ruleset's own (a rule worker, or a tool's thread).
    Full,
    /// A thread that serves HTTP (see `inline.rs`): CPU time at most [`Lane::TIME`], memory
    /// at most [`Lane::HEADROOM`] above twice what the loaded script holds (room for the
    /// collector's pause, which lets the heap reach twice its live size), and a script that takes
    /// more than [`Lane::SETUP`] to load is not built at all.
    Inline,
}

/// The inline lane's own limits, kept with the lane they bound.
impl Lane {
    /// CPU time an evaluation may use on a thread that serves HTTP: a tenth of the default time
    /// limit, and hundreds of times what the default rules take.
    pub(super) const TIME: Duration = Duration::from_millis(2);
    /// Bytes an evaluation may allocate on a thread that serves HTTP, above twice the loaded
    /// script's.
    pub(super) const HEADROOM: usize = 1 << 20;
    /// CPU time loading the script may take on a thread that serves HTTP (the default rules take
    /// about 0.5 ms on the benchmark machine).
    pub(super) const SETUP: Duration = Duration::from_millis(10);
}

impl Evaluator {
    pub(super) fn new() -> Evaluator {
        Evaluator::in_lane(Lane::Full)
    }

    pub(super) fn in_lane(lane: Lane) -> Evaluator {
        Evaluator { state: None, blob: String::new(), lane }
    }

    /// Whose limits the state runs under.
    pub(super) fn lane(&self) -> Lane {
        self.lane
    }

    /// Builds the state for `compiled` unless it is already built; a failure is kept for
    /// `evaluate` to report.
    pub(super) fn prepare(&mut self, compiled: &Compiled) -> Option<RulesError> {
        if self.state.as_ref().is_some_and(|state| state.generation == compiled.generation) {
            return None;
        }
        self.state = None;
        match build(compiled, self.lane) {
            Ok(state) => {
                self.state = Some(state);
                None
            }
            Err(error) => Some(error),
        }
    }

    /// Runs the rules on `facts`; with `tracing`, also returns what each rule did.
    pub(super) fn evaluate(
        &mut self,
        compiled: &Compiled,
        facts: &Facts,
        tracing: bool,
    ) -> (Decision, Vec<RuleOutcome>) {
        if let Some(error) = self.prepare(compiled) {
            // The ruleset compiled at load, so this is a resource problem; apply the fail mode.
            tracing::error!(%error, "cannot build a Lua state for the rules");
            return (
                Decision::failed(
                    compiled.fail,
                    &Arc::from(WHOLE_RULESET),
                    FailureKind::Error,
                    &error.to_string(),
                ),
                Vec::new(),
            );
        }
        let Some(state) = self.state.as_ref() else {
            return (
                Decision::failed(
                    compiled.fail,
                    &Arc::from(WHOLE_RULESET),
                    FailureKind::Error,
                    "no Lua state",
                ),
                Vec::new(),
            );
        };
        let mut trace = Vec::new();
        let decision = run(state, &mut self.blob, compiled, facts, tracing.then_some(&mut trace));
        // A state that ran out of memory may hold what filled it: start the next request afresh.
        if decision.failures.iter().any(|failure| failure.kind == FailureKind::MemoryLimit) {
            self.state = None;
        }
        (decision, trace)
    }
}

/// How the driver's error for a rule that read a header the request's source did not carry
/// begins (see `Coverage`); the header's name follows.
pub(super) const UNJUDGED: &str = "unjudged: the input does not carry ";

/// A failure's text when a state runs out of memory.
const MEMORY_LIMIT_EXCEEDED: &str = "memory limit exceeded";

fn run(
    state: &ThreadRules,
    blob: &mut String,
    compiled: &Compiled,
    facts: &Facts,
    trace: Option<&mut Vec<RuleOutcome>>,
) -> Decision {
    {
        // Held to the end: the failure path runs Lua too.
        let running = state.watch.start(state.limits.time);
        let partial = facts.coverage != Coverage::All;
        let request = Request::of(facts, blob, trace.is_some());
        // Describing an error runs Lua, which a stop in progress would stop too: lift it, and
        // note whether the error was the stop's.
        let stopped = std::cell::Cell::new(false);
        let lift = || stopped.set(running.lift());
        let mut result = state.driver.evaluate(&request, lift);
        let (mut failures, mut unjudged) = (Vec::new(), Vec::new());
        let mut decision = loop {
            let (message, kind) = match result {
                Ok(outcome) => break decided(state, outcome),
                Err(error) => {
                    let kind = if stopped.take() {
                        FailureKind::TimeLimit
                    } else if error.out_of_memory {
                        FailureKind::MemoryLimit
                    } else {
                        FailureKind::Error
                    };
                    (clean_message(&error.text), kind)
                }
            };
            let index = state.failed.call::<usize>(message.as_str()).unwrap_or(0);
            // An error outside any rule (0) leaves nothing to resume at.
            let rule = state.names.get(index.wrapping_sub(1)).cloned();
            // A rule that read what this request's source did not carry: not a failure, and
            // skipped whatever the fail mode, since its answer would rest on a guess.
            if let (Some(rule), true) = (&rule, partial && message.starts_with(UNJUDGED)) {
                unjudged.push(rule.clone());
                result = state.driver.resume(|| stopped.set(running.lift()));
                continue;
            }
            // One CPU budget per request: a rule stopped at the time limit spent it for the
            // rules after it too, so the evaluation ends with the fail mode.
            let spent = kind == FailureKind::TimeLimit;
            let resumable = rule.is_some() && compiled.fail == FailMode::Open && !spent;
            let rule = rule.unwrap_or_else(|| Arc::from(WHOLE_RULESET));
            failures.push(RuleFailure { rule: rule.clone(), kind, message: message.clone() });
            if !resumable {
                break Decision::failed(compiled.fail, &rule, kind, &message);
            }
            result = state.driver.resume(|| stopped.set(running.lift()));
        };
        // Every failure of the evaluation, not only the last.
        decision.failures = failures;
        decision.unjudged = unjudged;
        if let Some(trace) = trace {
            let table = state.last_trace.call::<Option<Table>>(()).ok().flatten();
            trace.extend(
                pairs(&state.names, table.as_ref())
                    .into_iter()
                    .map(|(rule, result)| RuleOutcome { rule, result: Cow::Owned(result) }),
            );
        }
        // Garbage a rule left behind is collected before it counts against the next request.
        if state.lua.used_memory() > state.collect_above {
            let _ = state.lua.gc_collect();
        }
        decision
    }
}

fn decided(state: &ThreadRules, DriverOutcome { index, code, reason }: DriverOutcome) -> Decision {
    let rule = state.names.get(index.wrapping_sub(1)).cloned().unwrap_or_else(|| state.no_rule.clone());
    let verdict = match code {
        CODE_TRAP => Verdict::Trap,
        CODE_CHALLENGE => Verdict::Challenge,
        _ => Verdict::Allow,
    };
    Decision { verdict, rule, reason: reason.unwrap_or_default(), failures: Vec::new(), unjudged: Vec::new() }
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
        return MEMORY_LIMIT_EXCEEDED.into();
    }
    cut(first, MAX_MESSAGE).into_owned()
}

/// The longest failure text kept: a rule can raise a string of any size, and the text reaches
/// logs, traces and metrics.
const MAX_MESSAGE: usize = 512;

/// `text` cut to at most `max` bytes on a character boundary, saying how much was left out.
fn cut(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}… (+{} bytes)", &text[..end], text.len() - end))
}

fn error_message(error: &mlua::Error) -> String {
    match error {
        mlua::Error::CallbackError { cause, .. } => error_message(cause),
        mlua::Error::MemoryError(_) => MEMORY_LIMIT_EXCEEDED.into(),
        other => other.to_string().lines().next().unwrap_or_default().to_string(),
    }
}

/// Builds a sandboxed state for `lane`, runs the script and collects its rules.
fn build(compiled: &Compiled, lane: Lane) -> Result<ThreadRules, RulesError> {
    let script_error =
        |error: mlua::Error| RulesError::Script(format!("{}: {}", compiled.name, error_message(&error)));
    let lua =
        Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::UTF8, LuaOptions::default())
            .map_err(script_error)?;
    let watch = Registration::new(&lua).map_err(RulesError::Script)?;
    let setup = match lane {
        Lane::Full => compiled.limits.time * SETUP_LIMIT_FACTOR,
        Lane::Inline => Lane::SETUP.min(compiled.limits.time * SETUP_LIMIT_FACTOR),
    };
    let running = watch.start(setup);
    let Prepared { names, driver, failed, last_trace, lists } = prepare(&lua, compiled)?;
    drop(running);
    let (limits, collect_above) = match lane {
        Lane::Full => (compiled.limits.clone(), compiled.limits.memory / 2),
        Lane::Inline => {
            // What a request may allocate here bounds what one call into C can be asked to do
            // (sort, concatenate, repeat), which the time limit cannot interrupt. The incremental
            // collector lets the heap grow to twice what is live before it runs, so the limit
            // leaves that room; a full collection is forced only past half the headroom beyond it,
            // as it takes a millisecond here, on a thread that serves HTTP.
            let live = lua.used_memory();
            let memory = compiled.limits.memory.min(2 * live + Lane::HEADROOM);
            lua.set_memory_limit(memory).map_err(script_error)?;
            let limits = Limits { time: compiled.limits.time.min(Lane::TIME), memory };
            (limits, memory.min(2 * live + Lane::HEADROOM / 2))
        }
    };
    Ok(ThreadRules {
        watch,
        driver,
        failed,
        last_trace,
        lua,
        _lists: lists,
        generation: compiled.generation,
        names,
        no_rule: Arc::from(""),
        limits,
        collect_above,
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

/// `preferences` in Lua: `search`, `ai_input` and `ai_train`, each true, false, or nil when the
/// site did not say.
fn preferences_table(lua: &Lua, preferences: &crate::vocabulary::Preferences) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    table.set("search", preferences.search)?;
    table.set("ai_input", preferences.ai_input)?;
    table.set("ai_train", preferences.ai_train)?;
    Ok(table)
}

/// Builds the sandbox, runs the script in it and builds the driver over its rules.
fn prepare(lua: &Lua, compiled: &Compiled) -> Result<Prepared, RulesError> {
    let script_error =
        |error: mlua::Error| RulesError::Script(format!("{}: {}", compiled.name, error_message(&error)));
    let (lists, browser, kept) = helpers::install(lua, compiled).map_err(script_error)?;
    let (env, settle, reset, seal, _base): (Table, Function, Function, Function, Table) = lua
        .load(SANDBOX)
        .set_name("=quagmire sandbox")
        .call((
            patterns::guard(lua).map_err(script_error)?,
            patterns::re(lua).map_err(script_error)?,
            lists,
            browser,
            compiled.trap_threshold,
            compiled.challenge_everyone,
            compiled.challenge_unanswered,
            preferences_table(lua, &compiled.preferences).map_err(script_error)?,
        ))
        .map_err(script_error)?;
    strip_globals(lua).map_err(script_error)?;
    lua.set_memory_limit(compiled.limits.memory).map_err(script_error)?;
    let returned: Value = lua
        .load(compiled.source.as_str())
        .set_name(format!("@{}", compiled.name))
        .set_environment(env)
        .eval()
        .map_err(|error| RulesError::Script(error_message(&error)))?;
    let globals: Table = settle.call(()).map_err(script_error)?;
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
    // Nothing a rule changes may outlive its request: every table the rules can reach becomes
    // read-only, and no rule may assign a local declared outside it (see `seal.rs`).
    let (upvalue, metatable, set_metatable) = seal::inspectors(lua).map_err(script_error)?;
    let roots =
        lua.create_sequence_from([Value::Table(list), Value::Table(globals)]).map_err(script_error)?;
    let functions: Vec<Function> =
        seal.call((roots, upvalue, metatable, set_metatable)).map_err(script_error)?;
    if let Some(reason) = functions.iter().find_map(seal::outer_assignment) {
        return Err(RulesError::Script(reason));
    }
    let (evaluate, failed, resume, last_trace): (Function, Function, Function, Function) = lua
        .load(driver::SOURCE)
        .set_name("=quagmire rule driver")
        .call((checks, reset))
        .map_err(script_error)?;
    let driver = Driver::new(lua, evaluate, resume).map_err(script_error)?;
    Ok(Prepared { names, driver, failed, last_trace, lists: kept })
}

/// Removes from the state's own globals what could read files, load code or escape the time
/// limit. Rules never see these globals (their environment is the sandbox's), so this only
/// narrows what the sandbox and driver chunks could reach by mistake.
fn strip_globals(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    for name in
        ["dofile", "loadfile", "load", "require", "collectgarbage", "print", "warn", "rawset", "xpcall"]
    {
        globals.set(name, Value::Nil)?;
    }
    Ok(())
}

#[cfg(test)]
/// The names a rule script can reach as globals, and those in its `string` library.
pub(super) fn visible_names(compiled: &Compiled) -> (Vec<String>, Vec<String>) {
    let lua =
        Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::UTF8, LuaOptions::default())
            .unwrap();
    let (lists, browser, _kept) = helpers::install(&lua, compiled).unwrap();
    let (_env, _settle, _reset, _seal, base): (Table, Function, Function, Function, Table) = lua
        .load(SANDBOX)
        .call((
            patterns::guard(&lua).unwrap(),
            patterns::re(&lua).unwrap(),
            lists,
            browser,
            1.0,
            false,
            4,
            preferences_table(&lua, &compiled.preferences).unwrap(),
        ))
        .unwrap();
    let mut globals: Vec<String> = base.pairs::<String, Value>().map(|pair| pair.unwrap().0).collect();
    let strings: Table = lua
        .load("local names = {} for k in pairs(string) do names[#names + 1] = k end return names")
        .set_environment(base)
        .eval()
        .unwrap();
    let mut strings: Vec<String> = strings.sequence_values::<String>().map(Result::unwrap).collect();
    globals.sort();
    strings.sort();
    (globals, strings)
}
