//! The page generator as a specification: deterministic pages per (host, path), sizes and links
//! in range, every piece of text escaped.

use super::*;

/// A corpus with hostile markup in it, repeated so that the chain has material.
fn hostile_corpus() -> String {
    let sentences = [
        "The harbor was quiet in the <script>alert(1)</script> morning.",
        "Ships came \"home\" & left again at night.",
        "She wrote letters to the <b>keeper</b> of the light.",
        "Nobody knew why the 'tide' turned so late that year!",
        "Would the winter end before the ships returned?",
    ];
    let mut text = String::new();
    for i in 0..400 {
        text.push_str(sentences[i % sentences.len()]);
        text.push(' ');
    }
    text
}

fn generator(secret: &str) -> Generator {
    let chain = Chain::train(&hostile_corpus(), 2).unwrap();
    let settings = PageSettings { min_bytes: 4096, max_bytes: 12288, min_links: 8, max_links: 15 };
    Generator::new(chain, TrapUrls::new(secret.as_bytes()), settings, secret.as_bytes())
}

fn hrefs(page: &str) -> Vec<&str> {
    page.split("href=\"").skip(1).map(|rest| &rest[..rest.find('"').unwrap()]).collect()
}

#[test]
fn same_url_same_page_and_other_urls_other_pages() {
    let generator = generator("s");
    let page = generator.page("example.org", "/a/b");
    assert_eq!(page, generator.page("example.org", "/a/b"));
    assert_eq!(page, generator.page("EXAMPLE.org:8080", "/a/b"));
    assert_ne!(page, generator.page("example.org", "/a/c"));
    assert_ne!(page, generator.page("example.com", "/a/b"));
    assert_ne!(page, generator.page("example.org", "/a/b?page=2"));
}

#[test]
fn another_secret_gives_other_pages() {
    assert_ne!(generator("s").page("h", "/"), generator("t").page("h", "/"));
}

#[test]
fn pages_stay_within_size_and_link_bounds() {
    let generator = generator("s");
    for i in 0..200 {
        let page = generator.page("example.org", &format!("/page/{i}"));
        assert!((3500..=14000).contains(&page.len()), "{} bytes", page.len());
        let links = hrefs(&page).len();
        assert!((8..=15).contains(&links), "{links} links");
    }
}

#[test]
fn every_link_is_a_trap_url() {
    let generator = generator("s");
    for i in 0..100 {
        let page = generator.page("example.org", &format!("/{i}"));
        for href in hrefs(&page) {
            assert!(generator.trap_urls().is_trap(href), "{href}");
        }
    }
}

#[test]
fn corpus_markup_is_escaped() {
    let generator = generator("s");
    for i in 0..50 {
        let page = generator.page("example.org", &format!("/{i}"));
        assert!(!page.contains("<script"), "{page}");
        assert!(!page.contains("<b>"), "{page}");
        assert!(!page.contains("\"home\""), "{page}");
        assert!(page.contains("&lt;") || page.contains("&amp;") || page.contains("&quot;"));
    }
}

#[test]
fn pages_do_not_name_the_product() {
    let page = generator("s").page("example.org", "/");
    assert!(!page.to_lowercase().contains("quagmire"));
}

#[test]
fn ports_and_ipv6_literals_are_stripped_from_hosts() {
    assert_eq!(site_host("example.org:80"), "example.org");
    assert_eq!(site_host("[::1]:8421"), "[::1]");
    assert_eq!(site_host("example.org"), "example.org");
}

#[test]
fn escaping_covers_every_special_character() {
    let mut out = Vec::new();
    escape::push_escaped(&mut out, "a<b>&\"c'");
    assert_eq!(out, b"a&lt;b&gt;&amp;&quot;c&#39;");
}

