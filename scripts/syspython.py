"""scripts/syspython.py: run the scripts in scripts/ under the interpreter that has their modules.

The scripts that draw or compute with numpy and matplotlib (plot_run, plot_attention,
plot_control, plot_sinks, unigram_entropy.py, mark_parking, torch_peer.py, the sweep report's
plots) need Debian's python3-numpy / python3-matplotlib,
installed for /usr/bin/python3 (`make deps`). They start with `#!/usr/bin/python3`, but
`python3 scripts/plot_run ...` runs them under whatever `python3` is first on PATH (often a
pyenv or venv interpreter without those modules). Each such script calls

    import syspython
    syspython.need("plot_run", "numpy", "matplotlib")

before importing them: when a module is missing here and this is not already the system
interpreter, the script is started again, with the same arguments, under
$ATTNLAB_PYTHON (default /usr/bin/python3); when that interpreter lacks them too, the script
exits 2 saying which modules are missing, for which interpreter, and how to install them.
need(..., required=False) only re-executes (for optional plots): where no interpreter has the
modules, it returns and the caller goes on without them.
"""
import importlib.util
import os
import sys

DEFAULT = "/usr/bin/python3"
_GUARD = "ATTNLAB_SYSPYTHON_REEXEC"  # set across the one re-exec, so it can never loop


def interpreter():
    """The interpreter the scripts want: $ATTNLAB_PYTHON, else /usr/bin/python3."""
    return os.environ.get("ATTNLAB_PYTHON") or DEFAULT


def missing(modules):
    return [m for m in modules if importlib.util.find_spec(m) is None]


def need(script, *modules, required=True):
    lack = missing(modules)
    target = interpreter()
    reexeced = os.environ.pop(_GUARD, None) is not None  # (not passed on to child processes)
    if not lack:
        return
    here = os.path.abspath(sys.executable or "")
    if not reexeced and here != os.path.abspath(target) and os.access(target, os.X_OK) and \
            sys.argv and os.path.exists(sys.argv[0]):
        sys.stdout.flush()
        sys.stderr.flush()
        os.environ[_GUARD] = "1"
        os.execv(target, [target] + sys.argv)
    if not required:
        return
    pkgs = " ".join(f"python3-{m}" for m in lack)
    print(f"{script}: {', '.join(lack)} {'is' if len(lack) == 1 else 'are'} missing for "
          f"{sys.executable}"
          + (f" and for {target}" if here != os.path.abspath(target) and os.access(target, os.X_OK)
             else f" ({target} is not there)" if not os.access(target, os.X_OK) else "")
          + f": install {pkgs} (Debian; `make deps`) and run it as {target} "
          f"{sys.argv[0] if sys.argv else 'scripts/' + script} ..., or set ATTNLAB_PYTHON to an "
          "interpreter that has them", file=sys.stderr)
    sys.exit(2)
