//! Rules: operator-written Lua that turns [`Facts`] into a verdict, and the lists it consults.
//!
//! A script returns a list of rules, each `{ name = "...", check = function(r) ... end }`. Rules
//! run in order; the first that returns `"allow"` or `"trap"` (with a reason) decides, and a
//! request no rule decides is allowed. Lua is sandboxed and limited per call (see [`lua`]); a
//! rule that fails or runs over a limit gets the configured fail mode and is logged and counted,
//! so a broken rule never stalls or crashes the service.
//!
//! Rules and lists are compiled once per (re)load. A verdict's rules run first on the thread
//! that serves it, within limits far below the ruleset's (see [`inline`]); what goes over them
//! runs again on a pool of threads of their own (see [`pool`]) under the ruleset's limits. Each
//! thread keeps its own Lua state and rebuilds it when the generation changes, so the request
//! path takes no global lock, and a stuck rule holds a thread that serves HTTP no longer than
//! the inline limits allow.

mod driver;
mod helpers;
mod inline;
mod kept;
mod lua;
mod patterns;
mod pool;
mod report;
mod seal;
mod watchdog;
mod wire;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::facts::Facts;
use crate::lists::{self, List};
pub(crate) use crate::vocabulary::{FailureKind, Verdict};
pub(crate) use inline::InlineStats;
pub(crate) use pool::PoolStats;

/// The embedded default ruleset.
pub(crate) const DEFAULT_SCRIPT: (&str, &str) = ("rules/default.lua", include_str!("../rules/default.lua"));

use crate::lists::DEFAULT_LISTS;

/// The outcome of evaluating the rules for one request.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// The deciding rule's name, or empty when no rule decided.
    pub rule: Arc<str>,
    /// The deciding rule's reason.
    pub reason: String,
    /// Rules that failed on the way (empty, and unallocated, almost always).
    pub failures: Vec<RuleFailure>,
    /// Rules skipped because they read a header the request's source did not carry (a replayed
    /// log line's; see [`crate::facts::Coverage`]). Always empty for live requests.
    pub unjudged: Vec<Arc<str>>,
}

/// The rule a failure is charged to when no one rule failed (no worker answered, the rules
/// panicked, the state could not be built): the ruleset as a whole.
pub(crate) const WHOLE_RULESET: &str = "rules";

impl Decision {
    /// What the fail mode decides when `rule` failed as `kind` says, with `message`.
    pub(crate) fn failed(mode: FailMode, rule: &Arc<str>, kind: FailureKind, message: &str) -> Decision {
        let verdict = match mode {
            FailMode::Open => Verdict::Allow,
            FailMode::Closed => Verdict::Trap,
        };
        Decision {
            verdict,
            rule: rule.clone(),
            reason: format!("rule failed: {message}"),
            failures: vec![RuleFailure { rule: rule.clone(), kind, message: message.to_string() }],
            unjudged: Vec::new(),
        }
    }
}

/// A rule that failed, how, and its error's text.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleFailure {
    /// The rule; `rules` when no rule was running (the whole evaluation failed).
    pub rule: Arc<str>,
    /// How it failed.
    pub kind: FailureKind,
    /// The error's text, for people (cut to a bounded length).
    pub message: String,
}

/// What one rule did, for `explain`.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleOutcome {
    /// The rule.
    pub rule: Arc<str>,
    /// `pass`, `allow`, `trap`, or `error: ...`.
    pub result: Cow<'static, str>,
}

/// What to do when a rule fails or runs over a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailMode {
    /// Skip the rule, as if it had passed.
    Open,
    /// Trap the request.
    Closed,
}

/// Limits on each rule call and each Lua state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// CPU time per request, for all rules together.
    pub time: Duration,
    /// Bytes of memory per Lua state.
    pub memory: usize,
}

/// Where rules come from.
#[derive(Clone, Debug, PartialEq)]
pub struct RulesConfig {
    /// The script; `None` is the embedded default.
    pub script: Option<PathBuf>,
    /// A folder of list files; `None` is the embedded default lists.
    pub lists: Option<PathBuf>,
    /// Fail mode for rules that error.
    pub fail: FailMode,
    /// Per-call and per-state limits.
    pub limits: Limits,
    /// Rule worker threads; 0 is one per CPU core.
    pub workers: usize,
    /// The trap score at which a client counts as trapped: `trap_threshold` in Lua, and the
    /// threshold of `quagmire_clients_over_threshold`.
    pub trap_threshold: f64,
    /// `challenge { everyone }`: `challenge_everyone` in Lua.
    pub challenge_everyone: bool,
    /// `challenge { unanswered }`: `challenge_unanswered` in Lua.
    pub challenge_unanswered: u32,
    /// The site's AI preferences (`preferences { }`): `preferences` in Lua.
    pub preferences: crate::vocabulary::Preferences,
}

