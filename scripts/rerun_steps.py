"""scripts/rerun_steps.py: the grammar of a committed run's "rerun" list (provenance.json,
written by scripts/results_export, run by scripts/rerun_check --full), checked before anything
runs, and the names a results folder may have.

Nothing of a rerun list goes through a shell. Each step is read into argument lists:

  words      letters, digits and _ . / = , + - * : ; a word may be single-quoted (the quotes
             are removed; inside them the same characters only)
  ;          between the commands of a data step
  [ -f PATH ] || COMMAND
             in a data step: COMMAND runs only when PATH is not a file

Any other character ($ ` " \\ | & < > ( ) { } ! # ~ ?, a tab, a newline, ...) refuses the
step. Each command must be one the step's place allows, with the options its tool takes and
values of their kind (a whole number, a path, ...):

  build (step 1 only)   make, make all, make portable
  data (before the training command)
                        TOOLDIR/prepare, TOOLDIR/probe gen, bash scripts/setup (tokenizer,
                        corpus NAME)
  training              the run's "command": TOOLDIR/train [CONFIG] KEY=VALUE ...
  evaluations (after it)
                        TOOLDIR/probe eval|sinks, TOOLDIR/evaluate,
                        /usr/bin/python3 scripts/score_sinks

TOOLDIR is ./ or build-portable/. A path is relative to the repository root, or absolute, and
must lie inside the repository or inside one of the folders the caller allows (the committed
run's folder, the rerun's output folder); it has no '..' part and does not start with '-'.
"""
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# a sweep or run folder name (docs/ablations.md, "Run names": attention-softpick__seed-1,
# attention-gated+attn.gate_init-0.25__seed-1)
NAME_RE = re.compile(r"[A-Za-z0-9._=,+-]+")
TOOL_DIRS = ("./", "build-portable/")
WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=,+-*:")
PATH_RE = re.compile(r"[A-Za-z0-9_./=,+-]+")
GLOB_RE = re.compile(r"[A-Za-z0-9_./=,+*-]+")


class StepError(Exception):
    """A step (or a name) a rerun list may not hold; str() says why."""


def name_error(name):
    """Why `name` cannot be a sweep or run folder name, or None when it can."""
    if not isinstance(name, str) or not name:
        return "not a name"
    if name in (".", ".."):
        return "'.' and '..' are not folder names"
    if name.startswith("-"):
        return "it starts with '-'"
    if not NAME_RE.fullmatch(name):
        bad = next(c for c in name if not NAME_RE.fullmatch(c))
        return "%r is not one of the characters A-Z a-z 0-9 . _ = , + -" % bad
    return None


def project_tools():
    """The names of the project's binaries (train.c and tools/*.c; every one lands at ./NAME
    and, built by `make portable`, at build-portable/NAME)."""
    return ["train"] + sorted(os.path.splitext(os.path.basename(p))[0]
                              for p in glob.glob(os.path.join(ROOT, "tools", "*.c")))


def tool_name(word):
    """NAME when word is ./NAME or build-portable/NAME of a project binary, else None."""
    for d in TOOL_DIRS:
        if word.startswith(d) and word[len(d):] in project_tools():
            return word[len(d):]
    return None


# ---- words and operators ---------------------------------------------------------------------

def lex(text):
    """The tokens of one step: ("op", ";" or "||") and ("word", value, bare) where bare says the
    word had no quotes."""
    if not isinstance(text, str):
        raise StepError("not a string")
    toks, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == " ":
            i += 1
            continue
        if c == ";":
            toks.append(("op", ";"))
            i += 1
            continue
        if c == "|":
            if text.startswith("||", i) and not text.startswith("|||", i):
                toks.append(("op", "||"))
                i += 2
                continue
            raise StepError("'|' (a pipe)")
        val, bare = [], True
        while i < n and text[i] not in " ;|":
            c = text[i]
            if c == "'":
                j = text.find("'", i + 1)
                if j < 0:
                    raise StepError("an unterminated quote")
                seg = text[i + 1:j]
                bad = [ch for ch in seg if ch not in WORD_CHARS]
                if bad:
                    raise StepError("%r inside quotes" % bad[0])
                val.append(seg)
                bare = False
                i = j + 1
            elif c in WORD_CHARS or c in "[]":
                val.append(c)
                i += 1
            else:
                raise StepError("%r (a shell character: nothing of a rerun list runs through "
                                "a shell)" % c)
        word = "".join(val)
        if ("[" in word or "]" in word) and not (bare and word in ("[", "]")):
            raise StepError("%r ('[' and ']' stand alone, in [ -f PATH ] ||)" % word)
        toks.append(("word", word, bare))
    return toks


