"""A process that the operating system, the shell or a launcher ended, said in their own words, with no Python
traceback: `Illegal instruction (core dumped)`, `terminate called after throwing an instance of 'std::bad_alloc'`,
`bash: .../bin/deepspeed: /home/envs/py310/bin/python: bad interpreter: No such file or directory`,
`srun: error: Unable to create step for job 1234: Requested node configuration is not available`, mpirun's
`Permission denied (publickey,password)`, a C++ library's glog fatal line (`F0830 ... ] Check failed: ...`); and
the program's own command-line parser refusing what it was given (argparse's `error: unrecognized arguments`,
Hydra's `Cannot find primary config`), which ends it the same way. The run failed there, and the line says what to
look at next.

These lines are printed by programs, not by Python, so no exception reader sees them; each has one well-known cause
or a first thing to check. A launcher's line about a rank that merely ended (`srun: error: ... Exited with exit code
1`) is a consequence, not a cause, and is not read. Pure: a line in, (what died said, the next step) out.
"""

from __future__ import annotations

import re

from loratui.logic.advisor.advice import ERROR, Advice
from loratui.logic.advisor.error_said import gone_before
from loratui.logic.fmt import clip, quoted

_ILLEGAL = re.compile(r"\billegal instruction\b", re.I)
ILLEGAL_STEP = (
    "the process ran a CPU instruction this machine does not have: a native library (numpy's OpenBLAS, torch, a "
    "compiled extension) built for another CPU; on a Jetson or other ARM board export OPENBLAS_CORETYPE=ARMV8 "
    "before starting Python, elsewhere reinstall the package built for this CPU (pip install --force-reinstall "
    "--no-cache-dir PACKAGE; `python -X faulthandler` names the Python line it died on)")
"""jetson-inference's and DeepStream-Yolo's threads (numpy's OpenBLAS on ARMv8 cores, fixed by OPENBLAS_CORETYPE);
x86 wheels built with AVX2/AVX-512 on older CPUs are the other cause."""
_SEGFAULT = re.compile(r"\bSegmentation fault\b|\bSIGSEGV\b|\bsegfault\b", re.I)
SEGFAULT_STEP = ("a native library crashed: rerun with `python -X faulthandler` to see the Python line it died on; "
                 "most often a compiled package built against another torch or CUDA (reinstall it against the "
                 "installed torch), else a DataLoader worker's (dataloader_num_workers=0 shows it in the main process)")
_TERMINATE = re.compile(r"terminate called after throwing an instance of '(?P<type>[^']{1,120})'")
BAD_ALLOC_STEP = ("native code could not allocate host memory (std::bad_alloc): host RAM ran short, or a size read "
                  "from malformed input (a wrong file or format) asked for more than exists; check the input files "
                  "first, then free -g while it runs")
TERMINATE_STEP = ("a C++ library threw an exception nothing caught: its what() line below is the message, and the "
                  "lines before it name the call that raised it")
_BAD_INTERPRETER = re.compile(r"(?P<script>\S+): (?P<python>\S+): bad interpreter: No such file or directory")
_SLURM = re.compile(r"(?:^|[\s`'\"])(?P<tool>srun|sbatch|salloc): error: (?P<said>.+)")
"""Slurm's client's error line, at a line's start or quoted in a sentence."""
_SLURM_AFTER = re.compile(r"exit(?:ed)? (?:with )?code|\bKilled\b|Terminat|Out Of Memory|TIME LIMIT|CANCELLED|"
                          r"timed? ?out|\bsignal\b|task \d+: |Aborted|Job step aborted|Force Terminated", re.I)
"""What a launcher says of ranks that ended (their exit, a kill, Slurm's own OOM and time limit, which readers of their
own read): a consequence of the error above it, not a cause."""
SLURM_STEP = ("Slurm refused the job or its step before training ran: a request no node can meet (check --nodes, "
              "--ntasks, --gres and --mem against `sinfo -N -l`), or, where it names munge, the munged daemon not "
              "running on this node (`systemctl status munge`)")
_SSH = re.compile(r"Permission denied \((?:publickey|password|gssapi)|ssh: Could not resolve hostname|"
                  r"ssh: connect to host \S+ port \d+: (?:Connection refused|Connection timed out|No route to host)|"
                  r"Host key verification failed|ORTE was unable to reliably start one or more daemons|"
                  r"mpirun was unable to (?:launch|start) the specified application|"
                  r"PRTE has lost communication with a remote daemon", re.I)
SSH_STEP = ("the launcher could not start ranks on the other nodes (mpirun, deepspeed's and accelerate's multi-node "
            "launchers reach them over ssh): from this node `ssh HOST hostname` must work for every host in the "
            "hostfile with no prompt (keys in ~/.ssh/authorized_keys, host names that resolve), with the same "
            "Python environment at the same path there")
