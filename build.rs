//! Embeds the default corpus compressed: every `corpus/*.txt` except the URL word list, in name
//! order, joined by blank lines and gzipped into `$OUT_DIR/corpus.txt.gz`.

use std::io::Write;
use std::path::Path;
use std::{env, fs};

fn main() {
    println!("cargo::rerun-if-changed=corpus");
    let mut files: Vec<_> = fs::read_dir("corpus")
        .expect("corpus/ exists")
        .map(|entry| entry.expect("corpus/ is readable").path())
        .filter(|path| {
            path.extension().is_some_and(|ext| ext == "txt")
                && path.file_name().is_some_and(|name| name != "url-words.txt")
        })
        .collect();
    files.sort();
    let out = Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("corpus.txt.gz");
    let mut encoder = flate2::write::GzEncoder::new(
        fs::File::create(&out).expect("OUT_DIR is writable"),
        flate2::Compression::best(),
    );
    for file in &files {
        println!("cargo::rerun-if-changed={}", file.display());
        encoder.write_all(&fs::read(file).expect("corpus file is readable")).expect("gzip write");
        encoder.write_all(b"\n\n").expect("gzip write");
    }
    encoder.finish().expect("gzip finish");
}
