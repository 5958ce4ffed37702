"""Which kernels of a CUDA source may run on the emulator's fast path (no fibers).

A kernel is fiber-free when neither its body nor anything it can reach uses a block barrier
(__syncthreads*), a warp barrier or collective (__syncwarp, any *_sync), shared memory
(__shared__), inline assembly or cooperative groups. Such a kernel's threads never wait for one
another, so the emulator may run each to completion on the calling stack (docs/cuda.md, "The fast
path"). The check is textual and conservative: whatever it cannot resolve keeps fibers.

  - The scan covers the source and every header it includes with "..." that lies in the project
    (resolved against the including file's folder and the include roots), recursively. A <...>
    header outside the allow-list below (e.g. <cooperative_groups.h>, <cub/...>) or a "..."
    header outside the project and outside kHostOnlyPrefixes makes every kernel of the source
    keep fibers: its device functions are not read.
  - Definitions found: functions (by name; overloads and specialisations merge), classes and
    structs (their whole body, member functions included), macros, and variables initialised
    with braces (lambdas at namespace scope). Preprocessor conditionals are ignored: both
    branches count.
  - A kernel keeps fibers if a definition it names (transitively; any identifier equal to a
    definition's name counts, called or not) contains a barrier token; or if it (or a device
    function it reaches) calls through a function parameter, through a type template parameter
    (`T(...)`, `T::f(...)`), through a member not defined in the scanned files, or calls a name
    the scanned files only declare (a function defined in another source, a __device__ variable).

The emulator's runtime backs this up: a barrier, a warp collective or shared memory reached on the
fast path fails the launch with an error naming the kernel and the call (scheduler.cc).
"""
import os
import re

# Identifiers that make a definition need fibers.
BARRIER_RE = re.compile(r"sync|^__shared__$|^asm$|^__asm__$|^cooperative_groups$|^__barrier")

# <...> headers that hold no device function with a barrier (the C++ and C libraries, the CUDA
# runtime's types and conversions, the host-side cuBLAS/NCCL APIs).
ALLOWED_SYSTEM = {
    "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "cuda_fp16.h", "cuda_bf16.h",
    "library_types.h", "driver_types.h", "vector_types.h", "cublasLt.h", "cublas_v2.h",
    "cublas_api.h", "nccl.h", "math.h", "stdint.h", "stddef.h", "stdio.h", "stdlib.h",
    "string.h", "assert.h", "float.h", "limits.h", "inttypes.h", "stdbool.h",
}
STD_HEADER_RE = re.compile(r"^[a-z_]+$")  # <cmath>, <type_traits>, <algorithm>, ...
# "..." headers outside the project that are host-only libraries (no device code).
HOST_ONLY_PREFIXES = ("absl/", "gtest/", "gmock/", "google/protobuf/", "grpcpp/")

# Identifiers followed by "(" that are not calls of a function.
NOT_CALLS = {
    "if", "for", "while", "switch", "return", "sizeof", "alignof", "alignas", "decltype",
    "static_cast", "reinterpret_cast", "const_cast", "dynamic_cast", "noexcept", "static_assert",
    "__launch_bounds__", "__align__", "__attribute__", "defined", "catch", "throw", "typeid",
    "operator", "case", "do", "else", "new", "delete", "co_return", "requires",
}
# Names before a "(" in a definition's header that are not the defined function's name.
ATTRIBUTES = {"__launch_bounds__", "__align__", "alignas", "__attribute__", "__declspec",
              "decltype", "noexcept", "requires"}
FUNDAMENTAL = {"void", "bool", "char", "short", "int", "long", "float", "double", "unsigned",
               "signed", "auto", "size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
               "uint16_t", "uint32_t", "uint64_t", "uintptr_t", "intptr_t", "ptrdiff_t",
               "__half", "__nv_bfloat16", "half", "float2", "float4", "int2", "int4", "dim3",
               "uint3"}

QUALIFIERS = {"const", "volatile", "struct", "class", "enum", "__restrict__", "restrict",
              "typename"}

TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.']|)*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>::|->|>>|<<|&&|\|\||[^\sA-Za-z_0-9])
""", re.X)


def strip(text, literals=True):
    """Comments (and string and character literals unless not `literals`) blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and (text[i - 1].isalnum()))):
            if not literals:  # keep the literal, but skip it whole (a "//" inside is no comment)
                j = i + 1
                while j < n and text[j] != c and text[j] != "\n":
                    j += 2 if text[j] == "\\" else 1
                out.append(text[i:j + 1])
                i = j + 1
                continue
            # A character/string literal (a ' after a digit or letter is a digit separator).
            if c == '"' and i > 0 and text[i - 1] == "R":
                m = re.match(r'"([^(\s]*)\(', text[i:])
                if m:
                    end = text.find(")" + m.group(1) + '"', i)
                    end = n if end < 0 else end + len(m.group(1)) + 2
                    out.append(re.sub(r"[^\n]", " ", text[i:end]))
                    i = end
                    continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * max(0, j - i - 2) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def tokens(text):
    return [m.group() for m in TOKEN_RE.finditer(text) if m.lastgroup != "ws"]


