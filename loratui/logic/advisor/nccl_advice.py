"""The advice for an NCCL timeout TextWatch read (text.py): a run that hangs in a collective, a watchdog timeout at
the run's first collectives (one rank still preparing alone), one while a rank was still preprocessing the dataset,
and one rank that fell behind or died."""

from __future__ import annotations

import re

from loratui.logic.advisor.advice import ERROR, Advice, Finding
from loratui.recipe import Recipe


def nccl_advice(f: Finding, r: Recipe | None, ranks: int = 0, lines: int = 1, prep: tuple[str, int] = ("", 0)
                ) -> Advice:
    """A collective timed out: one rank stopped joining (stalled, died, or works alone that long). When the text
    shows the dataset being preprocessed, that is the work one rank did alone: the timeout is the symptom."""
    facts = f.facts
    op = facts["op"] or "collective"
    after = f" after {facts['timeout_ms'] / 1000:g} s" if facts["timeout_ms"] else ""
    evidence = [facts["line"]]
    what = "The ranks' rendezvous (c10d store)" if op == "rendezvous" else f"NCCL {op}"
    verb = "timed out" if facts.get("timed_out", True) else "failed"  # `store->get('0') got error`, cut short
    if facts.get("hang"):
        return _hang_advice(f, r)
    if facts.get("unreached"):
        return _unreached_advice(f, after)
    if facts.get("arrived"):
        return _barrier_advice(f)
    if prep[0]:
        return _prep_timeout_advice(f, f"{what} {verb}{after}", evidence + [prep[0]] * (prep[0] != evidence[0]),
                                    prep[1])
    if lines > 1:
        evidence.append(f"{lines} watchdog lines" + (f" from {ranks} ranks" if ranks > 1 else ""))
    if facts["ran_ms"] > 2 * facts["timeout_ms"] > 0:
        evidence.append(f"it ran for {facts['ran_ms'] / 3.6e6:.1f} h: the ranks had been waiting long before")
    evidence += ["a rank stopped joining collectives: look for the first error or the last line of each rank "
                 "before this (a crash, an OOM, a hang in data loading)",
                 "rerun with NCCL_DEBUG=INFO to see which rank and which collective"]
    if r is None:
        evidence.append("if one rank legitimately works alone that long (tokenizing on rank 0, a save, an eval on "
                        "rank 0), raise ddp_timeout (TrainingArguments, seconds; default 1800)")
    seq = _SEQ.search(facts["line"])
    if seq and int(seq.group(1)) <= FIRST_COLLECTIVES:
        evidence.insert(1, f"SeqNum={seq.group(1)}: among the run's first collectives, before training had gone far")
        return Advice("nccl_timeout", ERROR, f"{what} {verb}{after} at the run's first collectives: one rank was still "
                      "preparing alone (dataset preprocessing or caching) or died starting; raise ddp_timeout "
                      "(seconds) above that preparation, or prepare the data once before launching",
                      evidence, {"env.NCCL_DEBUG": "INFO"} if r is not None else {}, f.step)
    return Advice("nccl_timeout", ERROR, f"{what} {verb}{after}: one rank fell behind or died",
                  evidence, {"env.NCCL_DEBUG": "INFO"} if r is not None else {}, f.step)


_UNREACHED = {
    "tpu": ("JAX's TPU backend is waiting for the pod's other hosts: start the same program on every host of the slice "
            "at once (gcloud compute tpus tpu-vm ssh NAME --worker=all --command ...)",
            ["a multi-host TPU slice starts only when every host runs the program; one host alone waits for the "
             "others"]),
    "store": ("A rank could not reach the ranks' rendezvous (c10d store){after}: check that every node reaches "
              "MASTER_ADDR:MASTER_PORT (or --rdzv-endpoint), e.g. nc -zv ADDR PORT from each node, that no firewall "
              "blocks it, and that the rank-0 node was started",
              ["no collective ran: the connection to the store itself timed out",
               "on several nodes, MASTER_ADDR must be the rank-0 node's address as the others see it, not localhost"]),
}
"""What a rank that never reached the others is told, by how it said so (text.py's `unreached`)."""


def _unreached_advice(f: Finding, after: str) -> Advice:
    """A rank that never reached the others: c10d's client could not connect to the rendezvous store, or JAX's TPU
    backend waited for hosts that never started the program. No collective ran; the network or the launch is at fault,
    not a rank that fell behind."""
    title, evidence = _UNREACHED[f.facts["unreached"]]
    return Advice("nccl_timeout", ERROR, title.format(after=after), [f.facts["line"], *evidence], {}, f.step)


def _barrier_advice(f: Finding) -> Advice:
    """The process group's start, where torch's store based barrier waits for every rank (`worker_count=7` of
    `world_size=8`): one rank never got there, so no collective has run yet."""
    return Advice("nccl_timeout", ERROR, f"The ranks' start is waiting with {f.facts['arrived']} ranks arrived: one rank "
                  "never reached init_process_group (it died starting, or is busy alone: a logger's login such as "
                  "wandb, a download, data preparation)",
                  [f.facts["line"], "each rank's own output before this line shows where the missing one stopped",
                   "a process that waits for input or a login (wandb, huggingface-cli) holds its rank back: set "
                   "WANDB_DISABLED=true or log in first"], {}, f.step)


def _hang_advice(f: Finding, r: Recipe | None) -> Advice:
    """The run hangs in a collective (no timeout yet): most often the GPUs' peer-to-peer path."""
    facts = f.facts
    where = "in a collective or across nodes, as the text says" if facts["hang"] == facts["line"] else \
        "after NCCL set up its communicators"
    return Advice("nccl_timeout", ERROR, f"The run hangs {where}: a collective never "
                  "completes; try NCCL_P2P_DISABLE=1 (GPUs whose peer-to-peer path fails), then NCCL_IB_DISABLE=1",
                  [facts["line"], "the last NCCL line: " + str(facts["hang"]),
                   "NCCL_DEBUG=INFO shows the transport each channel uses (P2P/IPC, SHM, NET/IB); a hang at the "
                   "first collective is most often the P2P path (a PCIe switch, ACS, a VM)",
                   "if one rank is busy alone instead (preprocessing, saving), the others wait until the timeout"],
                  {"env.NCCL_P2P_DISABLE": "1"} if r is not None else {}, f.step)


_SEQ = re.compile(r"SeqNum=(\d+)")
FIRST_COLLECTIVES = 10
"""A watchdog timeout at SeqNum 10 or less struck before any real training (a barrier, the first broadcast of the
weights): the ranks never got going together, most often because one was still preparing the data alone."""


def _prep_timeout_advice(f: Finding, what: str, evidence: list[str], prep_s: int) -> Advice:
    """The timeout struck while one rank was still tokenising the dataset (the others wait in a collective)."""
    needs = f" (the bar needs about {prep_s / 60:.0f} min)" if prep_s else ""
    suggest = max(3600, -(-2 * prep_s // 3600) * 3600) if prep_s else 0
    raise_to = f"to {suggest} or more" if suggest else "above the preprocessing time"
    title = (f"{what} while a rank was still preprocessing the dataset{needs}: raise ddp_timeout (seconds) "
             f"{raise_to}, or tokenise once before launching")
    evidence += ["the other ranks waited in a collective while one rank tokenised alone",
                 "tokenise ahead (datasets save_to_disk, LLaMA-Factory tokenized_path, axolotl preprocess) and "
                 "launch on the saved set; a larger num_proc shortens it where CPUs are free"]
    return Advice("nccl_timeout", ERROR, title, evidence, {}, f.step)
