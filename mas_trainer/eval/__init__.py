"""Evaluation, benchmark suites and leaderboards (``mas-eval``, ``mas-leaderboard``).

* :mod:`mas_trainer.eval.play`: greedy held-out episodes and their summary (the trainer's
  ``eval/*`` metrics and ``mas-eval --env``);
* :mod:`mas_trainer.eval.suite`: boards (an env id + its first N test tasks), versioned suites,
  and the result files ``mas-eval --suite`` writes;
* :mod:`mas_trainer.eval.leaderboard`: ``mas-leaderboard``: validate, verify, submit, render.
"""
