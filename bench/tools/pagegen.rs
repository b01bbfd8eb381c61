//! Generates many trap pages in a loop, for profiling the generator (`perf record`).
//!
//! Usage: `pagegen [PAGES]` (default 20000); prints the bytes generated.

use quagmire::Chain;
use quagmire::TrapUrls;
use quagmire::{Generator, PageSettings};

fn main() {
    let pages: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(20_000);
    let text = match std::env::var("PAGEGEN_CORPUS") {
        Ok(path) => std::fs::read_to_string(path).expect("corpus file"),
        Err(_) => quagmire::embedded_corpus(),
    };
    let chain = Chain::train(&text, 2).expect("the embedded corpus trains");
    let settings = PageSettings { min_bytes: 8192, max_bytes: 8192, min_links: 8, max_links: 15 };
    let generator = Generator::new(chain, TrapUrls::new(b"profile"), settings, b"profile");
    let mut out = Vec::with_capacity(16 * 1024);
    let mut total = 0;
    let mut path = String::new();
    let started = std::time::Instant::now();
    for i in 0..pages {
        out.clear();
        path.clear();
        path.push_str("/page/");
        path.push_str(&i.to_string());
        generator.write_page(&mut out, "example.org", &path);
        total += out.len();
    }
    let elapsed = started.elapsed();
    eprintln!(
        "{pages} pages, {total} bytes in {elapsed:?}: {:.1} µs/page",
        elapsed.as_secs_f64() * 1e6 / pages as f64
    );
}
