"""Build ``mas_envs/code/data/builtin.jsonl``: the coding problems written for mas-rl, with their
hidden tests.

Each problem below is a statement, a reference solution, explicit example inputs (shown in the
statement), explicit edge-case inputs, and a seeded input generator. This script runs every
reference on every input (in this process: the references are ours and trusted) to get the expected
outputs, and writes one JSON line per problem. Run it from a checkout (an editable install) after
editing a problem:

    python scripts/build_builtin_code.py

The output is deterministic (each problem's generator is ``random.Random(<stable hash of id>)``):
run on an unchanged tree, it rewrites the file byte for byte (``git diff`` shows nothing). This
script is a build step, not part of the installed package.
``tests/envs/test_code_env.py`` checks through the sandbox that every reference passes all its tests.
"""

# ruff: noqa: E501  (reference programs are data: their lines stay as written)
from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import io
import json
import random
import string
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mas_envs.code.problems import BUILTIN_PATH as OUT

N_TESTS = 12  # hidden tests per problem: examples + edge cases + generated, up to this many


@dataclass
class Spec:
    id: str
    difficulty: str
    statement: str
    reference: str
    gen: Callable[[random.Random], Any]
    examples: list[Any]
    edge: list[Any] = field(default_factory=list)
    fn: str | None = None
    signature: str = ""


SPECS: list[Spec] = []


def S(id, difficulty, statement, reference, gen, examples, edge=()):
    """A stdin/stdout problem; inputs are stdin texts."""
    SPECS.append(
        Spec(
            id,
            difficulty,
            textwrap.dedent(statement).strip(),
            textwrap.dedent(reference).strip() + "\n",
            gen,
            list(examples),
            list(edge),
        )
    )


def F(id, difficulty, signature, statement, reference, gen, examples, edge=()):
    """A function problem; inputs are argument tuples."""
    fn = signature.split("(")[0].replace("def ", "").strip()
    SPECS.append(
        Spec(
            id,
            difficulty,
            textwrap.dedent(statement).strip(),
            textwrap.dedent(reference).strip() + "\n",
            gen,
            list(examples),
            list(edge),
            fn,
            signature,
        )
    )


def ints(r: random.Random, n: int, lo: int, hi: int) -> list[int]:
    return [r.randint(lo, hi) for _ in range(n)]


def arr_input(xs: list[int]) -> str:
    return f"{len(xs)}\n{' '.join(map(str, xs))}\n"


def word(r: random.Random, lo: int = 1, hi: int = 8, alphabet: str = string.ascii_lowercase) -> str:
    return "".join(r.choice(alphabet) for _ in range(r.randint(lo, hi)))


def maybe_palindrome(r: random.Random) -> str:
    w = word(r, 1, 6, "abc")
    return w + w[::-1][r.randint(0, 1) :] if r.random() < 0.5 else w


def random_maze(r: random.Random) -> str:
    h, w = r.randint(1, 12), r.randint(2, 12)
    cells = ["#" if r.random() < 0.3 else "." for _ in range(h * w)]
    s, e = r.sample(range(h * w), 2)
    cells[s], cells[e] = "S", "E"
    return f"{h} {w}\n" + "".join("".join(cells[i * w : (i + 1) * w]) + "\n" for i in range(h))


# ============================================================================ stdin problems: easy

S(
    "sum-two",
    "easy",
    """
    Read two integers a and b (|a|, |b| <= 10^9) on one line and print a + b.""",
    """
    a, b = map(int, input().split())
    print(a + b)""",
    lambda r: f"{r.randint(-(10**9), 10**9)} {r.randint(-(10**9), 10**9)}\n",
    ["3 4\n", "-5 5\n"],
    ["0 0\n", "1000000000 1000000000\n"],
)

S(
    "max-of-list",
    "easy",
    """
    The first line holds n (1 <= n <= 1000), the second n integers. Print the largest one.""",
    """
    n = int(input())
    print(max(map(int, input().split())))""",
    lambda r: arr_input(ints(r, r.randint(1, 50), -1000, 1000)),
    ["5\n1 9 3 9 2\n", "3\n-4 -2 -7\n"],
    ["1\n42\n"],
)

S(
    "count-vowels",
    "easy",
    """
    Read one line of text and print how many of its characters are vowels (a, e, i, o, u, in
    upper or lower case).""",
    """
    s = input()
    print(sum(c in "aeiouAEIOU" for c in s))""",
    lambda r: " ".join(word(r, 1, 7, string.ascii_letters) for _ in range(r.randint(1, 8))) + "\n",
    ["Hello World\n", "rhythm\n"],
    ["AEIOU aeiou\n"],
)

S(
    "reverse-words",
    "easy",
    """
    Read one line of words separated by single spaces and print the words in reverse order,
    separated by single spaces.""",
    """
    print(" ".join(input().split()[::-1]))""",
    lambda r: " ".join(word(r) for _ in range(r.randint(1, 8))) + "\n",
    ["the sky is blue\n", "hello\n"],
)

S(
    "even-or-odd",
    "easy",
    """
    Read an integer n (|n| <= 10^18) and print EVEN if it is even, otherwise ODD.""",
    """
    print("EVEN" if int(input()) % 2 == 0 else "ODD")""",
    lambda r: f"{r.randint(-(10**18), 10**18)}\n",
    ["4\n", "7\n"],
    ["0\n", "-3\n"],
)

S(
    "factorial",
    "easy",
    """
    Read an integer n (0 <= n <= 30) and print n! (the product 1 * 2 * ... * n; 0! = 1).""",
    """
    n = int(input())
    f = 1
    for i in range(2, n + 1):
        f *= i
    print(f)""",
    lambda r: f"{r.randint(0, 30)}\n",
    ["5\n", "0\n"],
    ["1\n", "30\n"],
)

S(
    "fizzbuzz",
    "easy",
    """
    Read n (1 <= n <= 100). For each i from 1 to n print one line: FizzBuzz if i is divisible by
    15, Fizz if by 3, Buzz if by 5, otherwise i.""",
    """
    n = int(input())
    for i in range(1, n + 1):
        print("FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else i)""",
    lambda r: f"{r.randint(1, 100)}\n",
    ["5\n", "15\n"],
    ["1\n"],
)

S(
    "digit-sum",
    "easy",
    """
    Read a non-negative integer with up to 1000 digits and print the sum of its digits.""",
    """
    print(sum(int(c) for c in input().strip()))""",
    lambda r: (
        str(r.randint(1, 9))
        + "".join(r.choice(string.digits) for _ in range(r.randint(0, 200)))
        + "\n"
    ),
    ["12345\n", "0\n"],
    ["9999999999999999999999\n"],
)

S(
    "range-width",
    "easy",
    """
    The first line holds n (1 <= n <= 1000), the second n integers. Print the difference between
    the largest and the smallest of them.""",
    """
    input()
    xs = list(map(int, input().split()))
    print(max(xs) - min(xs))""",
    lambda r: arr_input(ints(r, r.randint(1, 40), -500, 500)),
    ["4\n3 -2 8 1\n", "1\n5\n"],
)

S(
    "palindrome",
    "easy",
    """
    Read a word of lowercase letters and print YES if it reads the same backwards, else NO.""",
    """
    s = input().strip()
    print("YES" if s == s[::-1] else "NO")""",
    lambda r: maybe_palindrome(r) + "\n",
    ["racecar\n", "abca\n"],
    ["a\n"],
)

S(
    "count-words",
    "easy",
    """
    Read one line and print the number of words in it (words are maximal runs of non-space
    characters; the line may have leading, trailing or repeated spaces).""",
    """
    print(len(input().split()))""",
    lambda r: "  ".join(" " * r.randint(0, 2) + word(r) for _ in range(r.randint(0, 7))) + "\n",
    ["hello   world  \n", "one\n"],
    ["   \n"],
)

S(
    "leap-year",
    "easy",
    """
    Read a year y (1 <= y <= 10^6) and print YES if it is a leap year in the Gregorian calendar
    (divisible by 4, except years divisible by 100 that are not divisible by 400), else NO.""",
    """
    y = int(input())
    print("YES" if y % 4 == 0 and (y % 100 != 0 or y % 400 == 0) else "NO")""",
    lambda r: (
        f"{r.choice([r.randint(1, 10**6), 4 * r.randint(1, 2500), 100 * r.randint(1, 100)])}\n"
    ),
    ["2024\n", "1900\n"],
    ["2000\n", "2023\n"],
)

S(
    "triangle-type",
    "easy",
    """
    Read three positive integers, the side lengths of a triangle. Print "invalid" if they cannot
    form a triangle with positive area, else "equilateral", "isosceles" or "scalene".""",
    """
    a, b, c = sorted(map(int, input().split()))
    if a + b <= c:
        print("invalid")
    elif a == c:
        print("equilateral")
    elif a == b or b == c:
        print("isosceles")
    else:
        print("scalene")""",
    lambda r: " ".join(str(r.randint(1, 6)) for _ in range(3)) + "\n",
    ["3 4 5\n", "2 2 2\n"],
    ["1 2 3\n", "5 5 8\n"],
)

S(
    "second-largest",
    "easy",
    """
    The first line holds n (1 <= n <= 1000), the second n integers. Print the second largest
    DISTINCT value, or -1000000 if there is no such value.""",
    """
    input()
    xs = sorted(set(map(int, input().split())))
    print(xs[-2] if len(xs) > 1 else -1000000)""",
    lambda r: arr_input(ints(r, r.randint(1, 10), -5, 5)),
    ["5\n4 1 4 3 2\n", "3\n7 7 7\n"],
)

S(
    "letter-grade",
    "easy",
    """
    Read a score from 0 to 100 and print its grade: A for 90 and above, B for 80-89, C for 70-79,
    D for 60-69 and F below 60.""",
    """
    s = int(input())
    print("A" if s >= 90 else "B" if s >= 80 else "C" if s >= 70 else "D" if s >= 60 else "F")""",
    lambda r: f"{r.randint(0, 100)}\n",
    ["95\n", "59\n"],
    ["90\n", "80\n", "60\n", "0\n", "100\n"],
)

S(
    "sum-of-evens",
    "easy",
    """
    The first line holds n (1 <= n <= 1000), the second n integers. Print the sum of the even
    ones (0 if there are none).""",
    """
    input()
    print(sum(x for x in map(int, input().split()) if x % 2 == 0))""",
    lambda r: arr_input(ints(r, r.randint(1, 30), -100, 100)),
    ["5\n1 2 3 4 5\n", "2\n1 3\n"],
)

