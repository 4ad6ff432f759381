#!/usr/bin/env python3
"""Every function the given public headers declare NXR_API, one per line.

    api_functions.py HEADER...            the names, sorted
    api_functions.py --xmacro HEADER...   NXR__API_FUNCTION(name) lines, for a C
                                          table that must cover each of them
                                          (tests/runtime/error_channel_test.c)

Comments and preprocessor lines are dropped first, so neither the NXR_API
definition nor a function named in a comment counts.
"""
import re
import sys


def declared(paths):
    names = set()
    for path in paths:
        with open(path) as f:
            text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
        text = re.sub(r"(?m)^[ \t]*#.*$", " ", text)
        for decl in re.findall(r"\bNXR_API\b([^;{]*)", text):
            m = re.search(r"\b(nxr_[a-z0-9_]+)\s*\(", decl)
            if not m:
                sys.exit("%s: no function name in: NXR_API%s" % (path, decl))
            names.add(m.group(1))
    return sorted(names)


def main(argv):
    xmacro = argv[:1] == ["--xmacro"]
    paths = argv[1:] if xmacro else argv
    if not paths:
        sys.exit(__doc__)
    for name in declared(paths):
        print("NXR__API_FUNCTION(%s)" % name if xmacro else name)


if __name__ == "__main__":
    main(sys.argv[1:])
