#!/usr/bin/env python3
"""Prints the CMake configure command of a Dockerfile's build stage, one argument per line.

    dockerfile_cmake.py DOCKERFILE SOURCE_DIR BUILD_DIR

Reads the Dockerfile as written (tests/deploy_cuda_configure.sh runs what it prints): the
RUN instruction that starts with `cmake -S` (backslash continuations joined), up to its first
`&&`, split as a shell would, with ${NAME} / $NAME replaced by the defaults of the file's ARG
lines, the Dockerfile's -S and -B directories replaced by SOURCE_DIR and BUILD_DIR. The ARG
defaults come first, as lines `# ARG NAME=VALUE`. Exits 1 with a message naming the file when
there is no such RUN, no -S/-B, or a variable without an ARG default.
"""
import re
import shlex
import sys


def fail(path, why):
    print(f"dockerfile_cmake.py: {path}: {why}", file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    path, source, build = sys.argv[1:]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # Instructions, with continuation lines joined (comments inside a RUN are not used there).
    instructions = []
    current = ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        instructions.append(current + line)
        current = ""
    if current:
        instructions.append(current)
    args = {}
    for ins in instructions:
        m = re.match(r"ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(.*)$", ins.strip())
        if m:
            args[m.group(1)] = " ".join(shlex.split(m.group(2)))
    runs = [ins.strip()[4:] for ins in instructions
            if re.match(r"RUN\s+cmake\s+-S\b", ins.strip())]
    if len(runs) != 1:
        fail(path, f"expected one RUN cmake -S ... instruction, found {len(runs)}")
    configure = runs[0].split("&&")[0]

    def expand(word):
        def sub(m):
            name = m.group(1) or m.group(2)
            if name not in args:
                fail(path, f"${name} in the configure line has no ARG default")
            return args[name]
        return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", sub, word)

    words = [expand(w) for w in shlex.split(configure)]
    if words[0] != "cmake":
        fail(path, f"the configure line starts with {words[0]}, not cmake")
    for flag, value in (("-S", source), ("-B", build)):
        if flag not in words or words.index(flag) + 1 >= len(words):
            fail(path, f"the configure line has no {flag} DIR")
        words[words.index(flag) + 1] = value
    for name, value in args.items():
        print(f"# ARG {name}={value}")
    for w in words:
        print(w)


if __name__ == "__main__":
    main()
