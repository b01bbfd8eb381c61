# Writes a realistic 200-line robots.txt to the file named by $1: groups that shut out 30 AI
# crawlers, a few that allow search engines, and a `*` group of 135 rules (prefixes, `*`
# wildcards, `$` anchors) that a browser's page view is matched against in full (none matches).
# Sourced by bench/wrk-robots.sh; also used by the criterion `decide` bench's robots case.
write_robots_200() {
  {
    for bot in GPTBot ChatGPT-User OAI-SearchBot ClaudeBot Claude-User anthropic-ai CCBot \
      Google-Extended Bytespider Amazonbot Applebot-Extended PerplexityBot Perplexity-User \
      Meta-ExternalAgent meta-externalfetcher FacebookBot cohere-ai Diffbot ImagesiftBot \
      Omgilibot Timpibot YouBot Kangaroo-Bot PetalBot Scrapy img2dataset AI2Bot Ai2Bot-Dolma \
      DuckAssistBot MistralAI-User; do
      printf 'User-agent: %s\nDisallow: /\n\n' "$bot"
    done
    printf 'User-agent: Googlebot\nUser-agent: bingbot\nAllow: /\nDisallow: /search\n\n'
    printf 'User-agent: *\n'
    for i in $(seq 1 50); do printf 'Disallow: /private-%d/\n' "$i"; done
    for i in $(seq 1 50); do printf 'Disallow: /*/draft-%d$\n' "$i"; done
    for i in $(seq 1 33); do printf 'Disallow: /tag/*/page-%d*\n' "$i"; done
    printf 'Allow: /tag/\nSitemap: https://site.example/sitemap.xml\n'
  } >"$1"
}
