//! The `quagmire` command: parse the command line, load the config, hand over to the library.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use quagmire::App;
use quagmire::ReplaySource as Source;
use quagmire::{Config, ConfigError, LogFormat};
use quagmire::{ReplayDefaults as Defaults, ReplayFormat as Format};
use quagmire::{SECRET_ENV, Secret, SecretOrigin};

/// The environment variable that sets the admin endpoints' bearer token, over the config.
const ADMIN_TOKEN_ENV: &str = "QUAGMIRE_ADMIN_TOKEN";

/// Exit status for an unusable configuration (sysexits' EX_CONFIG).
const EXIT_CONFIG: u8 = 78;

#[derive(Parser)]
#[command(version, about = "Forward-auth verdicts and an endless trap for AI scraper bots")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the verdict and trap listeners (the default command).
    Serve {
        /// Config file (KDL); keys it leaves out keep the embedded defaults.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Verdict listener address, overriding the config.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Trap listener address, overriding the config.
        #[arg(long)]
        trap_listen: Option<SocketAddr>,
        /// Log format, overriding the config.
        #[arg(long)]
        log_format: Option<LogFormatArg>,
        /// MaxMind ASN database (.mmdb), overriding the config.
        #[arg(long)]
        asn_db: Option<PathBuf>,
    },
    /// Validate a config file (and the corpus it names) and exit.
    Check {
        /// Config file (KDL); without one, the embedded default is checked.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// MaxMind ASN database (.mmdb), overriding the config.
        #[arg(long)]
        asn_db: Option<PathBuf>,
    },
    /// Judge one request and print the verdict with every rule's result.
    Explain {
        /// Client address.
        #[arg(long, default_value = "127.0.0.1")]
        ip: std::net::IpAddr,
        /// Original path and query.
        #[arg(long, default_value = "/")]
        uri: String,
        /// Original method.
        #[arg(long, default_value = "GET")]
        method: String,
        /// Original host.
        #[arg(long, default_value = "localhost")]
        host: String,
        /// Original scheme.
        #[arg(long, default_value = "https")]
        proto: String,
        /// A request header, `Name: value` (repeatable).
        #[arg(long = "header", short = 'H')]
        headers: Vec<String>,
        /// A raw HTTP request (request line and headers) to judge instead.
        #[arg(long)]
        request: Option<PathBuf>,
        /// Trap hits to record for the client first, to see how history changes the verdict.
        #[arg(long, default_value_t = 0)]
        trap_hits: u32,
        /// Config file (KDL).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// MaxMind ASN database (.mmdb), overriding the config.
        #[arg(long)]
        asn_db: Option<PathBuf>,
    },
    /// Keep the crawler lists fresh.
    Lists {
        #[command(subcommand)]
        command: ListsCommand,
    },
    /// Print this deployment's hidden link and robots.txt lines, which lead crawlers that ignore
    /// robots.txt into the trap.
    Snippets {
        /// Config file (KDL).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Run access logs through the rules, in the log's own time, and report what they would
    /// have allowed and trapped.
    Replay {
        /// Log files, in order (plain or gzip); `-` reads standard input.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Log format; `auto` detects it from each file's first lines.
        #[arg(long, default_value = "auto")]
        format: ReplayFormatArg,
        /// Config file (KDL): its rules, lists, client settings, trap prefix and secret (trap
        /// URLs are recognised only with the live service's secret).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// MaxMind ASN database (.mmdb), overriding the config.
        #[arg(long)]
        asn_db: Option<PathBuf>,
        /// A second ruleset to run on the same requests; the report shows what changes.
        #[arg(long)]
        compare: Option<PathBuf>,
        /// Write the report as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write one JSON object per request (line, verdict, rule, client) to this file.
        #[arg(long)]
        verdicts: Option<PathBuf>,
        /// Example lines shown per rule.
        #[arg(long, default_value_t = 3)]
        sample: usize,
        /// Judge rules that read headers the log does not carry as if those headers were not
        /// sent, instead of skipping them on those lines.
        #[arg(long)]
        judge_missing: bool,
        /// Scheme of requests in a combined log, which does not record it.
        #[arg(long, default_value = "https")]
        scheme: String,
        /// Host of requests in a combined log, which does not record it.
        #[arg(long, default_value = "")]
        host: String,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        /// Do not verify crawler claims by reverse DNS (for offline use): a claim outside the
        /// published ranges stays pending, where live it would be confirmed or refuted.
        #[arg(long)]
        no_dns: bool,
    },
    /// Print the trap page that would be served for PATH.
    Generate {
        /// Path (and query) of the page, e.g. /blog/2019/a-post.
        path: String,
        /// Host the page is for.
        #[arg(long, default_value = "localhost")]
        host: String,
        /// Config file (KDL).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ListsCommand {
    /// Fetch the configured sources and rewrite the lists they fill; a list whose source fails
    /// keeps its file (and the exit status is 1). A running `serve` reloads the new files.
    Update {
        /// Folder of list files, overriding `rules { lists }`.
        #[arg(long)]
        lists: Option<PathBuf>,
        /// Config file (KDL): its `lists { source ... }` and `rules { lists }`.
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ReplayFormatArg {
    Auto,
    Caddy,
    Traefik,
    NginxCombined,
    Jsonl,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

/// jemalloc rather than glibc's malloc: 7-15% less CPU per verdict, the same resident memory with
/// the settings in `.cargo/config.toml` (bench/README.md, "The allocator").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Serve {
        config: None,
        listen: None,
        trap_listen: None,
        log_format: None,
        asn_db: None,
    });
    let result = match command {
        Command::Serve { config, listen, trap_listen, log_format, asn_db } => load_config(config, asn_db)
            .and_then(|mut config| {
                config.listen = listen.unwrap_or(config.listen);
                config.trap.listen = trap_listen.unwrap_or(config.trap.listen);
                config.log_format = match log_format {
                    Some(LogFormatArg::Text) => LogFormat::Text,
                    Some(LogFormatArg::Json) => LogFormat::Json,
                    None => config.log_format,
                };
                serve(config)
            }),
        Command::Check { config, asn_db } => load_config(config.clone(), asn_db).and_then(|loaded| {
            init_tracing(loaded.log_format);
            let (secret, _) = Secret::resolve(None, loaded.secret.as_deref());
            let app = App::build(loaded, &secret).map_err(Failure::from)?;
            let name = config.map_or("the embedded default config".into(), |path| path.display().to_string());
            println!("{name} is valid");
            println!("lists:");
            for (file, origin, entries) in app.rules().current().list_origins() {
                println!("  {file}: {entries} entries from {origin}");
            }
            let robots = app.describe_robots();
            if robots.is_empty() {
                println!("robots.txt: none configured (robots {{ }}): r.robots is \"none\"");
            } else {
                println!("robots.txt:");
                for line in robots {
                    println!("  {line}");
                }
                for warning in app.robots_warnings() {
                    println!("  warning: {warning}");
                }
            }
            Ok(())
        }),
        Command::Explain { ip, uri, method, host, proto, headers, request, trap_hits, config, asn_db } => {
            load_config(config, asn_db).and_then(|config| {
                init_tracing(config.log_format);
                let secret = resolve_secret(&config);
                let app = App::build(config, &secret).map_err(Failure::from)?;
                let forwarded = match request {
                    Some(path) => quagmire::read_explain_request(ip, &path)?,
                    None => quagmire::request_from_flags(ip, method, proto, host, uri, &headers)?,
                };
                print!("{}", quagmire::explain(&app, forwarded, trap_hits));
                Ok(())
            })
        }
        Command::Lists { command: ListsCommand::Update { lists, config } } => {
            load_config(config, None).and_then(|config| update_lists(config, lists))
        }
        Command::Snippets { config } => load_config(config, None).map(|config| {
            init_tracing(config.log_format);
            let secret = resolve_secret(&config);
            let urls = quagmire::TrapUrls::new(secret.as_bytes());
            let prefix = &config.verdict.redirect_prefix;
            let snippets = quagmire::Snippets::new(secret.as_bytes(), &urls, prefix, &config.preferences);
            println!(
                "<!-- Hidden links for your page template: hidden from people, screen readers and the keyboard, \
                 followed by crawlers that ignore robots.txt. Use one or all three (docs/trap.md, \"Hidden links\"). -->"
            );
            for link in &snippets.links {
                println!("<!-- {}: {}. -->", link.place, link.why);
                println!("{}\n", link.html);
            }
            println!("# In your robots.txt: polite crawlers stay out of {prefix}/.");
            print!("{}", snippets.robots);
        }),
        Command::Replay {
            files,
            format,
            config,
            asn_db,
            compare,
            json,
            verdicts,
            sample,
            judge_missing,
            scheme,
            host,
            quiet,
            no_dns,
        } => load_config(config, asn_db).and_then(|config| {
            let format = match format {
                ReplayFormatArg::Auto => None,
                ReplayFormatArg::Caddy => Some(Format::Caddy),
                ReplayFormatArg::Traefik => Some(Format::Traefik),
                ReplayFormatArg::NginxCombined => Some(Format::Combined),
                ReplayFormatArg::Jsonl => Some(Format::Jsonl),
            };
            let options = quagmire::ReplayOptions {
                sources: files.iter().map(|file| Source::from_arg(file)).collect(),
                format,
                defaults: Defaults { scheme: scheme.to_ascii_lowercase(), host },
                samples: sample,
                judge_missing,
                progress: !quiet,
                dns: !no_dns,
            };
            run_replay(config, options, compare, json, verdicts)
        }),
        Command::Generate { path, host, config } => load_config(config, None).and_then(|config| {
            init_tracing(config.log_format);
            let secret = resolve_secret(&config);
            let app = App::build(config, &secret).map_err(Failure::from)?;
            print!("{}", app.generator().page(&host, &path));
            Ok(())
        }),
    };
    // Lines still queued for the log writer go out before the exit.
    quagmire::flush_logs();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Config(error)) => {
            eprintln!("{}", render(&error));
            ExitCode::from(EXIT_CONFIG)
        }
        Err(Failure::Other(error)) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

enum Failure {
    Config(ConfigError),
    Other(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure::Other(error.into())
    }
}

/// The config at `path` (or the embedded default), with `--asn-db` in place of `geo { asn }`
/// when given.
fn load_config(path: Option<PathBuf>, asn_db: Option<PathBuf>) -> Result<Config, Failure> {
    let mut config = Config::load(path.as_deref()).map_err(Failure::Config)?;
    config.geo.asn = asn_db.or(config.geo.asn);
    Ok(config)
}

fn serve(mut config: Config) -> Result<(), Failure> {
    let started = Instant::now();
    init_tracing(config.log_format);
    if let Ok(token) = std::env::var(ADMIN_TOKEN_ENV)
        && !token.is_empty()
    {
        config.admin.token = Some(token);
    }
    let secret = resolve_secret(&config);
    let app = Arc::new(App::build(config, &secret)?);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let verdict = bind(app.config().listen, "verdict").await?;
        let trap = bind(app.config().trap.listen, "trap").await?;
        let admin = match app.config().admin.listen {
            Some(address) => Some(bind(address, "admin").await?),
            None => None,
        };
        let admin_address = match &admin {
            Some(admin) => admin.local_addr()?.to_string(),
            None => "verdict".into(),
        };
        tracing::info!(
            verdict = %verdict.local_addr()?,
            trap = %trap.local_addr()?,
            admin = %admin_address,
            clients = %app.describe_client_state(),
            startup_ms = started.elapsed().as_millis() as u64,
            "listening"
        );
        quagmire::serve(app, verdict, trap, admin, shutdown_signal()).await.context("serving")?;
        tracing::info!("stopped");
        Ok(())
    })
}