S(
    "gcd",
    "easy",
    """
    Read two positive integers a and b (up to 10^12) and print their greatest common divisor.""",
    """
    import math
    a, b = map(int, input().split())
    print(math.gcd(a, b))""",
    lambda r: (lambda g: f"{g * r.randint(1, 10**6)} {g * r.randint(1, 10**6)}\n")(
        r.randint(1, 10**6)
    ),
    ["12 18\n", "7 13\n"],
    ["1 1\n"],
)

S(
    "most-frequent-char",
    "easy",
    """
    Read a word of lowercase letters and print the letter that occurs most often in it; if
    several letters tie, print the alphabetically smallest of them.""",
    """
    from collections import Counter
    c = Counter(input().strip())
    best = max(c.values())
    print(min(ch for ch in c if c[ch] == best))""",
    lambda r: word(r, 1, 15, "abcde") + "\n",
    ["banana\n", "abc\n"],
)

S(
    "times-table",
    "easy",
    """
    Read an integer n (1 <= n <= 100) and print 10 lines: "n x i = p" for i = 1..10, where p is
    n times i.""",
    """
    n = int(input())
    for i in range(1, 11):
        print(f"{n} x {i} = {n * i}")""",
    lambda r: f"{r.randint(1, 100)}\n",
    ["3\n"],
    ["1\n"],
)

S(
    "sign-count",
    "easy",
    """
    The first line holds n (1 <= n <= 1000), the second n integers. Print three numbers: how many
    are positive, how many negative and how many zero.""",
    """
    input()
    xs = list(map(int, input().split()))
    print(sum(x > 0 for x in xs), sum(x < 0 for x in xs), sum(x == 0 for x in xs))""",
    lambda r: arr_input(ints(r, r.randint(1, 20), -3, 3)),
    ["6\n1 -2 0 4 -5 0\n", "1\n0\n"],
)

S(
    "sum-1-to-n",
    "easy",
    """
    Read an integer n (1 <= n <= 10^9) and print 1 + 2 + ... + n.""",
    """
    n = int(input())
    print(n * (n + 1) // 2)""",
    lambda r: f"{r.randint(1, 10**9)}\n",
    ["3\n", "10\n"],
    ["1\n", "1000000000\n"],
)

S(
    "rotate-left",
    "easy",
    """
    The first line holds a word s, the second an integer k (0 <= k <= 10^9). Print s rotated left
    by k positions (the first k mod |s| letters moved to the end).""",
    """
    s = input().strip()
    k = int(input()) % len(s)
    print(s[k:] + s[:k])""",
    lambda r: f"{word(r, 1, 10)}\n{r.randint(0, 30)}\n",
    ["abcdef\n2\n", "abc\n3\n"],
    ["x\n1000000000\n"],
)

# ============================================================================ stdin problems: medium

S(
    "prime-count",
    "medium",
    """
    Read n (1 <= n <= 200000) and print how many prime numbers are <= n.""",
    """
    n = int(input())
    sieve = bytearray([1]) * (n + 1)
    sieve[0:2] = b"\\x00\\x00"[: n + 1]
    i = 2
    while i * i <= n:
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(range(i * i, n + 1, i)))
        i += 1
    print(sum(sieve))""",
    lambda r: f"{r.randint(1, 200000)}\n",
    ["10\n", "1\n"],
    ["2\n", "200000\n"],
)

S(
    "balanced-brackets",
    "medium",
    """
    Read a string of the characters ()[]{} and print YES if the brackets are balanced and
    properly nested, else NO. The string may be empty.""",
    """
    s = input().strip()
    pair = {")": "(", "]": "[", "}": "{"}
    stack = []
    ok = True
    for ch in s:
        if ch in "([{":
            stack.append(ch)
        elif not stack or stack.pop() != pair[ch]:
            ok = False
            break
    print("YES" if ok and not stack else "NO")""",
    lambda r: (
        "".join(r.choice("()[]{}") for _ in range(r.randint(1, 12))) + "\n"
        if r.random() < 0.5
        else "({[]})" * r.randint(1, 3) + "\n"
    ),
    ["([]{})\n", "([)]\n"],
    ["\n", "((\n", "}\n"],
)

S(
    "longest-run",
    "medium",
    """
    Read a non-empty string and print the length of its longest block of equal consecutive
    characters.""",
    """
    s = input().strip()
    best = cur = 1
    for a, b in zip(s, s[1:]):
        cur = cur + 1 if a == b else 1
        best = max(best, cur)
    print(best)""",
    lambda r: word(r, 1, 30, "ab") + "\n",
    ["aabbbcc\n", "abc\n"],
    ["z\n"],
)

S(
    "transpose",
    "medium",
    """
    The first line holds r and c (1 <= r, c <= 20), then r lines of c integers. Print the
    transposed matrix: c lines of r integers separated by spaces.""",
    """
    r, c = map(int, input().split())
    m = [input().split() for _ in range(r)]
    for j in range(c):
        print(" ".join(m[i][j] for i in range(r)))""",
    lambda r: (
        lambda a, b: (
            f"{a} {b}\n"
            + "".join(" ".join(str(r.randint(0, 9)) for _ in range(b)) + "\n" for _ in range(a))
        )
    )(r.randint(1, 5), r.randint(1, 5)),
    ["2 3\n1 2 3\n4 5 6\n", "1 1\n7\n"],
)

S(
    "pair-sum-count",
    "medium",
    """
    The first line holds n and t (1 <= n <= 2000), the second n integers a_1..a_n. Print the
    number of pairs i < j with a_i + a_j = t.""",
    """
    from collections import Counter
    n, t = map(int, input().split())
    seen = Counter()
    count = 0
    for x in map(int, input().split()):
        count += seen[t - x]
        seen[x] += 1
    print(count)""",
    lambda r: (lambda xs: f"{len(xs)} {r.randint(-5, 10)}\n{' '.join(map(str, xs))}\n")(
        ints(r, r.randint(1, 30), -5, 10)
    ),
    ["5 6\n1 5 3 3 5\n", "3 2\n1 1 1\n"],
    ["1 0\n0\n"],
)

S(
    "kth-smallest",
    "medium",
    """
    The first line holds n and k (1 <= k <= n <= 1000), the second n integers. Print the k-th
    smallest of them (counting duplicates).""",
    """
    n, k = map(int, input().split())
    print(sorted(map(int, input().split()))[k - 1])""",
    lambda r: (
        lambda n: f"{n} {r.randint(1, n)}\n{' '.join(str(x) for x in ints(r, n, -50, 50))}\n"
    )(r.randint(1, 30)),
    ["5 2\n7 3 9 3 1\n", "1 1\n4\n"],
)

S(
    "base-convert",
    "medium",
    """
    Read two integers n (0 <= n <= 10^18) and b (2 <= b <= 16). Print n written in base b, with
    digits 0-9 and upper-case letters A-F.""",
    """
    n, b = map(int, input().split())
    digits = "0123456789ABCDEF"
    out = ""
    while n:
        n, d = divmod(n, b)
        out = digits[d] + out
    print(out or "0")""",
    lambda r: f"{r.randint(0, 10 ** r.randint(1, 18))} {r.randint(2, 16)}\n",
    ["10 2\n", "255 16\n"],
    ["0 7\n", "1000000000000000000 16\n"],
)

S(
    "anagram-groups",
    "medium",
    """
    The first line holds n (1 <= n <= 1000), then n lowercase words, one per line. Two words are
    in the same group when one is an anagram of the other. Print the number of groups.""",
    """
    n = int(input())
    print(len({"".join(sorted(input().strip())) for _ in range(n)}))""",
    lambda r: (lambda ws: f"{len(ws)}\n" + "".join(w + "\n" for w in ws))(
        [word(r, 1, 4, "abc") for _ in range(r.randint(1, 12))]
    ),
    ["4\nlisten\nsilent\nenlist\ngoogle\n", "2\nab\nab\n"],
)

S(
    "range-sums",
    "medium",
    """
    The first line holds n and q (1 <= n, q <= 100000), the second n integers, then q lines with
    l and r (1 <= l <= r <= n). For each query print the sum of elements l..r (1-based,
    inclusive), one per line.""",
    """
    import sys
    data = sys.stdin.buffer.read().split()
    n, q = int(data[0]), int(data[1])
    pre = [0]
    for x in data[2 : 2 + n]:
        pre.append(pre[-1] + int(x))
    out = []
    pos = 2 + n
    for _ in range(q):
        l, r = int(data[pos]), int(data[pos + 1])
        pos += 2
        out.append(pre[r] - pre[l - 1])
    print("\\n".join(map(str, out)))""",
    lambda r: (
        lambda n, q: (
            f"{n} {q}\n{' '.join(str(x) for x in ints(r, n, -100, 100))}\n"
            + "".join(
                (lambda a, b: f"{min(a, b)} {max(a, b)}\n")(r.randint(1, n), r.randint(1, n))
                for _ in range(q)
            )
        )
    )(r.randint(1, 300), r.randint(1, 300)),
    ["5 3\n1 2 3 4 5\n1 5\n2 3\n4 4\n"],
)

S(
    "word-frequency",
    "medium",
    """
    Read one line of lowercase words separated by spaces. Print each distinct word and its count,
    one "word count" per line, most frequent first, ties in alphabetical order.""",
    """
    from collections import Counter
    c = Counter(input().split())
    for w, k in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])):
        print(w, k)""",
    lambda r: (
        " ".join(r.choice(["a", "b", "to", "be", "or", "not"]) for _ in range(r.randint(1, 15)))
        + "\n"
    ),
    ["to be or not to be\n", "x\n"],
)

S(
    "max-subarray",
    "medium",
    """
    The first line holds n (1 <= n <= 100000), the second n integers. Print the largest sum of a
    non-empty contiguous subarray.""",
    """
    input()
    best = cur = None
    for x in map(int, input().split()):
        cur = x if cur is None or cur < 0 else cur + x
        best = cur if best is None else max(best, cur)
    print(best)""",
    lambda r: arr_input(ints(r, r.randint(1, 40), -20, 15)),
    ["9\n-2 1 -3 4 -1 2 1 -5 4\n", "3\n-3 -1 -2\n"],
    ["1\n-7\n"],
)

