//! The configuration loader as a specification: KDL text in, typed settings or an error with its
//! line and column out.

use super::*;
use crate::lists::update::Format;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse("test.kdl", text, Path::new("/etc/quagmire"))
}

fn problem(text: &str) -> (String, (usize, usize), Option<String>) {
    match parse(text).unwrap_err() {
        ConfigError::Invalid(problem) => {
            let help = miette::Diagnostic::help(&*problem).map(|help| help.to_string());
            (problem.message().to_string(), problem.line_column(), help)
        }
        other => panic!("expected an invalid-value problem, got {other:?}"),
    }
}

#[test]
fn embedded_defaults_set_every_field() {
    let config = Config::embedded();
    assert_eq!(config.listen, "127.0.0.1:8420".parse().unwrap());
    assert_eq!(config.secret, None);
    assert_eq!(config.log_format, LogFormat::Text);
    assert_eq!(config.trap.listen, "127.0.0.1:8421".parse().unwrap());
    assert_eq!(
        config.trap.page,
        PageSettings { min_bytes: 4096, max_bytes: 12288, min_links: 8, max_links: 15 }
    );
    assert_eq!(
        config.trap.drip,
        DripConfig { enabled: false, bytes_per_second: 2048, chunk_bytes: 512, max_connections: 256 }
    );
    assert_eq!(config.corpus, CorpusConfig { order: 2, embedded: true, paths: vec![] });
    assert_eq!(
        config.connections,
        ConnectionConfig {
            header_read_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(60),
            max_connections: None,
        }
    );
}

