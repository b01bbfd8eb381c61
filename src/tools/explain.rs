//! `quagmire explain`: judge one request offline and show why, rule by rule.

use std::fmt::Write;
use std::net::IpAddr;
use std::path::Path;

use crate::app::App;
use crate::verdict::{ForwardedRequest, How, RunRules, Verify, decide, decide_blocking};

/// A request given as a raw HTTP file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not an HTTP request.
    #[error("{0}")]
    Malformed(String),
}

/// Builds a request from command-line flags; headers are `Name: value`.
pub fn request_from_flags(
    peer: IpAddr,
    method: String,
    proto: String,
    host: String,
    uri: String,
    headers: &[String],
) -> Result<ForwardedRequest, ExplainError> {
    let headers = headers.iter().map(|header| parse_header(header)).collect::<Result<Vec<_>, _>>()?;
    let headers = headers.into_iter().collect();
    Ok(ForwardedRequest { method, proto, host, uri, headers, ..ForwardedRequest::from_peer(peer) })
}

/// Reads a raw request: `METHOD URI HTTP/1.1`, then headers up to a blank line.
pub fn read_request(peer: IpAddr, path: &Path) -> Result<ForwardedRequest, ExplainError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ExplainError::Read { path: path.display().to_string(), source })?;
    let mut lines = text.lines();
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(uri)) = (parts.next(), parts.next()) else {
        return Err(ExplainError::Malformed(format!(
            "{}, line 1: expected a request line such as `GET /path HTTP/1.1`, found `{request_line}`",
            path.display()
        )));
    };
    let mut headers = Vec::new();
    for (index, line) in lines.enumerate() {
        if line.trim().is_empty() {
            break;
        }
        headers.push(parse_header(line).map_err(|error| {
            ExplainError::Malformed(format!("{}, line {}: {error}", path.display(), index + 2))
        })?);
    }
    let host =
        headers.iter().find(|(name, _)| name == "host").map(|(_, value)| value.clone()).unwrap_or_default();
    let proto = headers
        .iter()
        .find(|(name, _)| name == "x-forwarded-proto")
        .map_or_else(|| "https".to_string(), |(_, value)| value.clone());
    let headers = headers.into_iter().collect();
    Ok(ForwardedRequest {
        method: method.into(),
        proto,
        host,
        uri: uri.into(),
        headers,
        ..ForwardedRequest::from_peer(peer)
    })
}

fn parse_header(line: &str) -> Result<(String, String), ExplainError> {
    let (name, value) = line.split_once(':').ok_or_else(|| {
        ExplainError::Malformed(format!("`{line}` is not a header (expected `Name: value`)"))
    })?;
    Ok((name.trim().to_ascii_lowercase(), value.trim().to_string()))
}

/// The kind of AI crawler the request names and what the site's preferences say of that kind:
/// `assistant (ChatGPT-User): the site says ai-input=yes`, or `-`.
fn ai_kind_line(app: &App, facts: &crate::facts::Facts) -> String {
    let Some(kind) = facts.ai_kind else { return "-".into() };
    let compiled = app.rules.compiled();
    let token = match compiled.list(crate::rules::AI_CRAWLERS_LIST) {
        Some(crate::lists::List::Tokens(tokens)) => {
            tokens.find(facts.user_agent()).unwrap_or("-").to_string()
        }
        _ => "-".into(),
    };
    let said = match kind.preference() {
        None => "no preference decides it: trapped whatever the site says".to_string(),
        Some(preference) => match app.config.preferences.get(preference) {
            Some(true) => format!("the site says {}=yes", preference.as_str()),
            Some(false) => format!("the site says {}=no", preference.as_str()),
            None => format!("{} not stated: trapped as before kinds", preference.as_str()),
        },
    };
    format!("{} ({token}): {said}", kind.as_str())
}