S(
    "roman-numeral",
    "medium",
    """
    Read an integer n (1 <= n <= 3999) and print it as a Roman numeral (I, V, X, L, C, D, M,
    with subtractive forms such as IV, IX, XL, XC, CD, CM).""",
    """
    n = int(input())
    vals = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
            (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]
    out = ""
    for v, s in vals:
        while n >= v:
            out += s
            n -= v
    print(out)""",
    lambda r: f"{r.randint(1, 3999)}\n",
    ["1994\n", "58\n"],
    ["1\n", "3999\n", "4\n"],
)

S(
    "spiral-order",
    "medium",
    """
    The first line holds r and c (1 <= r, c <= 20), then r lines of c integers. Print all
    elements on one line in clockwise spiral order starting at the top-left corner.""",
    """
    r, c = map(int, input().split())
    m = [input().split() for _ in range(r)]
    out = []
    top, bottom, left, right = 0, r - 1, 0, c - 1
    while top <= bottom and left <= right:
        out += [m[top][j] for j in range(left, right + 1)]
        out += [m[i][right] for i in range(top + 1, bottom + 1)]
        if top < bottom:
            out += [m[bottom][j] for j in range(right - 1, left - 1, -1)]
        if left < right:
            out += [m[i][left] for i in range(bottom - 1, top, -1)]
        top, bottom, left, right = top + 1, bottom - 1, left + 1, right - 1
    print(" ".join(out))""",
    lambda r: (
        lambda a, b: (
            f"{a} {b}\n"
            + "".join(" ".join(str(r.randint(0, 99)) for _ in range(b)) + "\n" for _ in range(a))
        )
    )(r.randint(1, 5), r.randint(1, 5)),
    ["3 3\n1 2 3\n4 5 6\n7 8 9\n", "1 3\n1 2 3\n"],
    ["3 1\n1\n2\n3\n"],
)

S(
    "merge-intervals",
    "medium",
    """
    The first line holds n (1 <= n <= 1000), then n lines "l r" (l <= r) describing closed
    intervals. Merge overlapping intervals (intervals that touch, like [1,2] and [2,3], overlap)
    and print the merged intervals sorted by start, one "l r" per line.""",
    """
    n = int(input())
    iv = sorted(tuple(map(int, input().split())) for _ in range(n))
    out = [list(iv[0])]
    for l, r in iv[1:]:
        if l <= out[-1][1]:
            out[-1][1] = max(out[-1][1], r)
        else:
            out.append([l, r])
    for l, r in out:
        print(l, r)""",
    lambda r: (
        lambda n: (
            f"{n}\n"
            + "".join(
                (lambda a, b: f"{a} {a + b}\n")(r.randint(0, 30), r.randint(0, 5)) for _ in range(n)
            )
        )
    )(r.randint(1, 8)),
    ["4\n1 3\n2 6\n8 10\n15 18\n", "2\n1 4\n4 5\n"],
)

S(
    "gcd-lcm-list",
    "medium",
    """
    The first line holds n (1 <= n <= 100), the second n positive integers (each <= 1000). Print
    their greatest common divisor and their least common multiple.""",
    """
    import math
    input()
    xs = list(map(int, input().split()))
    g, l = 0, 1
    for x in xs:
        g = math.gcd(g, x)
        l = l * x // math.gcd(l, x)
    print(g, l)""",
    lambda r: arr_input(
        [r.choice([2, 3, 4, 6, 9, 12, 15, 20, 25, 1000]) for _ in range(r.randint(1, 8))]
    ),
    ["3\n4 6 8\n", "1\n7\n"],
)

S(
    "collatz-steps",
    "medium",
    """
    Read n (1 <= n <= 10^12). Repeatedly replace n by n / 2 if it is even and by 3n + 1 if it is
    odd. Print how many steps it takes to reach 1.""",
    """
    n = int(input())
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    print(steps)""",
    lambda r: f"{r.randint(1, 10 ** r.randint(1, 12))}\n",
    ["6\n", "1\n"],
    ["27\n"],
)

S(
    "caesar-cipher",
    "medium",
    """
    The first line holds k (0 <= k <= 10^6), the second a line of text. Shift every letter k
    positions forward in the alphabet, wrapping around, keeping its case; other characters stay.
    Print the result.""",
    """
    k = int(input()) % 26
    s = input()
    out = []
    for ch in s:
        if ch.islower():
            out.append(chr((ord(ch) - 97 + k) % 26 + 97))
        elif ch.isupper():
            out.append(chr((ord(ch) - 65 + k) % 26 + 65))
        else:
            out.append(ch)
    print("".join(out))""",
    lambda r: (
        f"{r.randint(0, 100)}\n"
        + " ".join(word(r, 1, 6, string.ascii_letters) for _ in range(r.randint(1, 5)))
        + "!\n"
    ),
    ["3\nHello, World!\n", "26\nabc\n"],
    ["1\nzZ\n"],
)

S(
    "run-length",
    "medium",
    """
    Read a non-empty string of lowercase letters and print its run-length encoding: each maximal
    block of equal letters becomes the letter followed by the block length (e.g. aaab -> a3b1).""",
    """
    s = input().strip()
    out = []
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        out.append(f"{s[i]}{j - i}")
        i = j
    print("".join(out))""",
    lambda r: word(r, 1, 25, "ab") + "\n",
    ["aaabccdddd\n", "z\n"],
)

S(
    "best-stock-trade",
    "medium",
    """
    The first line holds n (1 <= n <= 100000), the second n daily prices. Buy once and sell once
    on a later day. Print the largest profit possible, or 0 if no trade makes a profit.""",
    """
    input()
    best, low = 0, None
    for p in map(int, input().split()):
        if low is not None:
            best = max(best, p - low)
        low = p if low is None else min(low, p)
    print(best)""",
    lambda r: arr_input(ints(r, r.randint(1, 30), 1, 100)),
    ["6\n7 1 5 3 6 4\n", "5\n7 6 4 3 1\n"],
    ["1\n5\n"],
)

S(
    "stair-ways",
    "medium",
    """
    Read n (1 <= n <= 90). You climb a staircase of n steps taking 1 or 2 steps at a time. Print
    the number of different ways to reach the top.""",
    """
    n = int(input())
    a, b = 1, 1
    for _ in range(n):
        a, b = b, a + b
    print(a)""",
    lambda r: f"{r.randint(1, 90)}\n",
    ["2\n", "5\n"],
    ["1\n", "90\n"],
)

S(
    "digital-root",
    "medium",
    """
    Read a non-negative integer with up to 10000 digits. Replace it by the sum of its digits until
    a single digit remains, and print that digit.""",
    """
    s = input().strip()
    n = sum(map(int, s))
    while n >= 10:
        n = sum(map(int, str(n)))
    print(n)""",
    lambda r: (
        str(r.randint(1, 9))
        + "".join(r.choice(string.digits) for _ in range(r.randint(0, 300)))
        + "\n"
    ),
    ["38\n", "0\n"],
    ["9\n"],
)

S(
    "next-permutation",
    "medium",
    """
    The first line holds n (1 <= n <= 1000), the second a sequence of n integers. Print the next
    lexicographically greater permutation of the sequence; if it is the greatest, print the
    smallest one (sorted ascending).""",
    """
    input()
    a = list(map(int, input().split()))
    i = len(a) - 2
    while i >= 0 and a[i] >= a[i + 1]:
        i -= 1
    if i >= 0:
        j = len(a) - 1
        while a[j] <= a[i]:
            j -= 1
        a[i], a[j] = a[j], a[i]
    a[i + 1 :] = reversed(a[i + 1 :])
    print(" ".join(map(str, a)))""",
    lambda r: arr_input(ints(r, r.randint(1, 7), 1, 4)),
    ["3\n1 2 3\n", "3\n3 2 1\n"],
    ["3\n1 1 5\n", "1\n1\n"],
)

# ============================================================================ stdin problems: hard

S(
    "grid-shortest-path",
    "hard",
    """
    The first line holds r and c (1 <= r, c <= 100), then r lines of c characters: '.' free,
    '#' wall, 'S' start, 'E' end (exactly one of each). Moving up, down, left or right between
    free cells costs one step. Print the fewest steps from S to E, or -1 if E cannot be reached.""",
    """
    from collections import deque
    r, c = map(int, input().split())
    g = [input().strip() for _ in range(r)]
    start = next((i, j) for i in range(r) for j in range(c) if g[i][j] == "S")
    dist = {start: 0}
    q = deque([start])
    ans = -1
    while q:
        i, j = q.popleft()
        if g[i][j] == "E":
            ans = dist[(i, j)]
            break
        for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            a, b = i + di, j + dj
            if 0 <= a < r and 0 <= b < c and g[a][b] != "#" and (a, b) not in dist:
                dist[(a, b)] = dist[(i, j)] + 1
                q.append((a, b))
    print(ans)""",
    random_maze,
    ["3 4\nS..#\n.#..\n...E\n", "1 3\nS#E\n"],
    ["1 2\nSE\n"],
)

S(
    "dijkstra",
    "hard",
    """
    The first line holds n and m (2 <= n <= 10^4, 0 <= m <= 5 * 10^4), then m lines "u v w": an
    undirected road between towns u and v (1-based) of length w (1 <= w <= 1000). Print the length
    of the shortest route from town 1 to town n, or -1 if there is none.""",
    """
    import heapq
    import sys
    data = sys.stdin.read().split()
    n, m = int(data[0]), int(data[1])
    adj = [[] for _ in range(n + 1)]
    for k in range(m):
        u, v, w = (int(x) for x in data[2 + 3 * k : 5 + 3 * k])
        adj[u].append((v, w))
        adj[v].append((u, w))
    dist = [None] * (n + 1)
    heap = [(0, 1)]
    while heap:
        d, u = heapq.heappop(heap)
        if dist[u] is not None:
            continue
        dist[u] = d
        for v, w in adj[u]:
            if dist[v] is None:
                heapq.heappush(heap, (d + w, v))
    print(dist[n] if dist[n] is not None else -1)""",
    lambda r: (
        lambda n, m: (
            f"{n} {m}\n"
            + "".join(f"{r.randint(1, n)} {r.randint(1, n)} {r.randint(1, 20)}\n" for _ in range(m))
        )
    )(r.randint(2, 40), r.randint(0, 80)),
    ["4 4\n1 2 1\n2 4 5\n1 3 2\n3 4 1\n", "3 1\n1 2 4\n"],
    ["2 1\n1 2 7\n"],
)

