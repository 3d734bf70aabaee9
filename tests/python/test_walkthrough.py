"""docs/python.md's walk-through, run as written: its python cells in order, in one namespace,
on a 3,000-user slice of Gowalla and one epoch (the cells' ROWS and EPOCHS constants). Skipped
with a message when the shared data (../shared/data/gowalla beside the checkout) is absent."""

import os
import re

import pytest

from conftest import ROOT, SHARED_DATA

DOC = ROOT / "docs" / "python.md"


def cells():
    text = DOC.read_text()
    walk = text[text.index("## Walk-through"):]
    return re.findall(r"```python\n(.*?)```", walk, flags=re.S)


def test_walkthrough_runs_as_written(tmp_path, monkeypatch):
    gowalla = SHARED_DATA / "gowalla"
    if not (gowalla / "train.txt").exists():
        pytest.skip(f"{gowalla}/train.txt not found: the walk-through needs the shared Gowalla "
                    "data (../shared/data beside the checkout, or SPARSENET_SHARED_DATA)")
    code = cells()
    assert len(code) >= 5, "docs/python.md: the walk-through's python cells are missing"
    setup = code[0]
    for line in ('DATA = "../shared/data/gowalla"', "EPOCHS = 3", "ROWS = None"):
        assert line in setup, f"docs/python.md: the first cell no longer sets {line}"
    code[0] = (setup.replace('DATA = "../shared/data/gowalla"', f"DATA = {str(gowalla)!r}")
               .replace("EPOCHS = 3", "EPOCHS = 1").replace("ROWS = None", "ROWS = 3000"))
    monkeypatch.chdir(tmp_path)  # the files it writes land here; configs/ as in the repository
    os.symlink(ROOT / "configs", tmp_path / "configs")
    namespace = {}
    for i, cell in enumerate(code):
        exec(compile(cell, f"docs/python.md cell {i + 1}", "exec"), namespace)
    assert namespace["X"].shape == (3000, 40981)
    assert len(namespace["history"]) == 1
    assert namespace["ids"].shape == (3000, 20)
    recall = namespace["metrics"]["recall@20"]
    assert 0.02 < recall < 1, f"Recall@20 {recall}"
    assert len(namespace["rec"].recommend(["0"], k=5).ids) == 5
