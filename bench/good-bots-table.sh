#!/usr/bin/env bash
# The verdict for each link-preview fetcher, archive, crawler and datacenter flood of issue 14,
# from two builds side by side: BEFORE (default: the build before the issue) and AFTER
# (default: target/release/quagmire). Each row is `quagmire explain` with the client's address,
# User-Agent and an ASN database that puts the address in the network named.
#
#   BEFORE=/tmp/quagmire-before bench/good-bots-table.sh > table.md
#
# Needs python3 with mmdb-writer (pip install mmdb-writer) to write the ASN database.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=${BEFORE:?set BEFORE to the binary to compare with}
AFTER=${AFTER:-target/release/quagmire}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work/asn.mmdb" <<'PY'
import sys
from mmdb_writer import MMDBWriter, MmdbU32
from netaddr import IPSet
w = MMDBWriter(ip_version=6, database_type="GeoLite2-ASN", ipv4_compatible=True)
for net, asn, org in [("198.51.100.0/26", 16509, "AMAZON-02"), ("198.51.100.64/26", 7941, "INTERNET-ARCHIVE"),
                      ("198.51.100.128/26", 3320, "Deutsche Telekom AG")]:
    w.insert_network(IPSet([net]), {"autonomous_system_number": MmdbU32(asn), "autonomous_system_organization": org})
w.to_db_file(sys.argv[1])
PY
export QUAGMIRE_SECRET=good-bots-table-secret-0123456789
# name | address (network) | User-Agent | trap hits before the request
rows=(
  "Slack preview|198.51.100.10 (AWS)|Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)|0"
  "Discord preview|198.51.100.10 (AWS)|Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)|0"
  "X/Twitter card|198.51.100.10 (AWS)|Twitterbot/1.0|0"
  "facebookexternalhit|198.51.100.10 (AWS)|facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)|0"
  "Apple Messages|198.51.100.10 (AWS)|facebookexternalhit/1.1 Facebot Twitterbot/1.0|0"
  "Mastodon preview|198.51.100.10 (AWS)|http.rb/5.1.1 (Mastodon/4.2.0; +https://mastodon.social/)|0"
  "Bluesky card|198.51.100.10 (AWS)|Mozilla/5.0 (compatible; Bluesky Cardyb/1.1; +mailto:support@bsky.app)|0"
  "LinkedIn preview|198.51.100.10 (AWS)|LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)|0"
  "Telegram preview|198.51.100.10 (AWS)|TelegramBot (like TwitterBot)|0"
  "WhatsApp / Signal preview|198.51.100.130 (home ISP)|WhatsApp/2.23.20.0|0"
  "Internet Archive (heritrix)|198.51.100.70 (AS7941)|Mozilla/5.0 (compatible; heritrix/3.4.0 +https://archive.org/details/archive.org_bot) Firefox/57|0"
  "Wayback Save Page Now|198.51.100.70 (AS7941)|Mozilla/5.0 (compatible; archive.org_bot; Wayback Machine Live Record; +http://archive.org/details/archive.org_bot)|0"
  "UK Web Archive|198.51.100.10 (AWS)|Mozilla/5.0 (compatible; bl.uk_lddc_bot/3.3; +http://www.bl.uk/aboutus/legaldeposit/websites/websites/faqscrawler/)|0"
  "Googlebot, published range|66.249.66.1 (Google)|Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)|0"
  "Googlebot claimed from a home ISP (no PTR record)|198.51.100.130 (home ISP)|Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)|0"
  "preview name walking the trap|198.51.100.10 (AWS)|Twitterbot/1.0|8"
)
echo "| client | network | before | after |"
echo "| --- | --- | --- | --- |"
for row in "${rows[@]}"; do
  IFS='|' read -r name where ua hits <<<"$row"
  ip=${where%% *}
  verdict() {
    "$1" explain --asn-db "$work/asn.mmdb" --ip "$ip" -H "User-Agent: $ua" --trap-hits "$hits" 2>/dev/null \
      | sed -n 's/^verdict *//p'
  }
  echo "| $name | ${where#* } | $(verdict "$BEFORE") | $(verdict "$AFTER") |"
done