S(
    "lis-length",
    "hard",
    """
    The first line holds n (1 <= n <= 200000), the second n integers. Print the length of the
    longest strictly increasing subsequence. An O(n^2) solution is too slow.""",
    """
    import bisect
    import sys
    data = sys.stdin.buffer.read().split()
    tails = []
    for x in map(int, data[1:]):
        i = bisect.bisect_left(tails, x)
        if i == len(tails):
            tails.append(x)
        else:
            tails[i] = x
    print(len(tails))""",
    lambda r: arr_input(ints(r, r.randint(1, 60), 0, 50)),
    ["8\n10 9 2 5 3 7 101 18\n", "4\n5 5 5 5\n"],
    [arr_input([(i * 7919) % 30011 for i in range(10000)])],
)

S(
    "knapsack",
    "hard",
    """
    The first line holds n and W (1 <= n <= 100, 1 <= W <= 10^4), then n lines "w v": the weight
    and value of an item. Choose items of total weight at most W (each at most once) and print the
    largest total value.""",
    """
    n, cap = map(int, input().split())
    best = [0] * (cap + 1)
    for _ in range(n):
        w, v = map(int, input().split())
        for c in range(cap, w - 1, -1):
            if best[c - w] + v > best[c]:
                best[c] = best[c - w] + v
    print(best[cap])""",
    lambda r: (
        lambda n: (
            f"{n} {r.randint(1, 50)}\n"
            + "".join(f"{r.randint(1, 20)} {r.randint(1, 50)}\n" for _ in range(n))
        )
    )(r.randint(1, 12)),
    ["3 50\n10 60\n20 100\n30 120\n", "1 5\n6 10\n"],
)

S(
    "edit-distance",
    "hard",
    """
    Read two lines, strings a and b (each up to 2000 lowercase letters, possibly empty). Print the
    minimum number of single-letter insertions, deletions and substitutions turning a into b.""",
    """
    import sys
    lines = sys.stdin.read().split("\\n")
    a = lines[0].strip() if lines else ""
    b = lines[1].strip() if len(lines) > 1 else ""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    print(prev[-1])""",
    lambda r: f"{word(r, 0, 10, 'abc')}\n{word(r, 0, 10, 'abc')}\n",
    ["kitten\nsitting\n", "abc\nabc\n"],
    ["\nabc\n", "horse\n\n"],
)

S(
    "count-islands",
    "hard",
    """
    The first line holds r and c (1 <= r, c <= 200), then r lines of c characters, '1' land and
    '0' water. Land cells that touch up, down, left or right belong to the same island. Print the
    number of islands.""",
    """
    import sys
    data = sys.stdin.read().split()
    r, c = int(data[0]), int(data[1])
    g = [list(row) for row in data[2 : 2 + r]]
    count = 0
    for i in range(r):
        for j in range(c):
            if g[i][j] == "1":
                count += 1
                stack = [(i, j)]
                g[i][j] = "0"
                while stack:
                    a, b = stack.pop()
                    for x, y in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
                        if 0 <= x < r and 0 <= y < c and g[x][y] == "1":
                            g[x][y] = "0"
                            stack.append((x, y))
    print(count)""",
    lambda r: (
        lambda h, w: (
            f"{h} {w}\n"
            + "".join(
                "".join(r.choice("0001") if r.random() < 0.5 else r.choice("01") for _ in range(w))
                + "\n"
                for _ in range(h)
            )
        )
    )(r.randint(1, 10), r.randint(1, 10)),
    ["4 5\n11000\n11000\n00100\n00011\n", "1 1\n0\n"],
    ["2 2\n11\n11\n"],
)

S(
    "topo-order",
    "hard",
    """
    The first line holds n and m (1 <= n <= 10^4, 0 <= m <= 5 * 10^4), then m lines "a b": task a
    must come before task b (tasks are 1..n). Print the lexicographically smallest order of all
    tasks that respects every constraint, as n numbers on one line, or IMPOSSIBLE if none exists.""",
    """
    import heapq
    import sys
    data = sys.stdin.read().split()
    n, m = int(data[0]), int(data[1])
    adj = [[] for _ in range(n + 1)]
    indeg = [0] * (n + 1)
    for k in range(m):
        a, b = int(data[2 + 2 * k]), int(data[3 + 2 * k])
        adj[a].append(b)
        indeg[b] += 1
    heap = [v for v in range(1, n + 1) if indeg[v] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        v = heapq.heappop(heap)
        order.append(v)
        for w in adj[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, w)
    print(" ".join(map(str, order)) if len(order) == n else "IMPOSSIBLE")""",
    lambda r: (
        lambda n, m: (
            f"{n} {m}\n"
            + "".join(
                (lambda a, b: f"{a} {b}\n")(
                    *(
                        (lambda x, y: (x, y) if r.random() < 0.9 else (y, x))(
                            *sorted(r.sample(range(1, n + 1), 2))
                        )
                    )
                )
                for _ in range(m)
            )
        )
    )(r.randint(2, 9), r.randint(0, 10)),
    ["4 3\n1 2\n4 2\n2 3\n", "2 2\n1 2\n2 1\n"],
    ["1 0\n"],
)

S(
    "union-components",
    "hard",
    """
    The first line holds n and m (1 <= n <= 10^5, 0 <= m <= 10^5), then m lines "a b" joining
    computers a and b with a cable. Print the number of connected groups of computers.""",
    """
    import sys
    data = sys.stdin.buffer.read().split()
    n, m = int(data[0]), int(data[1])
    parent = list(range(n + 1))
    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    groups = n
    for k in range(m):
        a, b = find(int(data[2 + 2 * k])), find(int(data[3 + 2 * k]))
        if a != b:
            parent[a] = b
            groups -= 1
    print(groups)""",
    lambda r: (
        lambda n, m: (
            f"{n} {m}\n" + "".join(f"{r.randint(1, n)} {r.randint(1, n)}\n" for _ in range(m))
        )
    )(r.randint(1, 30), r.randint(0, 25)),
    ["5 3\n1 2\n2 3\n4 5\n", "3 0\n"],
)

S(
    "coin-change-ways",
    "hard",
    """
    The first line holds n and A (1 <= n <= 100, 0 <= A <= 10^5), the second n distinct coin
    values. Print the number of ways to pay exactly A with unlimited coins of these values (order
    does not matter), modulo 1000000007.""",
    """
    n, amount = map(int, input().split())
    coins = list(map(int, input().split()))
    ways = [1] + [0] * amount
    for c in coins:
        for a in range(c, amount + 1):
            ways[a] = (ways[a] + ways[a - c]) % 1000000007
    print(ways[amount])""",
    lambda r: (lambda cs: f"{len(cs)} {r.randint(0, 300)}\n{' '.join(map(str, cs))}\n")(
        r.sample(range(1, 30), r.randint(1, 5))
    ),
    ["3 5\n1 2 5\n", "1 3\n2\n"],
    ["2 0\n3 4\n", "3 100000\n1 2 5\n"],
)

S(
    "lcs-length",
    "hard",
    """
    Read two lines, strings a and b (each 1 to 2000 lowercase letters). Print the length of their
    longest common subsequence.""",
    """
    a = input().strip()
    b = input().strip()
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if ca == cb else max(prev[j], cur[j - 1]))
        prev = cur
    print(prev[-1])""",
    lambda r: f"{word(r, 1, 12, 'abcd')}\n{word(r, 1, 12, 'abcd')}\n",
    ["abcde\nace\n", "abc\ndef\n"],
)

S(
    "histogram-rectangle",
    "hard",
    """
    The first line holds n (1 <= n <= 200000), the second n bar heights (0 <= h <= 10^9) of a
    histogram with bars of width 1. Print the area of the largest rectangle inside it.""",
    """
    import sys
    data = sys.stdin.buffer.read().split()
    h = list(map(int, data[1:])) + [0]
    stack = []
    best = 0
    for i, x in enumerate(h):
        start = i
        while stack and stack[-1][1] >= x:
            j, y = stack.pop()
            best = max(best, y * (i - j))
            start = j
        stack.append((start, x))
    print(best)""",
    lambda r: arr_input(ints(r, r.randint(1, 30), 0, 12)),
    ["6\n2 1 5 6 2 3\n", "1\n0\n"],
    [arr_input(list(range(1, 10001)))],
)

S(
    "count-inversions",
    "hard",
    """
    The first line holds n (1 <= n <= 200000), the second n integers. Print the number of pairs
    i < j with a_i > a_j. An O(n^2) solution is too slow.""",
    """
    import sys
    data = sys.stdin.buffer.read().split()
    a = list(map(int, data[1:]))
    def sort(xs):
        if len(xs) <= 1:
            return xs, 0
        mid = len(xs) // 2
        left, x = sort(xs[:mid])
        right, y = sort(xs[mid:])
        merged, inv, i, j = [], x + y, 0, 0
        while i < len(left) and j < len(right):
            if left[i] <= right[j]:
                merged.append(left[i])
                i += 1
            else:
                merged.append(right[j])
                inv += len(left) - i
                j += 1
        merged += left[i:] + right[j:]
        return merged, inv
    print(sort(a)[1])""",
    lambda r: arr_input(ints(r, r.randint(1, 40), 0, 20)),
    ["5\n2 4 1 3 5\n", "3\n1 1 1\n"],
    [arr_input([(i * 7919) % 30011 for i in range(10000)])],
)

S(
    "sliding-max",
    "hard",
    """
    The first line holds n and k (1 <= k <= n <= 200000), the second n integers. Print, on one
    line, the maximum of every window of k consecutive elements (n - k + 1 numbers).""",
    """
    import sys
    from collections import deque
    data = sys.stdin.buffer.read().split()
    n, k = int(data[0]), int(data[1])
    a = list(map(int, data[2 : 2 + n]))
    dq = deque()
    out = []
    for i, x in enumerate(a):
        while dq and a[dq[-1]] <= x:
            dq.pop()
        dq.append(i)
        if dq[0] <= i - k:
            dq.popleft()
        if i >= k - 1:
            out.append(a[dq[0]])
    print(" ".join(map(str, out)))""",
    lambda r: (
        lambda n: f"{n} {r.randint(1, n)}\n{' '.join(str(x) for x in ints(r, n, -30, 30))}\n"
    )(r.randint(1, 25)),
    ["8 3\n1 3 -1 -3 5 3 6 7\n", "1 1\n5\n"],
)

# ============================================================================ function problems: easy

