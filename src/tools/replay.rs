//! `quagmire replay`: a site's own access logs through the rules, to see what they would have
//! done before they do it.
//!
//! Each line ([`formats`]) becomes the request the proxy would have asked about and goes
//! through [`crate::verdict::decide_blocking`] (rules on this thread), the same `decide` as `/verdict`: identity, enrichment,
//! client state and rules, no second implementation (only the rules run on the replay's own
//! thread rather than a worker's). Time is the log's: a line's timestamp is
//! the request's time for trap-score decay and request rates, so a day replayed in seconds gets
//! that day's verdicts. A line for a trap URL is a trap hit, as live, and a line under the
//! trap's prefix was served by the trap listener, which records a hit without a verdict. When
//! trap verdicts are answered with a status (transparent mode), the proxy served the trap page
//! in place of the site's, and the trap listener recorded a hit: so does the replay. (With a
//! redirect, the client's next request under the prefix is a line of its own.) A rule
//! that reads a header the format does not carry is skipped on that line and reported
//! ([`crate::facts::Coverage`]). Lines are streamed ([`input`]) and tallied in bounded memory
//! ([`report`]).

mod dns;
pub(crate) mod formats;
pub(crate) mod input;
pub(crate) mod report;

use std::collections::VecDeque;
use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::app::App;
use crate::config::{Answer, Mode};
use crate::facts::claims::RobotsCheck;
use crate::facts::{Coverage, Headers};
use crate::rules::{RuleFailure, Rules, Verdict};
use crate::verdict::{ForwardedRequest, How, decide_blocking, robots_crawler};
use dns::ReplayDns;
use formats::{Defaults, Format, LogRequest};
use input::{InputError, Line, Lines, Source};
use report::{Outcome, Report, SERVED_BY_TRAP};

/// How to replay.
pub struct Options {
    /// The logs, in order.
    pub sources: Vec<Source>,
    /// Their format; `None` detects it per source.
    pub format: Option<Format>,
    /// What a format does not say.
    pub defaults: Defaults,
    /// Lines kept as examples per rule.
    pub samples: usize,
    /// Judge rules that read headers the log does not carry as if those headers were absent,
    /// rather than skipping them.
    pub judge_missing: bool,
    /// Show a progress bar (when standard error is a terminal).
    pub progress: bool,
    /// Verify crawler claims by DNS as live verdicts do (`--no-dns` turns it off).
    pub dns: bool,
}

/// A replay that could not run to the end.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// An input cannot be read.
    #[error(transparent)]
    Input(#[from] InputError),
    /// `--verdicts` cannot be written.
    #[error("cannot write the verdicts: {0}")]
    Verdicts(std::io::Error),
    /// The `--compare` rules cannot be loaded.
    #[error("cannot load the rules to compare with: {0}")]
    Compare(crate::rules::RulesError),
    /// No runtime for the DNS lookups.
    #[error("cannot start the DNS lookups: {0}")]
    Runtime(std::io::Error),
}

/// The `--compare` ruleset: the script at `path` with the app's lists and limits.
pub fn compare_rules(app: &App, path: PathBuf) -> Result<Rules, ReplayError> {
    let config = crate::rules::RulesConfig { script: Some(path), ..app.config.rules.clone() };
    Rules::load(config).map_err(ReplayError::Compare)
}

/// Maps log time onto the records' clock: the first line is now, and every later line as far
/// after it as the log says.
struct LogClock {
    origin: Instant,
    first: Option<i128>,
    latest: Option<i128>,
}

/// How far a line may be earlier than the latest before it without counting as out of order
/// (proxies log a request when it ends, so lines are not quite in order of their start).
const OUT_OF_ORDER: i128 = 60_000_000_000;

impl LogClock {
    /// Whether a line at `nanos` is over a minute earlier than the latest line so far (which it
    /// then stays): the inputs are out of order, and verdicts for such lines are not the log's.
    fn went_back(&mut self, nanos: i128) -> bool {
        let latest = self.latest.get_or_insert(nanos);
        if nanos > *latest {
            *latest = nanos;
        }
        *latest - nanos > OUT_OF_ORDER
    }

    fn at(&mut self, nanos: i128) -> Instant {
        let first = *self.first.get_or_insert(nanos);
        let offset = nanos - first;
        let span = Duration::from_nanos(u64::try_from(offset.unsigned_abs()).unwrap_or(u64::MAX));
        if offset >= 0 {
            self.origin.checked_add(span).unwrap_or(self.origin)
        } else {
            // A line earlier than the first (logs are not always in order): as early as the
            // monotonic clock allows.
            self.origin.checked_sub(span).unwrap_or(self.origin)
        }
    }
}

