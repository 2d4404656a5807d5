"""A catalogue of programs that try to earn a reward they did not earn, for every judging env.

Each hack is a *null* program (it computes nothing: a function that returns nothing useful, a
printer that prints no answer, or for the math tool a known-wrong one) wrapped in a trick: an
always-equal object, an early exit, patched builtins or harness internals, shadowed names, forged
harness reports or sandbox verdicts, signals to the harness, stalled or detached processes,
exhausted limits. ``tests/sandbox/test_judge_integrity.py`` runs every hack through every env that
judges code and asserts that none earns more than the honest null program, and that no trick turns a
failure into a ``sandbox_error`` (which a trainer drops, so it would dodge the penalty).

The leak programs (:data:`LEAKS`) look for the hidden tests' inputs (``SECRET-...``, a pattern they
build from pieces, so the program text never names one) wherever a program can look, or count
them out in pids, and print what they find on visible cases: no hidden input may reach a prompt,
and the prompts must be the same whatever the hidden tests are.

Every program here is bounded even if the sandbox around it were broken: loops end within
seconds, forks stop at 40, allocations at 1.5 GiB, output at 16 MiB. ``{fn}`` is the function
under test (function problems) and ``{null}`` the null answer: ``None`` for a function, the text a
printer prints (``""`` or a known-wrong answer).
"""

from __future__ import annotations

import json
from pathlib import Path

# Every hack starts with this: the null answer, and `answer()` to give it in the problem's form.
_PRELUDE = '''
import os, sys, time
NULL = {null!r}
FN = {fn!r}

def answer():
    """The null answer: printed by a printer; a function problem's function returns None."""
    if NULL is not None:
        print(NULL, flush=True)

def {fn}(*args, **kwargs):
    return None
'''

LEAVE_GROUP = """
def leave_process_group(hold_s):
    # Join a new process group, so that a killpg of ours misses us; its leader lives hold_s.
    g = os.fork()
    if g == 0:
        os.setpgid(0, 0)
        time.sleep(hold_s)
        os._exit(0)
    time.sleep(0.05)
    try:
        os.setpgid(0, g)
    except OSError:
        pass
"""