F(
    "add",
    "easy",
    "def add(a: int, b: int) -> int:",
    """
    Return the sum of the integers a and b.""",
    """
    def add(a, b):
        return a + b""",
    lambda r: (r.randint(-(10**9), 10**9), r.randint(-(10**9), 10**9)),
    [(2, 3), (-1, 1)],
    [(0, 0)],
)

F(
    "is-palindrome",
    "easy",
    "def is_palindrome(s: str) -> bool:",
    """
    Return True if s reads the same forwards and backwards when only its letters and digits are
    kept and upper case is treated as lower case, else False.""",
    """
    def is_palindrome(s):
        t = [c.lower() for c in s if c.isalnum()]
        return t == t[::-1]""",
    lambda r: (
        r.choice(["A man, a plan, a canal: Panama", "No lemon, no melon", "abc"])
        if r.random() < 0.3
        else maybe_palindrome(r),
    ),
    [("A man, a plan, a canal: Panama",), ("race a car",)],
    [("",), (" ,.",)],
)

F(
    "reverse-list",
    "easy",
    "def reverse_list(xs: list[int]) -> list[int]:",
    """
    Return a new list with the elements of xs in reverse order.""",
    """
    def reverse_list(xs):
        return xs[::-1]""",
    lambda r: (ints(r, r.randint(0, 10), -9, 9),),
    [([1, 2, 3],), ([],)],
)

F(
    "count-char",
    "easy",
    "def count_char(s: str, c: str) -> int:",
    """
    Return how many times the single character c occurs in s (case-sensitive).""",
    """
    def count_char(s, c):
        return s.count(c)""",
    lambda r: (word(r, 0, 15, "aAb"), r.choice("aAb")),
    [("banana", "a"), ("Aa", "a")],
    [("", "x")],
)

F(
    "fizzbuzz-list",
    "easy",
    "def fizzbuzz(n: int) -> list[str]:",
    """
    Return a list of n strings: for i = 1..n, "FizzBuzz" if i is divisible by 15, "Fizz" if by 3,
    "Buzz" if by 5, otherwise str(i).""",
    """
    def fizzbuzz(n):
        return ["FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0
                else str(i) for i in range(1, n + 1)]""",
    lambda r: (r.randint(0, 40),),
    [(5,), (15,)],
    [(0,), (1,)],
)

F(
    "sum-of-squares",
    "easy",
    "def sum_of_squares(n: int) -> int:",
    """
    Return 1^2 + 2^2 + ... + n^2 for n >= 0 (0 when n is 0).""",
    """
    def sum_of_squares(n):
        return n * (n + 1) * (2 * n + 1) // 6""",
    lambda r: (r.randint(0, 10**6),),
    [(3,), (0,)],
    [(1,)],
)

F(
    "capitalize-words",
    "easy",
    "def capitalize_words(s: str) -> str:",
    """
    Return s with the first letter of every space-separated word in upper case and the rest of
    each word unchanged. Spaces are kept as they are.""",
    """
    def capitalize_words(s):
        return " ".join(w[:1].upper() + w[1:] for w in s.split(" "))""",
    lambda r: (" ".join(word(r, 0, 6, "abcXY") for _ in range(r.randint(1, 5))),),
    [("hello world",), ("a  bC",)],
    [("",)],
)

F(
    "argmax",
    "easy",
    "def argmax(xs: list[int]) -> int:",
    """
    Return the index of the largest element of the non-empty list xs; if it occurs several times,
    the first such index.""",
    """
    def argmax(xs):
        return xs.index(max(xs))""",
    lambda r: (ints(r, r.randint(1, 12), -5, 5),),
    [([1, 3, 2, 3],), ([-1],)],
)

F(
    "dedupe",
    "easy",
    "def dedupe(xs: list[int]) -> list[int]:",
    """
    Return the elements of xs without repeats, each kept at the position of its first
    occurrence.""",
    """
    def dedupe(xs):
        seen = set()
        out = []
        for x in xs:
            if x not in seen:
                seen.add(x)
                out.append(x)
        return out""",
    lambda r: (ints(r, r.randint(0, 15), 0, 6),),
    [([3, 1, 3, 2, 1],), ([],)],
)

F(
    "is-prime",
    "easy",
    "def is_prime(n: int) -> bool:",
    """
    Return True if n is a prime number, else False (n may be any integer up to 10^12).""",
    """
    def is_prime(n):
        if n < 2:
            return False
        i = 2
        while i * i <= n:
            if n % i == 0:
                return False
            i += 1
        return True""",
    lambda r: (r.choice([r.randint(-5, 100), r.randint(1, 10**6), 999983, 1000003]),),
    [(7,), (1,)],
    [(2,), (0,), (-7,), (999999000001,), (1000000007,)],
)

F(
    "flatten-once",
    "easy",
    "def flatten(xss: list[list[int]]) -> list[int]:",
    """
    Return the concatenation of the lists in xss, in order.""",
    """
    def flatten(xss):
        return [x for xs in xss for x in xs]""",
    lambda r: ([ints(r, r.randint(0, 3), 0, 9) for _ in range(r.randint(0, 4))],),
    [([[1, 2], [3], []],), ([],)],
)

F(
    "has-duplicate",
    "easy",
    "def has_duplicate(xs: list[int]) -> bool:",
    """
    Return True if some value occurs more than once in xs, else False.""",
    """
    def has_duplicate(xs):
        return len(set(xs)) < len(xs)""",
    lambda r: (ints(r, r.randint(0, 8), 0, 15),),
    [([1, 2, 3, 1],), ([1, 2, 3],)],
    [([],)],
)

F(
    "char-histogram",
    "easy",
    "def char_histogram(s: str) -> dict[str, int]:",
    """
    Return a dict mapping each character of s to the number of times it occurs.""",
    """
    def char_histogram(s):
        out = {}
        for c in s:
            out[c] = out.get(c, 0) + 1
        return out""",
    lambda r: (word(r, 0, 12, "abc "),),
    [("hello",), ("",)],
)

F(
    "product",
    "easy",
    "def product(xs: list[int]) -> int:",
    """
    Return the product of the integers in xs (1 for an empty list).""",
    """
    def product(xs):
        p = 1
        for x in xs:
            p *= x
        return p""",
    lambda r: (ints(r, r.randint(0, 8), -9, 9),),
    [([2, 3, 4],), ([],)],
    [([0, 5],)],
)

F(
    "word-count",
    "easy",
    "def word_count(s: str) -> int:",
    """
    Return the number of words in s; words are maximal runs of non-whitespace characters.""",
    """
    def word_count(s):
        return len(s.split())""",
    lambda r: ("  ".join(word(r) for _ in range(r.randint(0, 6))),),
    [("hello  world ",), ("",)],
    [("\\tone\\ntwo",)],
)

F(
    "square-evens",
    "easy",
    "def square_evens(xs: list[int]) -> list[int]:",
    """
    Return the squares of the even numbers of xs, in their original order.""",
    """
    def square_evens(xs):
        return [x * x for x in xs if x % 2 == 0]""",
    lambda r: (ints(r, r.randint(0, 10), -9, 9),),
    [([1, 2, 3, 4],), ([1, 3],)],
)

F(
    "min-max",
    "easy",
    "def min_max(xs: list[int]) -> list[int]:",
    """
    Return [smallest, largest] of the non-empty list xs.""",
    """
    def min_max(xs):
        return [min(xs), max(xs)]""",
    lambda r: (ints(r, r.randint(1, 10), -50, 50),),
    [([3, 1, 2],), ([5],)],
)

F(
    "to-binary",
    "easy",
    "def to_binary(n: int) -> str:",
    """
    Return the binary representation of the non-negative integer n, without leading zeros
    ("0" for 0).""",
    """
    def to_binary(n):
        return bin(n)[2:]""",
    lambda r: (r.randint(0, 10 ** r.randint(1, 12)),),
    [(5,), (0,)],
    [(1,), (1024,)],
)

# ============================================================================ function problems: medium

F(
    "two-sum",
    "medium",
    "def two_sum(nums: list[int], target: int) -> list[int]:",
    """
    Exactly one pair of positions i < j has nums[i] + nums[j] == target. Return [i, j].""",
    """
    def two_sum(nums, target):
        seen = {}
        for j, x in enumerate(nums):
            if target - x in seen:
                return [seen[target - x], j]
            seen[x] = j""",
    lambda r: two_sum_case(r),
    [([2, 7, 11, 15], 9), ([3, 3], 6)],
)

F(
    "group-anagrams",
    "medium",
    "def group_anagrams(words: list[str]) -> list[list[str]]:",
    """
    Group the words that are anagrams of each other. Return the groups, each sorted
    alphabetically (duplicates kept), and the list of groups sorted by its first word.""",
    """
    def group_anagrams(words):
        groups = {}
        for w in words:
            groups.setdefault("".join(sorted(w)), []).append(w)
        return sorted(sorted(g) for g in groups.values())""",
    lambda r: ([word(r, 1, 3, "abc") for _ in range(r.randint(0, 8))],),
    [(["eat", "tea", "tan", "ate", "nat", "bat"],), ([],)],
)

F(
    "common-prefix",
    "medium",
    "def common_prefix(words: list[str]) -> str:",
    """
    Return the longest string that is a prefix of every word in the non-empty list words.""",
    """
    def common_prefix(words):
        p = words[0]
        for w in words[1:]:
            while not w.startswith(p):
                p = p[:-1]
        return p""",
    lambda r: (lambda base: ([base + word(r, 0, 3, "ab") for _ in range(r.randint(1, 4))],))(
        word(r, 0, 3, "ab")
    ),
    [(["flower", "flow", "flight"],), (["dog", "car"],)],
    [(["same"],), (["", "a"],)],
)

F(
    "valid-brackets",
    "medium",
    "def valid_brackets(s: str) -> bool:",
    """
    s consists of the characters ()[]{}. Return True if its brackets are balanced and properly
    nested.""",
    """
    def valid_brackets(s):
        pair = {")": "(", "]": "[", "}": "{"}
        stack = []
        for ch in s:
            if ch in "([{":
                stack.append(ch)
            elif not stack or stack.pop() != pair[ch]:
                return False
        return not stack""",
    lambda r: (
        "".join(r.choice("()[]{}") for _ in range(r.randint(0, 10)))
        if r.random() < 0.5
        else "([{}])" * r.randint(0, 2),
    ),
    [("()[]{}",), ("(]",)],
    [("",), ("((",), ("){",)],
)

