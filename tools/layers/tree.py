"""What the layer tools read from the tree: the files git tracks, and the quoted
includes of a source file."""
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def tracked_files(patterns):
    """The files git tracks; exits 2 (the tests' "skipped") outside a git checkout."""
    try:
        done = subprocess.run(["git", "ls-files", *patterns], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        print("not a git checkout: the tree's files are not known", file=sys.stderr)
        sys.exit(2)
    return done.stdout.split()


def quoted_includes(path):
    """The paths of a file's #include "..." lines, in order."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return [m.group(1) for m in map(INCLUDE.match, f) if m]