/// Judges `request` (after recording `trap_hits` for its client) and describes the outcome.
pub fn explain(app: &App, request: ForwardedRequest, trap_hits: u32) -> String {
    if trap_hits > 0 {
        let address = app.identity.client_address(request.peer, &request.headers);
        for _ in 0..trap_hits {
            app.clients
                .record_trap_hit(app.identity.key(address), request.header("user-agent").unwrap_or(""));
        }
    }
    // A crawler claim that needs DNS is verified for real, waiting as long as a verification
    // may take (a verdict would wait only `verdict-wait-ms`).
    let wait = app.config.dns.timeout.max(app.config.web_bot_auth.timeout);
    let how = How { rules: RunRules::Worker, verify: Verify::Wait(Some(wait)), trace: true };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let judgement = match runtime {
        Ok(runtime) => runtime.block_on(decide(app, request, how)),
        Err(_) => decide_blocking(app, request, how),
    };
    let trace = &judgement.trace;
    let facts = &judgement.facts;
    let mut out = String::new();
    let none = || "-".to_string();
    let _ = writeln!(out, "request     {} {}://{}{}", facts.method, facts.proto, facts.host, facts.uri);
    let _ =
        writeln!(out, "user agent  {}", if facts.user_agent().is_empty() { "-" } else { facts.user_agent() });
    let _ = writeln!(out, "client      {} (key {})", facts.address, facts.key);
    let _ = writeln!(
        out,
        "asn         {} {}",
        facts.geo.asn.map_or_else(none, |asn| format!("AS{asn}")),
        facts.geo.asn_org.clone().unwrap_or_default()
    );
    let _ = writeln!(out, "country     {}", facts.geo.country.clone().unwrap_or_else(none));
    let history = &facts.history;
    let _ = writeln!(
        out,
        "history     trap hits {}, trap score {:.1}, recent requests {:.1}, rate limited {}",
        history.trap_hits,
        history.trap_score,
        history.request_rate,
        if history.rate_limited { "yes" } else { "no" }
    );
    let _ = writeln!(out, "trap url    {}", if facts.is_trap_url { "yes" } else { "no" });
    match &facts.crawler {
        Some(claim) => {
            let _ = writeln!(
                out,
                "crawler     claims {}: {} ({})",
                claim.crawler,
                claim.check.as_str(),
                claim.detail
            );
        }
        None => {
            let _ = writeln!(out, "crawler     -");
        }
    }
    let _ = writeln!(out, "ai kind     {}", ai_kind_line(app, facts));
    match &facts.signature {
        Some(signature) => {
            let agent = if signature.agent.is_empty() { "no agent" } else { signature.agent.as_str() };
            let _ =
                writeln!(out, "signature   {} by {agent} ({})", signature.check.as_str(), signature.detail);
        }
        None => {
            let _ = writeln!(out, "signature   unsigned");
        }
    }
    let robots = &facts.robots;
    match app.robots.for_host(&facts.host).filter(|_| robots.check != crate::facts::claims::RobotsCheck::None)
    {
        Some(file) => {
            let group =
                robots.group.as_deref().map_or("no group".to_string(), |group| format!("group {group}"));
            let rule = file
                .rule_at(robots.line)
                .map_or("no rule matches".to_string(), |rule| format!("line {}: {rule}", robots.line));
            let _ = writeln!(
                out,
                "robots.txt  {} for {}: {group}, {rule} ({})",
                robots.check.as_str(),
                facts.host,
                file.source
            );
        }
        None => {
            let _ = writeln!(
                out,
                "robots.txt  none for {}",
                if facts.host.is_empty() { "-" } else { &facts.host }
            );
        }
    }
    match &facts.pass {
        Some(pass) => {
            let _ = writeln!(
                out,
                "pass        {:032x}, earned by {} {} s ago, {} networks, trap hits {}, {}",
                pass.id,
                pass.earned.as_str(),
                pass.age,
                pass.networks,
                pass.history.trap_hits,
                pass.burned.map_or("good".to_string(), |reason| format!("burned ({reason})"))
            );
        }
        None => {
            let _ = writeln!(out, "pass        none, {} challenges unanswered", facts.challenges);
        }
    }
    let _ = writeln!(out, "rules");
    let width = trace.iter().map(|outcome| outcome.rule.len()).max().unwrap_or(0);
    for outcome in trace {
        let _ = writeln!(out, "  {:width$}  {}", outcome.rule, outcome.result);
    }
    let decision = &judgement.decision;
    if decision.rule.is_empty() {
        let _ = writeln!(out, "verdict     {} (no rule decided)", decision.verdict.as_str());
    } else {
        let _ = writeln!(
            out,
            "verdict     {} by {}: {}",
            decision.verdict.as_str(),
            decision.rule,
            decision.reason
        );
    }
    out
}