/// A ruleset that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The rule workers cannot start.
    #[error("{0}")]
    Workers(String),
    /// A list entry is malformed.
    #[error(transparent)]
    List(#[from] crate::lists::ListFileError),
    /// The script does not compile or does not return a list of rules.
    #[error("{0}")]
    Script(String),
}

/// Where a list the rules load came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListOrigin {
    /// A file in the lists folder.
    File(PathBuf),
    /// The embedded copy, as no lists folder is configured.
    Embedded,
    /// The embedded copy, because the lists folder has no file for it: a fresh folder whose
    /// update has not yet succeeded. A list the default rules use must never be missing: without
    /// `ai-crawlers.txt` their `ai-crawlers` rule would fail open for every request.
    EmbeddedForMissing(PathBuf),
}

impl fmt::Display for ListOrigin {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListOrigin::File(path) => write!(out, "{}", path.display()),
            ListOrigin::Embedded => write!(out, "the embedded copy"),
            ListOrigin::EmbeddedForMissing(path) => {
                write!(out, "the embedded copy ({} is missing)", path.display())
            }
        }
    }
}

/// Where the rules run (see [`Rules::run`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunRules {
    /// On the calling thread within the inline lane's limits, and on a rule worker under the
    /// ruleset's when they go over them (the service; see `rules/inline.rs`).
    Inline,
    /// On a rule worker, under the pool's deadlines.
    Worker,
    /// On the calling thread, in a Lua state kept for it: for a tool that judges many requests
    /// in a row (`replay`), where a hand-over to a worker and back for each request would cost
    /// more than the rules.
    Here,
}

/// The AI crawlers' list, by the name rules call it (`lists.ai_crawlers`).
pub(crate) const AI_CRAWLERS_LIST: &str = "ai_crawlers";

/// A compiled ruleset: the script's source and the lists, with a generation number.
pub struct Compiled {
    generation: u64,
    name: String,
    source: String,
    /// foldhash: the names are the operator's, and the verdict path looks two up per request.
    lists: HashMap<String, Arc<List>, foldhash::fast::RandomState>,
    /// Each list's file name and where it came from, by file name.
    origins: Vec<(String, ListOrigin)>,
    rule_names: Vec<String>,
    fail: FailMode,
    limits: Limits,
    trap_threshold: f64,
    challenge_everyone: bool,
    challenge_unanswered: u32,
    preferences: crate::vocabulary::Preferences,
}

impl Compiled {
    /// The script's name: its path, or the embedded default's.
    pub fn script(&self) -> &str {
        &self.name
    }

    /// Names of the rules, in order.
    pub fn rule_names(&self) -> &[String] {
        &self.rule_names
    }

    /// The list the rules know as `lists.<name>` (file name without extension, `-` as `_`).
    pub fn list(&self, name: &str) -> Option<&List> {
        self.lists.get(name).map(|list| &**list)
    }

    /// The kind of AI crawler `user_agent` names, by the section of lists/ai-crawlers.txt its
    /// token is in (`r.ai_kind`).
    pub fn ai_kind(&self, user_agent: &str) -> Option<crate::vocabulary::AiKind> {
        match self.list(AI_CRAWLERS_LIST) {
            Some(List::Tokens(tokens)) => tokens.ai_kind(user_agent),
            _ => None,
        }
    }

    /// Logs, as a warning, each list the folder lacks and the embedded copy stands in for.
    pub fn warn_missing_lists(&self) {
        for (file, origin) in &self.origins {
            if let ListOrigin::EmbeddedForMissing(path) = origin {
                tracing::warn!(
                    list = %file,
                    missing = %path.display(),
                    "the lists folder has no such list; the rules use the embedded copy until an update writes it"
                );
            }
        }
    }

    /// Each list's file name (`ai-crawlers.txt`), where it came from and its entries, by file
    /// name.
    pub fn list_origins(&self) -> impl Iterator<Item = (&str, &ListOrigin, usize)> {
        self.origins.iter().map(|(file, origin)| {
            let entries = self.lists.get(&list_name(file)).map_or(0, |list| list.len());
            (file.as_str(), origin, entries)
        })
    }
}

