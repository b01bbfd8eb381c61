//! A hostile or broken ruleset against the real server: the service keeps answering `/health`
//! and the trap, verdicts get the fail mode in bounded time, `check` does not hang, and SIGTERM
//! still stops the process.

use std::time::{Duration, Instant};

use crate::support::{Server, quagmire, write_file};

/// A rule that spends a long time in one C call (sorting a quarter of a million numbers, made by
/// another C call: tables the script made while loading are read-only to rules), which no time
/// limit can interrupt, for requests to `/sort`. The comparator is a C function, so the sort
/// never returns to Lua, and each comparison is a call: a quarter of a second and more of one C
/// call, in either build profile (Lua's C code is optimised in both).
const STUCK_RULES: &str = r#"
local bytes = string.rep("\255\1\128\7", 62500)
return {
    { name = "sort", check = function(r)
        if r.path == "/sort" then
            local numbers = { string.byte(bytes, 1, -1) }
            table.sort(numbers, math.ult)
        end
        return "allow", "ok"
    end },
}"#;

fn stuck_config(dir: &std::path::Path) -> String {
    let script = write_file(dir, "rules.lua", STUCK_RULES);
    write_file(
        dir,
        "quagmire.kdl",
        &format!(
            "rules {{\n    script \"{script}\"\n    fail \"closed\"\n    time-limit-ms 20\n    \
             memory-limit-bytes 268435456\n    workers 2\n}}\n"
        ),
    )
}