F(
    "rotate-matrix",
    "medium",
    "def rotate(matrix: list[list[int]]) -> list[list[int]]:",
    """
    Return the square matrix rotated 90 degrees clockwise (as a new list of rows).""",
    """
    def rotate(matrix):
        return [list(row) for row in zip(*matrix[::-1])]""",
    lambda r: (lambda n: ([ints(r, n, 0, 9) for _ in range(n)],))(r.randint(1, 4)),
    [([[1, 2], [3, 4]],), ([[5]],)],
)

F(
    "merge-sorted",
    "medium",
    "def merge_sorted(a: list[int], b: list[int]) -> list[int]:",
    """
    a and b are sorted ascending. Return one sorted list with all elements of both.""",
    """
    def merge_sorted(a, b):
        out, i, j = [], 0, 0
        while i < len(a) and j < len(b):
            if a[i] <= b[j]:
                out.append(a[i])
                i += 1
            else:
                out.append(b[j])
                j += 1
        return out + a[i:] + b[j:]""",
    lambda r: (sorted(ints(r, r.randint(0, 6), 0, 20)), sorted(ints(r, r.randint(0, 6), 0, 20))),
    [([1, 3, 5], [2, 4]), ([], [1])],
)

F(
    "binary-search",
    "medium",
    "def binary_search(xs: list[int], target: int) -> int:",
    """
    xs is sorted ascending with distinct values. Return the index of target in xs, or -1 if it
    is absent.""",
    """
    def binary_search(xs, target):
        lo, hi = 0, len(xs) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            if xs[mid] == target:
                return mid
            if xs[mid] < target:
                lo = mid + 1
            else:
                hi = mid - 1
        return -1""",
    lambda r: (lambda xs: (xs, r.choice([*xs, r.randint(-5, 45)]) if xs else 3))(
        sorted(r.sample(range(-5, 40), r.randint(0, 10)))
    ),
    [([1, 3, 5, 7], 5), ([1, 3], 2)],
    [([], 1), ([4], 4)],
)

F(
    "word-break",
    "medium",
    "def word_break(s: str, words: list[str]) -> bool:",
    """
    Return True if s can be split into a sequence of one or more words from the list words
    (words may be reused), else False. The empty string counts as splittable.""",
    """
    def word_break(s, words):
        ok = [True] + [False] * len(s)
        for i in range(1, len(s) + 1):
            ok[i] = any(ok[i - len(w)] and s[i - len(w) : i] == w for w in words if 0 < len(w) <= i)
        return ok[len(s)]""",
    lambda r: (word(r, 0, 10, "ab"), [word(r, 1, 3, "ab") for _ in range(r.randint(1, 3))]),
    [("leetcode", ["leet", "code"]), ("catsandog", ["cats", "dog", "sand", "and", "cat"])],
    [("", ["a"])],
)

F(
    "max-profit-many",
    "medium",
    "def max_profit(prices: list[int]) -> int:",
    """
    prices[i] is a stock's price on day i. You may buy and sell many times but hold at most one
    share at a time. Return the largest total profit.""",
    """
    def max_profit(prices):
        return sum(max(0, b - a) for a, b in zip(prices, prices[1:]))""",
    lambda r: (ints(r, r.randint(0, 12), 1, 20),),
    [([7, 1, 5, 3, 6, 4],), ([7, 6, 4, 3, 1],)],
    [([],)],
)

F(
    "product-except-self",
    "medium",
    "def product_except_self(nums: list[int]) -> list[int]:",
    """
    Return a list whose i-th element is the product of all elements of nums except nums[i]
    (nums has at least two elements; do not use division).""",
    """
    def product_except_self(nums):
        n = len(nums)
        out = [1] * n
        left = 1
        for i in range(n):
            out[i] = left
            left *= nums[i]
        right = 1
        for i in range(n - 1, -1, -1):
            out[i] *= right
            right *= nums[i]
        return out""",
    lambda r: (ints(r, r.randint(2, 7), -3, 5),),
    [([1, 2, 3, 4],), ([0, 4, 0],)],
)

F(
    "majority",
    "medium",
    "def majority(nums: list[int]) -> int:",
    """
    Some value occurs in more than half of the positions of nums. Return it.""",
    """
    def majority(nums):
        cand, count = None, 0
        for x in nums:
            if count == 0:
                cand = x
            count += 1 if x == cand else -1
        return cand""",
    lambda r: (lambda m, k: (r.sample([m] * (k + 1) + ints(r, k, 0, 5), 2 * k + 1),))(
        r.randint(0, 5), r.randint(0, 6)
    ),
    [([3, 2, 3],), ([2, 2, 1, 1, 1, 2, 2],)],
)

F(
    "move-zeroes",
    "medium",
    "def move_zeroes(nums: list[int]) -> list[int]:",
    """
    Return nums with all zeros moved to the end and the order of the other elements kept.""",
    """
    def move_zeroes(nums):
        nz = [x for x in nums if x != 0]
        return nz + [0] * (len(nums) - len(nz))""",
    lambda r: (ints(r, r.randint(0, 10), 0, 3),),
    [([0, 1, 0, 3, 12],), ([0],)],
)

F(
    "pascal-row",
    "medium",
    "def pascal_row(n: int) -> list[int]:",
    """
    Return row n (0-based) of Pascal's triangle: the binomial coefficients C(n, 0..n).""",
    """
    def pascal_row(n):
        row = [1]
        for k in range(n):
            row.append(row[-1] * (n - k) // (k + 1))
        return row""",
    lambda r: (r.randint(0, 30),),
    [(3,), (0,)],
    [(1,)],
)

F(
    "fibonacci",
    "medium",
    "def fib(n: int) -> int:",
    """
    Return the n-th Fibonacci number, with fib(0) = 0 and fib(1) = 1, for 0 <= n <= 10000.""",
    """
    def fib(n):
        a, b = 0, 1
        for _ in range(n):
            a, b = b, a + b
        return a""",
    lambda r: (r.randint(0, 300),),
    [(10,), (0,)],
    [(1,), (2,), (10000,)],
)

F(
    "rle-decode",
    "medium",
    "def rle_decode(s: str) -> str:",
    """
    s is a run-length encoding: letters each followed by a positive decimal count (e.g. "a3b12").
    Return the decoded string (e.g. "aaab" followed by twelve b's).""",
    """
    import re

    def rle_decode(s):
        return "".join(ch * int(k) for ch, k in re.findall(r"([a-zA-Z])(\\d+)", s))""",
    lambda r: ("".join(f"{r.choice('abcXY')}{r.randint(1, 12)}" for _ in range(r.randint(0, 5))),),
    [("a3b1",), ("x10",)],
    [("",)],
)

F(
    "unique-paths",
    "medium",
    "def unique_paths(m: int, n: int) -> int:",
    """
    A robot walks from the top-left to the bottom-right cell of an m x n grid, moving only right
    or down. Return the number of different paths (1 <= m, n <= 100).""",
    """
    from math import comb

    def unique_paths(m, n):
        return comb(m + n - 2, m - 1)""",
    lambda r: (r.randint(1, 100), r.randint(1, 100)),
    [(3, 7), (3, 2)],
    [(1, 1)],
)

F(
    "longest-unique-substring",
    "medium",
    "def longest_unique(s: str) -> int:",
    """
    Return the length of the longest substring of s without repeated characters.""",
    """
    def longest_unique(s):
        last = {}
        best = start = 0
        for i, c in enumerate(s):
            if last.get(c, -1) >= start:
                start = last[c] + 1
            last[c] = i
            best = max(best, i - start + 1)
        return best""",
    lambda r: (word(r, 0, 20, "abcd"),),
    [("abcabcbb",), ("bbbbb",)],
    [("",), ("pwwkew",)],
)

F(
    "top-k-frequent",
    "medium",
    "def top_k_frequent(nums: list[int], k: int) -> list[int]:",
    """
    Return the k most frequent values of nums, most frequent first; among equally frequent values
    the smaller comes first. k is at most the number of distinct values.""",
    """
    from collections import Counter

    def top_k_frequent(nums, k):
        c = Counter(nums)
        return sorted(c, key=lambda x: (-c[x], x))[:k]""",
    lambda r: (lambda xs: (xs, r.randint(1, len(set(xs)))))(ints(r, r.randint(1, 15), 0, 6)),
    [([1, 1, 1, 2, 2, 3], 2), ([4], 1)],
)

F(
    "matrix-multiply",
    "medium",
    "def matmul(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:",
    """
    Return the matrix product of a (p x q) and b (q x r) as a list of p rows.""",
    """
    def matmul(a, b):
        return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]""",
    lambda r: (
        lambda p, q, s: (
            [ints(r, q, -3, 3) for _ in range(p)],
            [ints(r, s, -3, 3) for _ in range(q)],
        )
    )(r.randint(1, 3), r.randint(1, 3), r.randint(1, 3)),
    [([[1, 2], [3, 4]], [[5, 6], [7, 8]]), ([[2]], [[3]])],
)

F(
    "is-anagram",
    "medium",
    "def is_anagram(a: str, b: str) -> bool:",
    """
    Return True if b is a rearrangement of the characters of a (case-sensitive), else False.""",
    """
    def is_anagram(a, b):
        return sorted(a) == sorted(b)""",
    lambda r: (
        lambda a: (a, "".join(r.sample(a, len(a))) if r.random() < 0.5 else word(r, 0, 5, "abc"))
    )(word(r, 0, 5, "abc")),
    [("anagram", "nagaram"), ("rat", "car")],
    [("", "")],
)

F(
    "min-cost-stairs",
    "medium",
    "def min_cost_stairs(cost: list[int]) -> int:",
    """
    cost[i] is the price of stepping on stair i. You start on stair 0 or 1 and climb 1 or 2 stairs
    at a time; the top is just past the last stair. Return the least total cost (len(cost) >= 2).""",
    """
    def min_cost_stairs(cost):
        a, b = 0, 0
        for i in range(2, len(cost) + 1):
            a, b = b, min(b + cost[i - 1], a + cost[i - 2])
        return b""",
    lambda r: (ints(r, r.randint(2, 12), 0, 20),),
    [([10, 15, 20],), ([1, 100, 1, 1, 1, 100, 1, 1, 100, 1],)],
)