/// The live ruleset, swapped whole on reload, and the workers that evaluate it.
pub struct Rules {
    config: RulesConfig,
    current: Arc<ArcSwap<Compiled>>,
    pool: pool::Pool,
    inline: inline::InlineLane,
}

/// Generation numbers are unique in the process, so that a worker's Lua state can never be
/// mistaken for another ruleset's (tests and tools build several `Rules`).
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

impl Rules {
    /// Loads the configured script and lists, and starts the workers; errors name the file (and
    /// line).
    pub fn load(config: RulesConfig) -> Result<Rules, RulesError> {
        let compiled = compile(&config, GENERATIONS.fetch_add(1, Ordering::Relaxed))?;
        let current = Arc::new(ArcSwap::from_pointee(compiled));
        let workers = match config.workers {
            0 => std::thread::available_parallelism().map_or(2, usize::from),
            workers => workers,
        };
        let pool = pool::Pool::start(current.clone(), workers).map_err(RulesError::Workers)?;
        Ok(Rules { config, current, pool, inline: inline::InlineLane::new() })
    }

    /// Loads the rules again; on error the running ruleset stays.
    pub fn reload(&self) -> Result<Arc<Compiled>, RulesError> {
        let generation = GENERATIONS.fetch_add(1, Ordering::Relaxed);
        let compiled = Arc::new(compile(&self.config, generation)?);
        self.current.store(compiled.clone());
        Ok(compiled)
    }

    /// The number of rule worker threads (not counting abandoned ones still running).
    pub fn workers(&self) -> usize {
        self.pool.workers()
    }

    /// The rule workers active and abandoned, and verdicts queued for them, now.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// Verdicts the inline lane answered, escalated and passed to the workers so far.
    pub fn inline_stats(&self) -> InlineStats {
        self.inline.stats()
    }

    /// The ruleset in use.
    pub fn current(&self) -> Arc<Compiled> {
        self.current.load_full()
    }

    /// The ruleset in use, for a moment (not across an `.await`): cheaper than [`Rules::current`]
    /// on the request path.
    pub(crate) fn compiled(&self) -> arc_swap::Guard<Arc<Compiled>> {
        self.current.load()
    }

    /// The trap threshold rules are given.
    pub fn trap_threshold(&self) -> f64 {
        self.config.trap_threshold
    }

    /// Files to watch for changes.
    pub fn watched_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = self.config.script.iter().cloned().collect();
        if let Some(folder) = &self.config.lists {
            files.push(folder.clone());
            if let Ok(entries) = std::fs::read_dir(folder) {
                files.extend(entries.filter_map(|entry| entry.ok().map(|entry| entry.path())));
            }
        }
        files
    }

    /// Runs the rules on `facts` where `at` says, recording what each rule did when `trace` (a
    /// traced evaluation runs on a rule worker, wherever `at` says). Never fails and never waits
    /// past the deadlines in [`pool`]: a rule that errors, runs over a limit or gets stuck gets
    /// the fail mode; the trace is empty unless asked for.
    pub async fn run(&self, facts: Arc<Facts>, at: RunRules, trace: bool) -> (Decision, Vec<RuleOutcome>) {
        match (at, trace) {
            (RunRules::Here, false) => (self.evaluate_here(&facts), Vec::new()),
            (RunRules::Inline, false) => {
                let inline = self.judge_inline(&facts);
                if let inline::Inline::Answered(decision) = inline {
                    return (decision, Vec::new());
                }
                let answer = self.pool.evaluate(facts, false).await;
                if matches!(inline, inline::Inline::Escalated) {
                    self.inline.shut();
                }
                self.answered(answer)
            }
            (_, trace) => {
                let answer = self.pool.evaluate(facts, trace).await;
                self.answered(answer)
            }
        }
    }

    /// [`Rules::run`] for callers outside the async runtime (tools, tests, benchmarks): blocks
    /// the calling thread while a worker evaluates.
    pub fn run_blocking(&self, facts: Arc<Facts>, at: RunRules, trace: bool) -> (Decision, Vec<RuleOutcome>) {
        match (at, trace) {
            (RunRules::Here, false) => (self.evaluate_here(&facts), Vec::new()),
            (RunRules::Inline, false) => {
                let inline = self.judge_inline(&facts);
                if let inline::Inline::Answered(decision) = inline {
                    return (decision, Vec::new());
                }
                let answer = self.pool.evaluate_blocking(facts, false);
                if matches!(inline, inline::Inline::Escalated) {
                    self.inline.shut();
                }
                self.answered(answer)
            }
            (_, trace) => {
                let answer = self.pool.evaluate_blocking(facts, trace);
                self.answered(answer)
            }
        }
    }

    fn judge_inline(&self, facts: &Facts) -> inline::Inline {
        self.inline.evaluate(self.owner(), &self.current.load(), facts)
    }

    /// The rules on `facts` on the calling thread, in a Lua state of its own kept for this
    /// thread and ruleset ([`RunRules::Here`]). The time and memory limits apply as on a
    /// worker; the worker pool's backstop for a call into C that runs long does not: the caller
    /// waits for it, as nobody else is.
    fn evaluate_here(&self, facts: &Facts) -> Decision {
        let compiled = self.current.load();
        kept::on_this_thread(self.owner(), lua::Lane::Full, |kept| {
            kept.evaluator.evaluate(&compiled, facts, false).0
        })
    }

    /// Tells this `Rules`' states kept on a thread from another's (tools and tests build several).
    fn owner(&self) -> usize {
        Arc::as_ptr(&self.current) as usize
    }

    fn answered(&self, answer: Result<pool::Evaluated, pool::Unanswered>) -> (Decision, Vec<RuleOutcome>) {
        match answer {
            Ok(pool::Evaluated { decision, trace }) => (decision, trace),
            Err(unanswered) => {
                let rule: Arc<str> = Arc::from(WHOLE_RULESET);
                let message = unanswered.message();
                tracing::debug!(error = message, "rules unanswered");
                let decision =
                    Decision::failed(self.current.load().fail, &rule, FailureKind::Unanswered, message);
                let trace = vec![RuleOutcome { rule, result: Cow::Owned(format!("error: {message}")) }];
                (decision, trace)
            }
        }
    }
}

