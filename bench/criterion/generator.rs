//! Trap page generation speed on one core: an 8 KB page from the embedded corpus.
//!
//! `cargo bench --bench generator` reports time per page and MB/s; pages/s is 1 / time.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use quagmire::Chain;
use quagmire::TrapUrls;
use quagmire::{Generator, PageSettings};

fn generator(bytes: usize) -> Generator {
    let chain = Chain::train(&quagmire::embedded_corpus(), 2).expect("the embedded corpus trains");
    let settings = PageSettings { min_bytes: bytes, max_bytes: bytes, min_links: 8, max_links: 15 };
    Generator::new(chain, TrapUrls::new(b"bench secret"), settings, b"bench secret")
}

fn pages(c: &mut Criterion) {
    let generator = generator(8192);
    let sample = generator.page("example.org", "/sample");
    let mut group = c.benchmark_group("page");
    group.throughput(Throughput::Bytes(sample.len() as u64));
    let mut out = Vec::with_capacity(16 * 1024);
    // Two URLs over and over: the pages' share of the model stays in cache (the best case).
    let mut n = 0u64;
    group.bench_function("8KB_same_two_urls", |b| {
        b.iter(|| {
            n += 1;
            out.clear();
            let path =
                if n.is_multiple_of(2) { "/archive/2019/05/quiet-harbor" } else { "/blog/letters-home" };
            generator.write_page(&mut out, black_box("example.org"), black_box(path));
            black_box(out.len())
        })
    });
    // A new URL every time, as a crawler walking the trap asks: the walk misses the cache.
    let mut path = String::with_capacity(64);
    group.bench_function("8KB_new_url_each_time", |b| {
        b.iter(|| {
            n += 1;
            out.clear();
            path.clear();
            path.push_str("/archive/page-");
            path.push_str(itoa(n, &mut [0; 20]));
            generator.write_page(&mut out, black_box("example.org"), black_box(&path));
            black_box(out.len())
        })
    });
    group.finish();

    c.bench_function("trap_url/is_trap", |b| {
        let urls = generator.trap_urls();
        b.iter(|| urls.is_trap(black_box("/archive/2019/05/quiet-harbor-letters-winter-garden")))
    });
}

fn training(c: &mut Criterion) {
    let text = quagmire::embedded_corpus();
    let mut group = c.benchmark_group("startup");
    group.sample_size(10);
    group.bench_function("train_embedded_corpus", |b| b.iter(|| Chain::train(black_box(&text), 2).unwrap()));
    group.bench_function("decompress_embedded_corpus", |b| b.iter(quagmire::embedded_corpus));
    group.finish();
}

criterion_group!(benches, pages, training);
criterion_main!(benches);

/// Formats `n` without allocating, so the measured loop allocates nothing itself.
fn itoa(mut n: u64, buffer: &mut [u8; 20]) -> &str {
    let mut start = buffer.len();
    loop {
        start -= 1;
        buffer[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buffer[start..]).expect("digits are ASCII")
}