class Definition:
    def __init__(self, name, kind, header, body, path):
        self.name, self.kind, self.header, self.body, self.path = name, kind, header, body, path
        self.is_kernel = "__global__" in header
        self.params = set()
        self.type_params = set()
        if kind == "function":
            self.params, self.type_params = parse_signature(header)


def parse_signature(header):
    """Parameter names and type template parameter names of a function header."""
    type_params = set()
    if "template" in header:
        i = header.index("template")
        depth, j = 0, i + 1
        while j < len(header):
            t = header[j]
            depth += {"<": 1, ">": -1, ">>": -2}.get(t, 0)
            if t in ("typename", "class") and j + 1 < len(header) and \
                    re.match(r"[A-Za-z_]", header[j + 1]):
                type_params.add(header[j + 1])
            if depth <= 0 and j > i + 1:
                break
            j += 1
    # The parameter list: the parentheses after the function's name. Every name in it but the
    # fundamental types and qualifiers counts as a parameter (`float (*f)(float)` names f).
    params = set()
    start = name_paren(header)
    if start is None:
        return params, type_params
    depth = 0
    for t in header[start:]:
        if t in ("(", "[", "{"):
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                break
        elif re.match(r"[A-Za-z_]", t) and t not in FUNDAMENTAL and t not in QUALIFIERS:
            params.add(t)
    return params, type_params


def name_paren(header):
    """Index of the "(" that opens a function header's parameter list, or None."""
    depth = 0
    for i, t in enumerate(header):
        if t == "(":
            if depth == 0 and i > 0:
                prev = header[i - 1]
                if prev not in ATTRIBUTES and (re.match(r"[A-Za-z_]", prev) or
                                               prev in (")", ">") and "operator" in header[:i]):
                    if prev == ")" and header[i - 3:i] == ["operator", "(", ")"]:
                        return i
                    if re.match(r"[A-Za-z_]", prev):
                        return i
            depth += 1
        elif t == ")":
            depth -= 1
    return None


def function_name(header):
    i = name_paren(header)
    if i is None:
        return None
    if header[i - 1] == ")" or "operator" in header[max(0, i - 3):i]:
        return "operator"
    return header[i - 1]


def split_preprocessor(text):
    """(code without preprocessor lines, [(directive, line text)])."""
    lines = text.split("\n")
    code, directives, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("#"):
            full, blanks = line, 1
            while full.endswith("\\") and i + 1 < len(lines):
                i += 1
                full = full[:-1] + " " + lines[i]
                blanks += 1
            directives.append(full.lstrip()[1:].strip())
            code.extend([""] * blanks)
        else:
            code.append(line)
        i += 1
    return "\n".join(code), directives


class Scan:
    """Definitions and includes of a source and the project headers it includes."""

    def __init__(self, source, include_roots):
        self.roots = [os.path.abspath(r) for r in include_roots]
        self.defs = {}  # name -> [Definition]
        self.declared = set()  # names only declared at namespace or class scope
        self.files = []
        self.unresolved = []  # why the scan is incomplete
        self._seen = set()
        self._read(os.path.abspath(source))
        for name in list(self.declared):
            if name in self.defs:
                self.declared.discard(name)

    def _read(self, path):
        if path in self._seen:
            return
        self._seen.add(path)
        self.files.append(path)
        with open(path) as f:
            code, directives = split_preprocessor(strip(f.read(), literals=False))
        code = strip(code)
        for d in directives:
            self._directive(d, path)
        self._scope(tokens(code), path)

    def _directive(self, d, path):
        m = re.match(r'include\s*([<"])([^>"]+)[>"]', d)
        if m:
            kind, name = m.groups()
            if kind == "<":
                if name not in ALLOWED_SYSTEM and not STD_HEADER_RE.match(name):
                    self.unresolved.append("includes <%s>, which the rewriter does not read" % name)
                return
            for base in [os.path.dirname(path)] + self.roots:
                candidate = os.path.normpath(os.path.join(base, name))
                if os.path.isfile(candidate) and any(
                        candidate.startswith(r + os.sep) for r in self.roots):
                    self._read(candidate)
                    return
            if not name.startswith(HOST_ONLY_PREFIXES):
                self.unresolved.append('includes "%s", which is outside the project' % name)
            return
        m = re.match(r"define\s+([A-Za-z_]\w*)(.*)", d)
        if m:
            self._add(Definition(m.group(1), "macro", [], tokens(m.group(2)), None))

    def _add(self, d):
        self.defs.setdefault(d.name, []).append(d)

    def _scope(self, toks, path):
        """Definitions in a namespace or class body."""
        header, paren, i = [], 0, 0
        while i < len(toks):
            t = toks[i]
            if t in ("(", "["):
                paren += 1
            elif t in (")", "]"):
                paren -= 1
            if paren > 0 or t not in ("{", ";", "}"):
                header.append(t)
                i += 1
                continue
            if t == ";":
                self._declaration(header)
                header = []
                i += 1
                continue
            if t == "}":  # stray close (unbalanced input): start afresh
                header = []
                i += 1
                continue
            end = matching_brace(toks, i)
            body = toks[i + 1:end]
            self._block(header, body, path)
            header = []
            i = end + 1
        if header:
            self._declaration(header)

    def _block(self, header, body, path):
        first_paren = header.index("(") if "(" in header else len(header)
        keyword = next((k for k in ("namespace", "struct", "class", "union", "enum")
                        if k in header[:first_paren]), None)
        if keyword == "namespace" or (header and header[0] == "extern" and "(" not in header):
            self._scope(body, path)
        elif keyword == "enum":
            pass
        elif keyword in ("struct", "class", "union"):
            idx = header.index(keyword)
            name = None
            for t in header[idx + 1:]:
                if t in (":", "final", "{"):
                    break
                if re.match(r"[A-Za-z_]", t) and t not in ("alignas", "__align__"):
                    name = t
            if name:
                self._add(Definition(name, "class", header, body, path))
            self._scope(body, path)  # member functions by their own names too
        elif "=" in header[:first_paren]:
            eq = header.index("=")
            names = [t for t in header[:eq] if re.match(r"[A-Za-z_]", t)]
            if names:
                self._add(Definition(names[-1], "variable", header, body, path))
        else:
            name = function_name(header)
            if name:
                self._add(Definition(name, "function", header, body, path))
            else:
                ids = [t for t in header if re.match(r"[A-Za-z_]", t)]
                if ids:  # brace-initialised variable, or something unrecognised: keep its text
                    self._add(Definition(ids[-1], "variable", header, body, path))

    def _declaration(self, header):
        """A declaration ending in ';': remember functions and device variables declared."""
        if not header or header[0] in ("using", "typedef", "return", "friend", "static_assert"):
            return
        if any(t in ("__device__", "__constant__", "__managed__") for t in header):
            # A device function or variable (a function pointer, say): every name in it.
            end = header.index("=") if "=" in header else len(header)
            self.declared.update(t for t in header[:end] if re.match(r"[A-Za-z_]", t))
            return
        name = function_name(header)
        if name and "=" not in header[:header.index("(")]:
            self.declared.add(name)


