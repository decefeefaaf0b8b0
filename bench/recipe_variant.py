"""Write a recipe variant for the throughput runs (issue 7, item 6): BASE with `section.key=value` set.

    python bench/recipe_variant.py BASE OUT training.use_liger_kernel=true data.max_length=2048

Values are TOML literals. The edit goes through loratui's own comment-keeping recipe editor (the one the
`A` key uses), and the result is validated with `load_recipe`, so a variant is exactly what a user who
took that advice would run.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loratui.logic.recipe_edit import apply_changes  # noqa: E402
from loratui.recipe import load_recipe  # noqa: E402


def variant_text(base_text: str, pairs: list[str]) -> str:
    """`base_text` with each `section.key=<TOML literal>` of `pairs` set (comments kept)."""
    changes = {}
    for pair in pairs:
        key, _, literal = pair.partition("=")
        changes[key] = tomllib.loads(f"v = {literal}")["v"]
    return apply_changes(base_text, changes)


def main() -> int:
    base, out, *pairs = sys.argv[1:]
    out_path = Path(out)
    # relative data paths keep resolving: the variant is written next to its base
    out_path.write_text(f"# variant of {Path(base).name}: {' '.join(pairs) or '(unchanged)'}\n"
                        + variant_text(Path(base).read_text(), pairs))
    load_recipe(out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