/// `quagmire replay`: the summary on standard output, the JSON report and the verdicts in
/// files. The service's shared store is not used: a replay must not change live state.
fn run_replay(
    mut config: Config,
    options: quagmire::ReplayOptions,
    compare: Option<PathBuf>,
    json: Option<PathBuf>,
    verdicts: Option<PathBuf>,
) -> Result<(), Failure> {
    init_tracing(config.log_format);
    config.clients.store = Default::default();
    let secret = resolve_secret(&config);
    let app = App::build(config, &secret)?;
    let compare = match compare {
        Some(path) => Some((quagmire::compare_rules(&app, path.clone())?, path.display().to_string())),
        None => None,
    };
    let mut verdicts_out = match &verdicts {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => None,
    };
    let report = quagmire::replay(
        &app,
        compare.as_ref().map(|(rules, name)| (rules, name.clone())),
        &options,
        verdicts_out.as_mut().map(|out| out as &mut dyn std::io::Write),
    )?;
    if let Some(path) = &json {
        // Client-chosen text (user agents, rule errors) escaped as the text report escapes it.
        let mut text = Vec::new();
        quagmire::terminal_safe_json(&mut text, &report.json(), true)?;
        text.push(b'\n');
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    print!("{}", report.text());
    // Dropping a hundred thousand client records one by one takes a while and changes nothing
    // for a command that is about to exit.
    std::mem::forget(app);
    Ok(())
}

/// `quagmire lists update`: one line per list on stdout; an error (exit 1) if any list kept its
/// file because a source failed.
fn update_lists(config: Config, folder: Option<PathBuf>) -> Result<(), Failure> {
    init_tracing(config.log_format);
    let folder = folder.or(config.rules.lists.clone()).context(
        "no lists folder: pass --lists DIR, or set `rules { lists \"DIR\" }` in the config given with --config",
    )?;
    if !folder.is_dir() {
        return Err(anyhow::anyhow!("the lists folder {} does not exist", folder.display()).into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let reports = runtime.block_on(quagmire::update_lists(&folder, &config.lists));
    for report in &reports {
        println!("{report}");
    }
    let failed: Vec<&str> =
        reports.iter().filter(|report| report.result.is_err()).map(|report| report.file.as_str()).collect();
    if !failed.is_empty() {
        return Err(anyhow::anyhow!("kept the current {}: a source failed", failed.join(", ")).into());
    }
    Ok(())
}

/// Connections the kernel queues for a listener before quagmire accepts them (capped by
/// `net.core.somaxconn`). Larger than tokio's default of 1024: a burst of connections (or the
/// accept loop pausing at its connection cap) must not drop SYNs, which a client would only retry
/// after a second.
const LISTEN_BACKLOG: u32 = 4096;

async fn bind(address: SocketAddr, name: &str) -> anyhow::Result<tokio::net::TcpListener> {
    let listen = || -> std::io::Result<tokio::net::TcpListener> {
        let socket = if address.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(address)?;
        socket.listen(LISTEN_BACKLOG)
    };
    listen().with_context(|| format!("cannot listen on {address} ({name} listener)"))
}

fn resolve_secret(config: &Config) -> Secret {
    let (secret, origin) = Secret::resolve(std::env::var(SECRET_ENV).ok(), config.secret.as_deref());
    if origin == SecretOrigin::Random {
        tracing::warn!(
            "no secret configured (set `secret` in the config or {SECRET_ENV}): using a random one, so trap pages \
             and trap URLs will change on restart"
        );
    }
    secret
}

fn init_tracing(format: LogFormat) {
    quagmire::init_logging(format);
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::warn!(%error, "cannot watch SIGTERM; stop with Ctrl-C");
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
    tracing::info!("shutting down");
}

/// A config error as miette draws it: the file, line and column, the source line, and any help.
fn render(error: &ConfigError) -> String {
    let theme = if std::io::stderr().is_terminal() {
        miette::GraphicalTheme::unicode()
    } else {
        miette::GraphicalTheme::unicode_nocolor()
    };
    let mut out = String::new();
    let handler = miette::GraphicalReportHandler::new_themed(theme);
    if handler.render_report(&mut out, error).is_err() {
        out = format!("error: {error}");
    }
    out
}
