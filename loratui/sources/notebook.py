"""A saved Jupyter notebook's outputs as text: what `import` and `doctor` read of an unsloth, Colab or Kaggle
run. nbformat 4 keeps each code cell's outputs: streams (stdout/stderr text), rich results (text/html, such
as the Trainer's loss table, and text/plain, such as `TrainOutput(...)`) and errors (the traceback lines,
coloured with ANSI codes, that the text reader makes inert)."""

from __future__ import annotations

from typing import Any

STREAM, PLAIN, HTML, ERROR = "stream", "plain", "html", "error"


def is_notebook(whole: Any) -> bool:
    """Whether a parsed JSON document is a notebook."""
    return isinstance(whole, dict) and isinstance(whole.get("cells"), list)


def outputs(notebook: dict[str, Any]) -> list[tuple[str, str]]:
    """(text, kind) of every code cell output, in order."""
    out: list[tuple[str, str]] = []
    for cell in notebook.get("cells", []):
        for output in (cell.get("outputs") or []) if isinstance(cell, dict) else []:
            if not isinstance(output, dict):
                continue
            kind = output.get("output_type")
            if kind == "stream":
                out.append((_joined(output.get("text")), STREAM))
            elif kind == "error":
                lines = [line for line in output.get("traceback") or [] if isinstance(line, str)]
                out.append(("\n".join(lines) + f"\n{output.get('ename', '')}: {output.get('evalue', '')}", ERROR))
            else:
                data = output.get("data") if isinstance(output.get("data"), dict) else {}
                if "text/html" in data:
                    out.append((_joined(data["text/html"]), HTML))
                elif "text/plain" in data:
                    out.append((_joined(data["text/plain"]), PLAIN))
    return out


def _joined(text: Any) -> str:
    """nbformat stores text as a string or a list of lines."""
    if isinstance(text, list):
        return "".join(t for t in text if isinstance(t, str))
    return text if isinstance(text, str) else ""


def text_events(document: dict[str, Any]) -> list[Any]:
    """The outputs as the text reader's events, in order, for `doctor`. The Trainer redraws one loss table as
    training goes; its last drawing stands for the run's logs, in its place among the other outputs (printed
    dicts of a run that also drew the table would count twice, so they are dropped then)."""
    from loratui import events
    from loratui.logic.text_reader import TextReader, table

    found = outputs(document)
    tables = [(i, table.html_table(text)) for i, (text, kind) in enumerate(found) if kind == HTML]
    last = next(((i, t) for i, t in reversed(tables) if t is not None and t.rows), None)
    reader, out = TextReader(stream="stderr"), []
    for index, (text, kind) in enumerate(found):
        if last is not None and index == last[0]:
            out += [events.Log(t=0.0, step=step, values={k: events.num_out(x) for k, x in values.items()})
                    for step, values in last[1].entries()]
        if kind == HTML:
            continue
        for line in text.splitlines():
            out += [e for e in reader.feed(line) if last is None or not isinstance(e, events.Log)]
    return out + [e for e in reader.close() if last is None or not isinstance(e, events.Log)]
