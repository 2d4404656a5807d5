"""Rows of a parquet file, streamed: the one place that reads parquet (the ``data`` extra).

Both problem loaders (:mod:`mas_envs.code.problems`, :mod:`mas_envs.math.loaders`) and
``mas-data prepare`` read the parquet files that Hugging Face data sets publish through it, a
batch at a time, so a 200 MB CodeContests shard never sits in memory as Python objects at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mas_envs.optional import require

__all__ = ["parquet_columns", "parquet_rows"]


def _pyarrow(path: Path) -> Any:
    return require("pyarrow.parquet", purpose=f"reading {path}")


def parquet_rows(
    path: str | Path, error: type[Exception] = ValueError, batch_size: int = 64
) -> Iterator[dict[str, Any]]:
    """The rows of a parquet file as dicts of plain Python values, in file order.

    Raises:
        ImportError: pyarrow is missing (``pip install -e '.[data]'``).
        error: The file is not a readable parquet file (cut off, not parquet, corrupt); the
            message names the file and the first row that could not be read.
    """
    path = Path(path)
    pq = _pyarrow(path)
    import pyarrow as pa

    index = 0
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
            for row in batch.to_pylist():
                yield row
                index += 1
    except (pa.ArrowException, OSError) as e:
        where = f" at record {index}" if index else ""
        raise error(
            f"{path}: not a readable parquet file{where} ({type(e).__name__}: {e}); "
            "download it again"
        ) from None


def parquet_columns(path: str | Path, error: type[Exception] = ValueError) -> list[str]:
    """The top-level column names of a parquet file (from its footer; no rows are read)."""
    path = Path(path)
    pq = _pyarrow(path)
    import pyarrow as pa

    try:
        return list(pq.ParquetFile(path).schema_arrow.names)
    except (pa.ArrowException, OSError) as e:
        raise error(
            f"{path}: not a readable parquet file ({type(e).__name__}: {e}); download it again"
        ) from None