/// That `/health` and trap pages were answered without waiting on the rules. A thread held by
/// them would make most requests wait behind evaluations (20 ms each and more, eight callers'
/// worth, or a stuck call's seconds); a busy machine's scheduler delays only some. So: nine in
/// ten within 100 ms, and none near a second.
fn answered_at_once(mut times: Vec<Duration>) {
    assert!(times.len() >= 20, "only {} requests in the window", times.len());
    times.sort();
    let (typical, slowest) = (times[times.len() * 9 / 10], times[times.len() - 1]);
    assert!(typical < Duration::from_millis(100), "nine in ten within {typical:?}: {times:?}");
    assert!(slowest < Duration::from_millis(1000), "/health or the trap took {slowest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stuck_rules_never_stall_health_the_trap_or_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let config = stuck_config(dir.path());
    let server = Server::start(&["--config", &config]);
    let client = reqwest::Client::new();

    // Eight verdicts that get every rule worker stuck, several times over.
    let verdicts: Vec<_> = (0..8)
        .map(|_| {
            let request = client.get(server.verdict_url()).header("x-forwarded-uri", "/sort");
            tokio::spawn(async move {
                let started = Instant::now();
                let response = request.send().await.unwrap();
                (response.status().as_u16(), started.elapsed())
            })
        })
        .collect();

    // Meanwhile /health and the trap answer at once.
    let health = format!("http://{}/health", server.verdict);
    let mut times = Vec::new();
    let watching = Instant::now();
    while watching.elapsed() < Duration::from_secs(3) {
        for url in [health.as_str(), &server.trap_url("/some/page")] {
            let started = Instant::now();
            let status = client.get(url).send().await.unwrap().status().as_u16();
            assert_eq!(status, 200);
            times.push(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    answered_at_once(times);

    for verdict in verdicts {
        let (status, took) = verdict.await.unwrap();
        // Fail closed: a stuck rule traps, within its deadline (or the queue's, for the later ones).
        assert_eq!(status, 403);
        assert!(took < Duration::from_secs(3), "a verdict took {took:?}");
    }
    // A request that does not get stuck is answered by a fresh worker.
    let response = client.get(server.verdict_url()).header("x-forwarded-uri", "/calm").send().await.unwrap();
    assert_eq!(
        response.status().as_u16(),
        200,
        "{:?}\n{}",
        response.headers(),
        server.new_log_lines().join("\n")
    );

    // SIGTERM while stuck threads may still be sorting.
    let _ = client.get(server.verdict_url()).header("x-forwarded-uri", "/sort").send().await.unwrap();
    let signalled = Instant::now();
    let status = server.terminate(Duration::from_secs(10)).expect("the server exits after SIGTERM");
    assert!(status.success(), "{status:?}");
    assert!(signalled.elapsed() < Duration::from_secs(7), "exited after {:?}", signalled.elapsed());
}

/// Rules that go over the inline lane's limits (Lua that loops, the largest calls into C the
/// lane's memory allows), for every verdict: each is stopped on the thread that serves HTTP,
/// run again on a worker, and gets the fail mode there.
const HEAVY_RULES: &str = r#"
return {
    { name = "loop", check = function(r)
        if r.path == "/loop" then while true do end end
    end },
    { name = "c", check = function(r)
        if r.path == "/c" then
            -- Sorting and copying as much as 1 MiB holds, over and over.
            while true do
                local numbers = {}
                for i = 1, 40000 do numbers[i] = (i * 7919) % 40000 end
                table.sort(numbers)
                local text = string.rep("ab", 200000)
                text = text:upper():reverse():lower()
            end
        end
        return "allow", "ok"
    end },
}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rules_over_the_inline_limits_never_hold_health_or_the_trap_past_the_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_file(dir.path(), "rules.lua", HEAVY_RULES);
    let config = write_file(
        dir.path(),
        "quagmire.kdl",
        &format!(
            "rules {{\n    script \"{script}\"\n    fail \"closed\"\n    time-limit-ms 20\n    workers 2\n}}\n"
        ),
    );
    let server = Server::start(&["--config", &config]);
    let client = reqwest::Client::new();

    // Eight callers asking, one after another, for verdicts that run over every limit.
    let until = Instant::now() + Duration::from_secs(3);
    let callers: Vec<_> = (0..8)
        .map(|i| {
            let (client, url) = (client.clone(), server.verdict_url());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                while Instant::now() < until {
                    let path = if i % 2 == 0 { "/loop" } else { "/c" };
                    let response = client.get(&url).header("x-forwarded-uri", path).send().await.unwrap();
                    answers.push(response.status().as_u16());
                }
                answers
            })
        })
        .collect();

    let health = format!("http://{}/health", server.verdict);
    let mut times = Vec::new();
    while Instant::now() < until {
        for url in [health.as_str(), &server.trap_url("/some/page")] {
            let started = Instant::now();
            assert_eq!(client.get(url).send().await.unwrap().status().as_u16(), 200);
            times.push(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    answered_at_once(times);
    for caller in callers {
        let answers = caller.await.unwrap();
        assert!(!answers.is_empty());
        assert!(answers.iter().all(|status| *status == 403), "fail closed: {answers:?}");
    }
    let metrics =
        client.get(format!("http://{}/metrics", server.verdict)).send().await.unwrap().text().await.unwrap();
    let count = |lane: &str| {
        let prefix = format!("quagmire_rule_evaluations_total{{lane=\"{lane}\"}} ");
        metrics.lines().find_map(|line| line.strip_prefix(prefix.as_str())?.parse::<u64>().ok()).unwrap_or(0)
    };
    assert!(count("escalated") >= 1, "{metrics}");
    assert!(count("worker") >= 1, "after an escalation the lane is shut for a while: {metrics}");
}

#[test]
fn check_does_not_hang_on_a_hostile_script() {
    let dir = tempfile::tempdir().unwrap();
    for (script, expected) in [
        ("xpcall(error, function(e) while true do end end)\nreturn {}", "xpcall"),
        ("while true do end", "time limit exceeded"),
        ("string.find(('a'):rep(26), ('a?'):rep(26) .. ('a'):rep(26))\nreturn {}", "Lua patterns with `?`"),
    ] {
        let path = write_file(dir.path(), "rules.lua", script);
        let config = write_file(dir.path(), "q.kdl", &format!("rules {{\n    script \"{path}\"\n}}\n"));
        let started = Instant::now();
        let output = quagmire().args(["check", "--config", &config]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{script}: {stderr}");
        assert!(stderr.contains(expected), "{script}: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(10), "{script}: took {:?}", started.elapsed());
    }
}