def commands(text, compound):
    """The commands of one step: [(guard PATH or None, argv)]. Only a data step (compound) may
    hold several commands (;) and [ -f PATH ] || guards."""
    groups, cur = [], []
    for t in lex(text):
        if t[0] == "op" and t[1] == ";":
            groups.append(cur)
            cur = []
        else:
            cur.append(t)
    groups.append(cur)
    if not compound and (len(groups) > 1 or any(t[0] == "op" for t in groups[0])):
        raise StepError("';' and '||' belong to data steps only; this step is one command")
    out = []
    for g in groups:
        if not g:
            raise StepError("an empty command (';' at an end or twice)")
        guard = None
        if any(t[0] == "op" for t in g):
            w = [t[1] for t in g]
            if len(g) < 6 or w[0] != "[" or w[1] != "-f" or w[3] != "]" or w[4] != "||" or \
                    g[0][0] != "word" or not g[0][2] or g[3][0] != "word" or not g[3][2] or \
                    g[4][0] != "op" or any(t[0] == "op" for t in g[5:]):
                raise StepError("'||' only in [ -f PATH ] || COMMAND")
            guard = g[2][1]
            g = g[5:]
        argv = [t[1] for t in g]
        if "[" in argv or "]" in argv:
            raise StepError("'[' outside [ -f PATH ] ||")
        out.append((guard, argv))
    return out


# ---- values ----------------------------------------------------------------------------------

def check_path(value, roots, pattern=PATH_RE):
    """value as a path inside ROOT or one of roots (absolute folders); StepError when not."""
    if not value or value.startswith("-") or not pattern.fullmatch(value):
        raise StepError("%r is not a plain path (%s)" % (
            value, "letters, digits and _ . / = , + -" + (" *" if pattern is GLOB_RE else "")))
    if ".." in value.split("/"):
        raise StepError("%r has a '..' part" % value)
    p = os.path.normpath(value if os.path.isabs(value) else os.path.join(ROOT, value))
    for r in [ROOT] + [os.path.normpath(os.path.abspath(x)) for x in roots if x]:
        if p == r or p.startswith(r.rstrip("/") + "/"):
            return value
    raise StepError("%r is outside the repository%s" % (
        value, " and the run's folders" if any(roots) else ""))


def check_value(kind, flag, value, roots):
    """value of option flag as the kind its schema gives; StepError when it is not."""
    if isinstance(kind, tuple):
        if value not in kind:
            raise StepError("%s %r: not one of %s" % (flag, value, ", ".join(kind)))
        return
    pat = {"int": r"[0-9]+", "float": r"[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?",
           "ints": r"[0-9]+(,[0-9]+)*", "word": r"[A-Za-z0-9_]+",
           "words": r"[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*"}.get(kind)
    if pat is not None:
        if not re.fullmatch(pat, value):
            raise StepError("%s %r: not a %s" % (flag, value, {
                "int": "whole number", "float": "number", "ints": "list of whole numbers",
                "word": "name", "words": "list of names"}[kind]))
    elif kind == "path":
        check_path(value, roots)
    elif kind == "glob":
        check_path(value, roots, GLOB_RE)
    elif kind == "probe":
        if tool_name(value) != "probe":
            raise StepError("%s %r: not ./probe or build-portable/probe" % (flag, value))
    else:
        raise AssertionError(kind)


