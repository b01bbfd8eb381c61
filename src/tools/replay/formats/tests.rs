//! Each format as its program writes it, and what a line that is not one gets.

use super::*;

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";

fn parsed(format: Format, line: &str) -> LogRequest {
    parse(format, line, &Defaults::default()).unwrap_or_else(|error| panic!("{line}: {error}"))
}

#[test]
fn caddy_lines_carry_every_header_and_caddys_own_client_address() {
    let line = format!(
        r#"{{"level":"info","ts":1796464800.25,"logger":"http.log.access.log0","msg":"handled request","request":{{"remote_ip":"127.0.0.1","remote_port":"41342","client_ip":"203.0.113.9","proto":"HTTP/2.0","method":"GET","host":"site.example","uri":"/docs/a?x=1","headers":{{"User-Agent":["{CHROME}"],"Sec-Fetch-Mode":["navigate"],"X-Forwarded-For":["6.6.6.6"],"Accept":["text/html","*/*"]}},"tls":{{"resumed":false,"version":772}}}},"bytes_read":0,"user_id":"","duration":0.0009,"size":10900,"status":200,"resp_headers":{{"Server":["Caddy"]}}}}"#
    );
    assert_eq!(Format::detect(&line), Some(Format::Caddy));
    let request = parsed(Format::Caddy, &line);
    assert_eq!(request.time, 1_796_464_800_250_000_000);
    assert_eq!(request.client, "203.0.113.9".parse::<IpAddr>().unwrap());
    assert_eq!((request.method.as_str(), request.proto.as_str()), ("GET", "https"));
    assert_eq!((request.host.as_str(), request.uri.as_str()), ("site.example", "/docs/a?x=1"));
    assert_eq!(request.headers.get("user-agent"), Some(CHROME));
    assert_eq!(request.headers.get("sec-fetch-mode"), Some("navigate"));
    assert_eq!(request.headers.iter().filter(|(name, _)| *name == "accept").count(), 2);
    assert_eq!(
        request.headers.get("x-forwarded-for"),
        None,
        "the client's own forwarding headers are dropped"
    );
    assert_eq!(request.coverage, Coverage::All);
    // Without client_ip (Caddy before 2.7) and TLS: the peer, over HTTP.
    let old = r#"{"ts":"2026-12-05T10:00:00Z","request":{"remote_ip":"198.51.100.4","method":"POST","host":"a","uri":"/"}}"#;
    let request = parsed(Format::Caddy, old);
    assert_eq!((request.client.to_string().as_str(), request.proto.as_str()), ("198.51.100.4", "http"));
    assert_eq!(request.time, 1_796_464_800_000_000_000);
}

#[test]
fn traefik_lines_carry_the_headers_its_config_keeps() {
    let line = format!(
        r#"{{"ClientAddr":"203.0.113.9:51234","ClientHost":"203.0.113.9","ClientPort":"51234","ClientUsername":"-","DownstreamContentSize":17,"DownstreamStatus":200,"Duration":1051820,"RequestAddr":"site.example","RequestContentSize":0,"RequestCount":3,"RequestHost":"site.example","RequestMethod":"GET","RequestPath":"/docs/a?x=1","RequestPort":"-","RequestProtocol":"HTTP/1.1","RequestScheme":"https","RouterName":"site@file","StartLocal":"2026-12-05T11:00:00.5+01:00","StartUTC":"2026-12-05T10:00:00.5Z","entryPointName":"web","level":"info","msg":"","request_User-Agent":"{CHROME}","request_Cookie":"REDACTED","time":"2026-12-05T11:00:00+01:00"}}"#
    );
    assert_eq!(Format::detect(&line), Some(Format::Traefik));
    let request = parsed(Format::Traefik, &line);
    assert_eq!(request.time, 1_796_464_800_500_000_000);
    assert_eq!(request.client.to_string(), "203.0.113.9");
    assert_eq!((request.proto.as_str(), request.uri.as_str()), ("https", "/docs/a?x=1"));
    assert_eq!(request.headers.get("user-agent"), Some(CHROME));
    assert!(request.coverage.carries("user-agent"));
    assert!(!request.coverage.carries("cookie"), "a redacted value is not known");
    assert!(!request.coverage.carries("sec-fetch-mode"), "a header Traefik drops may have been sent");
    // Behind a trusted load balancer Traefik logs the forwarded chain; without a scheme, the
    // command line's.
    let chained = r#"{"ClientHost":"6.6.6.6, 203.0.113.9","RequestMethod":"GET","RequestPath":"/","StartUTC":"2026-12-05T10:00:00Z"}"#;
    let request = parsed(Format::Traefik, chained);
    assert_eq!((request.client.to_string().as_str(), request.proto.as_str()), ("203.0.113.9", "https"));
}

