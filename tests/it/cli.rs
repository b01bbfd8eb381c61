//! The command line: `check` and `generate`.

use crate::support::{SECRET, Server, get, quagmire, write_file};

/// Runs `quagmire check --config FILE` on `text`; returns the exit code and stderr.
fn check(text: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "my.kdl", text);
    let output = quagmire().args(["check", "--config", &path]).output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    // Report the file by its bare name so expectations do not depend on the temporary folder.
    (output.status.code().unwrap(), stderr.replace(&path, "my.kdl"))
}

#[test]
fn check_accepts_the_default_and_a_valid_file() {
    let output = quagmire().arg("check").output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let (code, stderr) = check("trap {\n  links min=3 max=5\n}\n");
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn check_points_at_a_syntax_error() {
    let (code, stderr) = check("listen \"127.0.0.1:8420\"\ntrap {\n  listen \"127.0.0.1:1\n}\n");
    assert_eq!(code, 78);
    assert!(stderr.contains("my.kdl is not valid KDL"), "{stderr}");
    assert!(stderr.contains("[my.kdl:3:"), "{stderr}");
}

#[test]
fn check_points_at_an_unknown_key_and_suggests_one() {
    let (code, stderr) = check("log-format \"json\"\ntrap {\n    page-byte min=4096 max=8192\n}\n");
    assert_eq!(code, 78);
    assert!(stderr.contains("unknown key `page-byte` in `trap`"), "{stderr}");
    assert!(stderr.contains("[my.kdl:3:5]"), "{stderr}");
    assert!(stderr.contains("did you mean `page-bytes`?"), "{stderr}");
}

#[test]
fn check_points_at_a_bad_value() {
    let (code, stderr) = check("trap {\n  links min=20 max=10\n}\n");
    assert_eq!(code, 78);
    assert!(stderr.contains("`links` has max below min"), "{stderr}");
    assert!(stderr.contains("[my.kdl:2:16]"), "{stderr}");

    let (code, stderr) = check("listen \"localhost:80\"\n");
    assert_eq!(code, 78);
    assert!(stderr.contains("`localhost:80` is not a socket address"), "{stderr}");
    assert!(stderr.contains("[my.kdl:1:8]"), "{stderr}");
}

#[test]
fn check_names_a_missing_corpus() {
    let (code, stderr) = check("corpus {\n  path \"/no/such/books\"\n}\n");
    assert_ne!(code, 0);
    assert!(stderr.contains("/no/such/books"), "{stderr}");
}

#[test]
fn a_sites_own_html_and_markdown_train_the_trap_and_too_little_of_it_says_how_much_is_needed() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir(&site).unwrap();
    // A small site: the error must say how much more is needed.
    write_file(
        &site,
        "index.html",
        "<html><body><nav>Home</nav><p>We repair old bicycles by hand.</p></body></html>",
    );
    write_file(&site, "about.md", "# About\n\nThe workshop opened in 1998.\n");
    let config = format!("corpus {{\n    embedded #false\n    path \"{}\"\n}}\n", site.display());
    let (code, stderr) = check(&config);
    assert_ne!(code, 0);
    assert!(stderr.contains("at least 1000 words"), "{stderr}");

    // Enough of it: pages speak the site's words, and never its navigation.
    let mut post = String::from("# Wheels\n\n");
    for i in 0..400 {
        post.push_str(&format!("Spoke number {i} of the rear wheel needs truing before the ride. "));
        post.push_str("A bicycle mechanic checks the brakes, the chain and the gears.\n\n");
    }
    write_file(&site, "wheels.md", &post);
    let path = write_file(dir.path(), "site.kdl", &config);
    let output = quagmire()
        .args(["generate", "/blog/x", "--config", &path])
        .env("QUAGMIRE_SECRET", SECRET)
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(page.contains("wheel") || page.contains("bicycle"), "{page}");
    assert!(!page.contains("Home"), "navigation is not prose: {page}");
}

#[test]
fn a_site_template_is_checked_with_line_and_column_and_used_by_generate() {
    let dir = tempfile::tempdir().unwrap();
    let broken = "<html><body>\n<main>{{title}} {{content}}\n<div>{{links}}</main>\n</body></html>\n";
    let template = write_file(dir.path(), "page.html", broken);
    let (code, stderr) = check(&format!("trap {{\n    template \"{template}\"\n}}\n"));
    assert_ne!(code, 0);
    assert!(stderr.contains("page.html:3:15: `</main>` closes `<div>` (opened at 3:1)"), "{stderr}");

    let good = "<html><head><title>{{title}} - Cycle Works</title></head><body>\n\
                <header class=\"brand\">Cycle Works</header>\n<main>{{content}}</main>\n\
                <aside>{{links}}</aside></body></html>\n";
    let template = write_file(dir.path(), "page.html", good);
    let config = write_file(dir.path(), "q.kdl", &format!("trap {{\n    template \"{template}\"\n}}\n"));
    let output = quagmire()
        .args(["generate", "/blog/x", "--config", &config])
        .env("QUAGMIRE_SECRET", SECRET)
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        page.contains("<header class=\"brand\">Cycle Works</header>") && page.contains("<aside><ul>"),
        "{page}"
    );
}