F(
    "compress-string",
    "medium",
    "def compress(s: str) -> str:",
    """
    Replace each maximal block of equal characters by the character followed by the block length
    when the length is at least 2 (e.g. "aabccc" -> "a2bc3"). Return the result if it is shorter
    than s, else s itself.""",
    """
    def compress(s):
        out = []
        i = 0
        while i < len(s):
            j = i
            while j < len(s) and s[j] == s[i]:
                j += 1
            out.append(s[i] + (str(j - i) if j - i > 1 else ""))
            i = j
        t = "".join(out)
        return t if len(t) < len(s) else s""",
    lambda r: (word(r, 0, 15, "ab"),),
    [("aabcccccaaa",), ("abc",)],
    [("",)],
)

# ============================================================================ function problems: hard

F(
    "longest-palindrome",
    "hard",
    "def longest_palindrome(s: str) -> str:",
    """
    Return the longest substring of s that is a palindrome; if several have the maximal length,
    the one that starts first. s has at most 2000 characters.""",
    """
    def longest_palindrome(s):
        best = s[:1]
        for c in range(len(s)):
            for lo, hi in ((c, c), (c, c + 1)):
                while lo >= 0 and hi < len(s) and s[lo] == s[hi]:
                    lo -= 1
                    hi += 1
                if hi - lo - 1 > len(best) or (hi - lo - 1 == len(best) and lo + 1 < s.find(best)):
                    best = s[lo + 1 : hi]
        return best""",
    lambda r: (word(r, 0, 14, "ab"),),
    [("babad",), ("cbbd",)],
    [("",), ("a",)],
)

F(
    "num-islands",
    "hard",
    "def num_islands(grid: list[str]) -> int:",
    """
    grid is a list of equal-length strings of '1' (land) and '0' (water). Land cells that touch up,
    down, left or right form one island. Return the number of islands.""",
    """
    def num_islands(grid):
        seen = set()
        count = 0
        for i, row in enumerate(grid):
            for j, ch in enumerate(row):
                if ch == "1" and (i, j) not in seen:
                    count += 1
                    stack = [(i, j)]
                    seen.add((i, j))
                    while stack:
                        a, b = stack.pop()
                        for x, y in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
                            if 0 <= x < len(grid) and 0 <= y < len(row) and grid[x][y] == "1" and (x, y) not in seen:
                                seen.add((x, y))
                                stack.append((x, y))
        return count""",
    lambda r: (lambda h, w: (["".join(r.choice("01") for _ in range(w)) for _ in range(h)],))(
        r.randint(1, 7), r.randint(1, 7)
    ),
    [(["11000", "11000", "00100", "00011"],), (["0"],)],
    [([],)],
)

F(
    "coin-change-min",
    "hard",
    "def min_coins(coins: list[int], amount: int) -> int:",
    """
    Return the fewest coins (unlimited supply of each value in coins) that sum to amount, or -1 if
    amount cannot be paid. amount <= 10^4.""",
    """
    def min_coins(coins, amount):
        inf = float("inf")
        best = [0] + [inf] * amount
        for a in range(1, amount + 1):
            for c in coins:
                if c <= a and best[a - c] + 1 < best[a]:
                    best[a] = best[a - c] + 1
        return best[amount] if best[amount] != inf else -1""",
    lambda r: (r.sample(range(2, 15), r.randint(1, 4)), r.randint(0, 60)),
    [([1, 2, 5], 11), ([2], 3)],
    [([1], 0), ([186, 419, 83, 408], 6249)],
)

F(
    "trap-rain",
    "hard",
    "def trap(heights: list[int]) -> int:",
    """
    heights are bar heights of width 1. Return how many units of rain water they trap.""",
    """
    def trap(heights):
        lo, hi = 0, len(heights) - 1
        left_max = right_max = water = 0
        while lo < hi:
            if heights[lo] < heights[hi]:
                left_max = max(left_max, heights[lo])
                water += left_max - heights[lo]
                lo += 1
            else:
                right_max = max(right_max, heights[hi])
                water += right_max - heights[hi]
                hi -= 1
        return water""",
    lambda r: (ints(r, r.randint(0, 15), 0, 6),),
    [([0, 1, 0, 2, 1, 0, 1, 3, 2, 1, 2, 1],), ([4, 2, 0, 3, 2, 5],)],
    [([],)],
)

F(
    "n-queens",
    "hard",
    "def n_queens(n: int) -> int:",
    """
    Return the number of ways to place n queens on an n x n chessboard so that no two attack each
    other (1 <= n <= 10).""",
    """
    def n_queens(n):
        def place(row, cols, d1, d2):
            if row == n:
                return 1
            total = 0
            for c in range(n):
                if c not in cols and row + c not in d1 and row - c not in d2:
                    total += place(row + 1, cols | {c}, d1 | {row + c}, d2 | {row - c})
            return total
        return place(0, frozenset(), frozenset(), frozenset())""",
    lambda r: (r.randint(1, 8),),
    [(4,), (1,)],
    [(2,), (3,), (8,), (10,)],
)

F(
    "word-ladder",
    "hard",
    "def ladder_length(begin: str, end: str, words: list[str]) -> int:",
    """
    Change begin into end one letter at a time; every intermediate word (and end) must be in
    words. Return the number of words in the shortest such sequence (begin and end included), or
    0 if there is none.""",
    """
    from collections import deque

    def ladder_length(begin, end, words):
        allowed = set(words)
        if end not in allowed:
            return 0
        q = deque([(begin, 1)])
        seen = {begin}
        while q:
            w, d = q.popleft()
            if w == end:
                return d
            for i in range(len(w)):
                for ch in "abcdefghijklmnopqrstuvwxyz":
                    v = w[:i] + ch + w[i + 1 :]
                    if v in allowed and v not in seen:
                        seen.add(v)
                        q.append((v, d + 1))
        return 0""",
    lambda r: (
        word(r, 3, 3, "abc"),
        word(r, 3, 3, "abc"),
        [word(r, 3, 3, "abc") for _ in range(r.randint(1, 12))],
    ),
    [
        ("hit", "cog", ["hot", "dot", "dog", "lot", "log", "cog"]),
        ("hit", "cog", ["hot", "dot", "dog", "lot", "log"]),
    ],
)

F(
    "median-two-sorted",
    "hard",
    "def median_sorted(a: list[int], b: list[int]) -> float:",
    """
    a and b are sorted ascending and not both empty. Return the median of all their elements as a
    float (the mean of the two middle elements when the total count is even).""",
    """
    def median_sorted(a, b):
        xs = sorted(a + b)
        n = len(xs)
        return float(xs[n // 2]) if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2""",
    lambda r: (
        sorted(ints(r, r.randint(0, 6), -20, 20)),
        sorted(ints(r, r.randint(1, 6), -20, 20)),
    ),
    [([1, 3], [2]), ([1, 2], [3, 4])],
)

F(
    "inversions",
    "hard",
    "def inversions(xs: list[int]) -> int:",
    """
    Return the number of pairs i < j with xs[i] > xs[j]. xs may have 10^5 elements, so an
    O(n^2) solution is too slow.""",
    """
    def inversions(xs):
        def sort(a):
            if len(a) <= 1:
                return a, 0
            mid = len(a) // 2
            left, x = sort(a[:mid])
            right, y = sort(a[mid:])
            out, inv, i, j = [], x + y, 0, 0
            while i < len(left) and j < len(right):
                if left[i] <= right[j]:
                    out.append(left[i])
                    i += 1
                else:
                    out.append(right[j])
                    inv += len(left) - i
                    j += 1
            return out + left[i:] + right[j:], inv
        return sort(list(xs))[1]""",
    lambda r: (ints(r, r.randint(0, 30), 0, 15),),
    [([2, 4, 1, 3, 5],), ([],)],
    [([(i * 7919) % 20011 for i in range(10000)],)],
)

F(
    "grid-path-01",
    "hard",
    "def shortest_path(grid: list[list[int]]) -> int:",
    """
    grid is a matrix of 0 (free) and 1 (blocked). Return the number of cells on the shortest path
    from the top-left to the bottom-right cell moving up, down, left or right through free cells
    (both ends included), or -1 if there is none.""",
    """
    from collections import deque

    def shortest_path(grid):
        h, w = len(grid), len(grid[0])
        if grid[0][0] or grid[h - 1][w - 1]:
            return -1
        dist = {(0, 0): 1}
        q = deque([(0, 0)])
        while q:
            i, j = q.popleft()
            if (i, j) == (h - 1, w - 1):
                return dist[(i, j)]
            for a, b in ((i + 1, j), (i - 1, j), (i, j + 1), (i, j - 1)):
                if 0 <= a < h and 0 <= b < w and not grid[a][b] and (a, b) not in dist:
                    dist[(a, b)] = dist[(i, j)] + 1
                    q.append((a, b))
        return -1""",
    lambda r: (lambda h, w: ([[int(r.random() < 0.25) for _ in range(w)] for _ in range(h)],))(
        r.randint(1, 7), r.randint(1, 7)
    ),
    [([[0, 1], [0, 0]],), ([[0, 1], [1, 0]],)],
    [([[0]],)],
)

F(
    "evaluate",
    "hard",
    "def evaluate(expr: str) -> int:",
    """
    expr is an arithmetic expression of non-negative integers, + - * /, parentheses and spaces.
    Division is integer division that truncates toward zero; * and / bind tighter than + and -,
    operators of equal precedence apply left to right; no unary minus. Return its value (divisors
    are never zero). Do not use eval.""",
    """
    def evaluate(expr):
        tokens = []
        i = 0
        while i < len(expr):
            ch = expr[i]
            if ch.isdigit():
                j = i
                while j < len(expr) and expr[j].isdigit():
                    j += 1
                tokens.append(int(expr[i:j]))
                i = j
                continue
            if ch in "+-*/()":
                tokens.append(ch)
            i += 1
        pos = 0

        def atom():
            nonlocal pos
            tok = tokens[pos]
            pos += 1
            if tok == "(":
                v = add()
                pos += 1
                return v
            return tok

        def mul():
            nonlocal pos
            v = atom()
            while pos < len(tokens) and tokens[pos] in ("*", "/"):
                op = tokens[pos]
                pos += 1
                w = atom()
                if op == "*":
                    v = v * w
                else:  # truncate toward zero, exactly (no float division)
                    q = abs(v) // abs(w)
                    v = q if (v >= 0) == (w > 0) else -q
            return v

        def add():
            nonlocal pos
            v = mul()
            while pos < len(tokens) and tokens[pos] in ("+", "-"):
                op = tokens[pos]
                pos += 1
                w = mul()
                v = v + w if op == "+" else v - w
            return v

        return add()""",
    lambda r: (random_expr(r, 3),),
    [("1 + 2 * 3",), ("(7 - 10) / 2",)],
    [("42",), ("2*(3+4)*5 - 6/4",)],
)

