//! The assembled service: every component built from a [`Config`] before any port is bound.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Semaphore;

use crate::challenge::Challenger;
use crate::client::ClientIdentity;
use crate::client_state::ClientStates;
use crate::client_state::store::Store;
use crate::config::{Config, DripConfig};
use crate::enrich::geo::{Geo, GeoError};
use crate::observe::metrics::Metrics;
use crate::rules::{Rules, RulesError};
use crate::support::secret::Secret;
use crate::trap::corpus::{self, CorpusError};
use crate::trap::generator::Generator;
use crate::trap::generator::markov::{Chain, ChainError};
use crate::trap::generator::template::{Template, TemplateError};
use crate::trap::snippets::Snippets;
use crate::trap::urls::TrapUrls;
use crate::verify::crawler::Crawlers;
use crate::verify::crowdsec::{CrowdSec, CrowdSecError};
use crate::verify::robots::{Robots, RobotsError};
use crate::verify::signature::Signatures;

/// Everything the handlers share, built once.
pub struct App {
    /// The settings it was built from.
    pub(crate) config: Config,
    /// The trap page generator (and, through it, the trap-URL check).
    pub(crate) generator: Generator,
    /// Permits for pages that drip; when none is left, pages go out whole.
    pub(crate) drip_slots: Arc<Semaphore>,
    /// Client addresses and keys.
    pub(crate) identity: ClientIdentity,
    /// What is remembered per client.
    pub(crate) clients: ClientStates,
    /// ASN and country databases.
    pub(crate) geo: Geo,
    /// The live ruleset.
    pub(crate) rules: Rules,
    /// Prometheus metrics.
    pub(crate) metrics: Arc<Metrics>,
    /// Crawler claims: published ranges and forward-confirmed reverse DNS.
    pub(crate) crawlers: Crawlers,
    /// Web Bot Auth signatures: key directories fetched and cached.
    pub(crate) signatures: Signatures,
    /// The site's robots.txt, per host.
    pub(crate) robots: Arc<Robots>,
    /// The CrowdSec decisions in force.
    pub(crate) crowdsec: Arc<CrowdSec>,
    /// Challenges, their answers and passes.
    pub(crate) challenges: Challenger,
    /// Which trap verdicts get a log line (one per rule and client a minute).
    pub(crate) trap_lines: crate::observe::log_sink::TrapLines,
    /// The site owner's own tools: their secret header and addresses.
    pub(crate) owner_tools: crate::enrich::owner_tools::OwnerTools,
}

