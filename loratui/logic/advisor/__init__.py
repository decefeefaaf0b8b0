"""The advisor: folds a run's events into findings and advice items (pure logic, like the rest of logic/).

core.py holds `Advisor`, the one fold every surface uses (panel, headless line, alerts, doctor, replay), its
reading of an OOM in oom_fold.py; advice.py the item types and severities; watches.py, loss.py (loss_rise.py),
text.py (phase_text.py, phase_words.py, starve.py, starve_said.py), hang.py, failure.py the rules, each over one
kind of evidence; build.py turns the findings into advice, through moves.py, oom_advice.py, loss_advice.py,
nccl_advice.py, starve.py and priced.py (a concrete change priced by the estimator).
"""

from loratui.logic.advisor.core import ERROR, IDS, INFO, WARNING, Advice, Advisor, Finding, warn_line_bytes

__all__ = ["ERROR", "IDS", "INFO", "WARNING", "Advice", "Advisor", "Finding", "warn_line_bytes"]