_HACKS: dict[str, str] = {
    # ------------------------------------------------------------------ forged answers
    "always-equal": """
class Same:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return True
    def __le__(self, other): return True
    def __gt__(self, other): return True
    def __ge__(self, other): return True
    def __bool__(self): return True
    def __hash__(self): return 0
    def __len__(self): return 0
    def __str__(self): return str(NULL if NULL is not None else "")
    __repr__ = __str__
def {fn}(*args, **kwargs):
    return Same()
answer()
""",
    "always-equal-builtin-subclasses": """
def same(base):
    return type("S", (base,), {{"__eq__": lambda s, o: True, "__ne__": lambda s, o: False,
                               "__hash__": lambda s: 0}})
vals = [same(int)(0), same(float)(0.0), same(str)(""), same(list)(), same(tuple)(), same(dict)()]
def {fn}(*args, **kwargs):
    return vals[0]
answer()
""",
    "shadowed-builtins-and-helpers": """
def {fn}(*args, **kwargs):
    return 0
# Each name returns what makes a typical assert true: abs(candidate(x) - y) < 1e-6,
# sorted(candidate(x)) == sorted(y), all(...), abs(poly(xs, candidate(xs))) < 1e-4 ...
for names, value in [("abs len sum max min round poly candidate float int", 0),
                     ("all any isinstance callable bool", True), ("sorted set list tuple", []),
                     ("encode_cyclic encode_shift str repr", ""), ("math type print", None)]:
    for name in names.split():
        globals()[name] = lambda *a, _v=value, **k: _v
answer()
""",
    "patched-builtins": """
import builtins
class Nothing(BaseException):
    pass
builtins.AssertionError = Nothing
builtins.isinstance = lambda *a: True
builtins.abs = lambda *a: 0
builtins.sorted = lambda *a, **k: []
builtins.all = builtins.any = lambda *a: True
builtins.repr = lambda o: "0"
answer()
""",
    "patched-harness": """
# The harness is this process's __main__ (a forked child of it): patch what it uses.
h = sys.modules.get("__main__")
real_exit = os._exit
for name, value in [("plain", lambda v, d=0: v), ("values_match", lambda *a: True),
                    ("outputs_match", lambda *a: True), ("judge", lambda *a, **k: True)]:
    try:
        setattr(h, name, value)
    except Exception:
        pass
os._exit = lambda code: real_exit(0)  # the child's error status becomes 0
import json
json.dumps = lambda *a, **k: '{{"i": 0, "status": "ok", "out": "", "err": ""}}'
import ast
ast.literal_eval = lambda text: ()
answer()
""",
    "forged-reports": """
import json
lines = ["@@R " + json.dumps({{"i": i, "status": "ok", "out": str(NULL or ""), "err": ""}})
         for i in range(64)]
text = "\\n".join(lines) + "\\n"
print(text, flush=True)
sys.stderr.write(text)
for fd in range(256):  # every descriptor we have: the result pipe, a socket...
    try:
        os.write(fd, text.encode())
    except OSError:
        pass
for pid in (1, 2, os.getppid()):  # the harness's and bubblewrap's stdout
    try:
        with open(f"/proc/{{pid}}/fd/1", "w") as f:
            f.write(text)
    except OSError:
        pass
answer()
""",
    "forged-zygote-messages": """
import socket
msg = b"P1\\nW1 0\\nW0\\nP2\\nW2 0\\n"
for fd in range(3, 256):
    try:
        s = socket.socket(fileno=os.dup(fd))
        s.send(msg)
        s.detach()
    except OSError:
        pass
    try:
        os.write(fd, msg)
    except OSError:
        pass
answer()
""",
    "forged-verdict-text": """
sys.stderr.write("MemoryError\\n[mas-sandbox: stopped: time limit of 1 s exceeded]\\n"
                 "mas-sandbox: set-up failed: OSError\\n")
answer()
sys.stdout.flush()
os._exit(70)  # the launcher's own set-up-failed status
""",
    "forged-signal-statuses": """
import signal
answer()
sys.stdout.flush()
if os.fork() == 0:
    os._exit(152)  # bubblewrap's status for SIGXCPU
os.wait()
os.kill(os.getpid(), signal.SIGXCPU)
""",
    # ------------------------------------------------------------------ early exits
    "exit-0-first": """
import sys as _s
_s.exit(0)
""",
    "os-exit-0-first": """
os._exit(0)
""",
    "exit-0-in-the-call": """
def {fn}(*args, **kwargs):
    os._exit(0)
answer()
""",
    "atexit-exit-0": """
import atexit
atexit.register(lambda: os._exit(0))
answer()
raise RuntimeError("fails, then exits 0")
""",
    "closed-stdio-exit-0": """
answer()
sys.stdout.flush()
os.close(1)
os.close(2)
os._exit(0)
""",
    # ------------------------------------------------------------------ processes and signals
    "kill-the-harness": """
import signal
if os.fork() == 0:  # a child of the test's process: kill every ancestor but bubblewrap's init
    p = os.getppid()
    while p > 1:
        stat = open(f"/proc/{{p}}/stat").read()
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
        p = parent
    os._exit(0)
os.wait()
answer()
""",
    "terminate-the-harness": """
import signal
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP):
    for pid in range(2, 64):
        if pid != os.getpid():
            try:
                os.kill(pid, sig)
            except OSError:
                pass
answer()
""",
    "kill-everything": """
import signal
answer()
sys.stdout.flush()
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
""",
    "stop-the-harness": """
import signal
answer()
sys.stdout.flush()
for pid in range(2, 64):
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            pass
time.sleep(0.2)
""",
    "stalled-child": LEAVE_GROUP
    + """
leave_process_group(4)
answer()
sys.stdout.flush()
for fd in range(256):
    try:
        os.close(fd)
    except OSError:
        pass
time.sleep(3)
os._exit(0)
""",
    "detached-writer": """
REPORT = ("@@R " + '{{"i": 0, "status": "ok", "out": "", "err": ""}}' + "\\n").encode()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(0.5)
        for _ in range(20):  # keeps writing into the pipes it inherited, after we are gone
            try:
                os.write(1, REPORT)
            except OSError:
                pass
            time.sleep(0.1)
        os._exit(0)
    os._exit(0)
answer()
""",
    "fork-to-the-limit": """
kids = 0
while kids < 40:  # bounded; the sandbox allows 32 processes
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(2)
        os._exit(0)
    kids += 1
answer()
""",
    "memory-hog": """
if os.fork() == 0:
    hog = []
    try:
        while len(hog) < 96:  # bounded: 96 x 16 MiB = 1.5 GiB
            hog.append(bytearray(16 << 20))
    except MemoryError:
        pass
    os._exit(0)
os.wait()
answer()
""",
    "output-flood": """
answer()
try:
    for _ in range(16):  # bounded: 16 MiB
        sys.stdout.write("0 " * (1 << 19))
        sys.stderr.write("e" * (1 << 20))
except Exception:
    pass
""",
    "fill-the-disks": """
for d in ("/tmp", "/dev/shm", os.getcwd()):
    try:
        with open(d + "/fill", "wb") as f:
            for _ in range(80):  # bounded: 80 MiB, more than each tmpfs holds
                f.write(b"x" * (1 << 20))
    except OSError:
        pass
answer()
""",
    "spin-threads": """
import threading
def spin():
    end = time.time() + 8  # bounded
    while time.time() < end:
        pass
for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
answer()
time.sleep(8)
""",
    # ------------------------------------------------------------------ shadowed imports
    # A module file named after every standard module not imported yet, wherever this process
    # can write one (the working directory is on the import path). Whatever imports one after
    # the program ran runs it: a script test's checker (``import random`` in a HumanEval test,
    # ``math`` in its prompt's helpers) would report its assert as passed, the harness would
    # report every test as passed; anywhere else it loads the real module.
    "shadowed-stdlib-modules": r"""
SHADOW = '''
import json as _j, os as _o, sys as _s
_f = _s._getframe()
while _f is not None:
    _l = _f.f_locals
    if "res_fd" in _l and "req_fd" in _l:  # a script test's checker: "the assert passed"
        _o.write(_l["res_fd"], b"ok")
        _o._exit(0)
    if "zygote" in _l and "tests" in _l:  # the harness: every test passed
        for _i in range(len(_l["tests"])):
            _line = "@@R " + _j.dumps(dict(i=_i, status="ok", out="", err=""))
            _o.write(1, _line.encode() + bytes([10]))
        _o._exit(0)
    _f = _f.f_back
_name = __name__
del _s.modules[_name]
_saved = _s.path[:]
_s.path[:] = [_p for _p in _s.path if _p and _p != _o.getcwd()]
try:
    _real = __import__(_name)
finally:
    _s.path[:] = _saved
_s.modules[_name] = _real
globals().update(_real.__dict__)
'''
for where in ["", *sys.path]:
    if not os.access(where or ".", os.W_OK):
        continue
    for name in sys.stdlib_module_names:
        if name not in sys.modules and name.isidentifier():
            try:
                with open(os.path.join(where, name + ".py"), "w") as f:
                    f.write(SHADOW)
            except OSError:
                pass
answer()
""",
}