_BUS = re.compile(r"\bbus error\b", re.I)
"""The kernel's `Bus error (core dumped)`, and the DataLoader's `Unexpected bus error encountered in worker`."""
BUS_STEP = ("a bus error in a training job is most often shared memory (/dev/shm) running out, a container's "
            "64 MB default: docker --shm-size=16g or --ipc=host (Kubernetes: an emptyDir with medium Memory at "
            "/dev/shm), or dataloader_num_workers=0 to confirm")
_ARGPARSE = re.compile(r"(?:^|[\s`'\"])[\w.-]+: error: (?:unrecognized arguments?:|argument [^:\n]{1,80}: "
                       r"(?:invalid choice|expected (?:one|at least)|invalid \w+ value)|the following arguments are "
                       r"required)")
"""argparse refusing a command line (`run_train.py: error: unrecognized arguments: --foundation_model=...`,
`unicore-train: error: argument --task: invalid choice: 'unimol_plus'`): it exits with status 2, no traceback."""
ARGPARSE_STEP = ("the script refused its command line (argparse): compare the flags with the installed version's "
                 "`--help`; a flag from a README or a newer release that this version lacks is the usual cause "
                 "(upgrade the package, or drop the flag), and a choice it lists none of is a plugin or --user-dir "
                 "not loaded")
_HYDRA = re.compile(r"Cannot find primary config '[^']{1,200}'")
HYDRA_STEP = ("Hydra found no config by that name in its search path: start from the directory the project "
              "expects, or pass --config-path and --config-name (HYDRA_FULL_ERROR=1 prints the whole trace)")
_GLOG_FATAL = re.compile(r"^\s*F\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+[\w./\\-]+:\d+\]\s+\S")
"""A C++ library's fatal line in glog's format (Caffe, MXNet, older PaddlePaddle, XGBoost and others):
`F0830 00:47:20.333189 25394 molgrid_data_layer.cpp:600] Check failed: pose < ex.sets.size()-1 (0 vs. 0)`. glog
aborts the process after printing it; an OOM or a CUDA error said in it is read by their own readers first."""
GLOG_STEP = ("a C++ library's check failed and aborted the process (glog's `F` line): the text after `]` is the "
             "failed condition; it most often names input the library did not expect (a file, a shape, an index or "
             "a config value), so check those against what the project's README asks")
_CHEAP = ("nstruction", "interpreter", "denied", "ssh", "ORTE", "mpirun", "PRTE", "egment", "SEGV", "egfault",
          "us error", "terminate", "Host key", ": error: ", "primary config")
"""A piece of every line the patterns read: most lines skip them all."""


def process_died(line: str) -> tuple[str, str] | None:
    """(the line quoted, the next step) when the line says a process died, else None."""
    glog = line[:12].lstrip().startswith("F") and _GLOG_FATAL.search(line) is not None  # no piece of _CHEAP in it
    if len(line) > 2000 or not glog and not any(piece in line for piece in _CHEAP):
        return None
    for pattern, step in ((_ILLEGAL, ILLEGAL_STEP), (_BAD_INTERPRETER, _interpreter_step), (_SSH, SSH_STEP),
                          (_SEGFAULT, SEGFAULT_STEP), (_BUS, BUS_STEP), (_TERMINATE, _terminate_step),
                          (_ARGPARSE, ARGPARSE_STEP), (_HYDRA, HYDRA_STEP)):
        found = pattern.search(line)
        if found is not None and not gone_before(line, found.start()):
            return quoted(line), step(found) if callable(step) else step
    if glog:
        return quoted(line), GLOG_STEP
    slurm = _SLURM.search(line)
    if slurm is not None and not _SLURM_AFTER.search(slurm.group("said")):
        return quoted(line), SLURM_STEP
    return None


def _terminate_step(found: re.Match[str]) -> str:
    return BAD_ALLOC_STEP if found.group("type") == "std::bad_alloc" else TERMINATE_STEP


def _interpreter_step(found: re.Match[str]) -> str:
    script = found.group("script").rsplit("/", 1)[-1]
    return (f"{script}'s first line (#!) names a Python that is not there ({found.group('python')}): the "
            "environment was moved or copied after the install; reinstall the package in this environment "
            f"(pip install --force-reinstall PACKAGE), or start the script with this Python: python "
            f"{found.group('script')} ARGS")


def died_advice(line: str, step_text: str, step: int) -> Advice:
    """The process died with no traceback: the line that says how, and what to check."""
    return Advice("exception", ERROR, f"The process died without a Python traceback: {clip(line, 140)} -> "
                  f"{step_text}", [line, "next: " + step_text], {}, step)