#[test]
fn sentences_walked_side_by_side_stay_separate() {
    // The corpus never repeats a word, so neither may a page; every paragraph ends a sentence.
    let generator = generator("s");
    for i in 0..50 {
        let page = generator.page("example.org", &format!("/side/{i}"));
        let paragraphs = page.split("<p>").skip(1).filter_map(|rest| rest.split_once("</p>"));
        for paragraph in paragraphs.filter(|paragraph| !paragraph.0.starts_with("&copy;")) {
            let words: Vec<&str> = paragraph.0.split_whitespace().collect();
            assert!(words.windows(2).all(|pair| pair[0] != pair[1]), "{}", paragraph.0);
            assert!(paragraph.0.ends_with(['.', '!', '?']), "{}", paragraph.0);
        }
    }
}

#[test]
fn a_page_is_appended_after_what_the_buffer_held() {
    let generator = generator("s");
    let mut out = b"already here".to_vec();
    generator.write_page(&mut out, "example.org", "/a/b");
    assert_eq!(&out[..12], b"already here");
    assert_eq!(&out[12..], generator.page("example.org", "/a/b").as_bytes());
}

#[test]
fn written_pages_are_utf8_whatever_the_corpus_script() {
    // The trap sends `write_page`'s bytes as they are, declared UTF-8. Words cut before
    // multi-byte trailing punctuation, escaped, or repeated from the title into the h1 must stay
    // whole characters. Sentences of 80 words run past every cap, so pages cut words such as
    // "straßen…".
    let words = [
        "übermäßig",
        "straßen…",
        "«été»",
        "déjà,",
        "Ελληνικά",
        "<γράφονται>",
        "日本語の、",
        "文章「も」",
        "ёлки…",
        "«зима»",
        "ça&nbsp;",
        "ﬁn‽",
        "naïve…",
        "œuvre»",
        "mañana—",
        "東京。",
    ];
    let starts = ["Über", "Ça", "Ёлки", "Ελλάδα", "Été", "日本"];
    let mut text = String::new();
    for sentence in 0..400 {
        text.push_str(starts[sentence % starts.len()]);
        for word in 0..80 {
            text.push(' ');
            text.push_str(words[(sentence * 7 + word * 3 + word / 5) % words.len()]);
        }
        text.push_str(" fin. ");
    }
    let chain = Chain::train(&text, 2).unwrap();
    let settings = PageSettings { min_bytes: 4096, max_bytes: 12288, min_links: 8, max_links: 15 };
    let generator = Generator::new(chain, TrapUrls::new(b"s"), settings, b"s");
    for i in 0..200 {
        let mut out = Vec::new();
        generator.write_page(&mut out, "example.org", &format!("/utf8/{i}"));
        assert!(std::str::from_utf8(&out).is_ok(), "page {i} is not UTF-8");
    }
}

#[test]
fn pages_far_larger_or_smaller_than_expected_stay_whole() {
    // The page buffer grows by the expected size up front; a page that outgrows it, or a
    // trap URL that lands past its slack, must still come out whole.
    let long_words: String = (0..2048).map(|i| format!("{}{}\n", "w".repeat(300), word_for(i))).collect();
    for (min_bytes, max_bytes) in [(0, 0), (40_000, 40_000)] {
        let chain = Chain::train(&hostile_corpus(), 2).unwrap();
        let settings = PageSettings { min_bytes, max_bytes, min_links: 15, max_links: 15 };
        let urls = TrapUrls::with_words(b"s", &long_words).unwrap();
        let generator = Generator::new(chain, urls, settings, b"s");
        let page = generator.page("example.org", "/x");
        // Whole: it ends as every page of this site ends (the end is the site's look).
        let other = generator.page("example.org", "/y");
        let ending = &other[other.rfind("</a>").unwrap()..];
        let ending = &ending[ending.find('>').unwrap() + 1..];
        assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with(ending), "{min_bytes}: {ending:?}");
        assert!(page.len() >= max_bytes);
        assert_eq!(hrefs(&page).len(), 15);
        for href in hrefs(&page) {
            assert!(generator.trap_urls().is_trap(href), "{href}");
        }
    }
}

/// A distinct lowercase a-z suffix for word `i`.
fn word_for(i: usize) -> String {
    (0..3).map(|digit| (b'a' + (i / 26usize.pow(digit) % 26) as u8) as char).collect()
}

