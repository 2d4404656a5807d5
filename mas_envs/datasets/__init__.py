"""Preparing the paper's code and math data sets for the envs (``mas-data``; no torch).

* :data:`DATASETS`: what can be prepared, where each is published, its splits.
* :func:`prepare`: a publisher's files -> ``DIR/NAME/<split>.jsonl`` + ``manifest.json``,
  training data de-duplicated against every held-out problem in ``DIR``.

The files load through the envs' own options: ``mas_envs.make("mas/Code-v0", problems={"train":
["data/apps/train.jsonl", "data/codecontests/train.jsonl"], "test": "data/apps/test.jsonl"})``,
``mas_envs.make("mas/Math-v0", problems={"train": "data/polaris/train.jsonl", "test":
"data/aime24/test.jsonl"})``. ``docs/data.md`` has the commands.
"""

from mas_envs.datasets.catalogue import DATASETS, DatasetError, DatasetSpec, Options
from mas_envs.datasets.prepare import Prepared, dedupe_folder, prepare, read_manifest

__all__ = [
    "DATASETS",
    "DatasetError",
    "DatasetSpec",
    "Options",
    "Prepared",
    "dedupe_folder",
    "prepare",
    "read_manifest",
]
