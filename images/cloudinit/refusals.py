"""Counts tinyproxy's refusals by reason and keeps the counts in its
statistics page (docs/egress.md, "Traffic").

tinyproxy counts a client outside its Allow rules and a destination its
filter refuses in one counter (stats.c STAT_DENIED), but logs each with its
own message. This reads tinyproxy's log messages on stdin, one a line as
`journalctl -o cat` prints them, counts those that begin with a refusal's
message, and rewrites the page's template (argv[1]) with the counts after
each chunk it read: tinyproxy reads the template at every request for the
page (stats.c showstats), so the counts reach the page at once. The file is
replaced, never written in place, so the page is never read half-written.
"""

import os
import sys

# The messages each refusal is logged with, matched at the start of a
# message only: another message may quote them.
REASONS = (
    ("client-refusals", b'Unauthorized connection from "'),  # acl.c check_acl
    ("destination-refusals", b"Proxying refused on filtered "),  # reqs.c process_request
)


def write(page, kept, counts):
    tmp = page + ".tmp"
    with open(tmp, "w") as f:
        f.writelines(kept)
        f.writelines(f"{name} {counts[name]}\n" for name, _ in REASONS)
    os.chmod(tmp, 0o644)
    os.replace(tmp, page)


def main(page):
    ours = tuple(name + " " for name, _ in REASONS)
    with open(page) as f:
        kept = [line for line in f if not line.startswith(ours)]
    counts = {name: 0 for name, _ in REASONS}
    write(page, kept, counts)
    rest = b""
    while chunk := os.read(0, 1 << 16):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        changed = False
        for line in lines:
            for name, message in REASONS:
                if line.startswith(message):
                    counts[name] += 1
                    changed = True
        if changed:
            write(page, kept, counts)


if __name__ == "__main__":
    main(sys.argv[1])