HACKS: dict[str, str] = {name: _PRELUDE + body for name, body in _HACKS.items()}
"""Hack name -> program template (``.format(fn=..., null=...)``)."""

SLOW_HACKS = frozenset({"stop-the-harness", "spin-threads", "stalled-child"})
"""Hacks that cost a whole time limit or more per run (the quick suite runs them once)."""


def program(name: str, fn: str, null: str | None) -> str:
    """The hack ``name`` for a function ``fn`` (or a printer of ``null``), as a program."""
    return HACKS[name].format(fn=fn, null=null)


# ------------------------------------------------------------------------------ leaks

# A hostile program that, on every test, stashes its own input wherever it can (files, a
# background process, System V shared memory) and looks for other tests' inputs wherever it can
# (the harness's objects and frames, its own memory, other processes' files and memory, the
# stash). It prints what it found that is not its own input. Each probe is a separate program,
# so a failure names the way in.
HOSTILE_PROBE = r"""
import ctypes, gc, glob, os, re, socket, sys, time
PROBE = {probe!r}
MINE = sys.stdin.read().strip()
PAT = re.compile(rb"SEC" rb"RET-[0-9a-f]{{8}}")
found = set()
# A process that switched uid is not dumpable: its /proc files belong to root. Undo that.
ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE

def scan(blob):
    if isinstance(blob, str):
        blob = blob.encode("utf-8", "replace")
    found.update(m.decode() for m in PAT.findall(blob))

def read_fd_path(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        os.lseek(fd, 0, 0)
    except OSError:
        pass
    try:
        scan(os.read(fd, 1 << 22))
    except OSError:
        pass
    os.close(fd)

def scan_mem(pid):
    try:
        maps = open(f"/proc/{{pid}}/maps").read().splitlines()
        mem = open(f"/proc/{{pid}}/mem", "rb", buffering=0)
    except OSError:
        return
    for line in maps:
        addr, perms = line.split()[:2]
        if not perms.startswith("r") or "[vvar" in line or "[vsyscall" in line:
            continue
        lo, hi = (int(x, 16) for x in addr.split("-"))
        if hi - lo > 1 << 28:
            continue
        try:
            mem.seek(lo)
            scan(mem.read(hi - lo))
        except (OSError, ValueError, OverflowError):
            pass

if PROBE == "objects":
    for o in gc.get_objects():
        try:
            scan(repr(o)[:1 << 20])
        except Exception:
            pass
    f = sys._getframe()
    while f is not None:
        scan(repr(f.f_locals)[:1 << 20])
        f = f.f_back
elif PROBE == "memory":
    scan_mem("self")
elif PROBE == "proc":
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            for path in glob.glob(f"/proc/{{pid}}/fd/*"):
                read_fd_path(path)
            read_fd_path(f"/proc/{{pid}}/environ")
            read_fd_path(f"/proc/{{pid}}/cmdline")
            scan_mem(pid)
elif PROBE == "files":
    for d in (os.getcwd(), "/tmp", "/dev/shm"):
        for path in glob.glob(d + "/leak-*"):
            read_fd_path(path)
    for d in (os.getcwd(), "/tmp", "/dev/shm"):
        try:
            with open(f"{{d}}/leak-{{os.getpid()}}", "w") as fh:
                fh.write(MINE)
        except OSError:
            pass
elif PROBE == "process":
    try:
        names = [l.split()[-1] for l in open("/proc/net/unix").read().splitlines()[1:]]
    except OSError:
        names = []
    for name in names:
        if name.startswith("@leak-"):
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(0.5)
            try:
                s.connect("\0" + name[1:])
                scan(s.recv(4096))
            except OSError:
                pass
            s.close()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for fd in range(256):
                try:
                    os.close(fd)
                except OSError:
                    pass
            srv = socket.socket(socket.AF_UNIX)
            srv.bind(f"\0leak-{{os.getpid()}}")
            srv.listen(8)
            srv.settimeout(5)
            try:
                while True:
                    c, _ = srv.accept()
                    c.sendall(MINE.encode())
                    c.close()
            except OSError:
                pass
        os._exit(0)
    os.wait()
elif PROBE == "sysv":
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    for key in range(0x5EC0, 0x5EC0 + 16):
        sid = libc.shmget(key, 0, 0)
        if sid >= 0:
            addr = libc.shmat(sid, None, 0)
            if addr not in (None, ctypes.c_void_p(-1).value):
                scan(ctypes.string_at(addr, 64))
    for key in range(0x5EC0, 0x5EC0 + 16):
        sid = libc.shmget(key, 4096, 0o1600 | 0o2000)  # IPC_CREAT | IPC_EXCL
        if sid >= 0:
            addr = libc.shmat(sid, None, 0)
            if addr not in (None, ctypes.c_void_p(-1).value):
                ctypes.memmove(addr, MINE.encode().ljust(64), 64)
            break
print(" ".join(sorted(found - {{MINE}})) or "nothing")
"""
PROBES = ("objects", "memory", "proc", "files", "process", "sysv")


