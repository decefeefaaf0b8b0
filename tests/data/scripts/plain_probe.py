"""A plain script (no Trainer) reports what a monitor could change in it: the tests run it alone and under
`loratui run --` and compare (tests/test_watch_no_trace.py). It imports only what it reports with."""

import json
import os
import signal
import sys

fds = {}
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # the listing's own descriptor, closed by now
        pass
umask = os.umask(0o022)
os.umask(umask)
report = {
    "loratui_modules": sorted(m for m in sys.modules if m.startswith("loratui")),
    "modules": sorted(sys.modules),
    "argv": sys.argv, "main_file": sys.modules["__main__"].__file__, "cwd": os.getcwd(),
    "sys_path": sys.path, "meta_path": [type(f).__name__ for f in sys.meta_path],
    "path_hooks": [getattr(h, "__qualname__", type(h).__qualname__) for h in sys.path_hooks],
    "fds": fds, "env": dict(os.environ), "umask": umask, "flags": repr(sys.flags),
    "signals": {s.name: repr(signal.getsignal(s)) for s in signal.valid_signals() if isinstance(s, signal.Signals)},
    "sitecustomize": repr(sys.modules.get("sitecustomize")),
}
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump(report, out)
print("step 1 loss 2.0", flush=True)
