//! Hostile and careless rule scripts, as a specification: whatever a script does, no request
//! waits much past the time limit, the service keeps answering, and nothing one request does to
//! the Lua state reaches the next.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;

fn rules_with(script: &str, fail: FailMode, limits: Limits) -> Result<Rules, RulesError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.lua");
    std::fs::write(&path, script).unwrap();
    Rules::load(RulesConfig {
        script: Some(path),
        lists: None,
        fail,
        limits,
        workers: 1,
        trap_threshold: 5.0,
        challenge_everyone: false,
        challenge_unanswered: 4,
        preferences: Default::default(),
    })
}

/// The most a stopped evaluation may take: the pool's looks at a stuck job, plus room for a
/// loaded machine.
fn bound(limits: &Limits) -> Duration {
    (limits.time + pool::MARGIN) * 3 + Duration::from_millis(500)
}

#[test]
fn a_message_handler_that_loops_cannot_escape_the_time_limit() {
    // xpcall's handler runs with hooks off when the stop is raised in a hook; the sandbox has
    // no xpcall, so the script fails instead of hanging the worker.
    let script = r#"return {
        { name = "handler", check = function(r) xpcall(error, function(e) while true do end end) end },
        { name = "after", check = function(r) return "allow", "reached" end },
    }"#;
    let rules = rules_with(script, FailMode::Closed, limits()).unwrap();
    for _ in 0..3 {
        let started = Instant::now();
        let decision = rules.evaluate(&Request::browser(CHROME).facts());
        assert!(started.elapsed() < bound(&limits()), "took {:?}", started.elapsed());
        assert_eq!((decision.verdict, &*decision.rule), (Verdict::Trap, "handler"));
    }
    // At the top level of a script, too: a load error, not a hung `check` or reload.
    let started = Instant::now();
    let error = rules_with("xpcall(error, function(e) while true do end end)", FailMode::Open, limits())
        .err()
        .expect("a load error");
    assert!(error.to_string().contains("xpcall"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn backtracking_patterns_are_refused_and_regular_expressions_take_their_place() {
    let script = r#"return {
        { name = "pattern", check = function(r)
            if r.path == "/pattern" then
                return "trap", tostring(string.find(("a"):rep(26), ("a?"):rep(26) .. ("a"):rep(26)))
            end
        end },
        { name = "method", check = function(r)
            if r.path == "/method" then return "trap", tostring((r.user_agent):match(".-Chrome")) end
        end },
        { name = "linear", check = function(r)
            if r.path:find("^/wp%-admin") or r.path:match("%.php$") then return "trap", "probe" end
        end },
        { name = "re", check = function(r)
            local version = re.match(r.user_agent, [[Chrome/(\d+)\.]])
            local from, to = re.find(r.path, [[a+]])
            local huge = re.test(("a"):rep(26), ("a?"):rep(26) .. ("a"):rep(26))
            return "allow", table.concat({ version, from, to, tostring(huge) }, " ")
        end },
    }"#;
    let rules = rules_with(script, FailMode::Open, limits()).unwrap();
    let started = Instant::now();
    let (decision, trace) =
        rules.evaluate_traced(&Request { uri: "/pattern", ..Request::browser(CHROME) }.facts());
    assert!(started.elapsed() < bound(&limits()), "took {:?}", started.elapsed());
    assert!(trace[0].result.contains("Lua patterns with `?` are not available"), "{trace:?}");
    assert_eq!(&*decision.rule, "re");
    let (_, trace) = rules.evaluate_traced(&Request { uri: "/method", ..Request::browser(CHROME) }.facts());
    assert!(trace[1].result.contains("Lua patterns with `-`"), "string methods are guarded too: {trace:?}");
    let decision = rules.evaluate(&Request { uri: "/wp-admin/x.php", ..Request::browser(CHROME) }.facts());
    assert_eq!((&*decision.rule, decision.reason.as_str()), ("linear", "probe"));
    let decision = rules.evaluate(&Request { uri: "/baaad", ..Request::browser(CHROME) }.facts());
    assert_eq!(decision.reason, "120 3 5 true");
}

#[test]
fn what_a_rule_changes_does_not_reach_the_next_request() {
    let script = r#"
        settings = { seen = 0 }
        local upper = string.upper
        return {
            { name = "vandal", check = function(r)
                if r.path ~= "/vandal" then return end
                leaked = "yes"
                _G.also_leaked = "yes"
                pcall(function() string.upper = function() return "hijacked" end end)
                pcall(function() getmetatable("").__index = {} end)
                pcall(function() settings.seen = settings.seen + 1 end)
                pcall(function() table.insert = nil end)
                pcall(function() lists.ai_crawlers = nil end)
                error("vandalised")
            end },
            { name = "witness", check = function(r)
                local clean = string.upper("a") == "A" and ("a"):upper() == "A" and upper("b") == "B"
                    and leaked == nil and also_leaked == nil and settings.seen == 0
                    and table.insert ~= nil and lists.ai_crawlers ~= nil
                if clean then return "allow", "clean" end
                return "trap", "leaked"
            end },
        }"#;
    let rules = rules_with(script, FailMode::Closed, limits()).unwrap();
    let vandal = Request { uri: "/vandal", ..Request::browser(CHROME) }.facts();
    let calm = Request::browser(CHROME).facts();
    for _ in 0..300 {
        assert_eq!(rules.evaluate(&vandal).verdict, Verdict::Trap, "fail closed");
        let decision = rules.evaluate(&calm);
        assert_eq!((decision.verdict, decision.reason.as_str()), (Verdict::Allow, "clean"), "{decision:?}");
    }
}

#[test]
fn globals_written_during_a_request_are_visible_within_it() {
    let script = r#"return {
        { name = "write", check = function(r) note = r.path end },
        { name = "read", check = function(r) return "allow", note end },
    }"#;
    let rules = rules_with(script, FailMode::Closed, limits()).unwrap();
    assert_eq!(rules.evaluate(&Request::browser(CHROME).facts()).reason, "/articles/hello");
}

