#!/usr/bin/env python3
"""Build the public-domain prose corpus used by the Markov page generator.

Reads only files installed by these Debian packages:

  bible-kjv, bible-kjv-text   King James Bible (via the `bible` program)
  dict-devil                  Ambrose Bierce, The Devil's Dictionary
  dict-jargon                 The Jargon File 4.4.7
  wamerican                   /usr/share/dict/american-english (url-words only)

and writes, into the output directory (default: the folder of this script):

  kjv.txt, devils-dictionary.txt, jargon.txt, url-words.txt

The output is deterministic: running it twice gives byte-identical files.
Usage: python3 build_corpus.py [OUT_DIR]
"""

import collections
import gzip
import os
import re
import subprocess
import sys
import unicodedata

DICTD = "/usr/share/dictd"
WORDLIST = "/usr/share/dict/american-english"

# ---------------------------------------------------------------------------
# Shared paragraph cleaning and filtering
# ---------------------------------------------------------------------------

# Substrings that make a paragraph unusable (checked case-insensitively).
FORBIDDEN = ["{", "}", "<", ">", "[", "]", "|", "\\", "@", "#", "http",
             "www.", "javascript", "lorem ipsum", "cookie", "terms of use",
             "privacy policy", "..."]

# Words and phrases from the usual web "bad words" blocklists (C4 drops any
# page containing one).  A paragraph containing one of these is dropped, so
# generated pages never carry them.  Whole-word, case-insensitive.
BAD_WORDS = """
anal anus arse arsehole ass asshole bastard bastardo bastinado bitch bitches
bollocks bondage boner boob boobs bullshit butt butthole cialis clit clitoris
cock cocks coon coons crap cum cumming cunt dick dildo domination dominatrix
ejaculation erotic erotism escort eunuch eunuchs fag faggot fecal fellatio
fetish fuck fucked fucker fucking genitals horny hooker humping incest
intercourse jizz kinky lolita lovemaking masturbate masturbating masturbation
negro nigger nipple nipples nude nudity nympho orgasm orgy pedophile penis
piss pissed pissing pisseth playboy poof porn porno pornography pubes pussy
quim rape raping rapist rectum sadism scat schlong semen sex sexual sexually
sexuality sexy shit shitty slut smut snatch sodomy spastic spic spunk
strappado suck sucks swastika tit tits titties titty topless tosser twat
undressing vagina viagra voyeur vulva wank whore whores xxx
""".split()
BAD_PHRASES = ["date rape", "deep throat", "how to kill", "how to murder",
               "tied up", "taste my", "jerk off", "jack off", "blow job",
               "big black", "huge fat", "tongue in a", "make me come",
               "spread legs", "tight white", "hot chick", "strip club",
               "menage a trois", "wet dream", "white power"]
BAD_RE = re.compile(r"\b(?:%s)\b" % "|".join(
    [re.escape(w) for w in BAD_WORDS] +
    [re.escape(p).replace(r"\ ", r"\s+") for p in BAD_PHRASES]), re.I)

ASCII_MAP = {
    "\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'",
    "\u00b4": "'", "\u2014": " -- ", "\u2013": "-", "\u00a0": " ",
    "\u00ad": "", "\u2212": "-",
}

SENT_END_RE = re.compile(r"[.!?][\"')]*(?=\s|$)")
WORD_RE = re.compile(r"\S+")


def to_ascii(s):
    """Map typographic characters to ASCII; return None if impossible."""
    for k, v in ASCII_MAP.items():
        s = s.replace(k, v)
    s = unicodedata.normalize("NFKD", s)
    s = "".join(c for c in s if not unicodedata.combining(c))
    if any(ord(c) > 126 or (ord(c) < 32 and c != "\n") for c in s):
        return None
    return s


def norm_ws(s):
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r" ([,;:.!?])", r"\1", s)
    return s


def n_sentences(p):
    return len(SENT_END_RE.findall(p))