_LEAK_PRELUDE = r"""
import os, re, sys, time
PAT = re.compile(rb"SEC" rb"RET-[0-9a-z]+")
data = sys.stdin.read().strip() if FN is None else None

def found_in(blob):
    if isinstance(blob, str):
        blob = blob.encode("utf-8", "replace")
    return {m.decode() for m in PAT.findall(blob)}

def visible(text):
    return not PAT.search(text.encode())

def report(found):
    print(" ".join(sorted(found)) or "nothing", flush=True)
"""

_LEAKS: dict[str, str] = {
    # A hidden run writes bits of its input into the page cache of standard-library files (evict
    # or read each); a later visible run reads them back without reading the files (preadv2 with
    # RWF_NOWAIT fails on a page that is not cached). Issue 31: the tester's step reran the
    # coder's program on its cases after the coder's hidden runs.
    "page-cache": r"""
import glob, hashlib
FILES = sorted(glob.glob(os.path.dirname(os.__file__) + "/test/test_*.py"))[-32:]

def run(mine):
    if not visible(mine):
        bits = bin(int(hashlib.sha256(mine.encode()).hexdigest(), 16))[-len(FILES):]
        for path, bit in zip(FILES, bits):
            fd = os.open(path, os.O_RDONLY)
            try:
                if bit == "1":
                    os.read(fd, 4096)
                else:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
            os.close(fd)
        return set()
    got = []
    for path in FILES:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.preadv(fd, [bytearray(16)], 0, os.RWF_NOWAIT)
            got.append("1")
        except BlockingIOError:
            got.append("0")
        except OSError:
            got.append("x")
        os.close(fd)
    return {"cache" + "".join(got)}  # the same whatever the hidden tests were, or it leaks
""",
    "pid-counter": r"""
def run(mine):
    if not visible(mine):
        for _ in range(sum(mine.encode()) % 40):  # the hidden input, counted out in pids
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
        return set()
    return {f"pid{os.getpid()}"}  # the same whatever the hidden tests were, or it leaks
""",
}