#[test]
fn a_file_changes_only_what_it_names() {
    let config = parse(
        r#"
        listen "0.0.0.0:9000"
        trap {
            links min=2 max=4
            drip { enabled #true; }
        }
        corpus {
            path "books"
            path "/abs/more.txt"
        }
        "#,
    )
    .unwrap();
    let defaults = Config::embedded();
    assert_eq!(config.listen, "0.0.0.0:9000".parse().unwrap());
    assert_eq!((config.trap.page.min_links, config.trap.page.max_links), (2, 4));
    assert_eq!(config.trap.page.min_bytes, defaults.trap.page.min_bytes);
    assert!(config.trap.drip.enabled);
    assert_eq!(config.trap.drip.bytes_per_second, defaults.trap.drip.bytes_per_second);
    assert_eq!(
        config.corpus.paths,
        vec![PathBuf::from("/etc/quagmire/books"), PathBuf::from("/abs/more.txt")]
    );
}

#[test]
fn unknown_keys_name_the_place_and_suggest_a_close_key() {
    let (message, at, help) = problem("trap {\n    lisen \"127.0.0.1:1\"\n}\n");
    assert_eq!(message, "unknown key `lisen` in `trap`");
    assert_eq!(at, (2, 5));
    assert_eq!(help.as_deref(), Some("did you mean `listen`?"));

    let (message, at, help) = problem("colour \"red\"\n");
    assert_eq!(message, "unknown key `colour` at the top level");
    assert_eq!(at, (1, 1));
    assert!(help.unwrap().starts_with("known keys at the top level: listen"));
}

#[test]
fn wrong_values_point_at_the_value() {
    let (message, at, _) = problem("log-format \"text\"\nlisten \"localhost\"\n");
    assert_eq!(message, "`localhost` is not a socket address");
    assert_eq!(at, (2, 8));

    let (message, at, _) = problem("trap {\n  page-bytes min=9000 max=5000\n}\n");
    assert_eq!(message, "`page-bytes` has max below min");
    assert_eq!(at, (2, 23));

    let (message, _, _) = problem("corpus { order 9; }");
    assert_eq!(message, "9 is out of range");

    let (message, _, _) = problem("trap { drip { enabled \"yes\"; }; }");
    assert_eq!(message, "expected #true or #false, found a string");

    let (message, _, _) = problem("secret \"short\"");
    assert_eq!(message, "the secret is too short");
}

#[test]
fn syntax_errors_carry_kdl_diagnostics() {
    let err = parse("trap {\n  listen \"127.0.0.1:1\n}\n").unwrap_err();
    let ConfigError::Syntax { problems, .. } = err else { panic!("expected a syntax error") };
    assert!(!problems.is_empty());
    assert_eq!(problems[0].line_column().0, 2);
}

#[test]
fn deeply_nested_blocks_are_refused_before_they_overflow_the_parser() {
    // 400 nested blocks overflowed the stack inside the KDL parser (config fuzz target).
    let (message, (line, column), _) = problem(&format!("trap {}\n", "{".repeat(400)));
    assert_eq!(message, "blocks are nested more than 16 deep");
    assert_eq!((line, column), (1, 22));
    // Up to the limit, the parser gets the file (and reports what it finds).
    let nested = format!("{}{}", "a {".repeat(16), "}".repeat(16));
    assert!(
        matches!(parse(&nested), Err(ConfigError::Invalid(problem)) if problem.message().contains("unknown"))
    );
}

#[test]
fn missing_files_are_named() {
    let err = Config::load(Some(Path::new("/no/such/quagmire.kdl"))).unwrap_err();
    assert!(err.to_string().contains("/no/such/quagmire.kdl"), "{err}");
}

#[test]
fn dns_servers_and_budgets_are_read_and_checked() {
    let defaults = Config::embedded().dns;
    assert_eq!(
        defaults,
        DnsConfig {
            servers: vec![],
            timeout: Duration::from_secs(2),
            verdict_wait: Duration::from_millis(200),
            lookups_per_second: 20,
            max_pending: 64,
        }
    );
    let config = parse("dns {\n  servers \"127.0.0.1:5353\" \"[::1]:53\"\n  verdict-wait-ms 0\n}\n").unwrap();
    assert_eq!(config.dns.servers, vec!["127.0.0.1:5353".parse().unwrap(), "[::1]:53".parse().unwrap()]);
    assert_eq!(config.dns.verdict_wait, Duration::ZERO);
    assert_eq!(config.dns.timeout, defaults.timeout);

    let (message, at, _) = problem("dns {\n  servers \"127.0.0.1:53\" \"resolver.local\"\n}\n");
    assert_eq!(message, "`resolver.local` is not a socket address");
    assert_eq!(at, (2, 26));
    let (message, _, _) = problem("dns { lookups-per-second 0; }");
    assert_eq!(message, "0 is out of range");
}

#[test]
fn lists_default_to_the_publishers_sources_and_no_refresh() {
    let lists = Config::embedded().lists;
    assert_eq!(lists.refresh, None);
    assert_eq!(lists.timeout, Duration::from_secs(30));
    let googlebot = &lists.sources[0];
    assert_eq!(
        (googlebot.list.as_str(), googlebot.label.as_str(), googlebot.format, googlebot.url.as_str()),
        (
            "search-engines",
            "Googlebot",
            Format::PrefixesJson,
            "https://developers.google.com/static/search/apis/ipranges/googlebot.json"
        )
    );
    let mut lists: Vec<&str> = lists.sources.iter().map(|source| source.list.as_str()).collect();
    lists.dedup();
    assert_eq!(lists, ["search-engines", "ai-crawler-ranges", "ai-crawlers", "datacenter-asns"]);
}

#[test]
fn a_file_with_sources_replaces_the_default_sources() {
    let config = parse(
        r#"
        rules { lists "lists"; }
        lists {
            refresh-hours 0.5
            timeout-seconds 5
            source "search-engines" label="Googlebot" format="prefixes-json" url="https://mirror.example/googlebot.json"
            source "ai-crawlers" format="robots-json" url="http://mirror.example/robots.json"
        }
        "#,
    )
    .unwrap();
    assert_eq!(config.lists.refresh, Some(Duration::from_secs(1800)));
    assert_eq!(config.lists.timeout, Duration::from_secs(5));
    let urls: Vec<&str> = config.lists.sources.iter().map(|source| source.url.as_str()).collect();
    assert_eq!(urls, ["https://mirror.example/googlebot.json", "http://mirror.example/robots.json"]);
    assert_eq!(config.lists.sources[1].label, "");
}

#[test]
fn bad_sources_point_at_the_value() {
    let (message, at, help) = problem(
        "lists {\n  source \"search-engines\" label=\"Googlebot\" format=\"google-json\" url=\"https://x.example/\"\n}\n",
    );
    assert_eq!(message, "unknown format \"google-json\"");
    assert_eq!(at, (2, 45));
    assert_eq!(help, None);

    let (message, at, _) =
        problem("lists {\n  source \"se\" label=\"G\" format=\"cidr-list\" url=\"ftp://x.example/a\"\n}\n");
    assert_eq!(
        message,
        "`ftp://x.example/a` cannot be a source: the URL must start with https:// or http://"
    );
    assert_eq!(at, (2, 44));

    let (message, _, _) = problem("lists { source \"se\" format=\"cidr-list\" url=\"https://x.example/\"; }");
    assert_eq!(message, "a `cidr-list` source needs label=");
    let (message, _, _) =
        problem("lists { source \"a\" label=\"x\" format=\"robots-json\" url=\"https://x.example/\"; }");
    assert_eq!(message, "a `robots-json` source takes no label");
    let (message, _, _) =
        problem("lists { source \"se.txt\" label=\"G\" format=\"cidr-list\" url=\"https://x.example/\"; }");
    assert_eq!(message, "`se.txt` is not a list name");
    let (message, _, help) =
        problem("lists { source \"se\" lable=\"G\" format=\"cidr-list\" url=\"https://x.example/\"; }");
    assert_eq!(
        (message.as_str(), help.as_deref()),
        ("unknown property `lable` of `source`", Some("did you mean `label=`?"))
    );
    let (message, _, _) = problem(
        "lists {\n source \"se\" label=\"G\" format=\"cidr-list\" url=\"https://x.example/\"\n source \"se\" format=\"asn-list\" url=\"https://x.example/\"\n}",
    );
    assert_eq!(
        message,
        "list `se` already gets entries from a `cidr-list` source, which this format cannot join"
    );
}

#[test]
fn a_refresh_needs_a_lists_folder_and_a_sane_interval() {
    let (message, at, help) = problem("lists {\n    refresh-hours 24\n}\n");
    assert_eq!(message, "refreshing the lists needs a lists folder");
    assert_eq!(at, (2, 19));
    assert!(help.unwrap().contains("rules { lists"));
    assert!(parse("lists { refresh-hours 24; }\nrules { lists \"/srv/lists\"; }").is_ok());
    assert_eq!(parse("lists { refresh-hours 0; }").unwrap().lists.refresh, None);
    let (message, _, _) = problem("rules { lists \"l\"; }\nlists { refresh-hours 0.0001; }");
    assert_eq!(message, "0.0001 hours is out of range");
    let (message, _, _) = problem("lists { refresh-hours \"daily\"; }");
    assert_eq!(message, "expected a number of hours, found a string");
}

#[test]
fn web_bot_auth_settings_are_read_and_checked() {
    let defaults = Config::embedded().web_bot_auth;
    assert_eq!(
        defaults,
        WebBotAuthConfig {
            enabled: true,
            allow_http: false,
            allow_private: false,
            timeout: Duration::from_secs(2),
            verdict_wait: Duration::from_millis(200),
            fetches_per_second: 5,
            max_pending: 16,
        }
    );
    let config = parse("web-bot-auth {\n  allow-http #true\n  verdict-wait-ms 50\n}\n").unwrap();
    assert!(config.web_bot_auth.allow_http && config.web_bot_auth.enabled);
    assert_eq!(config.web_bot_auth.verdict_wait, Duration::from_millis(50));
    assert!(!parse("web-bot-auth { enabled #false; }").unwrap().web_bot_auth.enabled);
    let (message, _, _) = problem("web-bot-auth { fetches-per-second 0; }");
    assert_eq!(message, "0 is out of range");
    let (message, _, _) = problem("web-bot-auth { allow-https #true; }");
    assert!(message.contains("allow-https"), "{message}");
}

#[test]
fn the_challenge_block_is_read_and_checked_with_line_and_column() {
    let embedded = Config::embedded().challenge;
    assert_eq!(embedded, crate::challenge::ChallengeConfig::default(), "default.kdl and the defaults agree");
    let config = parse(
        "challenge {\n    difficulty 18\n    pass-hours 24\n    path \"/.guard/\"\n    wait-seconds 3\n    everyone #true\n    burn-networks 4\n}\n",
    )
    .unwrap();
    let challenge = &config.challenge;
    assert_eq!((challenge.difficulty, challenge.path.as_str()), (18, "/.guard/"));
    assert_eq!(
        (challenge.pass_lifetime, challenge.wait),
        (Duration::from_secs(86_400), Duration::from_secs(3))
    );
    assert_eq!(challenge.burn.networks, 4);
    // The rules see the opt-in and the unanswered limit.
    assert!(config.rules.challenge_everyone);
    assert_eq!(config.rules.challenge_unanswered, 5);
    for (text, line, column) in [
        ("challenge {\n    path \"quagmire\"\n}\n", 2, 10),
        ("challenge {\n    path \"//evil/\"\n}\n", 2, 10),
        ("challenge {\n    difficulty 40\n}\n", 2, 16),
        ("challenge {\n    dificulty 16\n}\n", 2, 5),
    ] {
        let (message, position, _) = problem(text);
        assert_eq!(position, (line, column), "{message}: {text}");
    }
}