/// Replays `options.sources` through `app` (and `compare`, on the same facts), writing one JSON
/// object per request to `verdicts` if given.
pub fn replay(
    app: &App,
    compare: Option<(&Rules, String)>,
    options: &Options,
    mut verdicts: Option<&mut dyn Write>,
) -> Result<Report, ReplayError> {
    let started = Instant::now();
    let capacity = usize::try_from(app.config.clients.capacity).unwrap_or(usize::MAX).min(1 << 20);
    let (compare, compare_name) = match compare {
        Some((rules, name)) => (Some(rules), Some(name)),
        None => (None, None),
    };
    let mut report = Report::new(capacity, options.samples, compare_name);
    let mut clock = LogClock { origin: Instant::now(), first: None, latest: None };
    let read = Arc::new(AtomicU64::new(0));
    let progress = Progress::new(options, read.clone());
    let trap_prefix = format!("{}/", app.config.verdict.redirect_prefix.trim_end_matches('/'));
    let verdict_config = &app.config.verdict;
    let served_in_place = verdict_config.mode == Mode::Enforce && verdict_config.answer == Answer::Status;
    let trap = TrapRoutes { prefix: &trap_prefix, served_in_place };
    let several = options.sources.len() > 1;
    let mut dns = match options.dns {
        true => Some(ReplayDns::new(app).map_err(ReplayError::Runtime)?),
        false => None,
    };
    // Without DNS there is nothing to wait for: each line is judged as soon as it is read.
    let ahead = if dns.is_some() { dns::WINDOW } else { 1 };
    let mut window: VecDeque<Read> = VecDeque::with_capacity(ahead);
    for source in &options.sources {
        let mut lines = Lines::open(source, read.clone())?;
        let name = source.name();
        let run =
            Run { app, compare, trap: &trap, judge_missing: options.judge_missing, name: &name, several };
        let mut format = options.format;
        if let Some(format) = format {
            report.inputs.push((name.clone(), format.name().into()));
        }
        let mut number = 0u64;
        while let Some(line) = lines.next_line() {
            number += 1;
            report.lines += 1;
            if number.is_multiple_of(4096) {
                progress.tick(report.lines);
            }
            let place = || format!("{name}:{number}");
            let text = match line {
                // The rest of this source cannot be read: said where, and the next one replayed.
                Err(error) => {
                    report.bad_line(place, || format!("unreadable from here on: {}", error.error));
                    break;
                }
                Ok(Line::TooLong(bytes)) => {
                    report.bad_line(place, || {
                        format!("longer than {} bytes ({bytes}); skipped", input::MAX_LINE)
                    });
                    continue;
                }
                Ok(Line::Text(text)) => text,
            };
            if text.trim().is_empty() {
                report.blank_lines += 1;
                continue;
            }
            let Some(line_format) = format.or_else(|| Format::detect(&text)) else {
                report.bad_line(place, || "not a line of any format replay reads".into());
                continue;
            };
            if format.is_none() {
                format = Some(line_format);
                report.inputs.push((name.clone(), line_format.name().into()));
            }
            let request = match formats::parse(line_format, &text, &options.defaults) {
                Ok(request) => request,
                Err(error) => {
                    report.bad_line(place, || error.to_string());
                    continue;
                }
            };
            let at = clock.at(request.time);
            if clock.went_back(request.time) {
                report.out_of_order += 1;
            }
            let needed = dns.as_mut().and_then(|dns| {
                let address = app.identity.client_address(request.client, &request.headers);
                dns.read_ahead(app, address, request.headers.get("user-agent").unwrap_or(""))
            });
            window.push_back(Read { number, request, at, needed });
            if window.len() >= ahead {
                let read = window.pop_front().expect("the window is not empty");
                record(&run, &mut dns, &mut report, &mut verdicts, read)?;
            }
        }
        // The rest of this source's window, before the next source starts.
        while let Some(read) = window.pop_front() {
            record(&run, &mut dns, &mut report, &mut verdicts, read)?;
        }
        if format.is_none() {
            report.inputs.push((name.clone(), "no requests".into()));
        }
    }
    if let Some(out) = verdicts {
        out.flush().map_err(ReplayError::Verdicts)?;
    }
    progress.finish(report.lines);
    report.elapsed = started.elapsed();
    report.dns = dns.map(|dns| dns.counts);
    Ok(report)
}