fn compile(config: &RulesConfig, generation: u64) -> Result<Compiled, RulesError> {
    let (name, source) = match &config.script {
        Some(path) => (path.display().to_string(), read(path)?),
        None => (DEFAULT_SCRIPT.0.to_string(), DEFAULT_SCRIPT.1.to_string()),
    };
    let mut lists = HashMap::default();
    let mut origins = Vec::new();
    match &config.lists {
        Some(folder) => {
            let entries = std::fs::read_dir(folder)
                .map_err(|source| RulesError::Read { path: folder.clone(), source })?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                .filter(|path| path.extension().is_some_and(|ext| ext == "txt"))
                .collect();
            files.sort();
            for path in files {
                let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                lists.insert(
                    list_name(&file),
                    Arc::new(List::parse(&path.display().to_string(), &read(&path)?)?),
                );
                origins.push((file, ListOrigin::File(path)));
            }
            // From its source, else the last good file, else the embedded copy: never missing.
            for (file, text) in DEFAULT_LISTS {
                if let std::collections::hash_map::Entry::Vacant(slot) = lists.entry(list_name(file)) {
                    slot.insert(Arc::new(List::parse(&format!("rules/lists/{file}"), text)?));
                    origins.push((file.to_string(), ListOrigin::EmbeddedForMissing(folder.join(file))));
                }
            }
        }
        None => {
            for (file, text) in DEFAULT_LISTS {
                lists.insert(list_name(file), Arc::new(List::parse(&format!("rules/lists/{file}"), text)?));
                origins.push((file.to_string(), ListOrigin::Embedded));
            }
        }
    }
    origins.sort_by(|a, b| a.0.cmp(&b.0));
    let mut compiled = Compiled {
        generation,
        name,
        source,
        lists,
        origins,
        rule_names: Vec::new(),
        fail: config.fail,
        limits: config.limits.clone(),
        trap_threshold: config.trap_threshold,
        challenge_everyone: config.challenge_everyone,
        challenge_unanswered: config.challenge_unanswered,
        preferences: config.preferences,
    };
    // Build one state now, so that a script that does not compile or run is an error at load.
    compiled.rule_names = lua::check(&compiled)?;
    Ok(compiled)
}

/// `ai-crawlers.txt` is `lists.ai_crawlers` in Lua.
fn list_name(file: &str) -> String {
    file.trim_end_matches(".txt").replace(['-', '.'], "_")
}

fn read(path: &Path) -> Result<String, RulesError> {
    std::fs::read_to_string(path).map_err(|source| RulesError::Read { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests;