F(
    "mst-weight",
    "hard",
    "def mst_weight(n: int, edges: list[list[int]]) -> int:",
    """
    A graph has vertices 0..n-1 and undirected edges [u, v, w] of weight w. Return the total
    weight of a minimum spanning tree, or -1 if the graph is not connected.""",
    """
    def mst_weight(n, edges):
        parent = list(range(n))
        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x
        total, used = 0, 0
        for u, v, w in sorted(edges, key=lambda e: e[2]):
            a, b = find(u), find(v)
            if a != b:
                parent[a] = b
                total += w
                used += 1
        return total if used == n - 1 else -1""",
    lambda r: (
        lambda n: (
            n,
            [
                [r.randrange(n), r.randrange(n), r.randint(1, 20)]
                for _ in range(r.randint(0, 2 * n))
            ],
        )
    )(r.randint(1, 8)),
    [(4, [[0, 1, 1], [1, 2, 2], [2, 3, 1], [0, 3, 5]]), (3, [[0, 1, 4]])],
    [(1, [])],
)

F(
    "edit-distance-fn",
    "hard",
    "def edit_distance(a: str, b: str) -> int:",
    """
    Return the minimum number of single-character insertions, deletions and substitutions that
    turn a into b.""",
    """
    def edit_distance(a, b):
        prev = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            cur = [i]
            for j, cb in enumerate(b, 1):
                cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
            prev = cur
        return prev[-1]""",
    lambda r: (word(r, 0, 8, "abc"), word(r, 0, 8, "abc")),
    [("horse", "ros"), ("", "ab")],
)

F(
    "unique-permutations",
    "hard",
    "def unique_permutations(nums: list[int]) -> list[list[int]]:",
    """
    Return all distinct orderings of nums (which may contain repeats), sorted lexicographically.""",
    """
    def unique_permutations(nums):
        out = []
        counts = {}
        for x in nums:
            counts[x] = counts.get(x, 0) + 1
        def go(path):
            if len(path) == len(nums):
                out.append(path[:])
                return
            for x in sorted(counts):
                if counts[x]:
                    counts[x] -= 1
                    path.append(x)
                    go(path)
                    path.pop()
                    counts[x] += 1
        go([])
        return out""",
    lambda r: (ints(r, r.randint(0, 5), 1, 3),),
    [([1, 1, 2],), ([3],)],
    [([],)],
)


# ============================================================================ generator helpers


def two_sum_case(r: random.Random) -> tuple[list[int], int]:
    while True:
        nums = r.sample(range(-30, 30), r.randint(2, 10))
        i, j = sorted(r.sample(range(len(nums)), 2))
        target = nums[i] + nums[j]
        pairs = [
            (a, b)
            for a in range(len(nums))
            for b in range(a + 1, len(nums))
            if nums[a] + nums[b] == target
        ]
        if len(pairs) == 1:
            return nums, target


def random_expr(r: random.Random, depth: int) -> str:
    if depth == 0 or r.random() < 0.3:
        return str(r.randint(0, 20))
    op = r.choice("+-*/")
    right = random_expr(r, depth - 1)
    if op == "/":
        right = str(r.randint(1, 9))
    text = f"{random_expr(r, depth - 1)} {op} {right}"
    return f"({text})" if r.random() < 0.4 else text


# ============================================================================ building


def run_reference(spec: Spec, inp: Any) -> Any:
    """Run a (trusted) reference in this process: stdout for stdin problems, the return value."""
    ns: dict[str, Any] = {"__name__": "__main__" if spec.fn is None else "__reference__"}
    code = compile(spec.reference, spec.id, "exec")
    if spec.fn is None:
        out = io.StringIO()
        old = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(inp.encode()), encoding="utf-8")
        try:
            with contextlib.redirect_stdout(out):
                exec(code, ns)
        finally:
            sys.stdin = old
        return out.getvalue()
    exec(code, ns)
    return ns[spec.fn](*copy.deepcopy(inp))


def fmt_example(spec: Spec, inp: Any, out: Any) -> str:
    if spec.fn is None:
        return f"Input:\n```\n{inp.rstrip()}\n```\nOutput:\n```\n{out.rstrip()}\n```"
    args = ", ".join(repr(a) for a in inp)
    return f"`{spec.fn}({args})` returns `{out!r}`"


def build(spec: Spec) -> dict[str, Any]:
    seed = int.from_bytes(hashlib.sha256(spec.id.encode()).digest()[:8], "big")
    r = random.Random(seed)
    inputs: list[Any] = []
    for inp in spec.examples + spec.edge:
        if inp not in inputs:
            inputs.append(inp)
    tries = 0
    while len(inputs) < N_TESTS and tries < 1000:
        tries += 1
        inp = spec.gen(r)
        if inp not in inputs:
            inputs.append(inp)
    rows = []
    for inp in inputs:
        out = run_reference(spec, inp)
        if spec.fn is None:
            rows.append({"input": inp, "output": out})
        else:
            rows.append({"input": json.dumps(list(inp)), "output": json.dumps(out)})
    examples = "\n\n".join(fmt_example(spec, i, run_reference(spec, i)) for i in spec.examples)
    statement = f"{spec.statement}\n\nExample{'s' if len(spec.examples) > 1 else ''}:\n\n{examples}"
    return {
        "id": f"builtin/{spec.id}",
        "difficulty": spec.difficulty,
        "kind": "stdio" if spec.fn is None else "function",
        "fn_name": spec.fn,
        "starter": spec.signature,
        "statement": statement,
        "reference": spec.reference,
        "public": rows[: len(spec.examples)],
        "tests": rows,
    }


# ============================================================================ known wrong programs

_SWAP_CMP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_SWAP_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add}
_SWAP_BOOL = {ast.And: ast.Or, ast.Or: ast.And}
_SWAP_CALL = {"min": "max", "max": "min"}
MAX_CANDIDATES = 24  # mutants tried per problem
MAX_WRONG = 2  # known wrong programs kept per problem


def _edits(node: ast.AST) -> list[Callable[[ast.AST], None]]:
    """Single-point edits of ``node``: the bugs people make (off-by-one, flipped comparison,
    ``and``/``or``, ``min``/``max``, ``+``/``-``)."""
    edits: list[Callable[[ast.AST], None]] = []
    if isinstance(node, ast.Compare):
        for j, op in enumerate(node.ops):
            if type(op) in _SWAP_CMP:
                edits.append(lambda n, j=j: n.ops.__setitem__(j, _SWAP_CMP[type(n.ops[j])]()))
    elif isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BIN:
        edits.append(lambda n: setattr(n, "op", _SWAP_BIN[type(n.op)]()))
    elif isinstance(node, ast.BoolOp):
        edits.append(lambda n: setattr(n, "op", _SWAP_BOOL[type(n.op)]()))
    elif isinstance(node, ast.Name) and node.id in _SWAP_CALL:
        edits.append(lambda n: setattr(n, "id", _SWAP_CALL[n.id]))
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        edits.append(lambda n: setattr(n, "value", not n.value))
    elif isinstance(node, ast.Constant) and type(node.value) is int and -1 <= node.value <= 10:
        edits.append(lambda n: setattr(n, "value", n.value + 1))
        edits.append(lambda n: setattr(n, "value", n.value - 1))
    return edits


def mutants(source: str) -> list[str]:
    """Programs that differ from ``source`` by one small edit (at most MAX_CANDIDATES)."""
    original = ast.unparse(ast.parse(source))
    out: list[str] = []
    for index, node in enumerate(ast.walk(ast.parse(source))):
        for edit in _edits(node):
            tree = ast.parse(source)
            edit(list(ast.walk(tree))[index])  # the same node in a fresh copy (same walk order)
            code = ast.unparse(tree) + "\n"
            if code.strip() != original and code not in out:
                out.append(code)
    return out[:MAX_CANDIDATES]


def add_known_wrong(records: list[dict[str, Any]]) -> None:
    """Give each problem up to MAX_WRONG subtle wrong programs, checked in the sandbox.

    A mutant qualifies when it runs without time-outs and fails at least one hidden test. The
    most subtle come first: those that pass every public example (the statement's examples
    cannot tell them apart), then by hidden pass rate. The tester's reward checks that its
    cases catch them.
    """
    from mas_envs.code.judge import Limits, Request, run_requests
    from mas_envs.code.problems import _read_builtin

    tmp = OUT.with_suffix(".tmp.jsonl")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    problems = list(_read_builtin(tmp))
    tmp.unlink()
    reqs, owners = [], []
    for i, p in enumerate(problems):
        for code in mutants(p.reference):
            reqs.append(Request(code, p.tests, p.fn_name))
            owners.append(i)
    print(f"checking {len(reqs)} mutants in the sandbox ...")
    results = run_requests(reqs, Limits(timeout_s=2.0))
    kept: dict[int, list[tuple[float, str]]] = {}
    for i, req, res in zip(owners, reqs, results, strict=True):
        p = problems[i]
        passed = [r.passed for r in res]
        public = [passed[p.tests.index(c)] for c in p.public]
        slow = any(r.status in ("timeout", "skipped", "sandbox_error") for r in res)
        if not slow and not all(passed):
            subtle = (all(public), sum(passed) / len(passed))
            kept.setdefault(i, []).append((subtle, req.program))
    for i, rec in enumerate(records):
        best = sorted(kept.get(i, []), key=lambda t: t[0], reverse=True)[:MAX_WRONG]
        rec["wrong"] = [code for _, code in best]


def main() -> None:
    ids = [s.id for s in SPECS]
    assert len(set(ids)) == len(ids), "duplicate problem id"
    records = [build(spec) for spec in SPECS]
    add_known_wrong(records)
    with OUT.open("w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    with_wrong = sum(1 for r in records if r["wrong"])
    missing = [r["id"] for r in records if not r["wrong"]]
    print(f"{with_wrong} problems have known wrong programs; none for {missing}")
    assert with_wrong >= len(records) * 0.85, "most problems need known wrong programs"
    kinds = {
        k: sum(1 for s in SPECS if (s.fn is None) == (k == "stdio")) for k in ("stdio", "function")
    }
    levels = {d: sum(1 for s in SPECS if s.difficulty == d) for d in ("easy", "medium", "hard")}
    print(f"wrote {len(SPECS)} problems to {OUT} ({kinds}, {levels})")


if __name__ == "__main__":
    main()