/// The page's `<style>` element.
fn stylesheet(page: &str) -> &str {
    let start = page.find("<style").unwrap();
    &page[start..start + page[start..].find("</style>").unwrap()]
}

#[test]
fn a_site_keeps_its_look_from_page_to_page() {
    let generator = generator("s");
    let first = generator.page("example.org", "/one");
    for path in ["/two", "/three/four", "/five?x=1"] {
        let page = generator.page("example.org", path);
        assert_eq!(stylesheet(&page), stylesheet(&first), "{path}");
        // The same skeleton up to the description (or the title, for a site without one).
        let skeleton = |page: &str| -> String {
            let end = ["<meta content", "<title>"].iter().filter_map(|mark| page.find(mark)).min().unwrap();
            page[..end].to_string()
        };
        assert_eq!(skeleton(&page), skeleton(&first));
    }
}

#[test]
fn deployments_and_sites_each_have_their_own_look() {
    let looks: std::collections::HashSet<String> = (0..20)
        .map(|i| stylesheet(&generator(&format!("secret {i}")).page("example.org", "/")).to_string())
        .collect();
    assert_eq!(looks.len(), 20, "twenty secrets, twenty stylesheets");
    let generator = generator("s");
    assert_ne!(
        stylesheet(&generator.page("example.org", "/")),
        stylesheet(&generator.page("example.com", "/")),
        "two sites of one deployment look different too"
    );
}

#[test]
fn the_stylesheet_styles_classes_the_page_uses() {
    for i in 0..20 {
        let page = generator(&format!("secret {i}")).page("example.org", "/");
        let css = stylesheet(&page);
        let classes: Vec<&str> = css
            .split('.')
            .skip(1)
            .map(|rest| {
                rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')).next().unwrap()
            })
            .filter(|class| class.starts_with(|c: char| c.is_ascii_alphabetic()))
            .collect();
        for class in classes {
            let quoted = page.contains(&format!("class=\"{class}\""));
            assert!(
                quoted || page.contains(&format!("class={class}>")),
                "secret {i}: .{class} styles nothing"
            );
        }
    }
}

#[test]
fn pages_in_a_sites_template_keep_its_markup_and_escape_every_insert() {
    let template = template::Template::parse(
        "<!DOCTYPE html><html><head><title>{{title}} | Harbour Notes</title>\
         <link rel=\"stylesheet\" href=\"/site.css\"></head><body><header id=\"top\">Harbour Notes\
         <nav>{{nav}}</nav></header><main><h1>{{heading}}</h1>{{content}}</main>\
         <aside><h2>Read on</h2>{{links}}</aside><footer>Harbour Notes, since 1987</footer></body></html>",
    )
    .unwrap();
    let generator = generator("s").with_template(template);
    for i in 0..50 {
        let page = generator.page("example.org", &format!("/t/{i}"));
        assert_eq!(page, generator.page("example.org", &format!("/t/{i}")), "deterministic");
        assert!(page.starts_with("<!DOCTYPE html><html><head><title>"));
        assert!(page.contains("<link rel=\"stylesheet\" href=\"/site.css\">"));
        assert!(page.ends_with("<footer>Harbour Notes, since 1987</footer></body></html>"));
        // The title's heading is the page's h1.
        let title = &page[page.find("<title>").unwrap() + 7..page.find(" | Harbour").unwrap()];
        assert!(page.contains(&format!("<h1>{title}</h1>")), "{title}");
        // The hostile corpus is escaped wherever it lands.
        assert!(!page.contains("<script>") && !page.contains("<b>"), "{page}");
        let links = hrefs(&page);
        assert!((8..=15).contains(&(links.len() - 1)), "{} links", links.len());
        for href in links.iter().filter(|href| **href != "/site.css") {
            assert!(generator.trap_urls().is_trap(href), "{href}");
        }
        assert!((3000..=14000).contains(&page.len()), "{} bytes", page.len());
    }
}
