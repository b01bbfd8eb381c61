//! The challenge page: self-contained HTML (its script and worker come from the reserved path on
//! the site's own host, nothing from anywhere else), a few KB, in plain words. With JavaScript its
//! script runs the proof of work in workers; without, a `<noscript>` meta refresh goes to the
//! answer path once the wait has passed (the server checks the wait). It uses no fingerprinting
//! API: nothing but the workers, `TextEncoder` and SHA-256.
//!
//! It also carries two of the deployment's hidden trap links: a crawler that parses the page for
//! links, rather than answering it, walks into the trap.

use std::fmt::Write;
use std::time::Duration;

/// The page's script, served at `<path>challenge.js`.
pub(crate) const SCRIPT: &str = include_str!("challenge.js");
/// The proof-of-work worker, served at `<path>worker.js`.
pub(crate) const WORKER: &str = include_str!("worker.js");

/// The page's own policy: scripts and workers only from the site itself (the reserved path), no
/// connections, images, frames, forms elsewhere or embedding. Inline styles are allowed for the
/// page's own look and the hidden links' hiding.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; worker-src 'self'; \
     style-src 'unsafe-inline'; img-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// The start of both pages, up to their own `<title>`.
const HEAD: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">"#;

/// Both pages' look: plain, readable, light or dark as the reader's system is.
const STYLE: &str = "<style>
body{font:1.05rem/1.5 system-ui,sans-serif;margin:0;padding:3rem 1rem;color:#222;background:#fafafa}
main{max-width:34rem;margin:0 auto}
h1{font-size:1.5rem}
.note{color:#8a1c1c}
@media (prefers-color-scheme:dark){body{color:#ddd;background:#161616}.note{color:#f19999}}
</style>";

/// What one page shows.
pub(crate) struct Page<'a> {
    /// The signed challenge.
    pub token: &'a str,
    /// Leading zero bits.
    pub difficulty: u8,
    /// The no-JavaScript wait.
    pub wait: Duration,
    /// How long the pass lasts.
    pub pass_lifetime: Duration,
    /// The reserved path (`/.quagmire/`).
    pub path: &'a str,
    /// Where the answer sends the browser back to: the page it asked for.
    pub target: &'a str,
    /// Hidden trap links: one right after `<body>`, one before `</body>`.
    pub links: [&'a str; 2],
    /// A line about the last answer, when it was refused.
    pub note: Option<&'a str>,
}

impl Page<'_> {
    /// The page's HTML.
    pub(crate) fn render(&self) -> String {
        let target: String = form_urlencoded::byte_serialize(self.target.as_bytes()).collect();
        let answer = format!("{}answer?c={}&to={target}", self.path, self.token);
        let answer = escape(&answer);
        let wait = self.wait.as_secs();
        let days = (self.pass_lifetime.as_secs() / 86_400).max(1);
        let remembered = if days == 1 { "a day".to_string() } else { format!("{days} days") };
        let mut html = String::with_capacity(4096);
        let _ = write!(
            html,
            r#"{HEAD}
<title>One moment, please</title>
<noscript><meta http-equiv="refresh" content="{wait}; url={answer}"></noscript>
{STYLE}
</head>
<body>
{lead}
<main>
<h1>One moment, please</h1>
"#,
            lead = self.links[0],
        );
        if let Some(note) = self.note {
            let _ = writeln!(html, r#"<p class="note">{}</p>"#, escape(note));
        }
        let _ = write!(
            html,
            r#"<p>This site asks each new visitor's browser to do a small sum before showing its pages. It keeps automated scrapers out; a person only waits once.</p>
<p id="quagmire-status" role="status" aria-live="polite">Checking your browser. This usually takes a second or two.</p>
<noscript><p>JavaScript is off, so the check is a {wait}-second wait instead. The page continues by itself.</p></noscript>
<p>Your browser then gets a cookie that lets it in for {remembered}, so cookies must be allowed for this site. Nothing about your device is read or kept.</p>
</main>
<div id="quagmire-challenge" hidden data-challenge="{token}" data-difficulty="{difficulty}" data-wait="{wait}" data-answer="{answer}" data-worker="{path}worker.js"></div>
<script src="{path}challenge.js"></script>
{tail}
</body>
</html>
"#,
            token = self.token,
            difficulty = self.difficulty,
            path = escape(self.path),
            tail = self.links[1],
        );
        html
    }
}

/// The page a browser waits on for its network's turn: no challenge, only a count of the seconds
/// and a refresh to the page it asked for once they have passed (without JavaScript too).
pub(crate) struct Waiting<'a> {
    /// Seconds until the turn.
    pub seconds: u64,
    /// Where it goes then.
    pub target: &'a str,
    /// Why it waits, in a sentence.
    pub why: &'a str,
    /// Hidden trap links, as on the challenge page.
    pub links: [&'a str; 2],
}

impl Waiting<'_> {
    /// The page's HTML.
    pub(crate) fn render(&self) -> String {
        let seconds = self.seconds.max(1);
        let when = if seconds < 90 {
            format!("{seconds} seconds")
        } else {
            format!("about {} minutes", seconds.div_ceil(60))
        };
        format!(
            r#"{HEAD}
<meta http-equiv="refresh" content="{seconds}; url={target}">
<title>Your turn is coming</title>
{STYLE}
</head>
<body>
{lead}
<main>
<h1>Your turn is coming</h1>
<p>{why}</p>
<p>Your turn is in {when}. This page continues by itself; there is nothing to do but keep it open.</p>
</main>
{tail}
</body>
</html>
"#,
            target = escape(self.target),
            why = escape(self.why),
            lead = self.links[0],
            tail = self.links[1],
        )
    }
}

/// Escapes text for an HTML attribute or element.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