#[test]
fn a_state_that_ran_out_of_memory_is_rebuilt() {
    let script = r#"
        return {
            { name = "hoarder", check = function(r)
                local hoard = {}
                if r.path == "/fill" then
                    while true do hoard[#hoard + 1] = string.rep("x", 65536) .. #hoard end
                end
                hoard[#hoard + 1] = "one"
                return "allow", tostring(#hoard)
            end },
        }"#;
    // A time limit far above what filling 16 MB takes, even in a debug build on a busy machine,
    // so that the memory limit is what ends the rule.
    let limits = Limits { time: Duration::from_secs(2), ..limits() };
    let rules = rules_with(script, FailMode::Open, limits).unwrap();
    assert_eq!(rules.evaluate(&Request::browser(CHROME).facts()).reason, "1");
    let (_, trace) = rules.evaluate_traced(&Request { uri: "/fill", ..Request::browser(CHROME) }.facts());
    assert!(trace[0].result.contains("memory limit exceeded"), "{trace:?}");
    assert_eq!(rules.evaluate(&Request::browser(CHROME).facts()).reason, "1", "a fresh state");
}

#[test]
fn tables_the_rules_reach_through_locals_are_read_only_nested_and_with_metatables() {
    let script = r#"
        local seen = {}
        local nested = { inner = { deeper = { 1, 2, 3 } } }
        local Counter = {}
        Counter.__index = Counter
        function Counter.total(self) return self.base + #nested.inner.deeper end
        local counter = setmetatable({ base = 10 }, Counter)
        local shielded = setmetatable({}, { __metatable = "mine", __index = function(_, key) return key .. "!" end })
        local function attempt(f) local ok, err = pcall(f); return ok and "wrote" or tostring(err) end
        return {
            { name = "grow", check = function(r)
                if r.path ~= "/grow" then return end
                return "trap", attempt(function() seen[#seen + 1] = r.path end)
            end },
            { name = "nested", check = function(r)
                if r.path ~= "/nested" then return end
                return "trap", attempt(function() table.insert(nested.inner.deeper, 4) end)
            end },
            { name = "metatable", check = function(r)
                if r.path ~= "/metatable" then return end
                return "trap", attempt(function() Counter.extra = true end)
                    .. " " .. attempt(function() counter.base = 11 end)
            end },
            { name = "reads", check = function(r)
                -- Reading works as before: fields, methods through the metatable, length,
                -- pairs, ipairs, a protected metatable and an __index function.
                local keys = 0
                for _ in pairs(nested.inner) do keys = keys + 1 end
                local sum = 0
                for _, n in ipairs(nested.inner.deeper) do sum = sum + n end
                return "allow", table.concat({ counter:total(), #seen, keys, sum,
                    tostring(getmetatable(counter) == Counter), getmetatable(shielded), shielded.x }, " ")
            end },
        }"#;
    let rules = rules_with(script, FailMode::Closed, limits()).unwrap();
    for (path, rule) in [("/grow", "grow"), ("/nested", "nested")] {
        let decision = rules.evaluate(&Request { uri: path, ..Request::browser(CHROME) }.facts());
        assert_eq!(&*decision.rule, rule);
        assert!(decision.reason.contains("rules cannot change this table"), "{decision:?}");
    }
    let decision = rules.evaluate(&Request { uri: "/metatable", ..Request::browser(CHROME) }.facts());
    assert_eq!(decision.reason.matches("rules cannot change this table").count(), 2, "{decision:?}");
    let decision = rules.evaluate(&Request::browser(CHROME).facts());
    assert_eq!(decision.reason, "13 0 1 6 true mine x!", "{decision:?}");
}

#[test]
fn no_way_around_the_seal_pairs_metamethod_keys_getmetatable_or_an_index_function() {
    let script = r#"
        local seen = {}
        local counters = { __n = 0 }
        local Counter = {}
        Counter.__index = Counter
        function Counter.get(self) return self.base end
        local counter = setmetatable({ base = 1 }, Counter)
        local memo = setmetatable({}, { __index = function(t, key) t[key] = key .. "!"; return t[key] end })
        local function attempt(f) local ok, err = pcall(f); return ok and "wrote" or "refused" end
        return {
            { name = "escapes", check = function(r)
                local _, raw = pairs(seen)
                return "allow", table.concat({
                    attempt(function() raw[#raw + 1] = r.path end),
                    attempt(function() counters.__n = counters.__n + 1 end),
                    attempt(function() getmetatable(counter).__index = function() return "hijacked" end end),
                    attempt(function() return memo.x end),
                    -- Objects made during a request still work with the script's classes.
                    tostring(setmetatable({ base = 7 }, Counter):get()),
                    tostring(getmetatable(setmetatable({}, Counter)) == Counter),
                    tostring(#seen), tostring(counters.__n), tostring(counter:get()),
                }, " ")
            end },
        }"#;
    let rules = rules_with(script, FailMode::Closed, limits()).unwrap();
    for _ in 0..3 {
        let decision = rules.evaluate(&Request::browser(CHROME).facts());
        assert_eq!(decision.reason, "refused refused refused refused 7 true 0 0 1", "{decision:?}");
    }
    // A finalizer added to a metatable after it was set would run outside any time limit when a
    // state closes: the script does not load.
    let finalizer = r#"
        local mt = {}
        local object = setmetatable({}, mt)
        mt.__gc = function() while true do end end
        return { { name = "x", check = function(r) return object and nil end } }"#;
    let error = rules_with(finalizer, FailMode::Closed, limits()).err().expect("refused").to_string();
    assert!(error.contains("rules cannot set __gc metamethods"), "{error}");
}

#[test]
fn state_cannot_outlive_a_request_through_a_scripts_locals() {
    // The issue's case: a table that grows across requests, and a rule that fires on every 50th
    // entry, once per worker. Now every request sees the table as the script left it.
    let script = r#"
        local seen = {}
        return {
            { name = "every-50th", check = function(r)
                pcall(function() seen[#seen + 1] = r.path end)
                if #seen > 0 and #seen % 50 == 0 then return "trap", "50th" end
                return "allow", tostring(#seen)
            end },
        }"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.lua");
    std::fs::write(&path, script).unwrap();
    let rules = Rules::load(RulesConfig {
        script: Some(path),
        lists: None,
        fail: FailMode::Closed,
        limits: limits(),
        workers: 2,
        trap_threshold: 5.0,
        challenge_everyone: false,
        challenge_unanswered: 4,
        preferences: Default::default(),
    })
    .unwrap();
    for _ in 0..120 {
        let decision = rules.evaluate(&Request::browser(CHROME).facts());
        assert_eq!((decision.verdict, decision.reason.as_str()), (Verdict::Allow, "0"), "{decision:?}");
    }
    // Assigning an outer local is refused when the script loads, with the variable and line.
    for (script, name) in [
        ("local count = 0\nreturn { { name = 'n', check = function(r)\n count = count + 1\nend } }", "count"),
        (
            "local cache\nlocal function get() cache = cache or {} return cache end\nreturn { { name = 'c', check = function(r) get() end } }",
            "cache",
        ),
        (
            "function helper() total = 1 end\nlocal calls = 0\nfunction counted() calls = calls + 1 end\nreturn { { name = 'g', check = function(r) counted() end } }",
            "calls",
        ),
    ] {
        let error = rules_with(script, FailMode::Closed, limits()).err().expect("refused").to_string();
        assert!(
            error.contains(&format!("a rule assigns `{name}`, a local the script declared outside it")),
            "{error}"
        );
        assert!(error.contains("rules.lua:"), "{error}");
    }
}

#[test]
fn a_timed_out_rule_is_located_at_its_own_line() {
    let script = "return {\n  { name = 'spin', check = function(r)\n    while true do end\n  end },\n}\n";
    let (_, trace) = rules_with(script, FailMode::Open, limits())
        .unwrap()
        .evaluate_traced(&Request::browser(CHROME).facts());
    assert!(trace[0].result.contains("rules.lua:3: time limit exceeded"), "{trace:?}");
}

#[test]
fn the_time_limit_counts_cpu_time_so_an_overloaded_machine_does_not_trip_it() {
    // An eighth of the limit in CPU time, while spinning threads make its wall time longer
    // than the limit.
    let script = r#"return {
        { name = "work", check = function(r)
            local sum = 0
            for i = 1, tonumber(r:header("x-iterations")) do sum = sum + i % 7 end
            return "allow", "done"
        end },
    }"#;
    let limits = Limits { time: Duration::from_millis(40), memory: 16 << 20 };
    let rules = rules_with(script, FailMode::Closed, limits.clone()).unwrap();
    // Calibrate on an idle machine: iterations that take about 5 ms.
    let mut iterations = 10_000u64;
    let with_iterations = |iterations: u64| {
        let mut facts = Request::browser(CHROME).facts();
        let count = iterations.to_string();
        facts.headers = [("x-iterations", count.as_str())].into_iter().collect();
        facts
    };
    loop {
        let facts = with_iterations(iterations);
        let started = Instant::now();
        assert_eq!(rules.evaluate(&facts).reason, "done");
        if started.elapsed() >= Duration::from_millis(5) || iterations > 1 << 30 {
            break;
        }
        iterations *= 2;
    }
    let facts = with_iterations(iterations);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let spinners: Vec<_> = (0..cores * 4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    let mut verdicts = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        verdicts.push(rules.evaluate(&facts));
        slowest = slowest.max(started.elapsed());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for spinner in spinners {
        spinner.join().unwrap();
    }
    for decision in &verdicts {
        assert_eq!(decision.reason, "done", "stopped under load after at most {slowest:?}: {decision:?}");
    }
}

/// Sorting a million numbers is one C call the time limit cannot interrupt. The numbers come
/// from one C call too (the table is the request's own: tables the script made while loading are
/// read-only to rules).
const SORT_SCRIPT: &str = r#"
    local bytes = string.rep("\255\1\128\7", 249000)
    return {
        { name = "sort", check = function(r)
            if r.path == "/sort" then
                local numbers = { string.byte(bytes, 1, -1) }
                -- A C comparator: the sort never returns to Lua, so no hook sees it, and each
                -- comparison is a call, which makes the one C call long enough to be stuck.
                table.sort(numbers, math.ult)
            end
            return "allow", "ok"
        end },
    }"#;

/// Waits up to 30 s for the pool to be back at `workers` active workers and no abandoned ones.
fn wait_for_full_strength(rules: &Rules, workers: usize) -> PoolStats {
    let started = Instant::now();
    loop {
        let stats = rules.pool_stats();
        if (stats.active, stats.abandoned) == (workers, 0) || started.elapsed() > Duration::from_secs(30) {
            return stats;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn abandoning_workers_past_the_cap_leaves_the_pool_at_full_strength_once_they_end() {
    // A limit well above what building the table takes (CPU time, even on a busy machine), so
    // that what the pool abandons is the sort.
    let limits = Limits { time: Duration::from_millis(100), memory: 256 << 20 };
    let rules = rules_with(SORT_SCRIPT, FailMode::Closed, limits).unwrap();
    // One worker, so at most five threads: the sixth stuck request finds no room for a
    // replacement, and the pool is short until a stuck thread ends.
    let sort = Request { uri: "/sort", ..Request::browser(CHROME) }.facts();
    // Past the cap a request may also find no worker free within its wait (the stuck threads
    // still sorting): that is the pool short, which is what this test waits out below.
    for _ in 0..6 {
        let decision = rules.evaluate(&sort);
        assert!(
            decision.reason.contains("did not finish in time")
                || decision.reason.contains("no rule worker was free in time")
                || decision.reason == "ok",
            "{decision:?}"
        );
    }
    let stats = wait_for_full_strength(&rules, 1);
    assert_eq!((stats.active, stats.abandoned), (1, 0), "the pool did not return to strength: {stats:?}");
    assert_eq!(rules.evaluate(&Request::browser(CHROME).facts()).reason, "ok");
}

#[test]
fn a_panicking_evaluation_gets_the_fail_mode_and_leaves_the_pool_at_full_strength() {
    // A generous time limit: the deadlines a caller waits by follow from it, and on a busy
    // machine a worker may wait longer than 50 ms for a core; this test is about the panic.
    let rules = rules_with(
        r#"return { { name = "ok", check = function(r) return "allow", "ok" end } }"#,
        FailMode::Closed,
        Limits { time: Duration::from_secs(2), ..limits() },
    )
    .unwrap();
    for _ in 0..3 {
        rules.pool.panic_next_evaluation();
        let decision = rules.evaluate(&Request::browser(CHROME).facts());
        assert_eq!(decision.verdict, Verdict::Trap, "{decision:?}");
        assert_eq!(decision.failures[0].kind, FailureKind::Panic);
        assert!(decision.reason.contains("the rules panicked"), "{decision:?}");
        assert_eq!(rules.evaluate(&Request::browser(CHROME).facts()).reason, "ok");
        // The worker whose evaluation panicked may still be unwinding, or its replacement
        // starting: wait (bounded) for the pool to be whole again.
        let deadline = Instant::now() + Duration::from_secs(30);
        let whole = || (rules.pool_stats().active, rules.pool_stats().abandoned) == (1, 0);
        while !whole() {
            assert!(Instant::now() < deadline, "{:?}", rules.pool_stats());
            std::thread::yield_now();
        }
    }
}

#[test]
fn a_worker_that_dies_holding_a_request_gets_it_the_fail_mode_and_is_replaced() {
    let rules = rules_with(
        r#"return { { name = "ok", check = function(r) return "allow", "ok" end } }"#,
        FailMode::Closed,
        Limits { time: Duration::from_secs(2), ..limits() },
    )
    .unwrap();
    for death in 1..=3 {
        let started_before = rules.pool.workers_started();
        rules.pool.kill_next_worker();
        // The thread ends with the request in hand: its caller learns at once that no answer
        // comes, and gets the fail mode.
        let decision = rules.evaluate(&Request::browser(CHROME).facts());
        assert_eq!(decision.verdict, Verdict::Trap, "death {death}: {decision:?}");
        assert!(decision.reason.contains("did not finish"), "death {death}: {decision:?}");
        // A new thread takes the dead one's place (the pool has one worker, so it is the one
        // that answers next), and the pool is whole again.
        let deadline = Instant::now() + Duration::from_secs(30);
        while (rules.pool_stats().active, rules.pool.workers_started()) != (1, started_before + 1) {
            assert!(Instant::now() < deadline, "death {death}: not replaced: {:?}", rules.pool_stats());
            std::thread::yield_now();
        }
        assert_eq!(rules.evaluate(&Request::browser(CHROME).facts()).reason, "ok", "death {death}");
        assert_eq!(rules.pool_stats().abandoned, 0, "death {death}");
    }
}

#[test]
fn looping_rules_under_fail_open_share_one_budget() {
    let script = r#"return {
        { name = "spin-1", check = function(r) while true do end end },
        { name = "spin-2", check = function(r) while true do end end },
        { name = "spin-3", check = function(r) while true do end end },
        { name = "spin-4", check = function(r) while true do end end },
        { name = "after", check = function(r) return "trap", "reached" end },
    }"#;
    let rules = rules_with(script, FailMode::Open, limits()).unwrap();
    let decision = rules.evaluate(&Request::browser(CHROME).facts());
    // The first loop spends the request's budget: the others never start.
    assert_eq!(decision.failures.len(), 1, "{decision:?}");
    assert_eq!(decision.failures[0].kind, FailureKind::TimeLimit);
    assert_eq!((decision.verdict, &*decision.rule), (Verdict::Allow, "spin-1"), "{decision:?}");
    assert!(decision.reason.contains("time limit exceeded"), "{decision:?}");
}

#[test]
fn a_failure_is_classified_where_it_happens_not_by_its_text() {
    let script = r#"return {
        { name = "liar", check = function(r) error("time limit exceeded", 0) end },
        { name = "hog", check = function(r) local t = {} while true do t[#t + 1] = ("x"):rep(4096) end end },
    }"#;
    let limits = Limits { time: Duration::from_secs(2), memory: 8 << 20 };
    let decision =
        rules_with(script, FailMode::Open, limits).unwrap().evaluate(&Request::browser(CHROME).facts());
    let kinds: Vec<(&str, FailureKind)> =
        decision.failures.iter().map(|failure| (&*failure.rule, failure.kind)).collect();
    assert_eq!(kinds, [("liar", FailureKind::Error), ("hog", FailureKind::MemoryLimit)], "{decision:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verdict_whose_caller_went_away_is_not_evaluated() {
    let script = r#"return { { name = "slow", check = function(r)
        if r.path == "/slow" then local n = 0; for i = 1, 30000000 do n = n + i end end
        return "allow", "ok"
    end } }"#;
    let rules = Arc::new(
        rules_with(script, FailMode::Closed, Limits { time: Duration::from_secs(20), memory: 16 << 20 })
            .unwrap(),
    );
    let slow = Arc::new(Request { uri: "/slow", ..Request::browser(CHROME) }.facts());
    let busy = tokio::spawn({
        let rules = rules.clone();
        async move { rules.run(slow, RunRules::Inline, false).await.0 }
    });
    // The one worker is busy once it has started the slow request (the inline lane gave it
    // up); this one waits in the queue and its caller gives up, as a proxy that timed out would.
    let deadline = Instant::now() + Duration::from_secs(30);
    while rules.pool.jobs_taken() == 0 {
        assert!(!busy.is_finished(), "the slow request was answered before it reached the worker");
        assert!(Instant::now() < deadline, "no worker started the slow request: {:?}", rules.pool_stats());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let gave_up = tokio::time::timeout(
        Duration::from_millis(30),
        rules.run(Arc::new(Request::browser(CHROME).facts()), RunRules::Worker, false),
    )
    .await;
    assert!(gave_up.is_err(), "the worker was free: the slow rule is not slow enough here");
    assert_eq!(busy.await.unwrap().reason, "ok");
    assert_eq!(
        rules.run(Arc::new(Request::browser(CHROME).facts()), RunRules::Inline, false).await.0.reason,
        "ok"
    );
    assert_eq!(rules.pool_stats().skipped, 1, "the abandoned verdict was evaluated for nobody");
}

#[test]
fn a_stuck_call_into_c_gets_the_fail_mode_and_the_worker_is_replaced() {
    let script = SORT_SCRIPT;
    // A limit well above what building the table takes (CPU time, even on a busy machine), so
    // that what the pool abandons is the sort.
    let limits = Limits { time: Duration::from_millis(100), memory: 256 << 20 };
    let rules = rules_with(script, FailMode::Closed, limits.clone()).unwrap();
    let started = Instant::now();
    let decision = rules.evaluate(&Request { uri: "/sort", ..Request::browser(CHROME) }.facts());
    let took = started.elapsed();
    assert_eq!(decision.verdict, Verdict::Trap, "{decision:?}");
    assert!(decision.reason.contains("did not finish in time"), "{decision:?}");
    // Abandoned once past the CPU allowance, or after STUCK_WALL whatever the CPU time: only a
    // hang goes past the wall time and a second.
    assert!(took < pool::STUCK_WALL + Duration::from_secs(1), "answered after {took:?} ({limits:?})");
    // The next requests are answered by a replacement worker, though the stuck one may still be
    // sorting. The replacement first rebuilds the state (a million-element table), which on a
    // busy machine can take longer than one hand-over wait, so the test allows a few seconds:
    // how fast it is back is a benchmark's figure, not this test's.
    let started = Instant::now();
    let answered = loop {
        let decision = rules.evaluate(&Request::browser(CHROME).facts());
        if decision.reason == "ok" || started.elapsed() > Duration::from_secs(10) {
            break decision;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(answered.reason, "ok", "no worker answered within 10 s: {answered:?}");
}

#[test]
fn rules_see_only_the_sandbox() {
    // Anything new here must be checked for a way past the time limit (a message handler, a
    // coroutine's own hook, a C function that can run long) or past the request (state).
    let compiled = default_rules().current();
    let (globals, strings) = lua::visible_names(&compiled);
    assert_eq!(
        globals,
        [
            "_G",
            "_VERSION",
            "assert",
            "browser",
            "challenge_everyone",
            "challenge_unanswered",
            "error",
            "getmetatable",
            "ipairs",
            "lists",
            "math",
            "next",
            "pairs",
            "pcall",
            "preferences",
            "rawequal",
            "rawget",
            "rawlen",
            "re",
            "select",
            "setmetatable",
            "string",
            "table",
            "tonumber",
            "tostring",
            "trap_threshold",
            "type",
            "utf8",
        ]
    );
    assert_eq!(
        strings,
        [
            "byte", "char", "find", "format", "gmatch", "gsub", "len", "lower", "match", "pack", "packsize",
            "rep", "reverse", "sub", "unpack", "upper",
        ]
    );
}

/// The inline lane (rules on the thread that serves the verdict): what behaves is answered there;
/// what runs over its limits is answered by a worker under the ruleset's limits, as if the lane
/// were not there, and the lane stays shut for a while.
mod inline_lane {
    use super::*;

    /// A rule that takes far longer than the inline lane's CPU time, far less than the
    /// ruleset's, for `/slow`; another that needs more memory than the lane's headroom, for
    /// `/big`.
    const SLOW_AND_BIG: &str = r#"return {
        { name = "slow", check = function(r)
            if r.path == "/slow" then
                local x = 0
                for i = 1, 20000000 do x = x + i end
                return "trap", "counted to " .. x
            end
        end },
        { name = "big", check = function(r)
            if r.path == "/big" then return "trap", "made " .. #string.rep("x", 8 << 20) end
        end },
        { name = "calm", check = function(r) return "allow", "ok" end },
    }"#;

    fn generous() -> Limits {
        Limits { time: Duration::from_secs(5), memory: 64 << 20 }
    }

    #[test]
    fn rules_that_behave_are_answered_on_the_calling_thread() {
        let rules = rules_with(SLOW_AND_BIG, FailMode::Closed, generous()).unwrap();
        for _ in 0..3 {
            let decision = rules.judge_blocking(Arc::new(Request::browser(CHROME).facts()));
            assert_eq!((&*decision.rule, decision.reason.as_str()), ("calm", "ok"));
        }
        assert_eq!(rules.inline_stats(), InlineStats { answered: 3, escalated: 0, passed: 0 });
    }

    #[test]
    fn a_rule_over_the_lanes_time_is_decided_by_a_worker_as_if_the_lane_were_not_there() {
        let rules = rules_with(SLOW_AND_BIG, FailMode::Closed, generous()).unwrap();
        let slow = Request { uri: "/slow", ..Request::browser(CHROME) }.facts();
        let decision = rules.judge_blocking(Arc::new(slow.clone()));
        assert_eq!(decision.reason, "counted to 200000010000000", "{decision:?}");
        assert!(decision.failures.is_empty(), "the worker's evaluation is the answer: {decision:?}");
        // Shut for a while: the next verdicts go straight to a worker, and are answered the same.
        let calm = rules.judge_blocking(Arc::new(Request::browser(CHROME).facts()));
        assert_eq!(calm.reason, "ok");
        assert_eq!(rules.inline_stats(), InlineStats { answered: 0, escalated: 1, passed: 1 });
    }

    #[test]
    fn a_rule_over_the_lanes_memory_is_decided_by_a_worker() {
        let rules = rules_with(SLOW_AND_BIG, FailMode::Closed, generous()).unwrap();
        let decision =
            rules.judge_blocking(Arc::new(Request { uri: "/big", ..Request::browser(CHROME) }.facts()));
        assert_eq!(decision.reason, format!("made {}", 8 << 20), "{decision:?}");
        assert_eq!(rules.inline_stats().escalated, 1);
    }

    #[test]
    fn a_rule_over_the_rulesets_own_limit_gets_the_fail_mode_from_the_worker() {
        let limits = Limits { time: Duration::from_millis(30), memory: 64 << 20 };
        let rules = rules_with(SLOW_AND_BIG, FailMode::Closed, limits).unwrap();
        let decision =
            rules.judge_blocking(Arc::new(Request { uri: "/slow", ..Request::browser(CHROME) }.facts()));
        assert_eq!(decision.verdict, Verdict::Trap);
        assert_eq!(decision.failures[0].kind, FailureKind::TimeLimit, "{decision:?}");
        assert_eq!(rules.inline_stats().escalated, 1);
    }

    #[test]
    fn a_script_too_slow_to_load_on_a_thread_that_serves_http_is_judged_by_the_workers() {
        // About a tenth of a second to load: within ten times its time limit, far past the
        // inline lane's.
        let script = r#"
            local x = 0
            for i = 1, 15000000 do x = x + i end
            return { { name = "calm", check = function(r) return "allow", "ok" end } }"#;
        let limits = Limits { time: Duration::from_secs(1), memory: 64 << 20 };
        let rules = rules_with(script, FailMode::Closed, limits).unwrap();
        for _ in 0..2 {
            // Straight to a worker each time: not built again, and no lane shut for it.
            assert_eq!(rules.judge_blocking(Arc::new(Request::browser(CHROME).facts())).reason, "ok");
        }
        assert_eq!(rules.inline_stats(), InlineStats { answered: 0, escalated: 0, passed: 2 });
    }
}