/// A component that could not be built from the config.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The corpus could not be read.
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    /// The corpus cannot train a chain.
    #[error("cannot train the Markov model: {0}")]
    Chain(#[from] ChainError),
    /// A MaxMind database cannot be used.
    #[error(transparent)]
    Geo(#[from] GeoError),
    /// The rules cannot be loaded.
    #[error("cannot load the rules: {0}")]
    Rules(#[from] RulesError),
    /// The trap template cannot be used.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// A configured robots.txt cannot be read.
    #[error(transparent)]
    Robots(#[from] RobotsError),
    /// The CrowdSec settings cannot be used.
    #[error(transparent)]
    CrowdSec(#[from] CrowdSecError),
}

impl App {
    /// The settings it was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The live ruleset, for `check` and the rule-cost benches.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The trap page generator, for `quagmire generate`.
    pub fn generator(&self) -> &Generator {
        &self.generator
    }

    /// Where per-client state lives, for the start-up line.
    pub fn describe_client_state(&self) -> String {
        match self.clients.store() {
            Some(store) => format!("shared through {}", store.config().describe()),
            None => "this process only (no store)".to_string(),
        }
    }

    /// What the site's robots.txt files say, and where they come from, for `check`.
    pub fn describe_robots(&self) -> Vec<String> {
        self.robots.describe()
    }

    /// Named robots.txt groups that would let their crawler into the trap, for `check`.
    pub fn robots_warnings(&self) -> Vec<String> {
        let prefix = self.config.verdict.redirect_prefix.trim_end_matches('/');
        self.robots.trap_warnings(&format!("{prefix}/"))
    }

    /// Reads the corpus and trains the model: the slow part of startup.
    pub fn build(config: Config, secret: &Secret) -> Result<App, BuildError> {
        let started = Instant::now();
        let geo = Geo::open(config.geo.asn.as_deref(), config.geo.country.as_deref())?;
        let rules = Rules::load(config.rules.clone())?;
        let compiled = rules.current();
        tracing::info!(
            script = compiled.script(),
            rules = compiled.rule_names().len(),
            workers = rules.workers(),
            "loaded the rules"
        );
        compiled.warn_missing_lists();
        // Checked before the slow part, so a broken template is reported at once.
        let template = config.trap.template.as_deref().map(Template::load).transpose()?;
        if let Some(path) = &config.trap.template {
            tracing::info!(template = %path.display(), "trap pages use the site's template");
        }
        let (text, sources) = corpus::load_reporting(config.corpus.embedded, &config.corpus.paths)?;
        for source in &sources {
            tracing::info!(source = %source.source, files = source.files, words = source.words, "read the corpus");
        }
        let chain = Chain::train(&text, config.corpus.order)?;
        drop(text);
        tracing::info!(
            words = chain.len(),
            vocabulary = chain.vocabulary_len(),
            model_bytes = chain.heap_bytes(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "trained the Markov model"
        );
        let urls = TrapUrls::new(secret.as_bytes());
        // The challenge page carries the first and last of the site's own hidden links.
        let snippets =
            Snippets::new(secret.as_bytes(), &urls, &config.verdict.redirect_prefix, &config.preferences);
        let mut links = snippets.links.into_iter().map(|placement| placement.html);
        let (first, last) = (links.next().unwrap_or_default(), links.next_back().unwrap_or_default());
        let challenges = Challenger::new(config.challenge.clone(), secret.as_bytes(), [first, last]);
        let mut generator = Generator::new(chain, urls, config.trap.page.clone(), secret.as_bytes());
        if let Some(template) = template {
            generator = generator.with_template(template);
        }
        let drip_slots = Arc::new(Semaphore::new(drip_capacity(&config.trap.drip)));
        let verdict = &config.verdict;
        let identity =
            ClientIdentity::new(verdict.trusted_proxies.clone(), verdict.ipv4_prefix, verdict.ipv6_prefix);
        let metrics = Arc::new(Metrics::new());
        let evictions = metrics.clone();
        let mut clients = ClientStates::new(config.clients.clone(), move || evictions.evicted())
            .keep_trapped_for(config.challenge.pass_lifetime);
        if config.clients.store.is_configured() {
            let store = Store::new(config.clients.store.clone(), config.clients.clone(), metrics.clone())
                .keep_trapped_for(config.challenge.pass_lifetime);
            clients = clients.with_store(store);
        }
        let crawlers = Crawlers::new(&config.dns, metrics.clone());
        let signatures = Signatures::new(&config.web_bot_auth, metrics.clone());
        let robots = Arc::new(Robots::new(config.robots.clone(), metrics.clone())?);
        for line in robots.describe() {
            tracing::info!(robots = %line, "the site's robots.txt");
        }
        let crowdsec = Arc::new(CrowdSec::new(config.crowdsec.clone(), metrics.clone())?);
        let owner_tools = crate::enrich::owner_tools::OwnerTools::new(&config.owner_tools);
        Ok(App {
            config,
            generator,
            drip_slots,
            identity,
            clients,
            geo,
            rules,
            metrics,
            crawlers,
            signatures,
            robots,
            crowdsec,
            challenges,
            trap_lines: crate::observe::log_sink::TrapLines::new(),
            owner_tools,
        })
    }
}

fn drip_capacity(drip: &DripConfig) -> usize {
    if drip.enabled { drip.max_connections.min(Semaphore::MAX_PERMITS) } else { 0 }
}