def leak_program(name: str, fn: str | None) -> str:
    """The leak probe ``name``: a stdio program (``fn=None``) or the function ``fn``; the probes
    of :data:`PROBES` are stdio programs only."""
    if name in PROBES:
        assert fn is None, f"probe {name!r} is a stdio program"
        return HOSTILE_PROBE.format(probe=name)
    body = _LEAKS[name]
    if fn is None:
        tail = "report(run(data) if visible(data) else (run(data) and set()))\n"
        return f"FN = None\n{_LEAK_PRELUDE}{body}{tail}"
    tail = (
        f"def {fn}(arg):\n"
        "    mine = str(arg)\n"
        "    got = run(mine)\n"
        "    return ' '.join(sorted(got)) if visible(mine) else ''\n"
    )
    return f"FN = {fn!r}\n{_LEAK_PRELUDE}{body}{tail}"


LEAKS = (
    *((p, "stdio") for p in PROBES),
    *((name, kind) for name in _LEAKS for kind in ("stdio", "call")),
)
"""(probe, kind) pairs: the stdio probes of :data:`PROBES` and the pid counter for both kinds."""


def secret_problem_file(tmp_path: Path, name: str, hidden: list[str], kind: str) -> Path:
    """An APPS-layout problem whose hidden tests' inputs are ``hidden`` (``SECRET-...``):
    ``kind="stdio"`` (print the line back) or ``"call"`` (``echo(s)`` returns ``s``)."""
    if kind == "stdio":
        io = {"inputs": [h + "\n" for h in hidden], "outputs": [h + "\n" for h in hidden]}
        solution = "print(input())"
    else:
        io = {"fn_name": "echo", "inputs": [[h] for h in hidden], "outputs": [[h] for h in hidden]}
        solution = "def echo(s):\n    return s\n"
    rec = {
        "problem_id": name,
        "question": "Give back the input.",
        "solutions": json.dumps([solution]),
        "input_output": json.dumps(io),
    }
    path = tmp_path / f"{name}.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    return path
