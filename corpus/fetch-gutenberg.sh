#!/usr/bin/env bash
# Download public-domain books from Project Gutenberg as plain text, with
# the Project Gutenberg header and licence footer removed.
#
#   corpus/fetch-gutenberg.sh DEST_DIR [BOOK_ID ...]
#
# Writes DEST_DIR/pgID.txt for each book (the default list below when no IDs
# are given).  Needs internet access and curl.  It is polite: one request at
# a time, 2 seconds apart, and books already present in DEST_DIR are skipped.
# The text is what Project Gutenberg ships (chapter headings and all); check
# it before feeding it to the generator.
set -euo pipefail

DEFAULT_IDS=(
    1342  # Jane Austen, Pride and Prejudice
    2701  # Herman Melville, Moby Dick; or, The Whale
    84    # Mary Shelley, Frankenstein
    98    # Charles Dickens, A Tale of Two Cities
    1661  # Arthur Conan Doyle, The Adventures of Sherlock Holmes
    11    # Lewis Carroll, Alice's Adventures in Wonderland
    74    # Mark Twain, The Adventures of Tom Sawyer
    76    # Mark Twain, Adventures of Huckleberry Finn
    345   # Bram Stoker, Dracula
    1080  # Jonathan Swift, A Modest Proposal
    205   # Henry David Thoreau, Walden
    174   # Oscar Wilde, The Picture of Dorian Gray
)
BASE_URL="${PG_BASE_URL:-https://www.gutenberg.org/cache/epub}"  # override for mirrors/tests
PAUSE=2

usage() {
    cat >&2 <<'EOF'
usage: fetch-gutenberg.sh DEST_DIR [BOOK_ID ...]

Downloads Project Gutenberg plain-text books to DEST_DIR/pgID.txt with the
"*** START OF ..." header and "*** END OF ..." footer removed.  Without
BOOK_IDs a default list of 12 public-domain novels and essays is fetched.
EOF
    exit 2
}

# strip_pg IN OUT: keep only the lines between the "*** START OF" and
# "*** END OF" markers (case-insensitive), drop carriage returns and a
# leading byte-order mark.  Fails if the START marker is missing.
strip_pg() {
    local in="$1" out="$2"
    LC_ALL=C awk '
        { sub(/\r$/, ""); if (NR == 1) sub(/^\357\273\277/, "") }
        !started {
            if (toupper($0) ~ /^\*\*\* *START OF (THE |THIS )?PROJECT GUTENBERG/)
                started = 1
            next
        }
        toupper($0) ~ /^\*\*\* *END OF (THE |THIS )?PROJECT GUTENBERG/ { ended = 1; exit }
        { print }
        END { if (!started) exit 3 }
    ' "$in" > "$out"
}

main() {
    [[ $# -ge 1 ]] || usage
    case "$1" in -h|--help) usage ;; esac
    local dest="$1"
    shift
    local ids=("$@")
    ((${#ids[@]})) || ids=("${DEFAULT_IDS[@]}")
    for id in "${ids[@]}"; do
        [[ $id =~ ^[0-9]+$ ]] || { echo "not a book id: $id" >&2; exit 2; }
    done
    command -v curl >/dev/null || { echo "curl is required" >&2; exit 1; }
    mkdir -p "$dest"

    local first=1 failed=0
    tmp="$(mktemp -d)"  # global, so that the EXIT trap still sees it
    trap 'rm -rf "$tmp"' EXIT
    for id in "${ids[@]}"; do
        local out="$dest/pg$id.txt"
        if [[ -s $out ]]; then
            echo "pg$id: already present, skipped" >&2
            continue
        fi
        ((first)) || sleep "$PAUSE"
        first=0
        local url="$BASE_URL/$id/pg$id.txt"
        echo "pg$id: $url" >&2
        if ! curl -fsSL --retry 2 --max-time 120 -o "$tmp/raw.txt" "$url"; then
            echo "pg$id: download failed" >&2
            failed=1
            continue
        fi
        if ! strip_pg "$tmp/raw.txt" "$tmp/body.txt"; then
            echo "pg$id: no '*** START OF' marker, skipped" >&2
            failed=1
            continue
        fi
        mv "$tmp/body.txt" "$out"
        echo "pg$id: $(wc -c < "$out") bytes -> $out" >&2
    done
    return "$failed"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    main "$@"
fi
