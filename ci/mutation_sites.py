"""Mutation sites in C++ and CUDA sources, for ci/mutants.

A mutant changes one token (or deletes one statement) of one file. The operators:

    lt_to_le  le_to_lt  gt_to_ge  ge_to_gt    a < b  ->  a <= b, and back; > and >= alike
    add1_to_sub1  sub1_to_add1                i + 1  ->  i - 1, and back
    and_to_or  or_to_and                      a && b ->  a || b, and back
    min_to_max  max_to_min                    std::min(a, b), hn::Max(a, b): the other one
    const_inc  const_dec                      an integer literal N -> N + 1, N - 1 (not below 0)
    delete_stmt                               an expression statement (a call, an assignment,
                                              ++i, break, continue) or a one-statement if, for
                                              or while without braces, removed

The sources are tokenized (comments, string and character literals and preprocessor lines are
never mutated; neither are static_assert declarations). Binary operators are told from template
brackets and references by their spacing: the project is clang-formatted, so `a < b` and
`a && b` have a space on both sides and `std::vector<float>`, `T&& x` do not. Statements are
deleted only inside function bodies (and lambdas), never declarations, returns or blocks, so
that most deletions compile.
"""
import dataclasses
import re

OPERATORS = ("lt_to_le", "le_to_lt", "gt_to_ge", "ge_to_gt", "add1_to_sub1", "sub1_to_add1", "and_to_or",
             "or_to_and", "min_to_max", "max_to_min", "const_inc", "const_dec", "delete_stmt")
SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx", ".hpp", ".h", ".hh", ".cu", ".cuh")

_SWAPS = {"<": ("lt_to_le", "<="), "<=": ("le_to_lt", "<"), ">": ("gt_to_ge", ">="), ">=": ("ge_to_gt", ">"),
          "&&": ("and_to_or", "||"), "||": ("or_to_and", "&&")}
_MIN_MAX = {"min": "max", "max": "min", "Min": "Max", "Max": "Min", "fmin": "fmax", "fmax": "fmin",
            "fminf": "fmaxf", "fmaxf": "fminf"}