def check_options(args, schema, positional, roots, nmin=0, nmax=0):
    """args as options of schema ({flag: kind, None for a flag without a value}) and from nmin
    to nmax positional values of kind positional."""
    npos, i = 0, 0
    while i < len(args):
        a = args[i]
        if a.startswith("-"):
            if a not in schema:
                raise StepError("%r is not an option this step may give" % a)
            if schema[a] is None:
                i += 1
                continue
            if i + 1 >= len(args):
                raise StepError("%s needs a value" % a)
            check_value(schema[a], a, args[i + 1], roots)
            i += 2
            continue
        if npos >= nmax:
            raise StepError("%r: one argument too many" % a)
        check_value(positional, "argument", a, roots)
        npos += 1
        i += 1
    if npos < nmin:
        raise StepError("too few arguments")


N = "int"
PREPARE = {"--out": "path", "--split": ("file", "paragraph"), "--val-tokens": N,
           "--val-fraction": "float", "--shard-tokens": N, "--doc-tokens": N,
           "--tokenizer": ("gpt2", "byte"), "--dir": "path", "--allow-special": None,
           "--quiet": None}
PROBE = {
    "gen": {"--out": "path", "--n-train": N, "--n-val": N, "--seq-len": N, "--seed": N,
            "--alphabet": N, "--pairs": N, "--trigger-every": N, "--copy-len": N,
            "--buckets": "words"},
    "eval": {"--checkpoint": "path", "--data": "path", "--batches": N, "--batch-size": N,
             "--threads": N},
    "sinks": {"--checkpoint": "path", "--data": "path", "--docs": N, "--prefix": N,
              "--eps": "float", "--batch-size": N, "--threads": N},
}
EVALUATE = {"--checkpoint": "path", "--data": "glob", "--lengths": "ints", "--seq-len": "ints",
            "--batches": N, "--batch-size": N, "--threads": N, "--passkey": None, "--length": N,
            "--trials": N, "--seed": N, "--stream": None, "--window": N, "--sinks": N,
            "--recompute": None, "--bucket": N, "--csv": "path"}
SCORE_SINKS = {"--task": "word", "--data": "path", "--docs": N, "--threads": N, "--probe": "probe"}
# the trainer's keys whose values are paths (a glob for the data)
TRAIN_PATHS = {"include": "path", "out_dir": "path", "tokenizer_dir": "path",
               "train_data": "glob", "val_data": "glob"}
KEY_RE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)*")
VALUE_RE = re.compile(r"[A-Za-z0-9_.,:+-]*")


def check_train(args, roots):
    """./train [CONFIG] KEY=VALUE ...: every key a config key's shape, its value a path for a
    path key, else plain characters (the key itself is checked against ./train --help when
    the trainer runs)."""
    for k, a in enumerate(args):
        if "=" not in a:
            if k != 0:
                raise StepError("%r: the trainer takes KEY=VALUE after its config" % a)
            check_path(a, roots)
            continue
        key, val = a.split("=", 1)
        if not KEY_RE.fullmatch(key):
            raise StepError("%r is not a config key" % key)
        if key in TRAIN_PATHS:
            check_value(TRAIN_PATHS[key], key + "=", val, roots)
        elif key == "init_from" and val != "scratch":
            check_path(val, roots)
        elif not VALUE_RE.fullmatch(val):
            raise StepError("%s=%r: a value of letters, digits and _ . , : + -" % (key, val))


