#!/usr/bin/env python3
"""Checks the documentation (README.md and every doc/**/*.md, subfolders
included):

- length: README.md stays an entry point, at most 1,000 words; every other
  document at most 3,000. Words are counted as `wc -w` counts them: every
  whitespace-separated token of the file, code blocks, tables and link
  targets included (nothing is stripped), so `wc -w FILE` gives the number
  this script compares;
- tables: no cell of a Markdown table is longer than 300 characters (a long
  explanation belongs in prose or a list under a heading, not in a cell).
  A cell is the text between two unescaped `|` of a table row, stripped of
  surrounding spaces; tables inside fenced code blocks are not tables;
- links: every relative link resolves to a file of the repository, and its
  #anchor to a heading of that file. External links (http, https, mailto)
  are listed with --external, not fetched: CI has no business depending on
  other people's web servers.

Exceptions are listed below, each with its reason; an exception that no
longer matches anything is reported too, so that the list does not outlive
its reason.

Usage: scripts/docs_check.py [--external] [REPO_DIR]
Exit status 0 when everything passes, 1 with one line per problem.
"""
import os
import re
import sys

MAX_README_WORDS = 1000
MAX_DOC_WORDS = 3000
MAX_CELL_CHARS = 300

# Documents allowed more than MAX_DOC_WORDS: {path: (words allowed, reason)}.
# None: every document fits its job in 3,000 words.
WORD_EXCEPTIONS = {}

# Table cells allowed more than MAX_CELL_CHARS: (path, how the cell starts,
# reason). Keep this list short and remove an entry with its cell.
CELL_EXCEPTIONS = []

LINK = re.compile(r'(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)|!\[[^\]]*\]\(([^)\s]+)\)')
FENCE = re.compile(r'^(```|~~~)')
TABLE_DELIMITER = re.compile(r'^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?$')


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


def check_links(repo, rel, text, broken, external):
    path = os.path.join(repo, rel)
    for lineno, line in enumerate(strip_code(text).splitlines(), 1):
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


def table_cells(text):
    """(line number, cell text) of every cell of every table outside code."""
    lines = text.splitlines()
    fenced, in_table = False, False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if FENCE.match(stripped):
            fenced = not fenced
            in_table = False
            continue
        if fenced:
            continue
        if not in_table:
            # A table starts with a header row followed by a delimiter row.
            if ('|' in stripped and i + 1 < len(lines)
                    and '-' in lines[i + 1] and TABLE_DELIMITER.match(lines[i + 1].strip())):
                in_table = True
            else:
                continue
        elif not stripped or '|' not in stripped:
            in_table = False
            continue
        if TABLE_DELIMITER.match(stripped):
            continue
        row = stripped
        if row.startswith('|'):
            row = row[1:]
        if row.endswith('|') and not row.endswith('\\|'):
            row = row[:-1]
        for cell in re.split(r'(?<!\\)\|', row):
            yield i + 1, cell.strip()


def check_cells(rel, text, problems, used):
    for lineno, cell in table_cells(text):
        if len(cell) <= MAX_CELL_CHARS:
            continue
        for n, (path, start, _) in enumerate(CELL_EXCEPTIONS):
            if path == rel and cell.startswith(start):
                used.add(n)
                break
        else:
            problems.append('%s:%d: a table cell of %d characters, more than %d: "%s..."'
                            % (rel, lineno, len(cell), MAX_CELL_CHARS, cell[:50]))


def doc_files(repo):
    files = []
    for root, dirs, names in os.walk(os.path.join(repo, 'doc')):
        dirs.sort()
        for name in sorted(names):
            if name.endswith('.md'):
                files.append(os.path.relpath(os.path.join(root, name), repo))
    return ['README.md'] + files


def main(argv):
    show_external = '--external' in argv
    args = [a for a in argv[1:] if a != '--external']
    repo = os.path.abspath(args[0] if args else
                           os.path.join(os.path.dirname(__file__), '..'))
    files = doc_files(repo)
    problems, external, used_cells = [], [], set()
    longest = (0, '')
    for rel in files:
        with open(os.path.join(repo, rel), encoding='utf-8') as f:
            text = f.read()
        check_links(repo, rel, text, problems, external)
        check_cells(rel, text, problems, used_cells)
        words = len(text.split())
        if rel == 'README.md':
            readme_words, limit = words, MAX_README_WORDS
        else:
            limit = WORD_EXCEPTIONS.get(rel, (MAX_DOC_WORDS,))[0]
            longest = max(longest, (words, rel))
        if words > limit:
            problems.append('%s: %d words, more than %d' % (rel, words, limit))
    for n, (path, start, _) in enumerate(CELL_EXCEPTIONS):
        if n not in used_cells:
            problems.append('%s: no cell over %d characters starts with "%s": remove it '
                            'from CELL_EXCEPTIONS' % (path, MAX_CELL_CHARS, start))
    for path in WORD_EXCEPTIONS:
        if path not in files:
            problems.append('%s: in WORD_EXCEPTIONS but not a document' % path)
    for line in problems:
        print('BROKEN ' + line)
    if show_external:
        for where, target in external:
            print('external %s %s' % (where, target))
    print('docs: %d files, README.md %d words, longest doc %s %d words, '
          '%d external links not fetched, %d problems'
          % (len(files), readme_words, longest[1], longest[0], len(external), len(problems)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