def matching_brace(toks, i):
    depth = 0
    for j in range(i, len(toks)):
        if toks[j] == "{":
            depth += 1
        elif toks[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(toks)


def template_call(body, j):
    """If body[j] is "<" opening template arguments followed by "(", the index of "(" else None."""
    depth = 0
    for k in range(j, min(len(body), j + 40)):
        t = body[k]
        if t == "<":
            depth += 1
        elif t == ">":
            depth -= 1
        elif t == ">>":
            depth -= 2
        elif t in (";", "{", "}", "&&", "||"):
            return None
        if depth <= 0:
            return k + 1 if k + 1 < len(body) and body[k + 1] == "(" else None
    return None


class Classifier:
    def __init__(self, scan):
        self.scan = scan
        # Why each defined name needs fibers (None: it does not): its own definitions first, then
        # whatever they name, to a fixed point.
        self.why = {}
        refs = {}
        for name, defs in scan.defs.items():
            self.why[name] = next((w for w in map(self._direct, defs) if w), None)
            refs[name] = sorted({t for d in defs for t in d.header + d.body
                                 if t != name and t in scan.defs})
        changed = True
        while changed:
            changed = False
            for name in scan.defs:
                if self.why[name]:
                    continue
                for t in refs[name]:
                    if self.why[t]:
                        self.why[name] = "uses %s, which %s" % (t, self.why[t])
                        changed = True
                        break

    def why_fibers(self, name):
        """None if every definition called `name` is fiber-free, else the reason it is not."""
        if self.scan.unresolved:
            return self.scan.unresolved[0]
        return self.why.get(name)

    def _direct(self, d):
        for t in d.body + (d.header if d.kind == "macro" else []):
            if BARRIER_RE.search(t) and re.match(r"[A-Za-z_]", t):
                return "uses %s" % t
        body = d.body
        for j, t in enumerate(body):
            if not re.match(r"[A-Za-z_]", t) or t in NOT_CALLS:
                continue
            nxt = body[j + 1] if j + 1 < len(body) else ""
            is_call = nxt == "(" or (nxt == "<" and template_call(body, j + 1) is not None)
            prev = body[j - 1] if j > 0 else ""
            if d.kind == "function" and t in d.type_params and nxt in ("(", "::"):
                return "calls through its type template parameter %s" % t
            if not is_call:
                continue
            if prev in (".", "->"):
                if t not in self.scan.defs:
                    return "calls the member %s, which the rewriter does not resolve" % t
            elif d.kind == "function" and t in d.params and prev != "::":
                return "calls through its parameter %s" % t
            elif t in self.scan.declared and t not in FUNDAMENTAL:
                return "calls %s, which is declared but not defined in what the rewriter reads" % t
        return None

    def kernels(self):
        """{kernel name: None if fiber-free, else why not}, in source order."""
        out = {}
        for name, defs in self.scan.defs.items():
            if any(d.is_kernel and d.kind == "function" for d in defs):
                out[name] = self.why_fibers(name)
        return out


def classify(source, include_roots):
    scan = Scan(source, include_roots)
    return Classifier(scan).kernels(), scan.files
