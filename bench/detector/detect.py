#!/usr/bin/env python3
"""How easily does a classifier tell quagmire's trap pages from real web pages? (issue 43)

Trap pages come from `quagmire generate` for several deployments (secrets), each walking its own
links; real pages from trafilatura's evaluation set (tests/eval, tests/cache). Two logistic
regressions, each scored by ROC AUC under grouped 5-fold cross-validation (no site and no
deployment on both sides of a split): one on markup alone (start tags with their attribute
names, 1-3-grams, text and attribute values removed), one on the extracted text (character
n-grams and stylometric ratios). See bench/detector/README.md.
"""
import argparse, datetime, hashlib, io, itertools, json, math, os, random, re, subprocess, sys
import tarfile
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import make_pipeline, make_union
from sklearn.preprocessing import StandardScaler

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TRAFILATURA_COMMIT = "e90b0ef51ab026fdb905fb6c5b3c84dd3d784fd5"
SKIP = {"script", "style", "noscript", "template", "head", "svg", "math"}
BLOCK = set("p div br li h1 h2 h3 h4 h5 h6 tr section article header footer nav aside main "
            "blockquote pre ul ol".split())
FUNCTION_WORDS = ("the of and to a in that is was he for it with as his on be at by i this had "
                  "not are but from or have an they which you were her all she there would their "
                  "we him been has when who will more no if out so said what up its about into "
                  "than them can only other new some could time these two may then do first any "
                  "my now such like our over me even most made after also did many before must "
                  "through your should because each just those people how very").split()
PUNCT = ",;:!?\"'()-\u2013\u2014\u2019\u201c"
SITE_WORDS = ("cycle river garden north harbor maple stone paper signal copper quiet atlas field "
              "lantern orchard summit cedar meadow bridge falcon").split()


class Scan(HTMLParser):
    """One pass over a page: its markup tokens (tag[attribute,names] as written, `tag/` when
    self-closed, `!--` for a comment, `!doctype`) and its visible text (outside script, style,
    head and the like)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tokens, self.text, self.skip = [], [], 0

    def handle_starttag(self, tag, attrs, suffix=""):
        if tag == "body":  # a head left open ends here
            self.skip = 0
        names = ",".join(name for name, _ in attrs)
        self.tokens.append(f"{tag}[{names}]{suffix}" if names else tag + suffix)
        if tag in SKIP and not suffix:
            self.skip += 1
        elif tag in BLOCK:
            self.text.append("\n")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs, "/")

    def handle_endtag(self, tag):
        if tag in SKIP and self.skip:
            self.skip -= 1
        elif tag in BLOCK:
            self.text.append("\n")

    def handle_comment(self, data):
        self.tokens.append("!--")

    def handle_decl(self, decl):
        self.tokens.append("!" + (decl.split() or ["decl"])[0].lower())

    def handle_data(self, data):
        if not self.skip:
            self.text.append(data)


def scan(html):
    """Markup tokens (space-joined) and visible text of one page."""
    s = Scan()
    try:
        s.feed(html)
        s.close()
    except Exception:  # html.parser gives up on a few broken pages; keep what it read
        pass
    text = re.sub(r"[ \t\r\f\v]+", " ", "".join(s.text))
    return " ".join(s.tokens), re.sub(r"\s*\n\s*", "\n", text).strip()


def generate(binary, secret, host, path, config, file):
    """One page from `quagmire generate`, kept in FILE (the cache) for later runs."""
    if not file.exists():
        cmd = [str(binary), "generate", path, "--host", host]
        cmd += ["--config", str(config)] if config else []
        env = dict(os.environ, QUAGMIRE_SECRET=secret, RUST_LOG="warn")
        out = subprocess.run(cmd, env=env, capture_output=True, check=True).stdout
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(out)
    return file.read_text("utf-8", "replace")


def trap_pages(binary, deployments, per_deployment, seed, template, cache):
    """Trap pages of DEPLOYMENTS deployments (a secret and a host each), each walking from /
    to a random page among the links it has seen so far. Cached by the binary's size and
    mtime, the template, the secret, the host and the path."""
    st, config = binary.stat(), None
    stamp = f"{st.st_size}:{st.st_mtime_ns}:"
    if template:
        config = cache / "template.kdl"
        config.write_text("trap {\n    template %s\n}\n" % json.dumps(str(Path(template).resolve())))
        stamp += hashlib.sha256(Path(template).read_bytes()).hexdigest()
    pages, rng = [], random.Random(seed)
    for d in range(deployments):
        secret = hashlib.sha256(f"quagmire detector {seed} {d}".encode()).hexdigest()
        words = rng.choice(SITE_WORDS), rng.choice(SITE_WORDS), rng.choice(["com", "org", "net"])
        host = "{}-{}.example.{}".format(*words)
        frontier, seen, made = ["/"], set(), 0
        while frontier and made < per_deployment:
            path = frontier.pop(rng.randrange(len(frontier)))
            if path in seen:
                continue
            seen.add(path)
            key = hashlib.sha256(f"{stamp}|{secret}|{host}|{path}".encode()).hexdigest()
            html = generate(binary, secret, host, path, config, cache / "trap" / key[:2] / f"{key}.html")
            frontier += [unescape(h) for h in re.findall(r'href="(/[^"]*)"', html) if h not in seen]
            made += 1
            pages.append({"html": html, "group": f"deployment-{d}", "label": 1, "name": host + path})
        print(f"  deployment {d + 1}/{deployments}: {host}", file=sys.stderr)
    return pages


def site_of(url):
    """Host of a page's URL without www., looking through web.archive.org."""
    m = re.search(r"web\.archive\.org/web/[^/]+/(.+)", url or "")
    return (urlsplit(m.group(1) if m else url or "").hostname or "").removeprefix("www.")