/// What every line of one source is judged with.
struct Run<'a> {
    app: &'a App,
    compare: Option<&'a Rules>,
    trap: &'a TrapRoutes<'a>,
    judge_missing: bool,
    /// The source's name, for line places.
    name: &'a str,
    /// Several sources: each verdict line names its file.
    several: bool,
}

/// A line read and parsed, waiting its turn (and its DNS answer) to be judged.
struct Read {
    number: u64,
    request: LogRequest,
    at: Instant,
    needed: Option<dns::Needed>,
}

/// Judges `read` (once DNS has answered for it) and records the outcome in `report` and
/// `verdicts`.
fn record(
    run: &Run,
    dns: &mut Option<ReplayDns>,
    report: &mut Report,
    verdicts: &mut Option<&mut dyn Write>,
    read: Read,
) -> Result<(), ReplayError> {
    if let (Some(dns), Some(needed)) = (dns.as_mut(), read.needed) {
        dns.settle(run.app, needed);
    }
    let read = Read { needed: None, ..read };
    let outcome = judge(run.app, run.compare, read.request, read.at, run.judge_missing, run.trap);
    let summary = || {
        format!("{} {} {} \"{}\"", outcome.client_address, outcome.method, outcome.uri, outcome.user_agent())
    };
    let network = || match (outcome.asn, &outcome.asn_org) {
        (Some(asn), Some(org)) => format!("AS{asn} {org}"),
        (Some(asn), None) => format!("AS{asn}"),
        _ => block(outcome.client_address),
    };
    let other = outcome.other.as_ref().map(|(verdict, rule)| (*verdict, rule));
    if let Some(out) = verdicts {
        let mut record = serde_json::json!({
            "line": read.number,
            "verdict": outcome.verdict.as_str(),
            "rule": &*outcome.rule,
            "client": outcome.client.to_string(),
        });
        if run.several {
            record["file"] = serde_json::json!(run.name);
        }
        if !outcome.unjudged.is_empty() {
            record["unjudged"] =
                serde_json::json!(outcome.unjudged.iter().map(|rule| &**rule).collect::<Vec<_>>());
        }
        if let Some((verdict, rule)) = &other {
            record["compare"] = serde_json::json!({ "verdict": verdict.as_str(), "rule": &***rule });
        }
        crate::support::log_field::terminal_safe_json(&mut *out, &record, false)
            .map_err(|error| ReplayError::Verdicts(error.into()))?;
        out.write_all(b"\n").map_err(ReplayError::Verdicts)?;
    }
    if let Some((crawler, ignored)) = &outcome.robots {
        report.robots_request(crawler, *ignored);
    }
    report.add(Outcome {
        place: &|| format!("{}:{}", run.name, read.number),
        summary: &summary,
        client: outcome.client,
        verdict: outcome.verdict,
        rule: &outcome.rule,
        unjudged: &outcome.unjudged,
        failures: &outcome.failures,
        other,
        user_agent: outcome.user_agent(),
        path: outcome.uri.split_once('?').map_or(&outcome.uri, |(path, _)| path),
        network: &network,
        request_rate: outcome.request_rate,
        ai_kind: outcome.ai_kind,
    });
    Ok(())
}

impl Judged {
    fn user_agent(&self) -> &str {
        self.headers.get("user-agent").unwrap_or_default()
    }
}

/// How the proxy routes to the trap, which records hits the replay must record too.
struct TrapRoutes<'a> {
    /// Requests under this prefix go straight to the trap listener.
    prefix: &'a str,
    /// A trap verdict is answered with the trap page in place of the site's.
    served_in_place: bool,
}

/// What one request got.
struct Judged {
    client: crate::client::ClientKey,
    client_address: IpAddr,
    method: String,
    uri: String,
    headers: Headers,
    verdict: Verdict,
    rule: Arc<str>,
    unjudged: Vec<Arc<str>>,
    failures: Vec<RuleFailure>,
    other: Option<(Verdict, Arc<str>)>,
    asn: Option<u32>,
    asn_org: Option<String>,
    request_rate: f64,
    /// A crawler's request under a robots.txt: which crawler, and whether it ignored the file.
    robots: Option<(String, bool)>,
    /// The kind of AI crawler its User-Agent names.
    ai_kind: Option<crate::vocabulary::AiKind>,
}