_PUNCTUATORS = sorted(["<<=", ">>=", "<=>", "->*", "...", "::", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=",
                       "&&", "||", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", ".*"], key=len, reverse=True)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_NUMBER = re.compile(r"\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.'])*")
_INTEGER = re.compile(r"(0[xX][0-9A-Fa-f]+|[1-9][0-9]*|0)([uUlL]*)")
_RAW_STRING = re.compile(r'R"([^()\\ ]{0,16})\(')
# A statement whose first token is one of these is a declaration, a jump that must stay, or a
# structure: never deleted.
_NOT_DELETED = {"return", "goto", "throw", "case", "default", "do", "else", "switch", "try", "catch", "using",
                "typedef", "static_assert", "namespace", "template", "class", "struct", "enum", "union", "public",
                "private", "protected", "friend", "extern", "static", "const", "constexpr", "consteval",
                "constinit", "inline", "auto", "unsigned", "signed", "int", "float", "double", "bool", "char",
                "long", "short", "void", "thread_local", "volatile", "register", "typename", "decltype",
                "explicit", "virtual", "co_return", "co_await", "co_yield", "asm", "operator", "new", "delete"}
_CONTROL = {"if", "for", "while"}
_FUNCTION_BODY_AFTER = {")", "]", "const", "override", "noexcept"}  # ] : a lambda at namespace scope
_LAMBDA_BODY_AFTER = {")", "]", "mutable", "noexcept"}
_BLOCK_HEADS = {"if", "for", "while", "switch", "else", "do", "try", "catch", "case", "default"}
_EXPRESSION_AFTER_NAME = {"(", ".", "->", "[", "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=",
                          "++", "--"}


@dataclasses.dataclass(frozen=True)
class Token:
    kind: str  # ident, number, string, punct
    text: str
    start: int
    end: int
    space_before: bool
    space_after: bool


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One change to one file: the text at [start, end) becomes `replacement`."""
    file: str  # path relative to the repository root
    line: int  # 1-based, of `start`
    column: int  # 1-based
    operator: str
    start: int
    end: int
    original: str
    replacement: str

    @property
    def id(self):
        return f"{self.file}:{self.line}:{self.column}:{self.operator}"

    def apply(self, text):
        assert text[self.start:self.end] == self.original, f"{self.id}: the source changed"
        return text[:self.start] + self.replacement + text[self.end:]


def tokenize(text):
    """The tokens of a C++ source, without comments and preprocessor lines."""
    tokens = []
    i, n = 0, len(text)
    line_start = True  # only whitespace since the last newline: a '#' there starts a directive
    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if c == "\\" and text.startswith("\n", i + 1):
            i += 2
            continue
        if text.startswith("//", i):
            i = _line_end(text, i)
            continue
        if text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close < 0 else close + 2
            continue
        if c == "#" and line_start:
            i = _line_end(text, i)  # a directive, with its continuation lines
            continue
        line_start = False
        start = i
        raw = _RAW_STRING.match(text, i) if c == "R" else None
        if raw:
            close = text.find(")" + raw.group(1) + '"', raw.end())
            i = n if close < 0 else close + len(raw.group(1)) + 2
            kind = "string"
        elif c in "\"'":
            i = _quoted_end(text, i)
            kind = "string"
        elif (m := _IDENT.match(text, i)) is not None:
            i = m.end()
            # u8"..", L'x' and the like: a prefix glued to a literal
            if i < n and text[i] in "\"'" and m.group() in ("u8", "u", "U", "L"):
                i = _quoted_end(text, i)
                kind = "string"
            else:
                kind = "ident"
        elif (m := _NUMBER.match(text, i)) is not None:
            i = m.end()
            kind = "number"
        else:
            i += next((len(p) for p in _PUNCTUATORS if text.startswith(p, i)), 1)
            kind = "punct"
        tokens.append(Token(kind, text[start:i], start, i, start > 0 and text[start - 1].isspace(),
                            i < n and text[i].isspace()))
    return tokens


def _line_end(text, i):
    """The index of the newline that ends the line at i, after any backslash continuations."""
    while True:
        newline = text.find("\n", i)
        if newline < 0:
            return len(text)
        if text[newline - 1] != "\\":
            return newline
        i = newline + 1


def _quoted_end(text, i):
    quote, i = text[i], i + 1
    while i < len(text) and text[i] != quote and text[i] != "\n":
        i += 2 if text[i] == "\\" else 1
    return i + 1


def find_mutants(text, file):
    """Every mutant of one source text, in order of position."""
    tokens = tokenize(text)
    found = []
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def add(operator, start, end, replacement):
        line = _bisect(line_starts, start)
        found.append(Mutant(file, line + 1, start - line_starts[line] + 1, operator, start, end, text[start:end],
                            replacement))

    skipped = _static_asserts(tokens)
    for index, token in enumerate(tokens):
        if index in skipped:
            continue
        before = tokens[index - 1] if index > 0 else None
        after = tokens[index + 1] if index + 1 < len(tokens) else None
        spaced = token.space_before and token.space_after
        if token.kind == "punct" and token.text in _SWAPS and spaced:
            operator, replacement = _SWAPS[token.text]
            add(operator, token.start, token.end, replacement)
        elif (token.kind == "punct" and token.text in "+-" and spaced and after is not None
              and after.kind == "number" and _integer_value(after.text) == 1):
            add("add1_to_sub1" if token.text == "+" else "sub1_to_add1", token.start, token.end,
                "-" if token.text == "+" else "+")
        elif (token.kind == "ident" and token.text in _MIN_MAX and after is not None and after.text in ("(", "<")
              and not (after.text == "(" and index + 2 < len(tokens) and tokens[index + 2].text == ")")
              and (before is None or before.text not in (".", "->") or after.text == "(")):
            add("min_to_max" if token.text.lower().endswith(("min", "minf")) else "max_to_min", token.start,
                token.end, _MIN_MAX[token.text])
        elif token.kind == "number" and (value := _integer_value(token.text)) is not None:
            suffix = _INTEGER.fullmatch(token.text).group(2)
            hexadecimal = token.text[:2].lower() == "0x"
            for operator, changed in (("const_inc", value + 1), ("const_dec", value - 1)):
                if changed >= 0:
                    add(operator, token.start, token.end, (hex(changed) if hexadecimal else str(changed)) + suffix)
    for first, last in _deletable_statements(tokens, skipped):
        add("delete_stmt", tokens[first].start, tokens[last].end, "")
    found.sort(key=lambda m: (m.start, OPERATORS.index(m.operator)))
    return found


def _bisect(starts, position):
    low, high = 0, len(starts)
    while high - low > 1:
        middle = (low + high) // 2
        if starts[middle] <= position:
            low = middle
        else:
            high = middle
    return low


def _integer_value(text):
    match = _INTEGER.fullmatch(text)
    return None if match is None else int(match.group(1), 0 if match.group(1)[:2].lower() == "0x" else 10)


def _static_asserts(tokens):
    """The indexes of the tokens of static_assert declarations (their mutants do not compile or
    change nothing)."""
    inside = set()
    for index, token in enumerate(tokens):
        if token.text == "static_assert":
            end = index
            while end < len(tokens) and tokens[end].text != ";":
                end += 1
            inside.update(range(index, end + 1))
    return inside


def _deletable_statements(tokens, skipped):
    """(first, last) token indexes of each statement that may be deleted: in a function body, at
    parenthesis depth 0, without braces, not a declaration (see _NOT_DELETED)."""
    statements = []
    # One entry per open brace: its kind, whether the statement around it goes on after it, and
    # the enclosing statement's start, cleanness and parenthesis depth. Kinds: "code" (a function body, a
    # block, a lambda's body), "expr" (an initializer list), "other" (a namespace, a class).
    braces = []
    start, clean, depth = 0, True, 0  # the statement being read, whether it may be deleted
    for index, token in enumerate(tokens):
        context = braces[-1][0] if braces else "other"
        text = token.text
        if text in ("(", "["):
            depth += 1
        elif text in (")", "]"):
            depth = max(0, depth - 1)
        elif text == "{":
            before = tokens[index - 1].text if index > 0 else ";"
            head = tokens[start].text if start < index else ""
            if depth > 0 or (context != "other" and start < index and head not in _BLOCK_HEADS):
                # inside an expression: a lambda's body, or an initializer (std::size_t{1})
                kind, goes_on = ("code" if before in _LAMBDA_BODY_AFTER else "expr"), True
            elif start == index:  # a block that is a statement of its own
                kind, goes_on = ("code" if context == "code" else "other"), False
            elif context == "other":  # a function's body, or a namespace, class or initializer
                kind, goes_on = ("code" if before in _FUNCTION_BODY_AFTER else "other"), False
            else:  # if (...) {, else {, case 1: {
                kind, goes_on = "code", False
            braces.append((kind, goes_on, start, clean, depth))
            start, clean, depth = index + 1, True, 0
        elif text == "}":
            kind, goes_on, outer_start, outer_clean, outer_depth = braces.pop() if braces else ("other", False, 0, 0, 0)
            if goes_on:
                start, clean, depth = outer_start, outer_clean, outer_depth
            else:
                start, clean, depth = index + 1, True, 0
        elif text == ";" and depth == 0:
            if clean and context == "code" and index > start and _deletable(tokens, start, index, skipped):
                statements.append((start, index))
            start, clean = index + 1, True
    return statements


def _deletable(tokens, first, last, skipped):
    if any(i in skipped for i in range(first, last + 1)):
        return False
    head = tokens[first]
    if head.text in ("break", "continue"):
        return last == first + 1
    if head.text in _CONTROL:
        following = tokens[last + 1].text if last + 1 < len(tokens) else ""
        return following != "else" and not any(t.text == "else" for t in tokens[first:last])
    if head.text in ("++", "--", "*"):
        return True
    if head.kind != "ident" or head.text in _NOT_DELETED:
        return False
    i = first + 1  # past a qualified name: a::b::c
    while i + 1 <= last and tokens[i].text == "::" and tokens[i + 1].kind == "ident":
        i += 2
    return tokens[i].text in _EXPRESSION_AFTER_NAME