def unpack_real(source, commit, cache):
    """trafilatura's tests/eval, tests/cache and tests/evaldata.json at COMMIT, taken with git
    archive from the clone SOURCE into the cache once; returns their folder."""
    dest = cache / f"trafilatura-{commit[:12]}"
    if not (dest / "tests" / "evaldata.json").exists():
        if not source:
            sys.exit(f"no real pages in {dest}: pass --trafilatura CLONE (see README.md)")
        tar = subprocess.run(["git", "-C", source, "archive", commit, "tests/eval", "tests/cache",
                              "tests/evaldata.json"], capture_output=True, check=True).stdout
        tarfile.open(fileobj=io.BytesIO(tar)).extractall(dest, filter="data")
    return dest


def real_pages(dest, real_dir):
    """Real pages, one by one, each with its site: those unpacked in DEST, sites from the URLs
    of tests/evaldata.json, else the page's canonical or og:url link, else the file name. Or
    every .html under REAL_DIR, one group per file (a site's own pages, for a template run)."""
    if real_dir:
        for f in sorted(Path(real_dir).rglob("*.htm*")):
            yield {"html": f.read_bytes().decode("utf-8", "replace"), "group": str(f), "label": 0,
                   "name": str(f)}
        return
    urls = {v["file"]: u for u, v in json.loads((dest / "tests/evaldata.json").read_text()).items()}
    seen = set()
    for f in sorted((dest / "tests").glob("*/*.htm*")):
        raw = f.read_bytes()
        if hashlib.sha1(raw).digest() in seen:
            continue
        seen.add(hashlib.sha1(raw).digest())
        html = raw.decode("utf-8", "replace")
        site = site_of(urls.get(f.name, ""))
        if not site:
            m = (re.search(r'<link[^>]+rel=["\']?canonical[^>]+href=["\']([^"\']+)', html)
                 or re.search(r'property=["\']og:url["\'][^>]+content=["\']([^"\']+)', html))
            site = site_of(m.group(1)) if m else ""
        if not site:
            m = re.match(r"((?:[\w-]+\.)+[a-z]{2,})[-.]", f.name.lower())
            site = m.group(1).removeprefix("www.") if m else f.name
        yield {"html": html, "group": site, "label": 0, "name": f"{f.parent.name}/{f.name}"}


def extract_text(html, visible, extractor):
    """The page's text as a training-data pipeline keeps it: trafilatura's main-text extraction
    (empty when it finds none), or all visible text (html.parser)."""
    if extractor == "trafilatura":
        import trafilatura
        return trafilatura.extract(html) or ""
    return visible