fn judge(
    app: &App,
    compare: Option<&Rules>,
    request: LogRequest,
    at: Instant,
    judge_missing: bool,
    trap: &TrapRoutes,
) -> Judged {
    let LogRequest { client, method, proto, host, uri, headers, coverage, .. } = request;
    if uri.starts_with(trap.prefix) {
        // The proxy sends these straight to the trap listener, which records a hit and asks for
        // no verdict.
        let key = app.identity.key(client);
        let history = app.clients.record_trap_hit_at(key, at);
        let rule: Arc<str> = Arc::from(SERVED_BY_TRAP);
        let ai_kind = app.rules.compiled().ai_kind(headers.get("user-agent").unwrap_or(""));
        return Judged {
            client: key,
            client_address: client,
            method,
            uri,
            headers,
            verdict: Verdict::Trap,
            rule: rule.clone(),
            unjudged: Vec::new(),
            failures: Vec::new(),
            other: compare.map(|_| (Verdict::Trap, rule)),
            asn: None,
            asn_org: None,
            request_rate: history.request_rate,
            robots: None,
            ai_kind,
        };
    }
    let forwarded = ForwardedRequest {
        peer: client,
        method,
        proto,
        host,
        uri,
        headers,
        at: Some(at),
        coverage: if judge_missing { Coverage::All } else { coverage },
    };
    let judgement = decide_blocking(app, forwarded, How::HERE);
    let other = compare.map(|rules| {
        let (decision, _) = rules.run_blocking(judgement.facts.clone(), crate::rules::RunRules::Here, false);
        (decision.verdict, decision.rule)
    });
    if judgement.decision.verdict == Verdict::Trap && trap.served_in_place {
        app.clients.record_trap_hit_at(judgement.facts.key, at);
    }
    let robots = (judgement.facts.robots.check != RobotsCheck::None)
        .then(|| {
            let facts = &judgement.facts;
            let compiled = app.rules.current();
            robots_crawler(&compiled, &facts.robots, facts.user_agent(), facts.crawler.as_ref())
                .map(|crawler| (crawler.to_string(), facts.robots.check == RobotsCheck::Disallowed))
        })
        .flatten();
    // Nothing else holds the facts now: their fields move into the outcome uncopied.
    let facts = Arc::try_unwrap(judgement.facts).unwrap_or_else(|shared| (*shared).clone());
    Judged {
        client: facts.key,
        client_address: facts.address,
        method: facts.method,
        uri: facts.uri,
        headers: facts.headers,
        verdict: judgement.decision.verdict,
        rule: judgement.decision.rule,
        unjudged: judgement.decision.unjudged,
        failures: judgement.decision.failures,
        other,
        asn: facts.geo.asn,
        asn_org: facts.geo.asn_org,
        request_rate: facts.history.request_rate,
        robots,
        ai_kind: facts.ai_kind,
    }
}

/// The address block a client is in, for "top networks" without an ASN database: /24 or /48.
fn block(address: IpAddr) -> String {
    match address {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            format!("{a}.{b}.{c}.0/24")
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}::/48", s[0], s[1], s[2])
        }
    }
}

/// The progress bar on standard error: bytes of the inputs read (as stored), and lines/s.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    read: Arc<AtomicU64>,
    started: Instant,
}

impl Progress {
    fn new(options: &Options, read: Arc<AtomicU64>) -> Progress {
        use std::io::IsTerminal;
        let shown = options.progress && std::io::stderr().is_terminal();
        let total: Option<u64> = options.sources.iter().map(Source::size).sum();
        let bar = shown.then(|| {
            let bar = match total {
                Some(total) => indicatif::ProgressBar::new(total),
                None => indicatif::ProgressBar::new_spinner(),
            };
            let template = match total {
                Some(_) => "{bar:30} {percent:>3}% {msg} (eta {eta})",
                None => "{spinner} {msg}",
            };
            if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
                bar.set_style(style);
            }
            bar
        });
        Progress { bar, read, started: Instant::now() }
    }

    fn tick(&self, lines: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(self.read.load(Ordering::Relaxed));
            let rate = lines as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!(
                "{} lines, {} lines/s",
                report::thousands(lines),
                report::thousands(rate as u64)
            ));
        }
    }

    fn finish(&self, lines: u64) {
        self.tick(lines);
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests;
