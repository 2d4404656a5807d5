"""mas-sudoku: Sudoku (mas/Sudoku-v0, mas/SudokuCode-v0) as a verifiers environment.

A tool agent proposes a grid (or writes a program that prints one), a planner fills the cells. Each
role (tool, planner) is an agent of the env (``--env.<role>.model`` and so on);
mas_envs.adapters.verifiers has the episode loop.
"""

from mas_envs.adapters.verifiers import GameTeamEnv, family_taskset

SudokuTaskset = family_taskset("Sudoku", ["mas/Sudoku-v0", "mas/SudokuCode-v0"])

__all__ = ["GameTeamEnv", "SudokuTaskset"]
