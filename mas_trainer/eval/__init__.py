"""Evaluation, benchmark suites and leaderboards (``mas-eval``, ``mas-leaderboard``).

* :mod:`mas_trainer.eval.play`: the one play loop and the one summary (the trainer's ``eval/*``
  metrics, ``mas-eval --env`` and the suites all use them);
* :mod:`mas_trainer.eval.actors`: the one resolver of ``--policy`` strings into actors;
* :mod:`mas_trainer.eval.suite`: boards (an env id + its first N test tasks), versioned suites,
  and the result files ``mas-eval --suite`` writes;
* :mod:`mas_trainer.eval.leaderboard`: ``mas-leaderboard``: validate, verify, submit, render;
* :mod:`mas_trainer.eval.cli`: ``mas-eval``, one parser for both forms.
"""