def n_words(p):
    return len(WORD_RE.findall(p))


def ends_well(p):
    return re.search(r"[.!?]\"?$", p) is not None


def acceptable(p, min_words=15):
    """The paragraph-level rules every output paragraph must satisfy."""
    low = p.lower()
    if any(f in low for f in FORBIDDEN):
        return False
    if BAD_RE.search(p):
        return False
    if n_sentences(p) < 2 or n_words(p) < min_words:
        return False
    if not ends_well(p):
        return False
    if not re.match(r"[A-Z\"'(]", p):
        return False
    # Must be ordinary printable ASCII text.
    if any(ord(c) < 32 or ord(c) > 126 for c in p):
        return False
    return True


def write_paragraphs(path, paras):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n\n".join(paras) + "\n")


# ---------------------------------------------------------------------------
# King James Bible
# ---------------------------------------------------------------------------

# Abbreviations as printed by `bible -f`, in canonical order.  Narrative and
# wisdom books only: long runs of genealogies and poetry are avoided.
KJV_BOOKS = ["Ge", "Exo", "Deu", "Josh", "Jdgs", "Ruth", "1Sm", "2Sm", "1Ki",
             "2Ki", "Est", "Prv", "Eccl", "Dan", "Jonah", "Mat", "Mark",
             "Luke", "John", "Acts"]


