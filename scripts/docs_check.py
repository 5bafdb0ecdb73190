#!/usr/bin/env python3
"""Checks the documentation: README.md stays an entry point (at most 1,000
words) and every relative link in README.md and doc/*.md resolves to a file
of the repository, and its #anchor to a heading of that file. External links
(http, https, mailto) are listed with --external, not fetched: CI has no
business depending on other people's web servers.

Usage: scripts/docs_check.py [--external] [REPO_DIR]
Exit status 0 when everything resolves, 1 with one line per broken link.
"""
import os
import re
import sys

MAX_README_WORDS = 1000
LINK = re.compile(r'(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)|!\[[^\]]*\]\(([^)\s]+)\)')
FENCE = re.compile(r'^(```|~~~)')


def strip_code(text):
    """Markdown without fenced code blocks and inline code spans."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            out.append('')
            continue
        out.append('' if fenced else re.sub(r'`[^`]*`', '', line))
    return '\n'.join(out)


def slug(heading):
    """GitHub's anchor for a heading."""
    s = heading.strip().lower()
    s = re.sub(r'[^\w\- ]', '', s)
    return s.replace(' ', '-')


def anchors(path):
    result, seen, fenced = set(), {}, False
    with open(path, encoding='utf-8') as f:
        for line in f:
            if FENCE.match(line.strip()):
                fenced = not fenced
            if fenced:
                continue
            m = re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
            if not m:
                continue
            base = slug(re.sub(r'`', '', m.group(1)))
            n = seen.get(base, 0)
            seen[base] = n + 1
            result.add(base if n == 0 else '%s-%d' % (base, n))
    return result


def check_file(repo, rel, broken, external):
    path = os.path.join(repo, rel)
    with open(path, encoding='utf-8') as f:
        text = strip_code(f.read())
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in LINK.finditer(line):
            target = m.group(1) or m.group(2)
            where = '%s:%d' % (rel, lineno)
            if re.match(r'^[a-z]+:', target):
                external.append((where, target))
                continue
            file_part, _, anchor = target.partition('#')
            dest = path if not file_part else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            if not os.path.realpath(dest).startswith(os.path.realpath(repo) + os.sep):
                broken.append('%s: %s leaves the repository' % (where, target))
                continue
            if not os.path.exists(dest):
                broken.append('%s: %s: no such file' % (where, target))
                continue
            if anchor and dest.endswith('.md') and anchor not in anchors(dest):
                broken.append('%s: %s: no heading with anchor #%s in %s'
                              % (where, target, anchor, os.path.relpath(dest, repo)))


def main(argv):
    show_external = '--external' in argv
    args = [a for a in argv[1:] if a != '--external']
    repo = os.path.abspath(args[0] if args else
                           os.path.join(os.path.dirname(__file__), '..'))
    files = ['README.md'] + sorted(
        os.path.join('doc', f) for f in os.listdir(os.path.join(repo, 'doc'))
        if f.endswith('.md'))
    broken, external = [], []
    for rel in files:
        check_file(repo, rel, broken, external)
    with open(os.path.join(repo, 'README.md'), encoding='utf-8') as f:
        words = len(f.read().split())
    if words > MAX_README_WORDS:
        broken.append('README.md: %d words, more than %d' % (words, MAX_README_WORDS))
    for line in broken:
        print('BROKEN ' + line)
    if show_external:
        for where, target in external:
            print('external %s %s' % (where, target))
    print('docs: %d files, README.md %d words, %d external links not fetched, %d broken'
          % (len(files), words, len(external), len(broken)))
    return 1 if broken else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