def check_command(argv, role, roots):
    """The kind of one command of a step in place role (build, data, train, eval):
    make, prepare, probe gen, setup, train, probe eval, probe sinks, evaluate, score_sinks."""
    prog, args = argv[0], argv[1:]
    tool = tool_name(prog)
    if role == "build":
        if prog == "make" and args in ([], ["all"], ["portable"]):
            return "make"
        raise StepError("the build step is make, make all or make portable")
    if role == "data":
        if tool == "prepare":
            check_options(args, PREPARE, "path", roots, 1, 1 << 30)
            return "prepare"
        if tool == "probe" and args[:1] == ["gen"]:
            if len(args) < 2:
                raise StepError("probe gen needs a task")
            check_value("word", "task", args[1], roots)
            check_options(args[2:], PROBE["gen"], None, roots)
            return "probe gen"
        if (argv[:2] == ["bash", "scripts/setup"] or prog == "scripts/setup") and \
                len(argv) > (2 if prog == "bash" else 1):
            rest = argv[2:] if prog == "bash" else argv[1:]
            i = 0
            while i < len(rest):
                if rest[i] == "tokenizer":
                    i += 1
                elif rest[i] == "corpus" and i + 1 < len(rest) and \
                        re.fullmatch(r"[a-z0-9_]+", rest[i + 1]):
                    i += 2
                else:
                    raise StepError("scripts/setup takes tokenizer and corpus NAME")
            return "setup"
        raise StepError("%r is not a data command a rerun list may hold (TOOLDIR/prepare, "
                        "TOOLDIR/probe gen, bash scripts/setup)" % prog)
    if role == "train":
        if tool != "train":
            raise StepError("the training command is TOOLDIR/train")
        check_train(args, roots)
        return "train"
    if tool == "probe" and args[:1] in (["eval"], ["sinks"]):
        if len(args) < 2:
            raise StepError("probe %s needs a task" % args[0])
        check_value("word", "task", args[1], roots)
        check_options(args[2:], PROBE[args[0]], None, roots)
        return "probe " + args[0]
    if tool == "evaluate":
        check_options(args, EVALUATE, None, roots)
        return "evaluate"
    if argv[:2] == ["/usr/bin/python3", "scripts/score_sinks"]:
        check_options(args[1:], SCORE_SINKS, "path", roots, 1, 1 << 30)
        return "score_sinks"
    raise StepError("%r is not an evaluation a rerun list may hold (TOOLDIR/probe eval|sinks, "
                    "TOOLDIR/evaluate, /usr/bin/python3 scripts/score_sinks)" % prog)


def check_step(text, role, roots):
    """One step of a rerun list: [(guard, argv, kind)], or StepError."""
    out = []
    for guard, argv in commands(text, role == "data"):
        if guard is not None:
            check_path(guard, roots)
        out.append((guard, argv, check_command(argv, role, roots)))
    return out


def check_rerun(prov, roots):
    """The whole "rerun" list of a provenance.json: {"build": argv or None, "data": [[(guard,
    argv, kind)]], "train": argv, "evals": [(argv, kind)], "listed_out": the training's
    out_dir}. Raises StepError naming the step ("rerun" step N) or the field."""
    steps, cmd = prov.get("rerun"), prov.get("command")
    if not isinstance(steps, list) or not all(isinstance(c, str) for c in steps) or \
            cmd not in steps:
        raise StepError("no \"rerun\" list holding its \"command\"")
    try:
        train = check_step(cmd, "train", roots)[0][1]
    except StepError as e:
        raise StepError("\"command\": %s" % e)
    outs = [a.split("=", 1)[1] for a in train[1:] if a.startswith("out_dir=")]
    if not outs:
        raise StepError("\"command\" has no out_dir=")
    ti = steps.index(cmd)
    plan = {"build": None, "data": [], "train": train, "evals": [], "listed_out": outs[-1]}
    for i, s in enumerate(steps):
        role = "train" if i == ti else "eval" if i > ti else \
            "build" if i == 0 and s.startswith("make") else "data"
        try:
            got = check_step(s, role, roots)
        except StepError as e:
            raise StepError("\"rerun\" step %d (%s, %s): %s" % (
                i + 1, role, json_text(s), e))
        if role == "build":
            plan["build"] = got[0][1]
        elif role == "data":
            plan["data"].append(got)
        elif role == "eval":
            plan["evals"].append((got[0][1], got[0][2]))
    return plan


def json_text(s):
    """s as a JSON string: a step named in a message, its newlines and quotes visible."""
    import json
    return json.dumps(s)