def kjv_verses():
    out = subprocess.run(
        ["bible", "-f", "-p", "/usr/lib", "Gen1:1-Rev22:21"],
        check=True, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
    ).stdout.decode("ascii")
    verses = []
    for line in out.splitlines():
        m = re.match(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$", line)
        if not m:
            continue
        verses.append((m.group(1), int(m.group(2)), int(m.group(3)),
                       norm_ws(m.group(4))))
    if len(verses) != 31102:
        sys.exit("unexpected verse count %d from bible" % len(verses))
    return verses


def name_heavy(p, lowercase_words):
    """True for genealogies and lists of cities: too many capitalised words
    that are not ordinary English words (i.e. proper names)."""
    toks = re.findall(r"[A-Za-z]+", p)
    names = sum(1 for t in toks if t[0].isupper() and t != "I" and
                t.lower() not in lowercase_words)
    return names > 0.15 * len(toks)


def build_kjv(lowercase_words):
    by_chapter = collections.OrderedDict()
    for book, ch, vs, text in kjv_verses():
        if book in KJV_BOOKS:
            by_chapter.setdefault((book, ch), []).append(text)
    paras = []
    for ci, ((book, ch), verses) in enumerate(by_chapter.items()):
        chunks, cur = [], []
        for v in verses:
            cur.append(v)
            # Deterministic target size of 3 to 6 verses per paragraph.
            target = 3 + (ci * 7 + len(chunks) * 3) % 4
            if len(cur) >= target and ends_well(v):
                chunks.append(cur)
                cur = []
        if cur:
            if chunks and (len(cur) < 3 or not ends_well(cur[-1])):
                chunks[-1].extend(cur)
            else:
                chunks.append(cur)
        for c in chunks:
            p = norm_ws(" ".join(c))
            if acceptable(p) and not name_heavy(p, lowercase_words):
                paras.append(p)
    return paras


# ---------------------------------------------------------------------------
# dictd databases
# ---------------------------------------------------------------------------

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64(s):
    n = 0
    for c in s:
        n = n * 64 + B64.index(c)
    return n


def dict_entries(name):
    """Unique (headword, text) entries of a dictd database, in file order."""
    with gzip.open(os.path.join(DICTD, name + ".dict.dz")) as f:
        data = f.read()
    seen, out = set(), []
    rows = []
    with open(os.path.join(DICTD, name + ".index"), encoding="utf-8") as f:
        for line in f:
            hw, off, ln = line.rstrip("\n").split("\t")
            rows.append((b64(off), b64(ln), hw))
    for off, ln, hw in sorted(rows):
        if (off, ln) in seen:
            continue
        seen.add((off, ln))
        out.append((hw, data[off:off + ln].decode("utf-8")))
    return out


def blocks(text):
    """Split text into blocks of non-blank lines (keeping indentation)."""
    out, cur = [], []
    for line in text.split("\n"):
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def indent(line):
    return len(line) - len(line.lstrip(" "))


def lc_first(s, lowercase_words):
    """Lower-case the first word of s if it is an ordinary word."""
    m = re.match(r"([\"'(]*)([A-Za-z]+)(.*)$", s, re.S)
    if not m:
        return s
    q, w, rest = m.groups()
    if w == "I" or w.isupper() and len(w) > 1:
        return s
    if w.lower() in lowercase_words:
        return q + w.lower() + rest
    return s


def cap_first(s):
    return s[:1].upper() + s[1:]


# ---------------------------------------------------------------------------
# The Devil's Dictionary
# ---------------------------------------------------------------------------

# "ABASEMENT, n.  A decent ...", "BABE or BABY, n.  ...", "WHITE, adj. and n."
DEVIL_HEAD_RE = re.compile(
    r"^(?P<head>[A-Z][A-Z'. -]*[A-Z]'?(?:(?:, | or )[A-Z][A-Z'. -]*[A-Z])*"
    r"(?: \(or [A-Z]+\) [A-Z]+)?),? ?"
    r"(?P<pos>(?:n\.pl|n|adj|v\.t|v\.i|v|adv|pro|pron|pp|p\.p|x)\."
    r"(?: and n\.)?)"
    r"\s*(?:\[Latin\])?\s*(?P<rest>.*)$", re.S)
# Entries without a part of speech: "HABEAS CORPUS.  A writ ...",
# "CUI BONO?  [Latin]  What good ...", "R.I.P.  A careless ...".
DEVIL_HEAD2_RE = re.compile(
    r"^(?P<head>[A-Z][A-Z'. -]*[A-Z])(?P<pos>)[.?]?\s+(?:\[Latin\]\s*)?"
    r"(?P<rest>[A-Z](?:[a-z]| [a-z]).*)$", re.S)


def devil_block_is_prose(lines):
    """Column-0 paragraphs are prose.  Fully indented blocks are verse,
    dialogue or quoted prose; keep only quoted prose, recognised by long
    lines that run on into a next line starting in lower case (verse
    lines start with capitals)."""
    if any(re.match(r"\s*[A-Z][A-Z ]+:  ", l) for l in lines):
        return False  # "LUNARIAN:  ..." dialogue
    if any(indent(l) == 0 for l in lines):
        return True
    if len(lines) < 2:
        return False
    body = lines[:-1]
    long_lines = sum(1 for l in body if len(l.strip()) >= 45)
    runs_on = sum(1 for l in lines[1:] if re.match(r"[a-z]", l.strip()))
    return long_lines >= 0.6 * len(body) and runs_on >= 0.5 * len(body)


def split_paragraphs(lines):
    """Within a prose block, a line indented deeper than the block's
    shallowest line starts a new paragraph."""
    base = min(indent(l) for l in lines)
    paras = []
    for i, l in enumerate(lines):
        if i == 0 or indent(l) > base:
            paras.append([l])
        else:
            paras[-1].append(l)
    return paras


def join_lines(lines):
    """Join wrapped lines; a line ending in a single hyphen continues the
    same (hyphenated) word."""
    out = ""
    for l in lines:
        l = l.strip()
        if re.search(r"[A-Za-z]-$", out):
            out += l
        else:
            out = (out + " " + l) if out else l
    return out


def devil_clean(s):
    s = s.replace("_", "")
    s = re.sub(r"\s*\[(?:sic|Latin)\]", "", s)
    # Cross-references added by the dictd conversion.
    s = re.sub(r"\s*\(See \{[^{}]*\}\.\)", "", s)
    s = re.sub(r"\[from \{[^{}]*\}\]\s*", "", s)
    s = norm_ws(s)
    # A paragraph that resumes a sentence interrupted by a verse quotation:
    # drop the fragment up to the end of that sentence.
    if re.match(r"[a-z]", s):
        m = SENT_END_RE.search(s)
        s = s[m.end():].strip() if m else ""
    return s


def devil_define(head, pos, rest, lowercase_words):
    """Turn 'HEAD, pos.  Definition.' into a prose sentence."""
    name = head.split(",")[0].split(" or ")[0].strip()
    name = re.sub(r" \(or [A-Z]+\)", "", name)
    word = name + "." if "." in name else name.lower()
    if not rest:
        return ""
    if pos and pos.startswith("v") and re.match(r"To ", rest):
        return "To %s is %s" % (word, lc_first(rest, lowercase_words))
    if re.match(r"(A|An|The|One|Any|That|Those|Some) ", rest):
        verb = "are" if pos == "n.pl." else "is"
        return "%s %s %s" % (cap_first(word), verb,
                             lc_first(rest, lowercase_words))
    return "%s means %s" % (cap_first(word), lc_first(rest, lowercase_words))


def build_devil(lowercase_words):
    raw = []  # paragraphs in order
    for hw, text in dict_entries("devil"):
        if hw == "00databaseinfo":
            # The author's preface, after the distribution header.
            i = text.find("PREFACE")
            if i < 0:
                continue
            bl = blocks(text[i + len("PREFACE"):])
        elif hw.startswith("00"):
            continue
        else:
            bl = blocks(text)
        for bi, b in enumerate(bl):
            # Attribution lines ("G.J.", poets' names) are set far right.
            b = [l for l in b if indent(l) < 20]
            if not b or not devil_block_is_prose(b):
                continue
            for pi, lines in enumerate(split_paragraphs(b)):
                p = devil_clean(join_lines(lines))
                if bi == 0 and pi == 0 and not hw.startswith("00"):
                    m = DEVIL_HEAD_RE.match(p) or DEVIL_HEAD2_RE.match(p)
                    if m:
                        p = devil_define(m.group("head"), m.group("pos"),
                                         m.group("rest"), lowercase_words)
                    elif re.fullmatch(r"[A-Z][A-Z' -]*\.", p):
                        p = ""  # headword alone; the entry is a poem
                if p and not BAD_RE.search(p) and \
                        not any(f in p.lower() for f in FORBIDDEN):
                    raw.append(p)
    # Merge short paragraphs (one-line definitions) with their neighbours so
    # that every paragraph holds at least two sentences and 30 words.
    paras, buf = [], ""
    for p in raw:
        buf = (buf + " " + p).strip()
        if n_sentences(buf) >= 2 and n_words(buf) >= 30 and ends_well(buf):
            paras.append(buf)
            buf = ""
    if buf:
        paras.append(buf)
    return [p for p in paras if acceptable(p)]


# ---------------------------------------------------------------------------
# The Jargon File
# ---------------------------------------------------------------------------

# Paragraphs with these look like code, paths, addresses or markup.
JARGON_BAD_CHARS = set("=*_~^$%+`/;")


def jargon_clean(s):
    s = to_ascii(s)
    if s is None:
        return None
    s = norm_ws(s)
    s = re.sub(r"\{([^{}]*)\}", lambda m: norm_ws(m.group(1)), s)
    # Cross-references: "(See foo.)", "(Compare bar)", "(sense 2)",
    # and whole sentences such as "See also foo, bar."
    s = re.sub(r"\s*\((?:[Ss]ee|[Cc]ompare|[Cc]f\.|[Oo]ppose|[Cc]ontrast)"
               r"\b[^()]*\)", "", s)
    s = re.sub(r"\s*\((?:in |esp\. )?senses? \d+[^()]*\)", "", s)
    s = re.sub(r",? (?:in )?senses? \d+(?:(?:,| and| or) \d+)*", "", s)
    sents = re.split(r"(?:(?<=[.!?])|(?<=[.!?][\"')]))(?=\s+[A-Z\"'(])", s)
    sents = [x for x in sents if not re.match(
        r"\s*(?:(?:See|Compare|Also see|Oppose|Contrast|Antonym|Synonym)\b"
        r"|Cf\.|Syn\.|Ant\.)", x)]
    s = norm_ws(" ".join(sents))
    s = re.sub(r"\s*\(\s*(?:from|also|see)?\s*\)", "", s)
    # Leading sense number, part of speech, [usage] tags, "(also foo)".
    for _ in range(3):
        s = re.sub(r"^\d+\.\s+", "", s)
        s = re.sub(r"^(?:n|v|vt|vi|adj|adv|interj|excl|pl|prep)\.\s+", "", s)
        s = re.sub(r"^\[[^\[\]]*\]\s*", "", s)
        s = re.sub(r"^\(also [^()]*\)\s*", "", s)
    return norm_ws(s)


def jargon_prose_ok(p):
    if any(c in JARGON_BAD_CHARS for c in p):
        return False
    if re.search(r"\w\(", p) or p.count("--") > 3:
        return False  # function calls like malloc(3)
    # Dotted names (file.ext, news.group), digits glued to letters, and
    # all-caps shouting.
    if re.search(r"\b[A-Za-z]+\.[a-z]{2,}", p):
        return False
    if re.search(r"[A-Za-z]\d|\d[A-Za-z]{2,}", p):
        return False
    words = re.findall(r"[A-Za-z]+", p)
    if not words:
        return False
    caps = sum(1 for w in words if len(w) > 1 and w.isupper())
    return caps <= 0.08 * len(words)


def build_jargon(lowercase_words):
    paras = []
    for hw, text in dict_entries("jargon"):
        if hw.startswith("00"):
            continue
        lines = text.split("\n")
        head = lines[0].strip()
        bl = blocks("\n".join(lines[1:]))
        # The first block is the pronunciation / part-of-speech line.
        if bl and indent(bl[0][0]) < 4:
            bl = bl[1:]
        entry = []
        for b in bl:
            if not all(indent(l) == 4 for l in b):
                continue  # examples, code, verse, tables
            p = jargon_clean(" ".join(l.strip() for l in b))
            if p and jargon_prose_ok(p):
                entry.append(p)
            elif entry and entry[-1] is not None:
                entry.append(None)  # keep track of gaps
        # Give the entry's first paragraph a subject when it is a bare
        # noun-phrase definition ("A notional black hole in ...").
        if entry and entry[0] and re.match(r"[a-z][a-z -]*[a-z]$", head) and \
                re.match(r"(A|An|The) [a-z]", entry[0]):
            entry[0] = "%s is %s" % (cap_first(head),
                                    lc_first(entry[0], lowercase_words))
        # Merge one-sentence senses with the following paragraph.
        buf = ""
        out = []
        for p in entry:
            if p is None:
                buf = ""
                continue
            buf = (buf + " " + p).strip()
            if n_sentences(buf) >= 2 and n_words(buf) >= 20 and ends_well(buf):
                out.append(buf)
                buf = ""
        if buf and out and ends_well(buf):
            out[-1] = out[-1] + " " + buf
        paras.extend(p for p in out if acceptable(p))
    return paras


# ---------------------------------------------------------------------------
# URL words
# ---------------------------------------------------------------------------

ARCHAIC = set("""
thee thou thy thine hath doth unto saith shalt wilt art ye ere begat hast
dost didst canst wouldst shouldst couldst mayest mightest spake sware shew
shewed shewing wherefore whither thither hither whence thence verily yea
nay thereof therein thereon thereto thereby therewith whereby wherein
whereof whereon whereas wherewith hereby herein brethren begotten kine
raiment twain lest behold beheld howbeit peradventure aforetime
afterward betwixt amongst amidst whilst unawares oftentimes
blest thyself whosoever whatsoever wheresoever whithersoever morrow nigh
hearken hearkened besought wrought brake tidings cubit cubits shekel
shekels cherubims tarry tarried tarrying waxed wroth withal divers bade
beseech communed fourscore threescore goodly wist nought naught aught
sojourn sojourned sojourner sojourners firstborn firstling firstlings
handmaid handmaiden handmaidens damsel damsels bullock bullocks graven
uttermost vesture victuals kinsman kinsmen palsy publican publicans
centurion centurions sackcloth girdle girdles girded girt leaven leavened
unleavened loaves staves firmament travail travailed alms gat clave wot
forasmuch insomuch thereunto whereunto wherewithal henceforth thenceforth
howbeit anon oft twain asses unclean hereafter whereupon thereat
""".split())

# Stems whose -est form is a second-person verb (givest, knowest, ...).
ARCHAIC_STEMS = set("""
giv know say go com tak mak hear see find keep bring seek call speak
""".split())

LOADED = set("""
god gods godly goddess goddesses lord lords jesus christ christian
christians christendom satan devil devils hell sin sins sinner sinners
sinned sinful holy holiness heaven heavens heavenly angel angels prophet
prophets prophecy prophesy prophesied priest priests priesthood temple
temples altar altars sacrifice sacrifices sacrificed worship worshipped
worshiped pray prayed prayer prayers praying gospel gospels church churches
apostle apostles disciple disciples baptize baptized baptism baptist bless
blessed blessing blessings salvation saviour savior redeem redeemed
redemption redeemer covenant scripture scriptures divine deity deities
demon demons heathen righteous righteousness unrighteous iniquity
iniquities transgress transgression abomination abominations repent
repented repentance resurrection crucify crucified amen messiah sanctify
sanctified circumcise circumcised circumcision uncircumcised foreskin
foreskins concubine concubines idolatry idolater fornication adultery
adulterer adulteress harlot harlots whoredom whoredoms bowels womb loins
pharisee pharisees synagogue synagogues tabernacle tabernacles
commandment commandments wrath gentile gentiles preach preached preacher
preaching sermon psalm psalms hymn bible biblical clergy clergyman
bishop pope papal cardinal saint saints sainted pious piety worshipper
religion religious theology theological infidel infidels heresy heretic
heretics pagan pagans idol idols soul souls spirit spirits ghost ghosts
cherub cherubim seraphim demon demonic damn damned damnation curse cursed
curses cursing accursed crap stupid idiot moron idiots morons imbecile
kill kills killed killing killer slay slain slew smite smote smitten
murder murdered murderer murderers blood bloody dead death deaths die died
dies dying corpse corpses carcase carcass flesh wicked wickedness evil
evils naked nakedness torture tortured suicide rape whip scourge scourged
stoned hanged hang beheaded leper lepers leprosy plague plagues sorcery
sorcerer witch witches wizard wizards slave slaves slavery bondman
bondmen bondwoman maidservant manservant eunuch drunk drunken drunkard
hacker hackers hackish hackerdom crack cracker crackers warez virus
viruses hack hacks hacked hacking spam spammer spammers spamming
anoint anointed anointing sanctuary glorified glorify glorifying glory
miracle miracles parable parables scribe scribes incense ointment oracle
oracles ordained sect virgin virgins spiritual devout sacred tithe tithes
oblation oblations offering offerings atonement slaughter slaughtered
devour devoured perish perished wickedly manna
""".split())


def word_counts(paragraphs):
    """Lower-case and capitalised-mid-sentence counts of each word.  A
    word is 'mid-sentence' when the token before it is a word with no
    punctuation in between (so sentence starts and the KJV's capitalised
    quotations after a comma do not count)."""
    lower = collections.Counter()
    cap_mid = collections.Counter()
    for para in paragraphs:
        toks = re.findall(r"[A-Za-z]+(?:'[A-Za-z]+)?|[^\sA-Za-z]", para)
        prev_word = False
        for t in toks:
            if not t[0].isalpha():
                prev_word = False
                continue
            if "'" in t:
                base, suf = t.split("'", 1)
                if suf.lower() != "s":
                    prev_word = True
                    continue
                t = base
            if t.islower():
                lower[t] += 1
            elif prev_word:
                cap_mid[t.lower()] += 1
            prev_word = True
    return lower, cap_mid


def url_word_ok(w, lowercase_words):
    """The rules that do not depend on corpus counts."""
    if not re.fullmatch(r"[a-z]{4,9}", w):
        return False
    if w not in lowercase_words or w in ARCHAIC or w in LOADED:
        return False
    if BAD_RE.fullmatch(w):
        return False
    # Archaic verb endings (goeth, sayest, knowest, ...) are not in the
    # word list; this also catches any that slip through.
    if w.endswith("eth") and w not in ("teeth", "beneath") and \
            not w.endswith("ieth"):
        return False
    if w.endswith("est") and w[:-3] in ARCHAIC_STEMS:
        return False
    return True


def ranked_words(paragraphs, lowercase_words):
    lower, cap_mid = word_counts(paragraphs)
    # Proper names: capitalised mid-sentence more often than in lower case.
    ok = [w for w in lower
          if url_word_ok(w, lowercase_words) and cap_mid[w] <= lower[w]]
    return sorted(ok, key=lambda w: (-lower[w], w))


def url_words(paragraphs, fallback_paragraphs, lowercase_words, n=2048):
    """The n most frequent eligible words of the corpus.  Should the corpus
    hold fewer, the rest come from the complete source texts (ranked the
    same way), then from american-english in its own (alphabetical)
    order.  Returns (words, how many came from each source)."""
    words = ranked_words(paragraphs, lowercase_words)[:n]
    used = [len(words)]
    seen = set(words)
    for source in (lambda: ranked_words(fallback_paragraphs(),
                                        lowercase_words),
                   lambda: sorted(w for w in lowercase_words
                                  if url_word_ok(w, lowercase_words))):
        if len(words) >= n:
            used.append(0)
            continue
        extra = [w for w in source() if w not in seen][:n - len(words)]
        words += extra
        seen.update(extra)
        used.append(len(extra))
    return words, used


def all_source_paragraphs():
    """Every line of the complete KJV and both dictionaries, unfiltered."""
    paras = [v[3] for v in kjv_verses()]
    for name in ("devil", "jargon"):
        for hw, text in dict_entries(name):
            paras.extend(text.split("\n"))
    return paras


def load_lowercase_words():
    words = set()
    with open(WORDLIST, encoding="utf-8") as f:
        for line in f:
            w = line.strip()
            if re.fullmatch(r"[a-z]+", w):
                words.add(w)
    return words


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out_dir, exist_ok=True)
    lowercase_words = load_lowercase_words()

    kjv = build_kjv(lowercase_words)
    devil = build_devil(lowercase_words)
    jargon = build_jargon(lowercase_words)
    for name, paras in (("kjv.txt", kjv), ("devils-dictionary.txt", devil),
                        ("jargon.txt", jargon)):
        write_paragraphs(os.path.join(out_dir, name), paras)

    words, used = url_words(kjv + devil + jargon, all_source_paragraphs,
                            lowercase_words)
    assert len(words) == 2048 == len(set(words))
    with open(os.path.join(out_dir, "url-words.txt"), "w",
              encoding="ascii", newline="\n") as f:
        f.write("\n".join(words) + "\n")
    print("url-words: %d from the corpus, %d from the full source texts, "
          "%d from american-english" % tuple(used), file=sys.stderr)
    for name, paras in (("kjv.txt", kjv), ("devils-dictionary.txt", devil),
                        ("jargon.txt", jargon)):
        print("%s: %d paragraphs" % (name, len(paras)), file=sys.stderr)


if __name__ == "__main__":
    main()