#[tokio::test]
async fn generate_prints_the_page_the_trap_serves() {
    let output = quagmire()
        .args(["generate", "/archive/2019/quiet-harbor-letters", "--host", "example.org"])
        .env("QUAGMIRE_SECRET", SECRET)
        .output()
        .unwrap();
    assert!(output.status.success());
    let printed = String::from_utf8(output.stdout).unwrap();
    let server = Server::start(&[]);
    let (_, _, served) = get(&server.trap_url("/archive/2019/quiet-harbor-letters"), "example.org").await;
    assert_eq!(printed, served);
}

#[test]
fn check_reports_a_lua_syntax_error_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_file(
        dir.path(),
        "rules.lua",
        "return {\n  { name = 'x', check = function(r)\n    return 'allow' +\n  end },\n}\n",
    );
    let (code, stderr) = check(&format!("rules {{\n  script \"{script}\"\n}}\n"));
    assert_ne!(code, 0);
    assert!(stderr.contains("rules.lua:4:"), "{stderr}");
}

#[test]
fn check_names_a_missing_or_corrupt_asn_database() {
    let dir = tempfile::tempdir().unwrap();
    let corrupt = write_file(dir.path(), "corrupt.mmdb", "not a database");
    for path in ["/no/such/GeoLite2-ASN.mmdb", corrupt.as_str()] {
        let output = quagmire().args(["check", "--asn-db", path]).output().unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(path), "{stderr}");
    }
}

#[test]
fn explain_prints_every_rule_and_the_verdict() {
    let output = quagmire()
        .args(["explain", "--ip", "198.51.100.7", "--uri", "/docs", "-H", "User-Agent: CCBot/2.0"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("client      198.51.100.7 (key 198.51.100.7)"), "{stdout}");
    assert!(stdout.contains("  trap-url"), "{stdout}");
    assert!(
        stdout.contains("verdict     trap by ai-crawlers: user agent CCBot (training; ai-train not stated)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ai kind     training (CCBot): ai-train not stated: trapped as before kinds"),
        "{stdout}"
    );

    let dir = tempfile::tempdir().unwrap();
    let raw = write_file(
        dir.path(),
        "request.http",
        "GET /blog HTTP/1.1\nHost: site.example\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0\nSec-Fetch-Mode: navigate\n\n",
    );
    let output = quagmire().args(["explain", "--request", &raw]).output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("request     GET https://site.example/blog"), "{stdout}");
    assert!(stdout.contains("verdict     allow (no rule decided)"), "{stdout}");
}

#[test]
fn check_points_at_an_owner_tools_secret_that_is_missing_or_weak() {
    let missing =
        "owner-tools {\n    header \"X-Monitor-Key\"\n    secret-env \"QUAGMIRE_TEST_UNSET_KEY\"\n}\n";
    let (code, stderr) = check(missing);
    assert_eq!(code, 78);
    assert!(stderr.contains("the environment variable QUAGMIRE_TEST_UNSET_KEY is not set"), "{stderr}");
    assert!(stderr.contains("[my.kdl:3:"), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        dir.path(),
        "my.kdl",
        "owner-tools {\n    header \"X-Monitor-Key\"\n    secret-env \"QUAGMIRE_TEST_SHORT_KEY\"\n}\n",
    );
    let output = quagmire()
        .args(["check", "--config", &path])
        .env("QUAGMIRE_TEST_SHORT_KEY", "short")
        .output()
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(78));
    assert!(stderr.contains("is 5 bytes; it needs at least 16"), "{stderr}");
    assert!(
        !stderr.contains("short\n") && !stderr.contains("\"short\""),
        "the secret itself is never shown: {stderr}"
    );
    let (code, stderr) = check("owner-tools {\n    header \"X-Monitor-Key\"\n}\n");
    assert_eq!(code, 78);
    assert!(stderr.contains("needs both `header` and `secret-env`"), "{stderr}");
    let (code, stderr) = check("owner-tools {\n    header \"User-Agent\"\n}\n");
    assert_eq!(code, 78);
    assert!(stderr.contains("`User-Agent` cannot be the owner's tools' header"), "{stderr}");
}
