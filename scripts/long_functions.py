#!/usr/bin/env python3
"""Lists the functions of src/ longer than a limit (default 120 lines),
tests and generated code aside: a function defined at namespace level (its
opening line starts in column 0 and its body ends with a "}" in column 0),
or a member function defined inside a class body at two spaces of indent.

Usage: scripts/long_functions.py [--max N] [REPO_DIR]
Exit status 1 when any function is longer than N lines (a test: ctest
long_functions), 0 otherwise.
"""
import os
import re
import sys

SKIP_DIRS = ('src/gtest/', 'src/fuzz/corpus/')
START = re.compile(r'^(  )?[A-Za-z_][\w:<>,\s\*&~\[\]]*\([^;]*$')


def functions(path):
    lines = open(path, encoding='utf-8').read().split('\n')
    i = 0
    while i < len(lines):
        m = START.match(lines[i])
        if not m or lines[i].lstrip().startswith(('if ', 'for ', 'while ', 'switch ', 'return ', 'namespace', 'class ', 'struct ', '//', '#')):
            i += 1
            continue
        indent = m.group(1) or ''
        # find the opening brace of the body within a few lines
        j = i
        while j < len(lines) and j < i + 8 and not lines[j].rstrip().endswith('{') and not lines[j].rstrip().endswith(';'):
            j += 1
        if j >= len(lines) or not lines[j].rstrip().endswith('{'):
            i += 1
            continue
        if lines[j].strip() == '{' and False:
            pass
        end = j + 1
        close = indent + '}'
        while end < len(lines) and not (lines[end].startswith(close) and
                                         (len(lines[end]) == len(close) or lines[end][len(close)] in ' ;/')):
            end += 1
        if end >= len(lines):
            i += 1
            continue
        name = re.sub(r'\s+', ' ', lines[i].strip())[:90]
        yield i + 1, end - i + 1, name
        i = end + 1


def main(argv):
    limit = 120
    repo = '.'
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == '--max':
            limit = int(args.pop(0))
        else:
            repo = a
    found = []
    for root, _, files in os.walk(os.path.join(repo, 'src')):
        for f in sorted(files):
            if not f.endswith(('.cc', '.h')):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, repo)
            if rel.startswith(SKIP_DIRS) or f.endswith(('_test.cc', '.pb.cc', '.pb.h')):
                continue
            for line, n, name in functions(path):
                if n > limit:
                    found.append((n, rel, line, name))
    for n, rel, line, name in sorted(found, reverse=True):
        print('%s:%d: %d lines: %s' % (rel, line, n, name))
    if found:
        print('long_functions: %d function(s) over %d lines' % (len(found), limit))
        return 1
    print('long_functions: no function over %d lines' % limit)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
