//! The words every layer shares, defined at the bottom so that metrics, rules, the verdict and the
//! commands can all use them without importing each other.

/// What a request gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Let it through to the site.
    Allow,
    /// Send it to the trap.
    Trap,
    /// Show the challenge page: a client that answers it gets a pass and goes on; one that does
    /// not is trapped on a later request.
    Challenge,
}

impl Verdict {
    /// `allow`, `trap` or `challenge`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Trap => "trap",
            Verdict::Challenge => "challenge",
        }
    }
}

/// Why a rule, or the rules as a whole, gave no answer: decided where the failure happens, not
/// read back from an error's text (a rule that raises "time limit exceeded" is an `Error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The rule raised an error, or returned something that is not a verdict.
    Error,
    /// The watchdog stopped the evaluation at the request's CPU-time limit.
    TimeLimit,
    /// The Lua state ran out of its memory limit.
    MemoryLimit,
    /// No rule worker answered in time (all busy, or stuck in a call the limit cannot stop).
    Unanswered,
    /// The evaluation panicked (a bug in quagmire, not in the rules).
    Panic,
}

impl FailureKind {
    /// The metric label: `error`, `time_limit`, `memory_limit`, `unanswered` or `panic`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Error => "error",
            FailureKind::TimeLimit => "time_limit",
            FailureKind::MemoryLimit => "memory_limit",
            FailureKind::Unanswered => "unanswered",
            FailureKind::Panic => "panic",
        }
    }
}

/// What an AI crawler fetches for, as lists/ai-crawlers.txt's sections name it: each kind is
/// judged by the site preference that speaks for it ([`AiKind::preference`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AiKind {
    /// Collects pages to train models (GPTBot, ClaudeBot, CCBot, Bytespider).
    Training,
    /// Indexes pages for an AI search product (OAI-SearchBot, PerplexityBot, Claude-SearchBot).
    AiSearch,
    /// Fetches a page because one person asked about it (ChatGPT-User, Claude-User,
    /// Perplexity-User).
    Assistant,
    /// Browses and acts for one person (ChatGPT Agent, Operator, coding agents such as
    /// Claude-Code or Cursor).
    Agent,
    /// Scrapes for resale or for purposes nobody documents, and scraping tools and headless
    /// browsers anyone can run (Diffbot, Bright Data, Crawl4AI, HeadlessChrome): no preference
    /// speaks for them.
    Scraper,
}

impl AiKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [AiKind; 5] =
        [AiKind::Training, AiKind::AiSearch, AiKind::Assistant, AiKind::Agent, AiKind::Scraper];

    /// Its name in list sections, `r.ai_kind` and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            AiKind::Training => "training",
            AiKind::AiSearch => "ai-search",
            AiKind::Assistant => "assistant",
            AiKind::Agent => "agent",
            AiKind::Scraper => "scraper",
        }
    }

    /// The kind called `name` (exactly, as [`AiKind::as_str`] writes it).
    pub fn named(name: &str) -> Option<AiKind> {
        AiKind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The names of every kind, for messages: `training, ai-search, ...`.
    pub fn names() -> String {
        AiKind::ALL.map(AiKind::as_str).join(", ")
    }

    /// The preference that decides this kind (`preferences { }`), or `None` for scrapers,
    /// which are trapped whatever the site says.
    pub fn preference(self) -> Option<Preference> {
        match self {
            AiKind::Training => Some(Preference::AiTrain),
            AiKind::AiSearch => Some(Preference::Search),
            AiKind::Assistant | AiKind::Agent => Some(Preference::AiInput),
            AiKind::Scraper => None,
        }
    }
}

/// One of the site's stated AI preferences.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preference {
    /// `search`: search indexes, links and short excerpts.
    Search,
    /// `ai-input`: content fed to an AI model as it answers (retrieval, grounding, agents).
    AiInput,
    /// `ai-train`: training or fine-tuning AI models.
    AiTrain,
}

impl Preference {
    /// Its name in the config and in Content-Signal lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Preference::Search => "search",
            Preference::AiInput => "ai-input",
            Preference::AiTrain => "ai-train",
        }
    }
}

/// What the site allows AI systems to do with its content (`preferences { }`); `None` is not
/// stated. `quagmire snippets` states them in robots.txt lines, and the default rules judge
/// each kind of AI crawler by the one that speaks for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Preferences {
    /// Search indexes: links and short excerpts.
    pub search: Option<bool>,
    /// Content fed to an AI model as it answers (retrieval, grounding).
    pub ai_input: Option<bool>,
    /// Training or fine-tuning AI models.
    pub ai_train: Option<bool>,
}

impl Preferences {
    /// What the site said of `preference`, if it said.
    pub fn get(&self, preference: Preference) -> Option<bool> {
        match preference {
            Preference::Search => self.search,
            Preference::AiInput => self.ai_input,
            Preference::AiTrain => self.ai_train,
        }
    }
}