def english(text):
    """Share of the words that are common English function words (English prose: 0.3-0.5,
    German or Polish: under 0.1)."""
    words = re.findall(r"[a-z']+", text.lower())
    common = set(FUNCTION_WORDS)
    return sum(w in common for w in words) / max(1, len(words))


class Stylometry(BaseEstimator, TransformerMixin):
    """Length-free style ratios: sentence-length statistics, word length, vocabulary richness,
    capitals, digits, line breaks, punctuation per character and 40 function-word shares."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return np.array([self.features(t) for t in X])

    @staticmethod
    def features(text):
        words = re.findall(r"[A-Za-z\u00c0-\u024f']+", text)
        lower = [w.lower() for w in words]
        nw, nc = max(1, len(words)), max(1, len(text))
        sl = np.array([len(re.findall(r"\w+", s)) for s in re.split(r"(?<=[.!?])\s+|\n+", text)
                       if s.strip()] or [0], dtype=float)
        f = [sl.mean(), sl.std(), np.median(sl), (sl > 40).mean(), (sl < 5).mean(),
             np.mean([len(w) for w in words]) if words else 0,
             len(set(lower[:300])) / max(1, min(300, nw)), sum(w[0].isupper() for w in words) / nw,
             sum(c.isdigit() for c in text) / nc, sum(c.isupper() for c in text) / nc,
             text.count("\n") / nw]
        return f + [text.count(p) / nc for p in PUNCT] + [lower.count(w) / nw for w in FUNCTION_WORDS[:40]]


def markup_model():
    """Logistic regression on tf-idf of start-tag[attribute-names] 1-3-grams."""
    vec = TfidfVectorizer(token_pattern=r"\S+", lowercase=False, ngram_range=(1, 3), min_df=2,
                          sublinear_tf=True, max_features=200000, dtype=np.float32)
    return make_pipeline(vec, LogisticRegression(max_iter=2000, class_weight="balanced"))


def text_model(features="all"):
    """Logistic regression on tf-idf of character 2-4-grams (what the text is about, and its
    vocabulary) plus the scaled stylometry (its rhythm): both, or one (`chars`, `style`)."""
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2, sublinear_tf=True,
                            max_features=100000, dtype=np.float32)
    style = make_pipeline(Stylometry(), StandardScaler())
    used = {"all": make_union(chars, style), "chars": chars, "style": style}[features]
    return make_pipeline(used, LogisticRegression(max_iter=2000, class_weight="balanced"))


def evaluate(make, X, y, groups, k):
    """ROC AUC per grouped fold, their mean and a 95% interval (mean +- 1.96 sd / sqrt(k))."""
    aucs = []
    for train, test in GroupKFold(n_splits=k).split(X, y, groups):
        model = make().fit([X[i] for i in train], y[train])
        aucs.append(float(roc_auc_score(y[test], model.decision_function([X[i] for i in test]))))
    mean, sd = float(np.mean(aucs)), float(np.std(aucs, ddof=1))
    half = 1.96 * sd / math.sqrt(k)
    return {"folds": aucs, "mean": mean, "sd": sd, "ci95": [mean - half, min(1.0, mean + half)]}


def top_markup(X, y, n=15):
    """The N markup n-grams that weigh most towards 'trap' in a model fitted on all pages, with
    the share of trap and of real pages that contain each."""
    model = markup_model().fit(X, y)
    vec, lr = model.steps[0][1], model.steps[1][1]
    names, coef, present = vec.get_feature_names_out(), lr.coef_[0], vec.transform(X) > 0
    out = []
    for i in np.argsort(-coef)[:n]:
        col = present[:, i].toarray().ravel()
        out.append({"feature": names[i], "weight": float(coef[i]),
                    "trap_share": float(col[y == 1].mean()), "real_share": float(col[y == 0].mean())})
    return out


def git_head():
    """The quagmire commit measured (short hash; '+dirty' when src/ has local changes)."""
    def git(*args):
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()
    return git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain", "--", "src") else "")


def main():
    release = ROOT / "target/release/quagmire"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quagmire", type=Path, default=release if release.exists() else ROOT / "target/debug/quagmire")
    ap.add_argument("--deployments", type=int, default=20)
    ap.add_argument("--pages", type=int, default=30, help="trap pages per deployment")
    ap.add_argument("--seed", type=int, default=1, help="draws the secrets, hosts and walks")
    ap.add_argument("--template", help="every deployment with trap { template FILE }")
    ap.add_argument("--trafilatura", help="a clone (or bare git dir) of github.com/adbar/trafilatura")
    ap.add_argument("--commit", default=TRAFILATURA_COMMIT, help="the trafilatura commit to read")
    ap.add_argument("--real-dir", help="real pages from this folder instead (e.g. the template's site)")
    ap.add_argument("--all-languages", action="store_true", help="keep the non-English real pages")
    ap.add_argument("--extractor", choices=["trafilatura", "visible"], default="trafilatura")
    ap.add_argument("--min-words", type=int, default=50, help="drop pages with less text")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--text-features", choices=["all", "chars", "style"], default="all",
                    help="the text classifier's features: character n-grams, stylometry, or both")
    ap.add_argument("--cache", type=Path, default=HERE / ".cache")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    a.cache.mkdir(parents=True, exist_ok=True)

    dest = None if a.real_dir else unpack_real(a.trafilatura, a.commit, a.cache)
    print(f"trap pages: {a.deployments} deployments x {a.pages} ({a.quagmire})", file=sys.stderr)
    traps = trap_pages(a.quagmire, a.deployments, a.pages, a.seed, a.template, a.cache)
    print(f"reading the real pages, extracting text ({a.extractor})", file=sys.stderr)
    kept, dropped = [], {"trap_short": 0, "real_short": 0, "real_not_english": 0}
    for p in itertools.chain(traps, real_pages(dest, a.real_dir)):
        p["markup"], visible = scan(p["html"])
        p["text"] = extract_text(p.pop("html"), visible, a.extractor)
        if len(p["text"].split()) < a.min_words:
            dropped["trap_short" if p["label"] else "real_short"] += 1
        elif p["label"] == 0 and not a.all_languages and english(p["text"]) < 0.2:
            dropped["real_not_english"] += 1
        else:
            kept.append(p)
    y, groups = np.array([p["label"] for p in kept]), np.array([p["group"] for p in kept])
    sites = len(set(groups[y == 0]))
    print(f"kept {y.sum()} trap and {(y == 0).sum()} real pages ({sites} sites); dropped {dropped}", file=sys.stderr)

    results = {}
    for name, make in (("markup", markup_model), ("text", lambda: text_model(a.text_features))):
        print(f"cross-validating {name}", file=sys.stderr)
        results[name] = evaluate(make, [p[name] for p in kept], y, groups, a.folds)
    top = top_markup([p["markup"] for p in kept], y)

    print(f"\n{'classifier':<10} {'AUC per fold':<36} {'mean':>6}  95% CI")
    for name, r in results.items():
        folds = " ".join(f"{v:.3f}" for v in r["folds"])
        print(f"{name:<10} {folds:<36} {r['mean']:6.3f}  [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]")
    print("\nmarkup features weighing most towards 'trap' (weight, share of trap / real pages with it)")
    for t in top:
        print(f"  {t['weight']:5.2f}  {t['trap_share']:4.0%} / {t['real_share']:4.0%}  {t['feature']}")
    if a.json:
        out = {"date": datetime.date.today().isoformat(), "quagmire_commit": git_head(),
               "binary": str(a.quagmire), "template": a.template, "seed": a.seed,
               "deployments": a.deployments, "pages_per_deployment": a.pages,
               "real_source": a.real_dir or f"github.com/adbar/trafilatura@{a.commit} tests/eval tests/cache",
               "extractor": a.extractor, "text_features": a.text_features, "english_only": not a.all_languages, "min_words": a.min_words,
               "trap_pages": int(y.sum()), "real_pages": int((y == 0).sum()), "real_sites": sites,
               "dropped": dropped, "folds": a.folds, "results": results, "top_markup_features": top}
        Path(a.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
