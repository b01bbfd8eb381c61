#!/usr/bin/env bash
# Rebuild the corpus text files and url-words.txt from Debian packages.
#
#   bash corpus/build.sh            (from the repository root, or anywhere)
#
# Writes corpus/kjv.txt, corpus/devils-dictionary.txt, corpus/jargon.txt and
# corpus/url-words.txt.  The output is deterministic for the package versions
# listed in corpus/README.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
packages=(bible-kjv bible-kjv-text dict-devil dict-jargon wamerican python3)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}" >&2
    sudo=()
    if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then sudo=(sudo); fi
    "${sudo[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y \
        --no-install-recommends "${packages[@]}"
fi

dpkg-query -W bible-kjv bible-kjv-text dict-devil dict-jargon wamerican >&2

python3 "$here/build_corpus.py" "$here"

cd "$here"
wc -c kjv.txt devils-dictionary.txt jargon.txt url-words.txt
sha256sum kjv.txt devils-dictionary.txt jargon.txt url-words.txt
