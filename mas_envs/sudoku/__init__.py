"""Sudoku (``mas/Sudoku-v0``): 4x4 or 9x9 puzzles with a unique solution; see :mod:`.env`."""

from mas_envs.sudoku.env import SudokuEnv

__all__ = ["SudokuEnv"]
