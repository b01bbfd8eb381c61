//! The one integration-test binary: the real `quagmire` binary, started on ephemeral ports, where
//! a process matters (CLI, signals, sockets, proxies, several processes); elsewhere the routers
//! called in process (`support::app` and `support::call`, through `tower::ServiceExt::oneshot`).
//!
//! - `support`: starting the server, calling the routers in process, a small HTTP client, page
//!   helpers, and the report of tests that did not run for a missing tool;
//! - `trap`: trap pages over HTTP: determinism across processes, links, escaping, Traefik's
//!   `url=` form, methods and headers, the slow drip;
//! - `verdict`: forward-auth requests as Traefik, Caddy and nginx send them: every answer mode,
//!   trusted proxies, the trap-hit feedback loop, IPv6 /64s, shadow mode, rule limits, reload;
//! - `dashboard`: every dashboard query against a real Prometheus, alert rules through promtool,
//!   the dashboard JSON through `tsc --strict` with `@grafana/schema`;
//! - `metrics`: `/metrics` after traffic (checked by `promtool`), `/api/trapped`;
//! - `proxies`: the shipped proxy configs with the real nginx, Caddy, ... in front of quagmire and
//!   a small origin: people reach the site, crawlers the trap, the feedback loop, no forged headers;
//! - `hostile_rules`: rules that get stuck in C, against `/health`, the trap, verdict deadlines
//!   and SIGTERM; `check` on hostile scripts;
//! - `admin`: the admin listener and its bearer token;
//! - `connections`: header-read timeout, connection cap and graceful shutdown (verdicts in flight,
//!   a page dripping) with real sockets;
//! - `crawlers`: crawler claims verified by reverse DNS against a real dnsmasq; slow DNS and sprays;
//! - `crowdsec`: quagmire as a bouncer of a real CrowdSec Local API: decisions trapped, deleted,
//!   kept through an outage; `/api/blocklist`, checked by `nft -c`;
//! - `signed`: Web Bot Auth signatures verified against a local key directory server; forgeries,
//!   a directory down or silent, caching;
//! - `cli`: `check` errors that point at line and column, `generate`, `explain`;
//! - `store`: replicas sharing client state through a real Redis and a real Redis Cluster; the
//!   store stopped, hung and restarted under traffic; concurrent trap hits adding up;
//! - `challenge`: the challenge verdict with a real headless Chromium through every shipped proxy
//!   config in both modes: challenged, answered (with and without JavaScript), read on with a
//!   pass; programs trapped; passes forged, shared across networks or walking the trap; the
//!   default config's pace targets for a crawling browser and a reading person;
//! - `pace`: a person's reading pace and a crawler's, from a datacenter address, replayed through
//!   the default rules: the crawler over the request quota within 240 requests, the person never;
//! - `robots`: the site's robots.txt from a real origin through the real Caddy: crawlers that obey
//!   it reach the site, one that ignores it is trapped, a refresh and an origin down; `replay`'s
//!   counts per crawler;
//! - `lists_update`: `lists update` and `serve`'s list refresh against a local server of fixture
//!   list sources: lists written, broken sources keeping the old file, the verdict following.
// Helpers are `pub` so that every test module of this one binary can use them.
#![allow(unreachable_pub)]

mod admin;
mod challenge;
mod cli;
mod connections;
mod crawlers;
mod crowdsec;
mod dashboard;
mod hardening;
mod hostile_rules;
mod lists_update;
mod metrics;
mod pace;
mod proxies;
mod replay;
mod robots;
mod signed;
mod store;
mod support;
mod trap;
mod verdict;
