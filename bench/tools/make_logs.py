"""A day of a busy site's access log, the same requests written in each format replay reads.

usage: python3 bench/tools/make_logs.py LINES DIR
writes DIR/jsonl.log, DIR/nginx-combined.log, DIR/caddy.log and DIR/traefik.log.
"""

import json
import random
import sys
from datetime import datetime, timedelta, timezone

CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36"
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"
SAFARI = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15"
CRAWLERS = [
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
    "Mozilla/5.0 (compatible; Bytespider; spider-feedback@bytedance.com)",
    "CCBot/2.0 (https://commoncrawl.org/faq/)",
    "python-requests/2.32.3",
]
PATHS = ["/", "/blog/", "/docs/install", "/docs/config", "/about", "/feed.xml", "/robots.txt"]


def main():
    lines, out = int(sys.argv[1]), sys.argv[2]
    rng = random.Random(7)
    start = datetime(2026, 12, 4, tzinfo=timezone.utc)
    step = timedelta(seconds=86400 / lines)
    files = {name: open(f"{out}/{name}.log", "w") for name in ["jsonl", "nginx-combined", "caddy", "traefik"]}
    # 50,000 people, each browsing a few pages at a time over the day.
    people = [f"10.{rng.randrange(200)}.{rng.randrange(250)}.{rng.randrange(1, 250)}" for _ in range(50_000)]
    for i in range(lines):
        when = start + step * i
        kind = rng.random()
        if kind < 0.75:
            client = rng.choice(people)
            agent = rng.choice([CHROME, FIREFOX, SAFARI])
            headers = {"User-Agent": agent, "Accept": "text/html", "Accept-Language": "en-US,en;q=0.9",
                       "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Dest": "document"}
            path = rng.choice(PATHS) + ("" if rng.random() < 0.8 else f"?page={rng.randrange(9)}")
        elif kind < 0.92:
            client = f"192.0.2.{rng.randrange(1, 250)}"
            headers = {"User-Agent": rng.choice(CRAWLERS), "Accept": "*/*"}
            path = f"/blog/{rng.randrange(5000)}"
        else:
            client = f"198.51.100.{rng.randrange(1, 60)}"
            headers = {"User-Agent": CHROME, "Accept": "text/html"}
            path = f"/trap/archive/{rng.randrange(100000)}"
        write(files, when, client, path, headers)
    for file in files.values():
        file.close()


def write(files, when, client, path, headers):
    iso = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    files["jsonl"].write(json.dumps({"time": iso, "client": client, "method": "GET", "uri": path,
                                     "host": "site.example", "proto": "https", "headers": headers}) + "\n")
    stamp = when.strftime("%d/%b/%Y:%H:%M:%S +0000")
    files["nginx-combined"].write(f'{client} - - [{stamp}] "GET {path} HTTP/1.1" 200 5120 "-" "{headers["User-Agent"]}"\n')
    caddy = {"level": "info", "ts": when.timestamp(), "logger": "http.log.access.log0", "msg": "handled request",
             "request": {"remote_ip": client, "remote_port": "50000", "client_ip": client, "proto": "HTTP/2.0",
                         "method": "GET", "host": "site.example", "uri": path,
                         "headers": {name: [value] for name, value in headers.items()},
                         "tls": {"resumed": False, "version": 772, "proto": "h2", "server_name": "site.example"}},
             "bytes_read": 0, "user_id": "", "duration": 0.0012, "size": 5120, "status": 200,
             "resp_headers": {"Server": ["Caddy"], "Content-Type": ["text/html; charset=utf-8"]}}
    files["caddy"].write(json.dumps(caddy) + "\n")
    traefik = {"ClientAddr": f"{client}:50000", "ClientHost": client, "ClientPort": "50000", "ClientUsername": "-",
               "DownstreamContentSize": 5120, "DownstreamStatus": 200, "Duration": 1200000,
               "OriginContentSize": 5120, "OriginDuration": 1100000, "OriginStatus": 200, "Overhead": 100000,
               "RequestAddr": "site.example", "RequestContentSize": 0, "RequestCount": 1,
               "RequestHost": "site.example", "RequestMethod": "GET", "RequestPath": path, "RequestPort": "-",
               "RequestProtocol": "HTTP/2.0", "RequestScheme": "https", "RetryAttempts": 0,
               "RouterName": "site@file", "ServiceName": "site@file", "StartLocal": iso, "StartUTC": iso,
               "entryPointName": "websecure", "level": "info", "msg": "", "time": iso}
    for name, value in headers.items():
        traefik[f"request_{name}"] = value
    files["traefik"].write(json.dumps(traefik) + "\n")


if __name__ == "__main__":
    main()