#[test]
fn combined_lines_from_nginx_and_apache_with_their_escapes() {
    let nginx = format!(
        r#"203.0.113.9 - - [05/Dec/2026:11:00:00 +0100] "GET /a?q=\x22x\x22 HTTP/1.1" 200 612 "https://ref.example/" "{CHROME}""#
    );
    assert_eq!(Format::detect(&nginx), Some(Format::Combined));
    let request = parsed(Format::Combined, &nginx);
    assert_eq!(request.time, 1_796_464_800_000_000_000, "+0100 is an hour ahead of UTC");
    assert_eq!((request.method.as_str(), request.uri.as_str()), ("GET", "/a?q=\"x\""));
    assert_eq!(request.headers.get("referer"), Some("https://ref.example/"));
    assert_eq!(request.headers.get("user-agent"), Some(CHROME));
    assert!(request.coverage.carries("user-agent") && !request.coverage.carries("sec-fetch-mode"));
    let defaults = Defaults { scheme: "http".into(), host: "site.example".into() };
    let request = parse(Format::Combined, &nginx, &defaults).unwrap();
    assert_eq!((request.proto.as_str(), request.host.as_str()), ("http", "site.example"));

    let apache =
        r#"2001:db8::7 - frank [05/Dec/2026:10:00:00 -0000] "GET /b HTTP/1.0" 200 2326 "-" "say \"hi\"""#;
    let request = parsed(Format::Combined, apache);
    assert_eq!(request.client.to_string(), "2001:db8::7");
    assert_eq!(request.headers.get("user-agent"), Some("say \"hi\""));
    assert_eq!(request.headers.get("referer"), None, "`-` is no header");

    // The common format: no headers at all, so none is carried.
    let common = r#"203.0.113.9 - - [05/Dec/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 10"#;
    let request = parsed(Format::Combined, common);
    assert!(request.headers.is_empty() && !request.coverage.carries("user-agent"));
}

#[test]
fn json_lines_keep_header_order_and_take_either_time() {
    let line = r#"{"time":"2026-12-05T10:00:00Z","client":"203.0.113.9","method":"GET","uri":"/a","host":"h","proto":"HTTPS","headers":{"User-Agent":"agent","Accept":["a","b"],"Sec-Fetch-Mode":"navigate"}}"#;
    assert_eq!(Format::detect(line), Some(Format::Jsonl));
    let request = parsed(Format::Jsonl, line);
    let headers: Vec<(&str, &str)> = request.headers.iter().collect();
    assert_eq!(
        headers,
        [("user-agent", "agent"), ("accept", "a"), ("accept", "b"), ("sec-fetch-mode", "navigate")]
    );
    assert_eq!((request.proto.as_str(), request.coverage.clone()), ("https", Coverage::All));
    let numeric = r#"{"time":1796464800,"client":"203.0.113.9","uri":"/"}"#;
    let request = parsed(Format::Jsonl, numeric);
    assert_eq!((request.time, request.method.as_str()), (1_796_464_800_000_000_000, "GET"));
}

#[test]
fn lines_that_are_not_requests_say_what_is_wrong() {
    let defaults = Defaults::default();
    let error = |format, line: &str| parse(format, line, &defaults).unwrap_err().to_string();
    assert!(
        error(Format::Caddy, r#"{"ts":1.0,"request":{"uri":"/"#)
            .starts_with("not a caddy line: EOF while parsing")
    );
    assert_eq!(error(Format::Caddy, r#"{"ts":1.0}"#), "request: missing");
    assert_eq!(
        error(Format::Caddy, r#"{"ts":1.0,"request":{"remote_ip":"nope","method":"GET","uri":"/"}}"#),
        "request.client_ip: `nope` is not an address"
    );
    assert_eq!(
        error(Format::Jsonl, r#"{"time":"yesterday","client":"203.0.113.9","uri":"/"}"#),
        "time: `yesterday` is not an RFC 3339 time"
    );
    assert_eq!(error(Format::Traefik, r#"{"ClientHost":"203.0.113.9"}"#), "StartUTC: missing");
    assert_eq!(
        error(Format::Combined, "\u{1}\u{7f}binary\u{0}garbage"),
        "not a combined log line: the first field is not an address"
    );
    assert_eq!(
        error(Format::Combined, r#"203.0.113.9 - - [05/Dec/2026:10:00:00 +0000] "GET /a"#),
        "not a combined log line: no quoted request line"
    );
    assert_eq!(
        error(Format::Combined, r#"203.0.113.9 - - [99/Foo/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1"#),
        "not a combined log line: the time is not `dd/Mon/yyyy:hh:mm:ss +zzzz`"
    );
    // A line of one format read as another.
    let caddy = r#"{"ts":1.0,"request":{"remote_ip":"203.0.113.9","method":"GET","uri":"/"}}"#;
    assert_eq!(error(Format::Jsonl, caddy), "time: missing");
    assert_eq!(Format::detect("{\"a\": 1}"), None);
    assert_eq!(Format::detect("just words"), None);
}
